//! Image pulls per imagePullPolicy, with ErrImagePull then ImagePullBackOff.

use super::*;

pub(super) struct PullFailure {
    count: u32,
    at: Instant,
    message: String,
}

impl Worker {
    /// Credentials for the image's registry from the pod's imagePullSecrets (missing secrets
    /// are skipped: the pull then fails with the registry's own message).
    async fn pull_auth(&self, pod: &Pod, image: &str) -> Option<cri::AuthConfig> {
        let names: Vec<String> = pod
            .spec
            .as_ref()
            .and_then(|s| s.image_pull_secrets.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|r| r.name)
            .collect();
        if names.is_empty() {
            return None;
        }
        let ns = pod
            .metadata
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let api: Api<Secret> = Api::namespaced(self.ctx.client.clone(), &ns);
        let mut secrets = Vec::new();
        for name in names {
            match api.get_opt(&name).await {
                Ok(Some(s)) => secrets.push(
                    s.data
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(k, v)| (k, v.0))
                        .collect(),
                ),
                Ok(None) => {
                    tracing::info!(pod = %pod_key(pod), secret = %name, "imagePullSecret not found")
                }
                Err(e) => {
                    tracing::warn!(pod = %pod_key(pod), secret = %name, error = %e, "reading imagePullSecret failed")
                }
            }
        }
        crate::pod::pull_secrets::auth_for(image, &secrets)
    }

    /// Pulls the image per imagePullPolicy, with ErrImagePull then ImagePullBackOff on failure.
    pub(super) async fn ensure_image(
        &mut self,
        pod: &Pod,
        container: &Container,
        sandbox: &cri::PodSandboxConfig,
    ) -> Result<String, Waiting> {
        let image = container.image.clone().unwrap_or_default();
        let policy = container
            .image_pull_policy
            .clone()
            .unwrap_or_else(|| default_pull_policy(&image).to_string());
        let cri = &self.ctx.cri;
        if policy != "Always" {
            if let Ok(Some(present)) = cri.image_status(&image).await {
                self.ctx.events.pod(
                    pod,
                    Some(&container.name),
                    Kind::Normal,
                    "Pulled",
                    format!("Container image \"{image}\" already present on machine"),
                );
                return Ok(present.id);
            }
            if policy == "Never" {
                return Err(Waiting {
                    reason: "ErrImageNeverPull".into(),
                    message: format!(
                        "Container image \"{image}\" is not present with pull policy of Never"
                    ),
                });
            }
        }
        if let Some(f) = self.pulls.get(&image) {
            if f.at.elapsed() < backoff::pull_delay(f.count) {
                return Err(Waiting {
                    reason: "ImagePullBackOff".into(),
                    message: format!("Back-off pulling image \"{image}\": {}", f.message),
                });
            }
        }
        self.ctx.events.pod(
            pod,
            Some(&container.name),
            Kind::Normal,
            "Pulling",
            format!("Pulling image \"{image}\""),
        );
        let auth = self.pull_auth(pod, &image).await;
        let started = Instant::now();
        match cri.pull_image(&image, auth, Some(sandbox.clone())).await {
            Ok(image_ref) => {
                self.pulls.remove(&image);
                self.ctx.events.pod(
                    pod,
                    Some(&container.name),
                    Kind::Normal,
                    "Pulled",
                    format!(
                        "Successfully pulled image \"{image}\" in {:.3}s",
                        started.elapsed().as_secs_f64()
                    ),
                );
                Ok(image_ref)
            }
            Err(e) => {
                let message = format!("Failed to pull image \"{image}\": {}", e.status.message());
                tracing::info!(pod = %pod_key(pod), %message, "image pull failed");
                self.ctx.events.pod(
                    pod,
                    Some(&container.name),
                    Kind::Warning,
                    "Failed",
                    message.clone(),
                );
                let entry = self.pulls.entry(image).or_insert(PullFailure {
                    count: 0,
                    at: Instant::now(),
                    message: String::new(),
                });
                entry.count += 1;
                entry.at = Instant::now();
                entry.message = message.clone();
                Err(Waiting {
                    reason: "ErrImagePull".into(),
                    message,
                })
            }
        }
    }

    pub(super) fn pull_retry_in(&self) -> Option<Duration> {
        self.pulls
            .values()
            .map(|f| backoff::pull_delay(f.count).saturating_sub(f.at.elapsed()))
            .min()
    }
}

fn default_pull_policy(image: &str) -> &'static str {
    let last = image.rsplit('/').next().unwrap_or(image);
    if image.contains('@') {
        "IfNotPresent"
    } else {
        match last.split_once(':') {
            None => "Always",
            Some((_, "latest")) => "Always",
            Some(_) => "IfNotPresent",
        }
    }
}

#[cfg(test)]
mod policy_tests {
    use super::default_pull_policy;

    #[test]
    fn pull_policy_defaults_like_the_api() {
        assert_eq!(default_pull_policy("busybox"), "Always");
        assert_eq!(default_pull_policy("busybox:latest"), "Always");
        assert_eq!(
            default_pull_policy("127.0.0.1:5000/keelson/busybox"),
            "Always"
        );
        assert_eq!(
            default_pull_policy("127.0.0.1:5000/keelson/busybox:1.35"),
            "IfNotPresent"
        );
        assert_eq!(default_pull_policy("x@sha256:abc"), "IfNotPresent");
    }
}
