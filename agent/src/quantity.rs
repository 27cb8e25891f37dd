//! Kubernetes resource quantities ("100m", "0.5", "128Mi", "1G", "1e3") as numbers.

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
    let mut milli: i128 = if int_digits.is_empty() {
        0
    } else {
        int_digits.parse::<i128>().ok()? * 1000
    };
    // Up to three fractional digits are kept exactly; more precision is rounded up, as the API does.
    let mut scale = 100;
    for (i, c) in frac_part.chars().enumerate() {
        let d = c.to_digit(10)? as i128;
        if i < 3 {
            milli += d * scale;
            scale /= 10;
        } else if d > 0 {
            milli += 1;
            break;
        }
    }
    let value = match suffix {
        "" => milli,
        "m" => milli.div_euclid(1000) + i128::from(milli.rem_euclid(1000) > 0),
        "k" => milli * 1_000,
        "M" => milli * 1_000_000,
        "G" => milli * 1_000_000_000,
        "T" => milli * 1_000_000_000_000,
        "Ki" => milli * (1 << 10),
        "Mi" => milli * (1 << 20),
        "Gi" => milli * (1 << 30),
        "Ti" => milli * (1 << 40),
        s if s.starts_with('e') || s.starts_with('E') => {
            let exp: u32 = s[1..].parse().ok()?;
            milli * 10i128.checked_pow(exp)?
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
