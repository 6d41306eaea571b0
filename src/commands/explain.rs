//! `dfck explain CODE`: what a finding code means and what to do about it. The text is the
//! code's section of docs/findings.md, compiled in, so the binary and the documentation
//! never disagree.

use dfck_core::finding::{FindingCode, Severity};
use serde::Serialize;

/// docs/findings.md, as built.
const FINDINGS_MD: &str = include_str!("../../docs/findings.md");

/// One code explained.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    /// The code.
    pub code: FindingCode,
    /// Its default severity.
    pub severity: Severity,
    /// One line: what it means.
    pub summary: String,
    /// The documentation section (Markdown, without its heading).
    pub text: String,
}

/// The section of docs/findings.md for `code`, without its heading (`None` when missing).
fn section(code: FindingCode) -> Option<&'static str> {
    let heading = format!("\n## {}\n", code.as_str());
    let start = FINDINGS_MD.find(&heading)? + heading.len();
    let rest = &FINDINGS_MD[start..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    Some(rest[..end].trim())
}

/// The first sentence after the severity line, on one line, Markdown links as their text.
fn summary_of(text: &str) -> String {
    let para = text
        .split("\n\n")
        .map(str::trim)
        .find(|p| !p.is_empty() && !p.starts_with("**Severity"))
        .unwrap_or_default()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let out = unlink(&para, false);
    match out.find(". ") {
        Some(i) => out[..=i].to_owned(),
        None => out,
    }
}

/// Markdown links `[text](target)` as `text`, or as `text (docs/target)` with `keep_target`
/// (links in docs/findings.md are relative to docs/).
pub fn unlink(text: &str, keep_target: bool) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|i| open + i) else {
            break;
        };
        let Some(end) = rest[close..].find(')').map(|i| close + i) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..close]);
        if keep_target {
            out.push_str(&format!(" (docs/{})", &rest[close + 2..end]));
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Explains `code` (every code has a section; a missing one is a build defect the tests catch,
/// shown as an empty text rather than a crash).
pub fn explain(code: FindingCode) -> Explanation {
    let text = section(code).unwrap_or_default().to_owned();
    Explanation {
        code,
        severity: code.severity(),
        summary: summary_of(&text),
        text,
    }
}

/// Why a text is not a finding code, with the closest codes when there are any.
#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown finding code '{given}'{hint} (dfck explain lists them)")]
pub struct UnknownCode {
    given: String,
    hint: String,
}

/// Looks a code up by its contract string; unknown → the nearest codes as "did you mean".
/// A unique suffix or prefix (`cycle`, `fork_contaminated`, `delta.fork_c`) is accepted.
pub fn lookup(given: &str) -> Result<FindingCode, UnknownCode> {
    let g = given.trim().to_ascii_lowercase();
    if let Some(c) = FindingCode::parse(&g) {
        return Ok(c);
    }
    let partial: Vec<FindingCode> = FindingCode::ALL
        .iter()
        .copied()
        .filter(|c| {
            let s = c.as_str();
            s.starts_with(&g) || s.split_once('.').is_some_and(|(_, name)| name == g)
        })
        .collect();
    if let [only] = partial[..] {
        return Ok(only);
    }
    let names: Vec<&str> = if partial.is_empty() {
        dfck_core::suggest::nearest(&g, FindingCode::ALL.iter().map(|c| c.as_str()))
    } else {
        partial.iter().map(|c| c.as_str()).collect()
    };
    Err(UnknownCode {
        given: given.to_owned(),
        hint: if names.is_empty() {
            String::new()
        } else {
            format!("; did you mean {}?", names.join(", "))
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_explained() {
        for &code in FindingCode::ALL {
            let e = explain(code);
            assert!(
                e.text.contains("**Severity:**") && e.text.contains("**What to do:**"),
                "docs/findings.md has no full section for {code}"
            );
            assert!(!e.summary.is_empty(), "{code}");
            let sev = format!("**Severity:** {}", code.severity().as_str());
            assert!(e.text.contains(&sev), "{code}: {sev}");
        }
    }

    #[test]
    fn lookups() {
        assert_eq!(lookup("lineage.cycle").unwrap(), FindingCode::LineageCycle);
        assert_eq!(lookup("cycle").unwrap(), FindingCode::LineageCycle);
        assert_eq!(
            lookup("delta.fork_c").unwrap(),
            FindingCode::DeltaForkContaminated
        );
        let e = lookup("lineage.cylce").unwrap_err().to_string();
        assert!(e.contains("did you mean lineage.cycle"), "{e}");
        let e = lookup("delta.fork").unwrap_err().to_string();
        assert!(
            e.contains("delta.fork_contaminated, delta.fork_ambiguous"),
            "{e}"
        );
    }
}
