//! Observe: what the runtime holds for one pod (found by the pod UID label), with the
//! termination messages of its exited containers read from the node.

use std::collections::HashMap;
use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use keelson_proto::runtime::v1 as cri;

use crate::cri::{labels, Cri, CriError};
use crate::pod::context::Context;
use crate::pod::decide::container_spec;
use crate::pod::observed::{ObservedPod, RunState};
use crate::pod::volumes;

/// The most of a termination message kept, as the kubelet does.
const MAX_MESSAGE: usize = 4096;
/// The most of a log's end used as the message (FallbackToLogsOnError).
const MAX_LOG_MESSAGE: usize = 2048;
const LOG_MESSAGE_LINES: usize = 80;

/// The pod as the runtime holds it, termination messages included.
pub async fn pod(ctx: &Context, uid: &str, pod: &Pod) -> Result<ObservedPod, CriError> {
    let mut observed = runtime(ctx.cri.as_ref(), uid).await?;
    termination_messages(&ctx.root, pod, &mut observed);
    Ok(observed)
}

/// The pod's sandboxes (with their addresses) and containers (with their statuses). A sandbox or
/// container removed between the list and its status is skipped. The calls go out together: on a
/// busy runtime each waits its turn, and a pod's start observes several times.
pub async fn runtime(cri: &dyn Cri, uid: &str) -> Result<ObservedPod, CriError> {
    let selector = HashMap::from([(labels::POD_UID.to_string(), uid.to_string())]);
    let (sandboxes, listed) = futures::try_join!(
        cri.list_pod_sandbox(selector.clone()),
        cri.list_containers(selector)
    )?;
    let ready = sandboxes
        .iter()
        .filter(|s| s.state == cri::PodSandboxState::SandboxReady as i32);
    let ips = ready.map(|s| async move {
        let ip = cri
            .pod_sandbox_status(&s.id)
            .await
            .map(|st| st.network.map(|n| n.ip).unwrap_or_default());
        (s.id.clone(), ip)
    });
    let statuses = listed
        .iter()
        .map(|c| async move { (c.pod_sandbox_id.clone(), cri.container_status(&c.id).await) });
    let (ips, statuses) = futures::join!(
        futures::future::join_all(ips),
        futures::future::join_all(statuses)
    );
    let ips = present(ips)?;
    let containers = present(statuses)?;
    Ok(ObservedPod::from_cri(&sandboxes, &ips, &containers))
}

/// The answers of status calls, without those of objects gone since they were listed.
fn present<T>(answers: Vec<(String, Result<T, CriError>)>) -> Result<Vec<(String, T)>, CriError> {
    let mut found = Vec::new();
    for (id, answer) in answers {
        match answer {
            Ok(v) => found.push((id, v)),
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    Ok(found)
}

/// The message of exited containers: what they wrote to their terminationMessagePath, or with
/// terminationMessagePolicy FallbackToLogsOnError and a failure, the end of their log.
pub fn termination_messages(root: &Path, pod: &Pod, observed: &mut ObservedPod) {
    for c in observed
        .containers
        .iter_mut()
        .filter(|c| c.state == RunState::Exited && c.message.is_empty())
    {
        let file = volumes::termination_log(root, pod, &c.name, c.attempt);
        let mut text = std::fs::read(&file)
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
        let fallback = container_spec(pod, &c.name, c.kind).is_some_and(|s| {
            s.termination_message_policy.as_deref() == Some("FallbackToLogsOnError")
        });
        if text.is_empty() && fallback && c.exit_code != 0 {
            text = log_end(&c.log_path);
        }
        crate::server::logs::truncate_bytes(&mut text, MAX_MESSAGE);
        c.message = text;
    }
}

/// The last lines of a container's log, at most `MAX_LOG_MESSAGE` bytes of them.
fn log_end(log_path: &str) -> String {
    let log = std::fs::read_to_string(log_path).unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    let tail = crate::server::logs::tail(&lines, LOG_MESSAGE_LINES);
    let text = crate::server::logs::render(&tail, false);
    if text.len() <= MAX_LOG_MESSAGE {
        return text;
    }
    let cut = text.len() - MAX_LOG_MESSAGE;
    let start = (cut..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    text[start..].to_string()
}
