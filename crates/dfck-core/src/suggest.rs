//! "Did you mean": the candidates closest to a mistyped name (thread ids, finding codes). A
//! leaf module.

/// Up to three candidates close to `given` (edit distance at most a third of its length, at
/// least 2), closest first; a candidate that contains `given` (or is contained in it) counts
/// as close.
pub fn nearest<'a>(given: &str, candidates: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let budget = (given.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &str)> = candidates
        .filter(|c| *c != given)
        .filter_map(|c| {
            let d = strsim::levenshtein(given, c);
            let contains = given.len() >= 3 && (c.contains(given) || given.contains(c));
            (d <= budget || contains).then_some((d, c))
        })
        .collect();
    scored.sort();
    scored.dedup();
    scored.into_iter().take(3).map(|(_, c)| c).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn close_names() {
        let names = ["t-linear", "t-forks", "t-deerflow", "t-deerflow-full"];
        assert_eq!(
            super::nearest("t-linaer", names.iter().copied()),
            vec!["t-linear"]
        );
        assert_eq!(
            super::nearest("deerflow", names.iter().copied()),
            vec!["t-deerflow", "t-deerflow-full"]
        );
        assert!(super::nearest("zzzzzzzz", names.iter().copied()).is_empty());
    }
}
