//! csrcleaner, as upstream's: CertificateSigningRequests do not pile up. Every hour (and at
//! start) it deletes pending ones older than 24 hours, approved, denied and failed ones an
//! hour after that condition, and issued ones whose certificate has expired. `expired` is pure.

use std::time::Duration;

use k8s_openapi::api::certificates::v1::CertificateSigningRequest as Csr;
use kube::api::{Api, DeleteParams, ListParams, Preconditions};
use kube::ResourceExt;

use super::{csr_state, State};

/// How often the CSRs are looked through (upstream's pollingInterval).
pub const INTERVAL: Duration = Duration::from_secs(60 * 60);
const PENDING: i64 = 24 * 60 * 60;
const DECIDED: i64 = 60 * 60;

/// Why the CSR goes at `now` (unix seconds), or None while it stays.
pub fn expired(csr: &Csr, now: i64) -> Option<String> {
    let created = csr.metadata.creation_timestamp.as_ref()?.0.as_second();
    let since = |type_: &str| {
        let conditions = csr.status.as_ref()?.conditions.as_ref()?;
        let c = conditions.iter().find(|c| c.type_ == type_)?;
        let at = c
            .last_update_time
            .as_ref()
            .or(c.last_transition_time.as_ref());
        Some(at.map_or(created, |t| t.0.as_second()))
    };
    let issued = csr.status.as_ref().and_then(|s| s.certificate.as_ref());
    if let Some(at) = issued.and_then(|c| keelson_daemon::x509::not_after(&c.0)) {
        if at < now {
            return Some("its certificate has expired".into());
        }
    }
    let (age, limit, what) = match csr_state(csr) {
        State::Pending => (now - created, PENDING, "pending"),
        State::Denied => (now - since("Denied")?, DECIDED, "denied"),
        State::Failed => (now - since("Failed")?, DECIDED, "failed"),
        State::Approved | State::Issued => (now - since("Approved")?, DECIDED, "approved"),
    };
    (age > limit).then(|| format!("{what} for more than {}h", limit / 3600))
}

/// Deletes the expired CSRs now, then every `INTERVAL`.
pub async fn run(api: Api<Csr>) {
    loop {
        if let Err(e) = clean(&api).await {
            tracing::warn!(error = %e, "CSR cleanup failed; trying again in an hour");
        }
        tokio::time::sleep(INTERVAL).await;
    }
}

async fn clean(api: &Api<Csr>) -> Result<(), kube::Error> {
    let now = k8s_openapi::jiff::Timestamp::now().as_second();
    for csr in api.list(&ListParams::default()).await?.items {
        let Some(why) = expired(&csr, now) else {
            continue;
        };
        // Only the CSR looked at: one recreated under the same name meanwhile stays.
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: csr.metadata.uid.clone(),
                ..Preconditions::default()
            }),
            ..DeleteParams::default()
        };
        match api.delete(&csr.name_any(), &params).await {
            Ok(_) => tracing::info!(csr = %csr.name_any(), "CSR cleaned up: {why}"),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::certificates::v1::{
        CertificateSigningRequestCondition as Condition, CertificateSigningRequestStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    const NOW: i64 = 1_800_000_000;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    fn csr(created: i64, condition: Option<(&str, i64)>) -> Csr {
        let mut csr = Csr::default();
        csr.metadata.creation_timestamp = Some(at(created));
        csr.status = condition.map(|(type_, when)| CertificateSigningRequestStatus {
            conditions: Some(vec![Condition {
                type_: type_.into(),
                status: "True".into(),
                last_update_time: Some(at(when)),
                ..Condition::default()
            }]),
            ..CertificateSigningRequestStatus::default()
        });
        csr
    }

    #[test]
    fn each_state_goes_after_its_own_time() {
        let hour = 3600;
        assert_eq!(expired(&csr(NOW - 23 * hour, None), NOW), None);
        assert_eq!(
            expired(&csr(NOW - 25 * hour, None), NOW).as_deref(),
            Some("pending for more than 24h")
        );
        // Decided CSRs count from the decision, not from their creation.
        for (type_, what) in [
            ("Approved", "approved"),
            ("Denied", "denied"),
            ("Failed", "failed"),
        ] {
            let old = csr(NOW - 30 * hour, Some((type_, NOW - 2 * hour)));
            assert_eq!(expired(&old, NOW), Some(format!("{what} for more than 1h")));
            let recent = csr(NOW - 30 * hour, Some((type_, NOW - 10 * 60)));
            assert_eq!(expired(&recent, NOW), None, "{type_}");
        }
    }

    #[test]
    fn an_issued_certificate_past_its_expiry_goes_at_once() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["n1".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        params.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let pem = params.self_signed(&key).unwrap().pem();
        let mut issued = csr(NOW - 60, Some(("Approved", NOW - 60)));
        if let Some(s) = issued.status.as_mut() {
            s.certificate = Some(k8s_openapi::ByteString(pem.into_bytes()));
        }
        assert_eq!(
            expired(&issued, NOW).as_deref(),
            Some("its certificate has expired")
        );
    }
}
