//! Where a dotted key (`database.sqlite_dir`) sits in a block-style YAML file, so that errors
//! can name the config file and its line.

/// The 1-based line of `dotted` in `text`, following block-mapping indentation; `None` when
/// the key is not written as a plain block key (flow style, anchors, merges).
pub fn line_of_key(text: &str, dotted: &str) -> Option<usize> {
    let want: Vec<&str> = dotted.split('.').collect();
    let mut path: Vec<(usize, String)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let content = line.trim_start();
        if content.is_empty() || content.starts_with('#') || content.starts_with('-') {
            continue;
        }
        let indent = line.len() - content.len();
        let Some((key, _)) = content.split_once(':') else {
            continue;
        };
        let key = key.trim().trim_matches(['"', '\'']);
        while path.last().is_some_and(|(i, _)| *i >= indent) {
            path.pop();
        }
        path.push((indent, key.to_owned()));
        if path.len() == want.len() && path.iter().zip(&want).all(|((_, k), w)| k == w) {
            return Some(n + 1);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #[test]
    fn nested_keys() {
        let text = "# c\nmodels:\n  - name: x\ndatabase:\n  backend: sqlite\n  sqlite_dir: data\nother:\n  sqlite_dir: no\n";
        assert_eq!(super::line_of_key(text, "database.sqlite_dir"), Some(6));
        assert_eq!(super::line_of_key(text, "database"), Some(4));
        assert_eq!(super::line_of_key(text, "other.sqlite_dir"), Some(8));
        assert_eq!(super::line_of_key(text, "database.postgres_url"), None);
    }
}
