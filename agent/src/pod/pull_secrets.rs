//! Registry credentials from the pod's imagePullSecrets (`.dockerconfigjson` or the older
//! `.dockercfg`), matched to the image's registry, for CRI PullImage. Pure.

use std::collections::BTreeMap;

use keelson_proto::runtime::v1 as cri;

/// The registry an image reference names ("docker.io" when it names none).
pub fn registry_host(image: &str) -> String {
    match image.split_once('/') {
        Some((first, _)) if first.contains('.') || first.contains(':') || first == "localhost" => {
            first.to_string()
        }
        _ => "docker.io".to_string(),
    }
}

/// A credentials key ("https://index.docker.io/v1/", "registry:5000", ...) as a registry host.
fn key_host(key: &str) -> String {
    let host = key
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    let host = host.split('/').next().unwrap_or(host);
    match host {
        "index.docker.io" | "registry-1.docker.io" => "docker.io".to_string(),
        other => other.to_string(),
    }
}

/// The registry as the runtime names the host it pulls from, as a URL: containerd parses
/// `server_address` as one and gives the credentials only to a host equal to its host (a bare
/// "127.0.0.1:5001" fails to parse; "registry.example.com" parses with no host and matches none).
fn server_address(host: &str) -> String {
    match host {
        "docker.io" => "https://registry-1.docker.io".to_string(),
        other => format!("https://{other}"),
    }
}

/// The first credentials (in imagePullSecrets order) for the image's registry.
pub fn auth_for(image: &str, secrets: &[BTreeMap<String, Vec<u8>>]) -> Option<cri::AuthConfig> {
    let host = registry_host(image);
    for data in secrets {
        let entries = if let Some(json) = data.get(".dockerconfigjson") {
            serde_json::from_slice::<serde_json::Value>(json)
                .ok()
                .and_then(|v| v.get("auths").cloned())
        } else {
            data.get(".dockercfg")
                .and_then(|json| serde_json::from_slice::<serde_json::Value>(json).ok())
        };
        let Some(serde_json::Value::Object(entries)) = entries else {
            continue;
        };
        for (key, entry) in entries {
            if key_host(&key) != host {
                continue;
            }
            let text = |k: &str| {
                entry
                    .get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or("")
                    .to_string()
            };
            return Some(cri::AuthConfig {
                username: text("username"),
                password: text("password"),
                auth: text("auth"),
                server_address: server_address(&host),
                identity_token: text("identitytoken"),
                registry_token: text("registrytoken"),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_image_references() {
        assert_eq!(registry_host("busybox"), "docker.io");
        assert_eq!(registry_host("library/busybox:1"), "docker.io");
        assert_eq!(
            registry_host("127.0.0.1:5000/keelson/app:1"),
            "127.0.0.1:5000"
        );
        assert_eq!(
            registry_host("registry.example.com/team/app"),
            "registry.example.com"
        );
        assert_eq!(registry_host("localhost/app"), "localhost");
    }

    #[test]
    fn credentials_matched_to_the_registry() {
        let config = br#"{"auths": {"https://index.docker.io/v1/": {"auth": "dXNlcjpwdw=="}, "registry.example.com": {"username": "bob", "password": "pw"}}}"#;
        let secrets = vec![BTreeMap::from([(
            ".dockerconfigjson".to_string(),
            config.to_vec(),
        )])];
        let hub = auth_for("busybox:1", &secrets).unwrap();
        assert_eq!(
            (hub.auth.as_str(), hub.server_address.as_str()),
            ("dXNlcjpwdw==", "https://registry-1.docker.io")
        );
        let private = auth_for("registry.example.com/team/app:2", &secrets).unwrap();
        assert_eq!(
            (private.username.as_str(), private.password.as_str()),
            ("bob", "pw")
        );
        assert_eq!(private.server_address, "https://registry.example.com");
        assert!(auth_for("127.0.0.1:5000/app:1", &secrets).is_none());
        let legacy = vec![BTreeMap::from([(
            ".dockercfg".to_string(),
            br#"{"127.0.0.1:5000": {"auth": "eDp5"}}"#.to_vec(),
        )])];
        assert_eq!(
            auth_for("127.0.0.1:5000/app:1", &legacy).unwrap().auth,
            "eDp5"
        );
    }
}
