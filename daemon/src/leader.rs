//! Leader election on a coordination.k8s.io/v1 Lease, as upstream's client-go leaderelection:
//! a candidate takes the Lease only when it is free or has gone unchanged for its duration, the
//! leader renews it every retry period, and gives up when no renewal succeeded for the renew
//! deadline. Writes carry the resourceVersion read, so two candidates never both win.

pub mod decide;
mod flags;

pub use flags::Flags;

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ObjectMeta, PostParams};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::Shutdown;
use decide::Decision;

/// Upstream's JitterFactor: a candidate waits retry period x (1 + up to 1.2) between tries,
/// so standbys do not all try at once.
const JITTER: f64 = 1.2;

/// How long a stopping leader tries to release: an unreachable API server must not hold up its
/// exit (the Lease then expires as after a crash).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// The `--leader-elect-*` flags.
#[derive(Clone, Debug)]
pub struct Config {
    /// `--leader-elect-resource-namespace`.
    pub namespace: String,
    /// `--leader-elect-resource-name`.
    pub name: String,
    /// This process: `<hostname>_<uuid>` (see `identity`).
    pub identity: String,
    /// `--leader-elect-lease-duration`: how long standbys wait on an unrenewed lease.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`: how long the leader keeps trying to renew.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`: how often candidates try and the leader renews.
    pub retry_period: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// The leader could not keep its lease: it must stop acting at once.
    #[error("leaderelection lost: {0}")]
    Lost(String),
    #[error("--leader-elect-lease-duration ({lease:?}) must be greater than --leader-elect-renew-deadline ({renew:?})")]
    LeaseNotAboveRenew { lease: Duration, renew: Duration },
    #[error("--leader-elect-renew-deadline ({renew:?}) must be greater than {JITTER} x --leader-elect-retry-period ({retry:?})")]
    RenewNotAboveRetry { renew: Duration, retry: Duration },
    #[error("--leader-elect-retry-period must be greater than zero")]
    ZeroRetry,
    #[error(
        "--leader-elect-resource-name and --leader-elect-resource-namespace must not be empty"
    )]
    NoLeaseName,
}

/// `<hostname>_<uuid>`, as upstream's components name themselves in the Lease.
pub fn identity() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

