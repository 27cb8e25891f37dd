//! Where a pod's first start spends its time: each phase's share, from the worker's first sync to
//! the status write that reports every container running. Told once per pod, as one log line
//! (with the wall-clock time the worker first saw the pod, so a benchmark can add the API's
//! create and watch delivery before it) and in `keelson_agent_pod_start_phase_seconds`.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::metrics::Metrics;

/// The steps of a start, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Listing the pod's sandboxes and containers from the runtime (before and after each round).
    Observe,
    /// Waiting for the pod's volumes (claims bound, local paths adopted).
    Volumes,
    /// RunPodSandbox: the runtime's pause container and the CNI ADD inside it.
    Sandbox,
    /// ImageStatus (or a pull) per imagePullPolicy.
    Pull,
    /// The container's config: env sources, tokens, volumes written on the node.
    Config,
    /// CreateContainer.
    Create,
    /// StartContainer.
    Start,
    /// The status write that reports the containers running.
    Status,
}

impl Phase {
    pub const ALL: [Phase; 8] = [
        Phase::Observe,
        Phase::Volumes,
        Phase::Sandbox,
        Phase::Pull,
        Phase::Config,
        Phase::Create,
        Phase::Start,
        Phase::Status,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Observe => "observe",
            Phase::Volumes => "volumes",
            Phase::Sandbox => "sandbox",
            Phase::Pull => "pull",
            Phase::Config => "config",
            Phase::Create => "create",
            Phase::Start => "start",
            Phase::Status => "status",
        }
    }
}

/// Time spent per phase until the pod first runs; idle once told.
#[derive(Debug, Default)]
pub struct StartClock {
    seen: Option<(SystemTime, Instant)>,
    spent: [Duration; Phase::ALL.len()],
    told: bool,
}

impl StartClock {
    /// Marks the first sync; later calls keep the first mark.
    pub fn begin(&mut self) {
        if self.seen.is_none() {
            self.seen = Some((SystemTime::now(), Instant::now()));
        }
    }

    pub fn add(&mut self, phase: Phase, spent: Duration) {
        if let Some(slot) = self.spent.get_mut(phase as usize).filter(|_| !self.told) {
            *slot += spent;
        }
    }

    /// Awaits `work`, counting its time to `phase`.
    pub async fn time<T>(&mut self, phase: Phase, work: impl Future<Output = T>) -> T {
        let started = Instant::now();
        let out = work.await;
        self.add(phase, started.elapsed());
        out
    }

    pub fn spent(&self, phase: Phase) -> Duration {
        self.spent.get(phase as usize).copied().unwrap_or_default()
    }

    /// Logs and records the phases once: the first time the pod's containers all run. `fresh` is
    /// false for a pod adopted after a restart, whose start happened before this agent.
    pub fn tell(&mut self, metrics: &Metrics, pod: &str, fresh: bool) {
        if self.told {
            return;
        }
        self.told = true;
        let Some((seen_wall, seen)) = self.seen else {
            return;
        };
        if !fresh {
            return;
        }
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        for phase in Phase::ALL {
            metrics.observe_start_phase(phase.name(), self.spent(phase).as_secs_f64());
        }
        let total = seen.elapsed();
        let counted: Duration = self.spent.iter().sum();
        let seen_unix_ms = seen_wall
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis())
            .unwrap_or(0);
        let p = |phase| ms(self.spent(phase));
        tracing::info!(
            %pod,
            seen_unix_ms,
            total_ms = ms(total),
            observe_ms = p(Phase::Observe),
            volumes_ms = p(Phase::Volumes),
            sandbox_ms = p(Phase::Sandbox),
            pull_ms = p(Phase::Pull),
            config_ms = p(Phase::Config),
            create_ms = p(Phase::Create),
            start_ms = p(Phase::Start),
            status_ms = p(Phase::Status),
            // Between phases: the worker waiting for its turn, events, planning.
            other_ms = ms(total.saturating_sub(counted)),
            "pod start phases"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn phases_add_up_until_told_once() {
        let metrics = Metrics::new();
        let mut clock = StartClock::default();
        clock.begin();
        clock
            .time(
                Phase::Sandbox,
                tokio::time::sleep(Duration::from_millis(20)),
            )
            .await;
        clock.add(Phase::Sandbox, Duration::from_millis(5));
        clock.add(Phase::Start, Duration::from_millis(7));
        assert!(clock.spent(Phase::Sandbox) >= Duration::from_millis(25));
        clock.tell(&metrics, "default/p", true);
        // Told: later work (restarts, resyncs) is not counted, and nothing is observed twice.
        clock.add(Phase::Start, Duration::from_secs(1));
        assert_eq!(clock.spent(Phase::Start), Duration::from_millis(7));
        clock.tell(&metrics, "default/p", true);
        let text = metrics.render();
        let line = text
            .lines()
            .find(|l| l.starts_with("keelson_agent_pod_start_phase_seconds_count{phase=\"start\"}"))
            .expect("the start phase is exported");
        assert!(line.ends_with(" 1"), "{line}");
    }

    #[test]
    fn an_adopted_pod_is_not_counted() {
        let metrics = Metrics::new();
        let mut clock = StartClock::default();
        clock.begin();
        clock.tell(&metrics, "default/p", false);
        assert!(!metrics
            .render()
            .contains("keelson_agent_pod_start_phase_seconds_count{"));
    }
}
