//! The sync loop with a recording backend and paused time: nothing before the inputs are
//! listed, bursts batched by the minimum sync period, periodic and canary-forced full syncs.

mod corpus;

use std::sync::Arc;
use std::time::Duration;

use keelson_daemon::{Changes, Shutdown};
use keelson_proxy::backend::{RecordingBackend, SyncScope};
use keelson_proxy::metrics::Metrics;
use keelson_proxy::model::ProxyModel;
use keelson_proxy::proxier::Proxier;
use keelson_proxy::sync_loop::{run_sync_loop, LoopConfig, StaticSource};

struct Harness {
    backend: RecordingBackend,
    source: Arc<StaticSource>,
    changes: Changes,
    metrics: Arc<Metrics>,
    /// Sending `true` stops the loop (dropping it does not).
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

fn start() -> Harness {
    let backend = RecordingBackend::default();
    let metrics = Arc::new(Metrics::new(Duration::from_secs(70)));
    let proxier = Proxier::new(Box::new(backend.clone()), None, metrics.clone());
    let source = Arc::new(StaticSource::default());
    let changes = Changes::default();
    let (stop, shutdown) = Shutdown::manual();
    let cfg = LoopConfig {
        min_sync_period: Duration::from_secs(1),
        sync_period: Duration::from_secs(30),
        canary_period: Duration::from_secs(2),
    };
    let task = tokio::spawn(run_sync_loop(
        proxier,
        source.clone(),
        changes.clone(),
        cfg,
        shutdown,
    ));
    Harness {
        backend,
        source,
        changes,
        metrics,
        stop,
        task,
    }
}

impl Harness {
    fn set(&self, m: ProxyModel) {
        *self.source.model.lock().expect("lock") = Some(m);
        self.changes.notify();
    }
}

/// The corpus with a distinct node name, so every call is a real change.
fn variant(i: usize) -> ProxyModel {
    let mut m = corpus::model();
    if let Some(sp) = m.services.values_mut().next() {
        sp.port = 1000 + i as u16;
    }
    m
}

async fn sleep(s: f64) {
    tokio::time::sleep(Duration::from_secs_f64(s)).await;
}

#[tokio::test(start_paused = true)]
async fn nothing_is_written_before_the_inputs_are_listed() {
    let h = start();
    sleep(10.0).await;
    assert!(h.backend.recorded().is_empty());
    assert!(
        h.metrics.health().is_err(),
        "no sync yet: /healthz must fail"
    );
    h.set(corpus::model());
    sleep(0.5).await;
    let rec = h.backend.recorded();
    assert_eq!(rec.len(), 1);
    assert_eq!(rec[0].scope, SyncScope::Full);
    assert!(h.metrics.health().is_ok());
}

#[tokio::test(start_paused = true)]
async fn bursts_are_batched_by_the_minimum_sync_period() {
    let h = start();
    h.set(corpus::model());
    sleep(0.1).await;
    for i in 0..20 {
        h.set(variant(i));
        sleep(0.05).await;
    }
    // 20 changes within one second: at most one sync per second after the first.
    sleep(1.5).await;
    let rec = h.backend.recorded();
    assert!(rec.len() <= 3, "{} syncs for a burst", rec.len());
    let last = rec.last().expect("a sync");
    assert_eq!(last.model, variant(19), "the last state is written");
    assert!(matches!(last.scope, SyncScope::Partial(ref c) if c.len() == 1));
}

#[tokio::test(start_paused = true)]
async fn periodic_full_resync_and_canary_loss() {
    let h = start();
    h.set(corpus::model());
    sleep(1.0).await;
    assert_eq!(h.backend.recorded().len(), 1);
    sleep(30.0).await;
    let rec = h.backend.recorded();
    assert_eq!(rec.len(), 2, "one periodic resync after 30 s");
    assert_eq!(rec[1].scope, SyncScope::Full);
    *h.backend.lost.lock().expect("lock") = true;
    sleep(2.5).await;
    let rec = h.backend.recorded();
    assert_eq!(
        rec.len(),
        3,
        "a lost canary forces a sync within one canary period"
    );
    assert_eq!(rec[2].scope, SyncScope::Full);
}

#[tokio::test(start_paused = true)]
async fn shutdown_stops_the_loop_before_and_after_the_first_sync() {
    let h = start();
    sleep(1.0).await;
    h.stop.send(true).expect("loop listening");
    sleep(0.1).await;
    assert!(
        h.task.is_finished(),
        "still waiting for inputs after shutdown"
    );

    let h = start();
    h.set(corpus::model());
    sleep(1.0).await;
    assert_eq!(h.backend.recorded().len(), 1);
    h.stop.send(true).expect("loop listening");
    sleep(0.1).await;
    assert!(h.task.is_finished(), "still syncing after shutdown");
}
