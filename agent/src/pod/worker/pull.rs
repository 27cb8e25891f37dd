//! Image pulls per imagePullPolicy, with ErrImagePull then ImagePullBackOff.

use super::*;

pub(super) struct PullFailure {
    count: u32,
    at: Instant,
    message: String,
}

impl Worker {
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
        let started = Instant::now();
        match cri.pull_image(&image, Some(sandbox.clone())).await {
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
