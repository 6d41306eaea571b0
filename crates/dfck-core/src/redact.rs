//! Password redaction: the one place that knows how a password hides in a store URL or a
//! keyword DSN. A leaf module: it imports nothing of dfck, so every layer can use it.

/// Replaces the password of a URL (`scheme://user:pass@host`) and any `password=` query
/// option with `***`.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?', '#'])
            .map(|i| rest_start + i)
            .unwrap_or(out.len());
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                let start = rest_start + colon + 1;
                let end = rest_start + at;
                out.replace_range(start..end, "***");
            }
        }
    }
    let mut from = 0;
    while let Some(i) = out[from..].to_ascii_lowercase().find("password") {
        let key_end = from + i + "password".len();
        // `password=…` (URL option) or `password = …` (keyword DSN, spaces allowed).
        let rest = &out[key_end..];
        let after_eq = match rest.trim_start().strip_prefix('=') {
            Some(r) => out.len() - r.trim_start().len(),
            None => {
                from = key_end;
                continue;
            }
        };
        let end = value_end(&out, after_eq);
        out.replace_range(after_eq..end, "***");
        from = after_eq + 3;
    }
    out
}

/// Where a password value starting at `start` ends: a quoted keyword-DSN value ends after its
/// closing quote (`\'` escapes one), a bare one at `&`, a space or the end.
fn value_end(s: &str, start: usize) -> usize {
    let bytes = s.as_bytes();
    if bytes.get(start) == Some(&b'\'') {
        let mut j = start + 1;
        while j < bytes.len() {
            match bytes[j] {
                b'\\' => j += 2,
                b'\'' => return j + 1,
                _ => j += 1,
            }
        }
        return bytes.len();
    }
    s[start..]
        .find(['&', ' '])
        .map(|j| start + j)
        .unwrap_or(s.len())
}

/// The password of a `scheme://user:password@host` URL or of a `password=` option.
pub fn url_password(url: &str) -> Option<String> {
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
        if let Some(at) = authority.rfind('@') {
            if let Some(colon) = authority[..at].find(':') {
                let p = &authority[colon + 1..at];
                if !p.is_empty() {
                    return Some(p.to_string());
                }
            }
        }
    }
    let lower = url.to_ascii_lowercase();
    let i = lower.find("password=")?;
    let start = i + "password=".len();
    let end = url[start..]
        .find(['&', ' '])
        .map(|j| start + j)
        .unwrap_or(url.len());
    Some(url[start..end].to_string()).filter(|p| !p.is_empty())
}
