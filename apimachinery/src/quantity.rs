//! Resource quantities ("500m", "128Mi", "1e3"): as f64, far enough to compare them, and
//! exactly in milli-units where a value is handed on (cgroup limits, sizes).

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

/// Parses a quantity into its value times 1000 (milli-units), so CPU "100m" is 100 and memory
/// "1Ki" is 1_024_000. None when the text is not a quantity.
pub fn parse_milli(text: &str) -> Option<i128> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (int_part, frac_part) = match number.split_once('.') {
        Some((i, f)) => (i, f),
        None => (number, ""),
    };
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let negative = int_part.starts_with('-');
    let int_digits = int_part.trim_start_matches(['+', '-']);
    // Checked all the way: a quantity is request data, and one too large is "not a quantity".
    let mut milli: i128 = if int_digits.is_empty() {
        0
    } else {
        int_digits.parse::<i128>().ok()?.checked_mul(1000)?
    };
    // Up to three fractional digits are kept exactly; more precision is rounded up, as the API does.
    let mut scale = 100;
    for (i, c) in frac_part.chars().enumerate() {
        let d = c.to_digit(10)? as i128;
        if i < 3 {
            milli = milli.checked_add(d * scale)?;
            scale /= 10;
        } else if d > 0 {
            milli = milli.checked_add(1)?;
            break;
        }
    }
    let value = match suffix {
        "" => milli,
        "m" => milli.div_euclid(1000) + i128::from(milli.rem_euclid(1000) > 0),
        "k" => milli.checked_mul(1_000)?,
        "M" => milli.checked_mul(1_000_000)?,
        "G" => milli.checked_mul(1_000_000_000)?,
        "T" => milli.checked_mul(1_000_000_000_000)?,
        "Ki" => milli.checked_mul(1 << 10)?,
        "Mi" => milli.checked_mul(1 << 20)?,
        "Gi" => milli.checked_mul(1 << 30)?,
        "Ti" => milli.checked_mul(1 << 40)?,
        s if s.starts_with('e') || s.starts_with('E') => {
            let exp: u32 = s.get(1..)?.parse().ok()?;
            milli.checked_mul(10i128.checked_pow(exp)?)?
        }
        _ => return None,
    };
    Some(if negative { -value } else { value })
}

/// CPU in millicores.
pub fn cpu_millis(text: &str) -> Option<i64> {
    parse_milli(text).and_then(|m| i64::try_from(m).ok())
}

/// Bytes (rounded up).
pub fn bytes(text: &str) -> Option<i64> {
    parse_milli(text).and_then(|m| i64::try_from((m + 999).div_euclid(1000)).ok())
}

/// A milli-unit amount as upstream prints a sum: "250m" when it has a fraction, "3Gi" style
/// when `binary` (memory, storage) and a whole number of Ki..Ti, else the plain number.
pub fn format_milli(milli: i128, binary: bool) -> String {
    if milli % 1000 != 0 {
        return format!("{milli}m");
    }
    let whole = milli / 1000;
    if binary && whole != 0 {
        for (suffix, shift) in [("Ti", 40), ("Gi", 30), ("Mi", 20), ("Ki", 10)] {
            if whole % (1i128 << shift) == 0 {
                return format!("{}{suffix}", whole >> shift);
            }
        }
    }
    whole.to_string()
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

    #[test]
    fn sums_print_as_upstream() {
        assert_eq!(format_milli(300, false), "300m");
        assert_eq!(format_milli(2000, false), "2");
        assert_eq!(format_milli(1536 * 1024 * 1024 * 1000, true), "1536Mi");
        assert_eq!(format_milli(1000 * 1000, true), "1000");
        assert_eq!(format_milli(0, true), "0");
    }

    #[test]
    fn cpu_quantities() {
        assert_eq!(cpu_millis("100m"), Some(100));
        assert_eq!(cpu_millis("1"), Some(1000));
        assert_eq!(cpu_millis("0.5"), Some(500));
        assert_eq!(cpu_millis("2.25"), Some(2250));
        assert_eq!(cpu_millis("abc"), None);
    }

    #[test]
    fn memory_quantities() {
        assert_eq!(bytes("128Mi"), Some(128 * 1024 * 1024));
        assert_eq!(bytes("1Ki"), Some(1024));
        assert_eq!(bytes("1G"), Some(1_000_000_000));
        assert_eq!(bytes("1e3"), Some(1000));
        assert_eq!(bytes("1.5Gi"), Some(1536 * 1024 * 1024));
        assert_eq!(bytes("12Q"), None);
    }

    #[test]
    fn quantities_too_large_to_hold_are_not_quantities() {
        let huge = "9".repeat(40);
        assert_eq!(parse_milli(&format!("{huge}Ti")), None);
        assert_eq!(parse_milli(&format!("{}k", "9".repeat(36))), None);
        assert_eq!(parse_milli("1e99"), None);
        assert_eq!(bytes(&format!("{huge}Mi")), None);
        assert_eq!(cpu_millis(&"9".repeat(30)), None);
    }
}
