//! The pure part of leader election: given the Lease as read and how long this process has
//! seen it unchanged, what to write (upstream's tryAcquireOrRenew, without the I/O).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::LeaseSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

/// What to do with the Lease as read.
#[derive(Debug, PartialEq)]
pub enum Decision {
    /// Write this spec (with the resourceVersion read: a concurrent writer makes it a conflict).
    Write(LeaseSpec),
    /// Another holder's lease is still valid: wait.
    HeldBy(String),
}

/// The spec of a Lease this process creates: it holds it from `now`.
pub fn new_record(identity: &str, lease_duration: Duration, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(identity.to_string()),
        lease_duration_seconds: Some(seconds(lease_duration)),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(0),
        ..LeaseSpec::default()
    }
}

/// `current` is the Lease's spec; `unchanged_for` how long this process has seen exactly that
/// spec (judged by the local clock from when it last saw it change, as upstream: clocks of
/// different machines are never compared). A lease held by another is free once it has gone
/// unchanged for its leaseDurationSeconds; an empty holder (a released lease) is free at once.
pub fn decide(
    current: &LeaseSpec,
    unchanged_for: Duration,
    identity: &str,
    lease_duration: Duration,
    now: Timestamp,
) -> Decision {
    let holder = current.holder_identity.as_deref().unwrap_or("");
    let valid_for = Duration::from_secs(
        current
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .unwrap_or(0),
    );
    if !holder.is_empty() && holder != identity && unchanged_for < valid_for {
        return Decision::HeldBy(holder.to_string());
    }
    let transitions = current.lease_transitions.unwrap_or(0);
    let mut next = new_record(identity, lease_duration, now);
    if holder == identity {
        // A renewal keeps when this holder acquired it and how often it changed hands.
        next.acquire_time = current.acquire_time.clone().or(next.acquire_time);
        next.lease_transitions = Some(transitions);
    } else {
        next.lease_transitions = Some(transitions.saturating_add(1));
    }
    Decision::Write(next)
}

/// The spec that gives the lease up (upstream's release on cancel): no holder, a one-second
/// duration, the transitions kept, so a standby takes over at its next try.
pub fn released(current: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(1),
        acquire_time: Some(MicroTime(now)),
        renew_time: Some(MicroTime(now)),
        lease_transitions: current.lease_transitions,
        ..LeaseSpec::default()
    }
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs()).unwrap_or(i32::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(15);

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap()
    }

    fn held_by(holder: &str, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(at(0))),
            renew_time: Some(MicroTime(at(5))),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn a_new_lease_names_its_holder_and_times() {
        let spec = new_record("a_1", LEASE, at(3));
        assert_eq!(spec.holder_identity.as_deref(), Some("a_1"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(3))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(3))));
        assert_eq!(spec.lease_transitions, Some(0));
    }

    #[test]
    fn another_holders_valid_lease_is_waited_for() {
        let d = decide(
            &held_by("b_2", 4),
            Duration::from_secs(14),
            "a_1",
            LEASE,
            at(20),
        );
        assert_eq!(d, Decision::HeldBy("b_2".into()));
    }

    #[test]
    fn a_lease_unchanged_for_its_duration_is_taken_over_counting_a_transition() {
        let Decision::Write(next) = decide(
            &held_by("b_2", 4),
            Duration::from_secs(15),
            "a_1",
            LEASE,
            at(30),
        ) else {
            panic!("an expired lease is taken");
        };
        assert_eq!(next.holder_identity.as_deref(), Some("a_1"));
        assert_eq!(next.acquire_time, Some(MicroTime(at(30))));
        assert_eq!(next.renew_time, Some(MicroTime(at(30))));
        assert_eq!(next.lease_transitions, Some(5));
    }

    #[test]
    fn expiry_follows_the_records_duration_not_the_renew_time() {
        // The holder's renewTime is far in the past by our wall clock, but we have seen the
        // record change only 2 s ago: another machine's clock is never trusted.
        let mut spec = held_by("b_2", 0);
        spec.renew_time = Some(MicroTime(at(-3600)));
        let d = decide(&spec, Duration::from_secs(2), "a_1", LEASE, at(0));
        assert_eq!(d, Decision::HeldBy("b_2".into()));
        // A shorter duration in the record expires sooner.
        spec.lease_duration_seconds = Some(1);
        assert!(matches!(
            decide(&spec, Duration::from_secs(2), "a_1", LEASE, at(0)),
            Decision::Write(_)
        ));
    }

    #[test]
    fn a_renewal_keeps_acquire_time_and_transitions() {
        let Decision::Write(next) = decide(
            &held_by("a_1", 3),
            Duration::from_secs(1),
            "a_1",
            LEASE,
            at(9),
        ) else {
            panic!("the holder renews");
        };
        assert_eq!(next.acquire_time, Some(MicroTime(at(0))));
        assert_eq!(next.renew_time, Some(MicroTime(at(9))));
        assert_eq!(next.lease_transitions, Some(3));
    }

    #[test]
    fn a_released_lease_is_free_at_once() {
        let released = released(&held_by("b_2", 2), at(10));
        assert_eq!(released.holder_identity.as_deref(), Some(""));
        assert_eq!(released.lease_duration_seconds, Some(1));
        assert_eq!(released.lease_transitions, Some(2));
        let Decision::Write(next) = decide(&released, Duration::ZERO, "a_1", LEASE, at(11)) else {
            panic!("a released lease is free");
        };
        assert_eq!(next.holder_identity.as_deref(), Some("a_1"));
        assert_eq!(next.lease_transitions, Some(3));
    }
}
