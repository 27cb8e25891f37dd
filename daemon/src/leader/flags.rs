//! Upstream's `--leader-elect*` flags, shared by the controller manager, the scheduler and the
//! ingress controller (each names its own Lease).

use std::time::Duration;

use keelson_apimachinery::parse_duration;

use super::{Config, LeaderError};

#[derive(clap::Args, Clone, Debug)]
// Its own group name: the binaries' option structs may be called Flags too.
#[group(id = "leader-election")]
pub struct Flags {
    /// Stand by until this process holds the Lease, and act only while it does (several
    /// replicas for high availability). `--leader-elect=false` runs without a Lease.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set,
        num_args = 0..=1, default_missing_value = "true", require_equals = true)]
    pub leader_elect: bool,
    /// How long standbys wait, after they last saw the Lease change, before taking it over.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leading.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub leader_elect_renew_deadline: Duration,
    /// How often candidates try to acquire, and the leader renews.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub leader_elect_retry_period: Duration,
    /// The Lease's name (default: the component's, e.g. kube-controller-manager).
    #[arg(long)]
    pub leader_elect_resource_name: Option<String>,
    /// The Lease's namespace.
    #[arg(long, default_value = "kube-system")]
    pub leader_elect_resource_namespace: String,
}

impl Flags {
    /// The election to run (None with `--leader-elect=false`), checked as upstream checks it;
    /// `component` names the Lease unless `--leader-elect-resource-name` does.
    pub fn config(&self, component: &str) -> Result<Option<Config>, LeaderError> {
        if !self.leader_elect {
            return Ok(None);
        }
        let name = self
            .leader_elect_resource_name
            .as_deref()
            .unwrap_or(component);
        let mut config = Config::new(&self.leader_elect_resource_namespace, name);
        config.lease_duration = self.leader_elect_lease_duration;
        config.renew_deadline = self.leader_elect_renew_deadline;
        config.retry_period = self.leader_elect_retry_period;
        config.validate()?;
        Ok(Some(config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Opts {
        #[command(flatten)]
        leader: Flags,
    }

    fn parse(args: &[&str]) -> Result<Option<Config>, String> {
        let opts = Opts::try_parse_from(std::iter::once("x").chain(args.iter().copied()))
            .map_err(|e| e.to_string())?;
        opts.leader
            .config("kube-scheduler")
            .map_err(|e| e.to_string())
    }

    #[test]
    fn on_by_default_with_upstreams_values() {
        let c = parse(&[]).unwrap().expect("elected by default");
        assert_eq!(
            (c.namespace.as_str(), c.name.as_str()),
            ("kube-system", "kube-scheduler")
        );
        assert_eq!(c.lease_duration, Duration::from_secs(15));
        assert_eq!(c.renew_deadline, Duration::from_secs(10));
        assert_eq!(c.retry_period, Duration::from_secs(2));
        assert!(parse(&["--leader-elect"]).unwrap().is_some());
    }

    #[test]
    fn off_named_and_bad_values() {
        assert!(parse(&["--leader-elect=false"]).unwrap().is_none());
        let c = parse(&[
            "--leader-elect-resource-name=sched-b",
            "--leader-elect-resource-namespace=ha",
        ])
        .unwrap()
        .unwrap();
        assert_eq!((c.namespace.as_str(), c.name.as_str()), ("ha", "sched-b"));
        let err = parse(&["--leader-elect-renew-deadline=20s"]).unwrap_err();
        assert!(err.contains("--leader-elect-lease-duration"), "{err}");
        assert!(parse(&["--leader-elect-retry-period=soon"]).is_err());
    }
}
