//! Resource quantities ("500m", "128Mi", "1e3"), parsed far enough to compare them.

use serde_json::Value;

const DECIMAL: &[(&str, f64)] = &[
    ("n", 1e-9),
    ("u", 1e-6),
    ("m", 1e-3),
    ("k", 1e3),
    ("M", 1e6),
    ("G", 1e9),
    ("T", 1e12),
    ("P", 1e15),
    ("E", 1e18),
];
const BINARY: &[(&str, i32)] = &[
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];

/// The numeric value of a quantity string, or None when it does not follow upstream's syntax.
pub fn parse(s: &str) -> Option<f64> {
    let split = s
        .char_indices()
        .find(|(i, c)| !(c.is_ascii_digit() || *c == '.' || (*i == 0 && (*c == '+' || *c == '-'))))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    if number.matches('.').count() > 1 || !number.bytes().any(|c| c.is_ascii_digit()) {
        return None;
    }
    let base: f64 = number.parse().ok()?;
    let scale = if suffix.is_empty() {
        1.0
    } else if let Some((_, m)) = DECIMAL.iter().find(|(k, _)| *k == suffix) {
        *m
    } else if let Some((_, p)) = BINARY.iter().find(|(k, _)| *k == suffix) {
        2f64.powi(*p)
    } else if let Some(exp) = suffix.strip_prefix(['e', 'E']) {
        let exp: i32 = exp.parse().ok()?;
        10f64.powi(exp)
    } else {
        return None;
    };
    Some(base * scale)
}

/// A quantity as it appears in JSON: a string, or a plain number.
pub fn parse_value(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => parse(s),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_upstream_forms() {
        assert_eq!(parse("500m"), Some(0.5));
        assert_eq!(parse("2"), Some(2.0));
        assert_eq!(parse("128Mi"), Some(128.0 * 1024.0 * 1024.0));
        assert_eq!(parse("1G"), Some(1e9));
        assert_eq!(parse("1e3"), Some(1000.0));
        assert_eq!(parse("0.5"), Some(0.5));
        assert_eq!(parse("abc"), None);
        assert_eq!(parse("1.2.3"), None);
        assert_eq!(parse("10Xi"), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse_value(&serde_json::json!(1)), Some(1.0));
    }
}
