//! When a certificate is renewed, as upstream's certificate manager decides it: at a random
//! point in 70-90% of its lifetime (notBefore to notAfter), so that a fleet's renewals spread
//! and a failed one has time to be retried. Pure.

/// What rotation needs to know of a certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: i64,
    pub not_after: i64,
    /// Hex, for logs and for tests to tell certificates apart.
    pub serial: String,
}

/// The validity of the first certificate in `pem` (a certificate and its key, as written).
pub fn validity(pem: &[u8]) -> Result<Validity, String> {
    for block in x509_parser::pem::Pem::iter_from_buffer(pem) {
        let block = block.map_err(|e| format!("unreadable PEM: {e}"))?;
        if block.label != "CERTIFICATE" {
            continue;
        }
        let cert = block
            .parse_x509()
            .map_err(|e| format!("not an X.509 certificate: {e}"))?;
        let v = cert.validity();
        return Ok(Validity {
            not_before: v.not_before.timestamp(),
            not_after: v.not_after.timestamp(),
            serial: cert.raw_serial_as_string(),
        });
    }
    Err("no certificate".to_string())
}

/// The instant (unix seconds) to renew at: notBefore + (0.7 + 0.2 * jitter) * lifetime, with
/// `jitter` in [0, 1] (random in use; fixed in tests).
pub fn renewal_deadline(v: &Validity, jitter: f64) -> i64 {
    let lifetime = (v.not_after - v.not_before).max(0) as f64;
    let fraction = 0.7 + 0.2 * jitter.clamp(0.0, 1.0);
    v.not_before + (lifetime * fraction).round() as i64
}

/// How long to wait after the `failures`-th failed renewal in a row: doubling from 2 s, never
/// more than 5 minutes nor past a tenth of what is left of the certificate (at least 1 s),
/// so that a short-lived certificate is retried often enough before it expires.
pub fn retry_after(failures: u32, v: &Validity, now: i64) -> u64 {
    let doubling = 2u64.saturating_mul(1 << failures.min(16));
    let left = u64::try_from(v.not_after - now).unwrap_or(0) / 10;
    doubling.min(300).min(left.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(not_before: i64, not_after: i64) -> Validity {
        Validity {
            not_before,
            not_after,
            serial: "01".into(),
        }
    }

    #[test]
    fn the_deadline_is_within_70_to_90_percent_of_the_lifetime() {
        let c = v(1000, 2000);
        assert_eq!(renewal_deadline(&c, 0.0), 1700);
        assert_eq!(renewal_deadline(&c, 1.0), 1900);
        assert_eq!(renewal_deadline(&c, 0.5), 1800);
        for _ in 0..1000 {
            let d = renewal_deadline(&c, rand::random::<f64>());
            assert!((1700..=1900).contains(&d), "{d}");
        }
        // Out-of-range jitter is clamped; an inverted validity renews at once.
        assert_eq!(renewal_deadline(&c, 7.0), 1900);
        assert_eq!(renewal_deadline(&v(2000, 1000), 0.5), 2000);
    }

    #[test]
    fn retries_double_and_stay_well_before_expiry() {
        let c = v(0, 100_000);
        assert_eq!(retry_after(0, &c, 0), 2);
        assert_eq!(retry_after(3, &c, 0), 16);
        assert_eq!(retry_after(30, &c, 0), 300);
        // 60 s left: at most 6 s between tries; expired: every second.
        assert_eq!(retry_after(30, &c, 99_940), 6);
        assert_eq!(retry_after(30, &c, 200_000), 1);
    }

    #[test]
    fn validity_of_the_written_pair() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_before = rcgen::date_time_ymd(2026, 1, 1);
        params.not_after = rcgen::date_time_ymd(2026, 1, 2);
        params.serial_number = Some(rcgen::SerialNumber::from_slice(&[0x0a, 0x0b]));
        let pem = format!(
            "{}{}",
            params.self_signed(&key).unwrap().pem(),
            key.serialize_pem()
        );
        let got = validity(pem.as_bytes()).unwrap();
        assert_eq!(got.not_after - got.not_before, 86_400);
        assert_eq!(got.not_before, 1_767_225_600);
        assert_eq!(got.serial, "0a:0b");
        assert_eq!(
            validity(key.serialize_pem().as_bytes()).unwrap_err(),
            "no certificate"
        );
    }
}
