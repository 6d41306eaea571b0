//! libpq connection strings: `postgresql://` URLs and keyword/value DSNs parsed into
//! keyword/value pairs, the way libpq reads them (docs/postgres-connection.md). Completing
//! them from the service file, the `PG*` environment and the password file is `resolve`'s job.

use percent_encoding::percent_decode_str;

/// The keywords libpq knows, each with the environment variable that supplies it when the
/// connection string does not.
pub const KEYWORDS: &[(&str, Option<&str>)] = &[
    ("service", Some("PGSERVICE")),
    ("host", Some("PGHOST")),
    ("hostaddr", Some("PGHOSTADDR")),
    ("port", Some("PGPORT")),
    ("dbname", Some("PGDATABASE")),
    ("user", Some("PGUSER")),
    ("password", Some("PGPASSWORD")),
    ("passfile", Some("PGPASSFILE")),
    ("sslmode", Some("PGSSLMODE")),
    ("sslrootcert", Some("PGSSLROOTCERT")),
    ("sslcert", Some("PGSSLCERT")),
    ("sslkey", Some("PGSSLKEY")),
    ("sslcrl", Some("PGSSLCRL")),
    ("sslcrldir", Some("PGSSLCRLDIR")),
    ("sslsni", Some("PGSSLSNI")),
    ("sslpassword", None),
    ("sslcompression", Some("PGSSLCOMPRESSION")),
    ("sslcertmode", Some("PGSSLCERTMODE")),
    ("sslnegotiation", Some("PGSSLNEGOTIATION")),
    ("ssl_min_protocol_version", Some("PGSSLMINPROTOCOLVERSION")),
    ("ssl_max_protocol_version", Some("PGSSLMAXPROTOCOLVERSION")),
    ("connect_timeout", Some("PGCONNECT_TIMEOUT")),
    ("options", Some("PGOPTIONS")),
    ("application_name", Some("PGAPPNAME")),
    ("fallback_application_name", None),
    ("client_encoding", Some("PGCLIENTENCODING")),
    ("target_session_attrs", Some("PGTARGETSESSIONATTRS")),
    ("load_balance_hosts", Some("PGLOADBALANCEHOSTS")),
    ("channel_binding", Some("PGCHANNELBINDING")),
    ("require_auth", Some("PGREQUIREAUTH")),
    ("gssencmode", Some("PGGSSENCMODE")),
    ("gsslib", Some("PGGSSLIB")),
    ("gssdelegation", Some("PGGSSDELEGATION")),
    ("krbsrvname", Some("PGKRBSRVNAME")),
    ("requirepeer", Some("PGREQUIREPEER")),
    ("keepalives", None),
    ("keepalives_idle", None),
    ("keepalives_interval", None),
    ("keepalives_count", None),
    ("tcp_user_timeout", None),
    ("replication", None),
];

/// Whether `key` is a libpq connection keyword.
pub fn is_keyword(key: &str) -> bool {
    KEYWORDS.iter().any(|(k, _)| *k == key)
}

/// Parses a URL (`postgresql://…`, `postgres://…`) or a keyword DSN into keyword/value pairs,
/// in the order given. Errors are one line and never contain the password.
pub fn parse(s: &str) -> Result<Vec<(String, String)>, String> {
    let s = s.trim();
    let pairs = if let Some(rest) = s
        .strip_prefix("postgresql://")
        .or_else(|| s.strip_prefix("postgres://"))
    {
        parse_url(rest)?
    } else {
        parse_keywords(s)?
    };
    for (k, _) in &pairs {
        if !is_keyword(k) {
            return Err(format!("invalid connection option \"{k}\""));
        }
    }
    Ok(pairs)
}

fn decode(s: &str, what: &str) -> Result<String, String> {
    percent_decode_str(s)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| format!("invalid percent-encoding in the URL's {what}"))
}

