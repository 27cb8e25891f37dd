//! What a node shutdown does to the pods, as the kubelet's shutdown manager with
//! shutdownGracePeriod and shutdownGracePeriodCriticalPods: the regular pods stop first, within
//! the grace period less the critical pods' share, then the critical pods within their share.
//! Each pod gets the shorter of its own grace period and its group's. Pure.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;

use crate::pod::critical::is_critical;
use crate::pod::security::Rejection;

/// The status a pod stopped by the shutdown is given (phase Failed), as upstream's.
pub const REASON: &str = "Terminated";
pub const MESSAGE: &str = "Pod was terminated in response to imminent node shutdown.";
/// Ready=False's message while the node shuts down.
pub const NOT_READY: &str = "node is shutting down";
/// A pod that arrives while the node shuts down is refused with these.
pub const REJECT_REASON: &str = "NodeShutdown";
pub const REJECT_MESSAGE: &str = "Pod was rejected as the node is shutting down.";

/// A new pod while the node shuts down is refused, as the kubelet's shutdown admit handler.
pub fn admit(shutting_down: bool) -> Result<(), Rejection> {
    if !shutting_down {
        return Ok(());
    }
    Err(Rejection {
        reason: REJECT_REASON,
        message: REJECT_MESSAGE.into(),
    })
}

/// The kubelet's two flags: the whole time the shutdown is held for, and the critical pods'
/// share of it (the last part).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    pub grace: Duration,
    pub critical_grace: Duration,
}

impl Settings {
    /// Both flags checked as the kubelet's configuration validation does.
    pub fn new(grace: Duration, critical_grace: Duration) -> Result<Settings, String> {
        if critical_grace > grace {
            return Err(format!(
                "--shutdown-grace-period-critical-pods {}s must be <= --shutdown-grace-period {}s",
                critical_grace.as_secs(),
                grace.as_secs()
            ));
        }
        Ok(Settings {
            grace,
            critical_grace,
        })
    }

    /// A zero grace period (the default) leaves node shutdown alone, as upstream.
    pub fn enabled(&self) -> bool {
        self.grace > Duration::ZERO
    }
}

/// Pods stopped together, and how long they are waited for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    /// (UID, grace period in seconds) of each pod.
    pub pods: Vec<(String, i64)>,
    pub period: Duration,
}

/// The groups, in the order they are stopped; empty groups are left out.
pub fn groups(pods: &[Arc<Pod>], settings: &Settings) -> Vec<Group> {
    let regular = settings.grace.saturating_sub(settings.critical_grace);
    let (critical, others): (Vec<&Arc<Pod>>, Vec<&Arc<Pod>>) =
        pods.iter().partition(|p| is_critical(p));
    [(others, regular), (critical, settings.critical_grace)]
        .into_iter()
        .filter(|(pods, _)| !pods.is_empty())
        .map(|(pods, period)| Group {
            pods: pods
                .iter()
                .map(|p| (p.metadata.uid.clone().unwrap_or_default(), grace(p, period)))
                .collect(),
            period,
        })
        .collect()
}

/// The pod's own grace period (30 s unless it says), cut to its group's.
fn grace(pod: &Pod, period: Duration) -> i64 {
    let own = pod
        .spec
        .as_ref()
        .and_then(|s| s.termination_grace_period_seconds)
        .unwrap_or(30);
    own.min(i64::try_from(period.as_secs()).unwrap_or(i64::MAX))
        .max(0)
}

/// logind's drop-in raising InhibitDelayMaxSec to the grace period, as the kubelet writes it.
pub fn logind_drop_in(grace: Duration) -> String {
    format!(
        "# Keelson agent: time to stop pods at node shutdown (--shutdown-grace-period)\n[Login]\nInhibitDelayMaxSec={}\n",
        grace.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;

    fn pod(uid: &str, priority: Option<i32>, grace: Option<i64>) -> Arc<Pod> {
        let mut p = Pod::default();
        p.metadata.uid = Some(uid.into());
        p.spec = Some(PodSpec {
            priority,
            termination_grace_period_seconds: grace,
            ..Default::default()
        });
        Arc::new(p)
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn regular_pods_go_first_within_the_time_the_critical_ones_leave() {
        let settings = Settings::new(secs(30), secs(10)).unwrap();
        let pods = [
            pod("dns", Some(2_000_001_000), None),
            pod("web", None, None),
            pod("batch", Some(1000), Some(5)),
        ];
        let plan = groups(&pods, &settings);
        assert_eq!(
            plan,
            vec![
                Group {
                    pods: vec![("web".into(), 20), ("batch".into(), 5)],
                    period: secs(20),
                },
                Group {
                    pods: vec![("dns".into(), 10)],
                    period: secs(10),
                },
            ]
        );
    }

    #[test]
    fn static_pods_are_critical_and_empty_groups_are_left_out() {
        let settings = Settings::new(secs(20), secs(0)).unwrap();
        let mut manifest = Pod::clone(&pod("etcd", None, Some(60)));
        manifest.metadata.annotations = Some(
            [(
                crate::pod::static_pods::SOURCE_ANNOTATION.to_string(),
                "file".to_string(),
            )]
            .into(),
        );
        let plan = groups(&[Arc::new(manifest)], &settings);
        assert_eq!(
            plan,
            vec![Group {
                pods: vec![("etcd".into(), 0)],
                period: secs(0),
            }]
        );
    }

    #[test]
    fn the_flags_are_checked_as_the_kubelet_checks_them() {
        assert!(!Settings::new(secs(0), secs(0)).unwrap().enabled());
        assert!(Settings::new(secs(30), secs(10)).unwrap().enabled());
        let e = Settings::new(secs(10), secs(30)).unwrap_err();
        assert!(e.contains("must be <= --shutdown-grace-period 10s"), "{e}");
        assert!(Settings::new(secs(0), secs(5)).is_err());
    }

    #[test]
    fn the_drop_in_sets_the_inhibit_delay_in_seconds() {
        let text = logind_drop_in(secs(45));
        assert!(text.contains("[Login]\nInhibitDelayMaxSec=45\n"), "{text}");
    }
}
