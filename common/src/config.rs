//! What every service's start-up check shares (STYLE.md rule 7): the error that lists every
//! problem of a configuration at once, each a line `field: rule`, and the small value rules
//! several services apply.

use std::fmt;

/// A configuration refused at start-up: every problem found in one pass, one line each, named
/// by the field they concern (`admin_token: at least 16 characters (got 5)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    /// Whose configuration ("booking core", "waiting room").
    pub what: &'static str,
    /// One line per problem, `field: rule`.
    pub problems: Vec<String>,
}

impl Invalid {
    /// `Ok(())` when `problems` is empty, else the error listing them.
    ///
    /// # Errors
    /// At least one problem.
    pub fn check(what: &'static str, problems: Vec<String>) -> Result<(), Invalid> {
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Invalid { what, problems })
        }
    }
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        let s = if n == 1 { "" } else { "s" };
        write!(f, "invalid {} configuration, {n} problem{s}:", self.what)?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Invalid {}

/// An absolute `http://` or `https://` URL with a host.
pub fn is_http_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    rest.is_some_and(|r| {
        let host = r.split(['/', '?', '#']).next().unwrap_or("");
        !host.is_empty() && !host.contains(char::is_whitespace)
    })
}

/// `field: at least {min} characters (got {n})` when `value` is shorter than `min` characters.
pub fn min_chars(field: &str, value: &str, min: usize) -> Option<String> {
    let n = value.chars().count();
    (n < min).then(|| format!("{field}: at least {min} characters (got {n})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_every_problem() {
        let e = Invalid::check("x", vec!["a: one".into(), "b: two".into()]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "invalid x configuration, 2 problems:\n  - a: one\n  - b: two"
        );
        assert!(Invalid::check("x", vec![]).is_ok());
    }

    #[test]
    fn http_urls() {
        assert!(is_http_url("http://127.0.0.1:8080"));
        assert!(is_http_url("https://a.example/x"));
        assert!(!is_http_url("http://"));
        assert!(!is_http_url("ftp://a"));
        assert!(!is_http_url("127.0.0.1:8080"));
    }

    #[test]
    fn min_chars_counts_characters() {
        assert_eq!(
            min_chars("admin_token", "short", 16).as_deref(),
            Some("admin_token: at least 16 characters (got 5)")
        );
        assert_eq!(min_chars("admin_token", "0123456789abcdef", 16), None);
    }
}
