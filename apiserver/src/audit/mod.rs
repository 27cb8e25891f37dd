//! The audit log (`--audit-log-path`): one audit.k8s.io/v1 Event per request, as JSON lines,
//! at level Metadata (who, what, the answer's code; never bodies), stage ResponseComplete
//! (ResponseStarted for a watch's start and for a failed authentication, as upstream).
//!
//! Events are written off the request path: requests hand them to a bounded channel and one
//! task writes them. When the writer falls behind (a slow disk) events are dropped, never the
//! request held, and /metrics counts them (apiserver_audit_error_total{plugin="log"}).

mod request;
mod rotate;

pub use request::{Answer, Asked, Pending};
pub use rotate::Rotation;

use prometheus_client::metrics::counter::Counter;
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};
use tokio::sync::mpsc;

/// Events waiting for the writer; beyond it they are dropped.
const QUEUE: usize = 10_000;

#[derive(Debug, thiserror::Error)]
#[error("--audit-log-path {}: {source}", .path.display())]
pub struct AuditError {
    path: PathBuf,
    source: std::io::Error,
}

/// One audit.k8s.io/v1 Event.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub kind: &'static str,
    pub api_version: &'static str,
    pub level: &'static str,
    #[serde(rename = "auditID")]
    pub audit_id: String,
    pub stage: &'static str,
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    pub verb: String,
    pub user: UserInfo,
    #[serde(rename = "sourceIPs")]
    pub source_ips: Vec<String>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectRef>,
    pub response_status: ResponseStatus,
    pub request_received_timestamp: String,
    pub stage_timestamp: String,
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<&'static str, String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UserInfo {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub resource: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    pub api_version: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The answer as a metav1.Status: the code, and for failures their reason and message.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct ResponseStatus {
    pub metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    pub code: u16,
}

/// Audit annotations a handler found (PodSecurity's), handed to the event in the response's
/// extensions.
#[derive(Debug, Clone, Default)]
pub struct Annotations(pub Vec<(&'static str, String)>);

/// Upstream's MicroTime: RFC 3339 in UTC with microseconds.
pub fn micro_time(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
}

/// Where requests send their events; does nothing without --audit-log-path.
#[derive(Clone, Default)]
pub struct Audit {
    tx: Option<mpsc::Sender<Event>>,
    /// apiserver_audit_event_total: events generated.
    pub events: Counter,
    /// apiserver_audit_error_total{plugin="log"}: events dropped or not written.
    pub errors: Counter,
}

impl Audit {
    /// Opens the log (appending; "-" is standard output), rotated as `rotation` says, and starts
    /// its writer task.
    pub fn start(
        path: Option<&Path>,
        rotation: Rotation,
        events: Counter,
        errors: Counter,
    ) -> Result<Audit, AuditError> {
        let Some(path) = path else {
            return Ok(Audit {
                tx: None,
                events,
                errors,
            });
        };
        let out: Box<dyn Write + Send> = if path == Path::new("-") {
            Box::new(std::io::stdout())
        } else {
            let file = rotate::LogFile::open(path, rotation).map_err(|source| AuditError {
                path: path.into(),
                source,
            })?;
            Box::new(file)
        };
        let (tx, rx) = mpsc::channel(QUEUE);
        tokio::task::spawn_blocking({
            let errors = errors.clone();
            move || write_all(rx, out, errors)
        });
        Ok(Audit {
            tx: Some(tx),
            events,
            errors,
        })
    }

    pub fn enabled(&self) -> bool {
        self.tx.is_some()
    }

    /// Queues `event` for the log; a full queue drops it (counted) rather than wait.
    pub fn log(&self, event: Event) {
        let Some(tx) = &self.tx else {
            return;
        };
        self.events.inc();
        if tx.try_send(event).is_err() {
            self.errors.inc();
        }
    }
}

/// The writer: one JSON line per event, flushed whenever the queue is empty, so the file is
/// current when the server is idle and written in batches when it is busy.
fn write_all(mut rx: mpsc::Receiver<Event>, out: Box<dyn Write + Send>, errors: Counter) {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, out);
    while let Some(event) = rx.blocking_recv() {
        let mut next = Some(event);
        while let Some(e) = next {
            // One write per line: the buffer passes whole lines on, and the file rotates
            // between them.
            let mut line = serde_json::to_vec(&e).unwrap_or_default();
            line.push(b'\n');
            if out.write_all(&line).is_err() {
                errors.inc();
            }
            next = rx.try_recv().ok();
        }
        if let Err(e) = out.flush() {
            tracing::warn!(error = %e, "writing the audit log failed");
            errors.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_queue_drops_events_instead_of_waiting() {
        let (tx, mut rx) = mpsc::channel(1);
        let audit = Audit {
            tx: Some(tx),
            ..Default::default()
        };
        let event = sample();
        // Nobody writes (a stuck disk): the second event does not fit and is counted.
        audit.log(event.clone());
        audit.log(event.clone());
        assert_eq!((audit.events.get(), audit.errors.get()), (2, 1));
        assert_eq!(rx.recv().await, Some(event));
    }

    #[test]
    fn an_event_is_upstreams_json() {
        let e = sample();
        let v = serde_json::to_value(&e).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "kind": "Event", "apiVersion": "audit.k8s.io/v1", "level": "Metadata",
                "auditID": "id", "stage": "ResponseComplete",
                "requestURI": "/api/v1/namespaces/default/pods/x", "verb": "get",
                "user": {"username": "alice", "groups": ["system:authenticated"]},
                "sourceIPs": ["127.0.0.1"], "userAgent": "kubectl",
                "objectRef": {"resource": "pods", "namespace": "default", "name": "x", "apiVersion": "v1"},
                "responseStatus": {"metadata": {}, "code": 200},
                "requestReceivedTimestamp": "t0", "stageTimestamp": "t1"
            })
        );
        let t = chrono::DateTime::from_timestamp(1_700_000_000, 123_456_000).unwrap();
        assert_eq!(micro_time(t), "2023-11-14T22:13:20.123456Z");
    }

    fn sample() -> Event {
        Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: "Metadata",
            audit_id: "id".into(),
            stage: "ResponseComplete",
            request_uri: "/api/v1/namespaces/default/pods/x".into(),
            verb: "get".into(),
            user: UserInfo {
                username: "alice".into(),
                uid: String::new(),
                groups: vec!["system:authenticated".into()],
            },
            source_ips: vec!["127.0.0.1".into()],
            user_agent: "kubectl".into(),
            object_ref: Some(ObjectRef {
                resource: "pods".into(),
                namespace: "default".into(),
                name: "x".into(),
                api_version: "v1".into(),
                ..Default::default()
            }),
            response_status: ResponseStatus {
                code: 200,
                ..Default::default()
            },
            request_received_timestamp: "t0".into(),
            stage_timestamp: "t1".into(),
            annotations: Default::default(),
        }
    }
}
