//! One Ingress nginx refuses must not freeze the others. When `nginx -t` refuses the whole
//! configuration, the Ingresses are added in groups to what already passed, each step tested on
//! a trial file; a group nginx refuses is halved until the Ingress that makes nginx refuse is
//! found. It is left out (with nginx's words), the rest are served. A verdict holds while the
//! Ingress and the Secrets it names stay the same.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::networking::v1::Ingress;
use keelson_apimachinery::hash::fnv1a_64;

use crate::error::NginxError;
use crate::model::{self, key, Inputs, Rejection, REASON_REJECTED_BY_NGINX};
use crate::render::{self, RenderOptions};
use crate::worker::NginxWorker;

/// `(namespace, name)` of an Ingress.
pub type Key = (String, String);

/// What nginx would see of an Ingress: its spec, its annotations and the Secrets its spec.tls
/// names (not its status, which this controller writes).
pub fn fingerprint(ing: &Ingress, secrets: &[Arc<Secret>]) -> u64 {
    let (ns, _) = key(ing);
    let mut bytes = serde_json::to_vec(&(&ing.spec, &ing.metadata.annotations)).unwrap_or_default();
    for t in ing.spec.iter().flat_map(|s| s.tls.iter().flatten()) {
        let named = secrets.iter().find(|s| {
            s.metadata.namespace.as_deref() == Some(ns.as_str()) && s.metadata.name == t.secret_name
        });
        if let Some(s) = named {
            bytes.extend(serde_json::to_vec(&(&s.type_, &s.data)).unwrap_or_default());
        }
    }
    fnv1a_64(&bytes)
}

/// Ingresses nginx refused, with the fingerprint they had then and nginx's message.
#[derive(Default)]
pub struct Verdicts {
    bad: BTreeMap<Key, (u64, String)>,
}

impl Verdicts {
    /// Forgets Ingresses that changed or are gone: they are tried again.
    pub fn refresh(&mut self, inputs: &Inputs) {
        self.bad.retain(|k, (fp, _)| {
            inputs
                .ingresses
                .iter()
                .find(|i| key(i) == *k)
                .is_some_and(|i| fingerprint(i, &inputs.secrets) == *fp)
        });
    }

    pub fn is_bad(&self, k: &Key) -> bool {
        self.bad.contains_key(k)
    }

    pub fn insert(&mut self, inputs: &Inputs, k: Key, message: String) {
        let Some(ing) = inputs.ingresses.iter().find(|i| key(i) == k) else {
            return;
        };
        self.bad
            .insert(k, (fingerprint(ing, &inputs.secrets), message));
    }

    pub fn rejections(&self) -> impl Iterator<Item = Rejection> + '_ {
        self.bad.iter().map(|(k, (_, message))| Rejection {
            ingress: k.clone(),
            reason: REASON_REJECTED_BY_NGINX,
            message: message.clone(),
        })
    }
}

/// What the search needs to render and test a configuration.
pub struct Trial<'a> {
    pub nginx: &'a NginxWorker,
    pub inputs: &'a Inputs,
    pub controller: &'a str,
    pub render: &'a RenderOptions,
}

impl Trial<'_> {
    /// `nginx -t` of the configuration of the Ingresses `keep` selects.
    async fn test(&self, keep: impl Fn(&Key) -> bool) -> Result<(), NginxError> {
        let model = model::build_only(self.inputs, self.controller, keep);
        let text = render::render(&model, self.render);
        self.nginx.test(text, model.certs).await
    }

    /// The Ingresses among `candidates` (sorted) that nginx refuses, with nginx's message.
    /// Groups are added to what already passed; a group nginx refuses is split in halves, so
    /// one bad Ingress among n costs about 2·log2(n) trials, not n. An error when even the
    /// configuration without any Ingress is refused: the fault is then no Ingress's.
    pub async fn find_bad(&self, candidates: &[Key]) -> Result<Vec<(Key, String)>, NginxError> {
        self.test(|_| false).await?;
        let mut passed: BTreeSet<&Key> = BTreeSet::new();
        let mut bad = Vec::new();
        let mut groups = vec![candidates];
        while let Some(group) = groups.pop() {
            if group.is_empty() {
                continue;
            }
            let trial = self
                .test(|k| passed.contains(k) || group.binary_search(k).is_ok())
                .await;
            match (trial, group) {
                (Ok(()), _) => passed.extend(group),
                (Err(NginxError::Rejected { message }), [one]) => {
                    bad.push((one.clone(), first_error(&message)));
                }
                (Err(NginxError::Rejected { .. }), _) => {
                    let (first, second) = group.split_at(group.len() / 2);
                    groups.push(second);
                    groups.push(first);
                }
                (Err(e), _) => return Err(e),
            }
        }
        Ok(bad)
    }
}

