//! Human text of `dfck explain`.

use crate::commands::explain::Explanation;

/// One code: its name and severity, then its documentation section (Markdown emphasis
/// removed, paragraphs kept).
pub fn explanation_text(e: &Explanation) -> String {
    let mut out = format!("{} ({})\n\n", e.code, e.severity.as_str());
    for para in e.text.split("\n\n") {
        let para = para.trim();
        if para.is_empty() || para.starts_with("**Severity:**") {
            continue;
        }
        out.push_str(&crate::commands::explain::unlink(
            &para.replace("**", ""),
            true,
        ));
        out.push_str("\n\n");
    }
    super::finish(out.trim_end().to_owned() + "\n")
}

/// Every code, one line each.
pub fn explanation_list(all: &[Explanation]) -> String {
    let width = all.iter().map(|e| e.code.as_str().len()).max().unwrap_or(0);
    let mut out = String::new();
    for e in all {
        out.push_str(&format!(
            "{:width$}  {:7}  {}\n",
            e.code.as_str(),
            e.severity.as_str(),
            e.summary.replace("**", "")
        ));
    }
    out.push_str("\n`dfck explain CODE` says what a finding means and what to do about it.\n");
    super::finish(out)
}