impl Config {
    /// Upstream's defaults (15 s, 10 s, 2 s) for the Lease `namespace/name`.
    pub fn new(namespace: &str, name: &str) -> Config {
        Config {
            namespace: namespace.into(),
            name: name.into(),
            identity: identity(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Upstream's checks: a leader must give up before standbys may take over, and retry
    /// within its renew deadline.
    pub fn validate(&self) -> Result<(), LeaderError> {
        let (lease, renew, retry) = (self.lease_duration, self.renew_deadline, self.retry_period);
        if self.name.is_empty() || self.namespace.is_empty() {
            return Err(LeaderError::NoLeaseName);
        }
        if retry.is_zero() {
            return Err(LeaderError::ZeroRetry);
        }
        if lease <= renew {
            return Err(LeaderError::LeaseNotAboveRenew { lease, renew });
        }
        if renew.as_secs_f64() <= JITTER * retry.as_secs_f64() {
            return Err(LeaderError::RenewNotAboveRetry { renew, retry });
        }
        Ok(())
    }
}

/// What one try found.
enum Outcome {
    Holding,
    HeldBy(String),
}

/// One candidate for one Lease.
pub struct Elector {
    api: Api<Lease>,
    config: Config,
    /// The spec last read or written, and when (local clock) it was first seen so.
    observed: Option<(LeaseSpec, Instant)>,
    status: Gauge,
    registry: Arc<Registry>,
}

impl Elector {
    pub fn new(client: kube::Client, config: Config) -> Elector {
        let mut registry = Registry::default();
        let family = Family::<Vec<(String, String)>, Gauge>::default();
        registry.register(
            "leader_election_master_status",
            "Whether this process leads (1) or stands by (0), by lease name",
            family.clone(),
        );
        let status = family
            .get_or_create(&vec![("name".to_string(), config.name.clone())])
            .clone();
        Elector {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            status,
            registry: Arc::new(registry),
        }
    }

    /// `leader_election_master_status{name=...}`, to be served with the daemon's /metrics.
    pub fn registry(&self) -> Arc<Registry> {
        self.registry.clone()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    fn lease(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    /// Remembers `spec`; returns how long it has been seen unchanged.
    fn observe(&mut self, spec: LeaseSpec) -> Duration {
        match &self.observed {
            Some((seen, since)) if *seen == spec => since.elapsed(),
            _ => {
                self.observed = Some((spec, Instant::now()));
                Duration::ZERO
            }
        }
    }

    /// Reads the Lease and creates, takes over or renews it when it may.
    async fn try_once(&mut self) -> Result<Outcome, kube::Error> {
        let (identity, duration) = (self.config.identity.clone(), self.config.lease_duration);
        let Some(mut lease) = crate::get_opt(&self.api, &self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(decide::new_record(&identity, duration, Timestamp::now())),
            };
            let created = self.api.create(&PostParams::default(), &lease).await?;
            self.observe(created.spec.unwrap_or_default());
            return Ok(Outcome::Holding);
        };
        let current = lease.spec.clone().unwrap_or_default();
        let unchanged_for = self.observe(current.clone());
        match decide::decide(
            &current,
            unchanged_for,
            &identity,
            duration,
            Timestamp::now(),
        ) {
            Decision::HeldBy(holder) => Ok(Outcome::HeldBy(holder)),
            Decision::Write(next) => {
                lease.spec = Some(next);
                let name = self.config.name.clone();
                let written = self
                    .api
                    .replace(&name, &PostParams::default(), &lease)
                    .await?;
                self.observe(written.spec.unwrap_or_default());
                Ok(Outcome::Holding)
            }
        }
    }

    /// Tries every retry period (jittered) until this process holds the Lease (true) or
    /// shutdown is requested (false).
    pub async fn acquire(&mut self, shutdown: &Shutdown) -> bool {
        tracing::info!(lease = %self.lease(), identity = %self.config.identity, "attempting to acquire leader lease");
        let mut last_holder = String::new();
        loop {
            match self.try_once().await {
                Ok(Outcome::Holding) => {
                    tracing::info!(lease = %self.lease(), identity = %self.config.identity, "successfully acquired lease");
                    self.status.set(1);
                    return true;
                }
                Ok(Outcome::HeldBy(holder)) if holder != last_holder => {
                    tracing::info!(lease = %self.lease(), %holder, "the lease is held and has not yet expired; standing by");
                    last_holder = holder;
                }
                Ok(Outcome::HeldBy(_)) => {}
                Err(e) => {
                    tracing::warn!(lease = %self.lease(), error = %e, "cannot acquire the lease; retrying")
                }
            }
            let wait = self
                .config
                .retry_period
                .mul_f64(1.0 + JITTER * rand::random::<f64>());
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.requested() => return false,
            }
        }
    }

    /// Renews every retry period; returns only when leadership is lost: another holder took
    /// the Lease (noticed at the next renewal), or no renewal succeeded for the renew deadline.
    pub async fn hold(&mut self) -> LeaderError {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let left = self.config.renew_deadline.saturating_sub(renewed.elapsed());
            match tokio::time::timeout(left, self.try_once()).await {
                Ok(Ok(Outcome::Holding)) => renewed = Instant::now(),
                Ok(Ok(Outcome::HeldBy(holder))) => {
                    return self.lost(format!(
                        "the lease {} is now held by {holder}",
                        self.lease()
                    ))
                }
                Ok(Err(e)) => {
                    tracing::warn!(lease = %self.lease(), error = %e, "cannot renew the lease; retrying")
                }
                Err(_) => tracing::warn!(lease = %self.lease(), "renewing the lease timed out"),
            }
            if renewed.elapsed() >= self.config.renew_deadline {
                let why = format!(
                    "the lease {} was not renewed within the renew deadline ({:?})",
                    self.lease(),
                    self.config.renew_deadline
                );
                return self.lost(why);
            }
        }
    }

    fn lost(&self, why: String) -> LeaderError {
        self.status.set(0);
        tracing::error!(lease = %self.lease(), "leaderelection lost: {why}");
        LeaderError::Lost(why)
    }

    /// Gives the Lease up if this process still holds it, so a standby takes over at its next
    /// try instead of waiting out the lease duration (upstream's ReleaseOnCancel).
    pub async fn release(&mut self) {
        self.status.set(0);
        let release = async {
            let Some(mut lease) = crate::get_opt(&self.api, &self.config.name).await? else {
                return Ok(false);
            };
            let current = lease.spec.clone().unwrap_or_default();
            if current.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(false);
            }
            lease.spec = Some(decide::released(&current, Timestamp::now()));
            let name = self.config.name.clone();
            self.api
                .replace(&name, &PostParams::default(), &lease)
                .await?;
            Ok::<_, kube::Error>(true)
        };
        match tokio::time::timeout(RELEASE_TIMEOUT, release).await {
            Ok(Ok(true)) => tracing::info!(lease = %self.lease(), "lease released"),
            Ok(Ok(false)) => {}
            Ok(Err(e)) => {
                tracing::warn!(lease = %self.lease(), error = %e, "cannot release the lease")
            }
            Err(_) => tracing::warn!(lease = %self.lease(), "releasing the lease timed out"),
        }
    }

    /// Stands by until this process leads, runs `work` while renewing, and releases the Lease
    /// when `work` ends. Ok(None): shutdown came while standing by. Err(Lost): `work` was
    /// dropped at the moment leadership was lost; the caller must exit (as upstream's
    /// components do) rather than go on acting.
    pub async fn lead<T>(
        mut self,
        shutdown: &Shutdown,
        work: impl Future<Output = T>,
    ) -> Result<Option<T>, LeaderError> {
        if !self.acquire(shutdown).await {
            return Ok(None);
        }
        // Renewal is a task of its own: `work` may keep its thread busy for longer than the
        // renew deadline (a scheduler's pass over thousands of Pods), and a renewal polled
        // only between `work`'s awaits missed it and gave up a lease it still held.
        let (done, finished) = tokio::sync::oneshot::channel::<()>();
        let mut holder = tokio::spawn(async move {
            tokio::select! {
                lost = self.hold() => Err(lost),
                _ = finished => {
                    self.release().await;
                    Ok(())
                }
            }
        });
        tokio::select! {
            out = work => {
                let _ = done.send(());
                let _ = holder.await;
                Ok(Some(out))
            }
            held = &mut holder => match held {
                Ok(Err(lost)) => Err(lost),
                // Only `done` ends renewal well, and it was not sent.
                Ok(Ok(())) => Err(LeaderError::Lost("renewal stopped".into())),
                Err(e) => Err(LeaderError::Lost(format!("the renewal task failed: {e}"))),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_defaults_are_valid_and_bad_combinations_are_named() {
        let ok = Config::new("kube-system", "kube-scheduler");
        ok.validate().unwrap();
        assert!(ok.identity.contains('_'), "{}", ok.identity);
        let mut c = ok.clone();
        c.renew_deadline = c.lease_duration;
        let text = c.validate().unwrap_err().to_string();
        assert!(text.contains("--leader-elect-lease-duration"), "{text}");
        let mut c = ok.clone();
        c.retry_period = Duration::from_secs(9);
        let text = c.validate().unwrap_err().to_string();
        assert!(text.contains("--leader-elect-retry-period"), "{text}");
        let mut c = ok;
        c.name.clear();
        assert!(c.validate().is_err());
    }
}
