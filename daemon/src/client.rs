//! The API client, found the way kubectl finds one.

use std::path::Path;

/// Why no client could be built; each case names where the configuration came from, and the
/// cause is its `source()` (printed by anyhow's "Caused by", not repeated in the message).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("kubeconfig {path}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("no --kubeconfig given and none found ($KUBECONFIG, ~/.kube/config, in-cluster service account)")]
    Infer(#[from] kube::config::InferConfigError),
    #[error("cannot build the API client")]
    Client(#[from] kube::Error),
}

/// A client from an explicit kubeconfig path; without one, as kubectl does: `$KUBECONFIG`, then
/// `~/.kube/config`, then the in-cluster service account.
pub async fn client(kubeconfig: Option<&Path>) -> Result<kube::Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let wrap = |source| ClientError::Kubeconfig {
                path: path.display().to_string(),
                source,
            };
            let kc = kube::config::Kubeconfig::read_from(path).map_err(wrap)?;
            kube::Config::from_custom_kubeconfig(kc, &Default::default())
                .await
                .map_err(wrap)?
        }
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_kubeconfig_is_named_in_the_error() {
        let Err(err) = client(Some(Path::new("/nonexistent/keelson.kubeconfig"))).await else {
            panic!("a client from a file that does not exist");
        };
        let text = err.to_string();
        assert!(text.contains("/nonexistent/keelson.kubeconfig"), "{text}");
    }

    #[tokio::test]
    async fn a_kubeconfig_file_gives_a_client_for_its_server() {
        let dir = std::env::temp_dir().join(format!("keelson-daemon-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("kubeconfig");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\n\
             contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n\
             users:\n- name: u\n  user:\n    token: t\n",
        )
        .unwrap();
        let c = client(Some(&path)).await.expect("client");
        assert_eq!(c.default_namespace(), "default");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