/// nginx's first complaint, without its "nginx: " prefix or the trial file's name and line
/// (which mean nothing to the Ingress's owner).
pub fn first_error(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find(|l| l.contains("[emerg]"))
        .or_else(|| stderr.lines().next())
        .unwrap_or("")
        .trim();
    let line = line.strip_prefix("nginx: ").unwrap_or(line);
    let cut = line
        .rfind(" in /")
        .filter(|i| line.get(*i..).is_some_and(|t| t.contains("nginx.conf")));
    cut.and_then(|i| line.get(..i)).unwrap_or(line).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nginx_words_without_the_trial_file() {
        let stderr = "nginx: [emerg] \"client_max_body_size\" directive invalid value in /var/lib/keelson/ingress/nginx.conf.trial:41\n\
                      nginx: configuration file /var/lib/keelson/ingress/nginx.conf.trial test failed";
        assert_eq!(
            first_error(stderr),
            "[emerg] \"client_max_body_size\" directive invalid value"
        );
        let cert = "nginx: [emerg] cannot load certificate \"/x/certs/a.pem\": PEM_read_bio_X509_AUX() failed";
        assert_eq!(first_error(cert), cert.strip_prefix("nginx: ").unwrap());
    }

    fn ing(annotations: serde_json::Value, status_ip: &str) -> Ingress {
        serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "default", "annotations": annotations},
            "spec": {"tls": [{"hosts": ["a.test"], "secretName": "a-tls"}]},
            "status": {"loadBalancer": {"ingress": [{"ip": status_ip}]}}
        }))
        .unwrap()
    }

    fn secret(crt: &str) -> Arc<Secret> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": "a-tls", "namespace": "default"},
                "type": "kubernetes.io/tls",
                "data": {"tls.crt": crt, "tls.key": "a2V5"}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn the_fingerprint_follows_what_nginx_sees_only() {
        let base = fingerprint(&ing(json!({}), "10.0.0.1"), &[secret("Y2VydA==")]);
        // Status is the controller's own write: no new trial for it.
        assert_eq!(
            base,
            fingerprint(&ing(json!({}), "10.0.0.2"), &[secret("Y2VydA==")])
        );
        assert_ne!(
            base,
            fingerprint(&ing(json!({"x": "y"}), "10.0.0.1"), &[secret("Y2VydA==")])
        );
        // A renewed Secret is tried again.
        assert_ne!(
            base,
            fingerprint(&ing(json!({}), "10.0.0.1"), &[secret("bmV3")])
        );
    }

    #[test]
    fn a_verdict_lasts_while_the_ingress_is_the_same() {
        let k: Key = ("default".into(), "a".into());
        let mut inputs = Inputs {
            ingresses: vec![Arc::new(ing(json!({}), ""))],
            secrets: vec![secret("Y2VydA==")],
            ..Default::default()
        };
        let mut v = Verdicts::default();
        v.insert(&inputs, k.clone(), "bad".into());
        v.refresh(&inputs);
        assert!(v.is_bad(&k));
        assert_eq!(v.rejections().next().unwrap().reason, "RejectedByNginx");
        inputs.secrets = vec![secret("Zml4ZWQ=")];
        v.refresh(&inputs);
        assert!(!v.is_bad(&k));
        v.insert(&inputs, k.clone(), "bad".into());
        inputs.ingresses.clear();
        v.refresh(&inputs);
        assert!(!v.is_bad(&k), "gone Ingresses are forgotten");
    }
}