/// `[user[:password]@][host][:port][,host[:port]…][/dbname][?key=value&…]`
fn parse_url(rest: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let (main, query) = match rest.split_once('?') {
        Some((m, q)) => (m, Some(q)),
        None => (rest, None),
    };
    let (authority, path) = match main.find('/') {
        Some(i) => (&main[..i], Some(&main[i + 1..])),
        None => (main, None),
    };
    let hostlist = match authority.rfind('@') {
        Some(at) => {
            let userinfo = &authority[..at];
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            if !user.is_empty() {
                out.push(("user".to_owned(), decode(user, "user name")?));
            }
            if let Some(p) = password {
                out.push(("password".to_owned(), decode(p, "password")?));
            }
            &authority[at + 1..]
        }
        None => authority,
    };
    if !hostlist.is_empty() {
        let mut hosts = Vec::new();
        let mut ports = Vec::new();
        for spec in hostlist.split(',') {
            let (host, port) = if let Some(inner) = spec.strip_prefix('[') {
                let close = inner
                    .find(']')
                    .ok_or("unterminated IPv6 address in the URL")?;
                let after = &inner[close + 1..];
                let port = match after.strip_prefix(':') {
                    Some(p) => p,
                    None if after.is_empty() => "",
                    None => return Err("unexpected characters after an IPv6 address".into()),
                };
                (inner[..close].to_owned(), port)
            } else {
                match spec.rsplit_once(':') {
                    Some((h, p)) => (decode(h, "host")?, p),
                    None => (decode(spec, "host")?, ""),
                }
            };
            hosts.push(host);
            ports.push(decode(port, "port")?);
        }
        if hosts.iter().any(|h| !h.is_empty()) {
            out.push(("host".to_owned(), hosts.join(",")));
        }
        if ports.iter().any(|p| !p.is_empty()) {
            out.push(("port".to_owned(), ports.join(",")));
        }
    }
    if let Some(db) = path.filter(|d| !d.is_empty()) {
        out.push(("dbname".to_owned(), decode(db, "database name")?));
    }
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (k, v) = pair.split_once('=').ok_or_else(|| {
            format!("missing '=' after \"{}\" in the URL's options", {
                decode(pair, "options").unwrap_or_default()
            })
        })?;
        let (k, v) = (decode(k, "options")?, decode(v, "options")?);
        // libpq's compatibility spelling for JDBC-style URLs.
        if k == "ssl" && v == "true" {
            out.push(("sslmode".to_owned(), "require".to_owned()));
            continue;
        }
        out.push((k, v));
    }
    Ok(out)
}

/// `key=value key='quoted \' value' …`
fn parse_keywords(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Ok(out);
        }
        let mut key = String::new();
        while let Some(&c) = chars.peek() {
            if c == '=' || c.is_whitespace() {
                break;
            }
            key.push(c);
            chars.next();
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.next() != Some('=') {
            return Err(format!(
                "missing \"=\" after \"{key}\" in connection info string"
            ));
        }
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let mut value = String::new();
        if chars.peek() == Some(&'\'') {
            chars.next();
            loop {
                match chars.next() {
                    None => {
                        return Err("unterminated quoted string in connection info string".into());
                    }
                    Some('\\') => {
                        if let Some(c) = chars.next() {
                            value.push(c);
                        }
                    }
                    Some('\'') => break,
                    Some(c) => value.push(c),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                chars.next();
                if c == '\\' {
                    if let Some(n) = chars.next() {
                        value.push(n);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        out.push((key, value));
    }
}

/// Quotes a value for a keyword DSN.
pub fn quote(v: &str) -> String {
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(s: &str) -> Vec<(String, String)> {
        parse(s).unwrap()
    }

    fn kv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn urls() {
        assert_eq!(map("postgresql://"), kv(&[]));
        assert_eq!(
            map("postgres://me:p%40ss@h1:5433,h2/db%2F1?sslmode=verify-full&application_name=x"),
            kv(&[
                ("user", "me"),
                ("password", "p@ss"),
                ("host", "h1,h2"),
                ("port", "5433,"),
                ("dbname", "db/1"),
                ("sslmode", "verify-full"),
                ("application_name", "x"),
            ])
        );
        assert_eq!(
            map("postgresql://[::1]:5432/d"),
            kv(&[("host", "::1"), ("port", "5432"), ("dbname", "d")])
        );
        assert_eq!(
            map("postgresql://%2Fvar%2Frun%2Fpostgresql/d?ssl=true"),
            kv(&[
                ("host", "/var/run/postgresql"),
                ("dbname", "d"),
                ("sslmode", "require")
            ])
        );
        assert_eq!(
            map("postgresql:///d?host=/tmp"),
            kv(&[("dbname", "d"), ("host", "/tmp")])
        );
        let e = parse("postgresql://u:secret@h/d?bogus=1").unwrap_err();
        assert!(e.contains("bogus") && !e.contains("secret"), "{e}");
    }

    #[test]
    fn keyword_dsns() {
        assert_eq!(
            map("host=h port = 5 password='a \\'b\\\\' dbname=x\\ y"),
            kv(&[
                ("host", "h"),
                ("port", "5"),
                ("password", "a 'b\\"),
                ("dbname", "x y")
            ])
        );
        assert_eq!(map("service=prod"), kv(&[("service", "prod")]));
        assert!(parse("host=h password='x").is_err());
        assert!(parse("host").is_err());
        assert_eq!(quote("a'b\\"), "'a\\'b\\\\'");
    }
}
