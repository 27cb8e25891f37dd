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

    /// A Lease spec held by `holder` for `secs`, acquired and renewed at these times.
    fn lease(holder: &str, secs: i32, acquired: i64, renewed: i64, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(secs),
            acquire_time: Some(MicroTime(at(acquired))),
            renew_time: Some(MicroTime(at(renewed))),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }
    }

    fn held_by(holder: &str, transitions: i32) -> LeaseSpec {
        lease(holder, 15, 0, 5, transitions)
    }

    #[test]
    fn a_new_lease_names_its_holder_and_times() {
        assert_eq!(new_record("a_1", LEASE, at(3)), lease("a_1", 15, 3, 3, 0));
    }

    /// What "a_1" decides on reading `current`, seen unchanged for `unchanged` seconds, at `now`.
    #[test]
    fn decisions() {
        let mut far_past_renewal = held_by("b_2", 0);
        far_past_renewal.renew_time = Some(MicroTime(at(-3600)));
        let short = LeaseSpec {
            lease_duration_seconds: Some(1),
            ..far_past_renewal.clone()
        };
        let cases = [
            (
                "another holder's valid lease is waited for",
                held_by("b_2", 4),
                14,
                20,
                Decision::HeldBy("b_2".into()),
            ),
            (
                "a lease unchanged for its duration is taken over, counting a transition",
                held_by("b_2", 4),
                15,
                30,
                Decision::Write(lease("a_1", 15, 30, 30, 5)),
            ),
            (
                // Another machine's clock is never trusted: the record changed 2 s ago by ours.
                "expiry follows the record's duration, not its renew time",
                far_past_renewal,
                2,
                0,
                Decision::HeldBy("b_2".into()),
            ),
            (
                "a shorter duration in the record expires sooner",
                short,
                2,
                0,
                Decision::Write(lease("a_1", 15, 0, 0, 1)),
            ),
            (
                "a renewal keeps acquire time and transitions",
                held_by("a_1", 3),
                1,
                9,
                Decision::Write(lease("a_1", 15, 0, 9, 3)),
            ),
            (
                "a released lease is free at once",
                released(&held_by("b_2", 2), at(10)),
                0,
                11,
                Decision::Write(lease("a_1", 15, 11, 11, 3)),
            ),
        ];
        for (case, current, unchanged, now, want) in cases {
            let unchanged = Duration::from_secs(unchanged);
            let got = decide(&current, unchanged, "a_1", LEASE, at(now));
            assert_eq!(got, want, "{case}");
        }
    }

    #[test]
    fn a_release_gives_up_the_lease_keeping_its_transitions() {
        let mut want = lease("", 1, 10, 10, 2);
        assert_eq!(released(&held_by("b_2", 2), at(10)), want);
        want.lease_transitions = None;
        assert_eq!(released(&LeaseSpec::default(), at(10)), want);
    }
}
