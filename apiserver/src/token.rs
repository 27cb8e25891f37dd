//! `keelson-apiserver token create|list|delete`: bootstrap tokens as `kubeadm token` makes them.
//! A token `<id>.<secret>` ([a-z0-9]{6}.[a-z0-9]{16}, from a CSPRNG) is the Secret
//! kube-system/bootstrap-token-<id> (type bootstrap.kubernetes.io/token) with an expiration; a
//! node joins with it (`keelson-agent join`) and gets only its own client certificate. Talks to
//! the API server as the admin kubeconfig's user, as kubeadm does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DeleteParams, ListParams, ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use rand::Rng;

/// The group a token's node is in besides system:bootstrappers (scripts/up binds it).
const EXTRA_GROUP: &str = "system:bootstrappers:keelson:default-node-token";
const TOKEN_TYPE: &str = "bootstrap.kubernetes.io/token";

#[derive(clap::Args, Debug, Clone, PartialEq)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub action: TokenAction,
    /// The admin kubeconfig.
    #[arg(
        long,
        global = true,
        env = "KUBECONFIG",
        default_value = "/var/lib/keelson/apiserver/admin.kubeconfig"
    )]
    pub kubeconfig: PathBuf,
}

#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum TokenAction {
    /// Makes a token and prints it (or the whole join command).
    Create {
        /// How long it is valid: a Go duration (24h, 90m) or "N hours|minutes|seconds|days".
        #[arg(long, default_value = "24h")]
        ttl: String,
        #[arg(long, default_value = "created by keelson-apiserver token")]
        description: String,
        /// Prints `scripts/join SERVER --token T --ca-cert-hash sha256:H` instead.
        #[arg(long)]
        print_join_command: bool,
    },
    /// The tokens: ID, expiration, description.
    List,
    /// Deletes a token (its ID, or the whole token).
    Delete { id: String },
}

#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("--ttl {0:?}: want a duration such as 24h, 90m or \"10 minutes\"")]
    Ttl(String),
    #[error("kubeconfig {path}: {why}")]
    Kubeconfig { path: String, why: String },
    #[error("the API server: {0}")]
    Api(#[from] kube::Error),
    #[error("no token {0:?}")]
    NotFound(String),
}

pub async fn run(args: &TokenArgs) -> Result<String, TokenError> {
    let kubeconfig = read_kubeconfig(&args.kubeconfig)?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &KubeConfigOptions::default())
            .await
            .map_err(|e| bad_kubeconfig(&args.kubeconfig, e))?;
    let server = config.cluster_url.to_string();
    let client = Client::try_from(config)?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), "kube-system");
    match &args.action {
        TokenAction::Create {
            ttl,
            description,
            print_join_command,
        } => {
            let ttl = parse_ttl(ttl)?;
            let token = create(&secrets, ttl, description).await?;
            if !print_join_command {
                return Ok(format!("{token}\n"));
            }
            let server = advertised_server(&client).await.unwrap_or(server);
            let hash = ca_of(&kubeconfig)
                .and_then(|pem| keelson_daemon::x509::ca_cert_hash(&pem).ok())
                .ok_or_else(|| bad_kubeconfig(&args.kubeconfig, "no usable CA"))?;
            let server = server.trim_end_matches('/');
            Ok(format!(
                "scripts/join {server} --token {token} --ca-cert-hash {hash}\n"
            ))
        }
        TokenAction::List => list(&secrets).await,
        TokenAction::Delete { id } => {
            let id = id.split('.').next().unwrap_or_default();
            let name = format!("bootstrap-token-{id}");
            match secrets.delete(&name, &DeleteParams::default()).await {
                Ok(_) => Ok(format!("bootstrap token {id:?} deleted\n")),
                Err(kube::Error::Api(e)) if e.code == 404 => Err(TokenError::NotFound(id.into())),
                Err(e) => Err(e.into()),
            }
        }
    }
}

async fn create(
    secrets: &Api<Secret>,
    ttl: Duration,
    description: &str,
) -> Result<String, TokenError> {
    let (id, secret) = (random(6), random(16));
    let ttl = chrono::Duration::from_std(ttl).map_err(|_| TokenError::Ttl(format!("{ttl:?}")))?;
    let expiration = (chrono::Utc::now() + ttl).format("%Y-%m-%dT%H:%M:%SZ");
    let data = BTreeMap::from([
        ("token-id", id.clone()),
        ("token-secret", secret.clone()),
        ("expiration", expiration.to_string()),
        ("description", description.to_string()),
        ("usage-bootstrap-authentication", "true".into()),
        ("usage-bootstrap-signing", "true".into()),
        ("auth-extra-groups", EXTRA_GROUP.into()),
    ]);
    let s = Secret {
        metadata: ObjectMeta {
            name: Some(format!("bootstrap-token-{id}")),
            namespace: Some("kube-system".into()),
            ..Default::default()
        },
        type_: Some(TOKEN_TYPE.into()),
        string_data: Some(data.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
        ..Default::default()
    };
    secrets.create(&PostParams::default(), &s).await?;
    Ok(format!("{id}.{secret}"))
}

async fn list(secrets: &Api<Secret>) -> Result<String, TokenError> {
    let mut out = format!("{:<8} {:<22} {}\n", "TOKEN-ID", "EXPIRATION", "DESCRIPTION");
    let all = secrets.list(&ListParams::default()).await?;
    for s in all
        .items
        .iter()
        .filter(|s| s.type_.as_deref() == Some(TOKEN_TYPE))
    {
        let field = |k: &str| {
            s.data
                .as_ref()
                .and_then(|d| d.get(k))
                .map(|v| String::from_utf8_lossy(&v.0).into_owned())
                .unwrap_or_default()
        };
        out += &format!(
            "{:<8} {:<22} {}\n",
            field("token-id"),
            field("expiration"),
            field("description")
        );
    }
    Ok(out)
}

/// [a-z0-9]{n} from rand's thread generator (a CSPRNG seeded from the OS).
fn random(n: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut rng = rand::rng();
    (0..n)
        .filter_map(|_| ALPHABET.get(rng.random_range(0..ALPHABET.len())))
        .map(|b| char::from(*b))
        .collect()
}

/// A Go duration (24h, 1h30m) or, as scripts/token took it, "N hours|minutes|seconds|days".
pub fn parse_ttl(s: &str) -> Result<Duration, TokenError> {
    let bad = || TokenError::Ttl(s.to_string());
    if let Ok(d) = keelson_apimachinery::parse_duration(s) {
        return (d > Duration::ZERO).then_some(d).ok_or_else(bad);
    }
    let (n, unit) = s.trim().split_once(' ').ok_or_else(bad)?;
    let n: u64 = n.parse().map_err(|_| bad())?;
    let seconds = match unit.trim().trim_end_matches('s') {
        "second" => 1,
        "minute" => 60,
        "hour" => 3600,
        "day" => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(seconds)
        .filter(|s| *s > 0)
        .map(Duration::from_secs)
        .ok_or_else(bad)
}

/// The address the API server advertises (kube-public/cluster-info), as kubeadm prints it.
async fn advertised_server(client: &Client) -> Option<String> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), "kube-public")
        .get("cluster-info")
        .await
        .ok()?;
    let text = cm.data?.remove("kubeconfig")?;
    let kc: Kubeconfig = serde_norway::from_str(&text).ok()?;
    kc.clusters.first()?.cluster.as_ref()?.server.clone()
}

fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, TokenError> {
    Kubeconfig::read_from(path).map_err(|e| bad_kubeconfig(path, e))
}

fn bad_kubeconfig(path: &Path, why: impl std::fmt::Display) -> TokenError {
    TokenError::Kubeconfig {
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

/// The CA (PEM) of the kubeconfig's current context's cluster.
fn ca_of(kc: &Kubeconfig) -> Option<Vec<u8>> {
    let context = kc.current_context.as_deref();
    let cluster_name = kc
        .contexts
        .iter()
        .find(|c| Some(c.name.as_str()) == context)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    let cluster = kc
        .clusters
        .iter()
        .find(|c| cluster_name.as_deref().is_none_or(|n| n == c.name))?
        .cluster
        .as_ref()?;
    if let Some(data) = &cluster.certificate_authority_data {
        return base64::engine::general_purpose::STANDARD
            .decode(data.trim())
            .ok();
    }
    std::fs::read(cluster.certificate_authority.as_ref()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ttls_as_go_durations_and_as_scripts_token_took_them() {
        let ok = |s: &str| parse_ttl(s).unwrap().as_secs();
        assert_eq!(ok("24h"), 86_400);
        assert_eq!(ok("1h30m"), 5_400);
        assert_eq!(ok("1 hour"), 3_600);
        assert_eq!(ok("10 minutes"), 600);
        assert_eq!(ok("1 second"), 1);
        assert_eq!(ok("2 days"), 172_800);
        for bad in ["", "0", "soon", "5 fortnights", "-1h", "0 hours"] {
            let e = parse_ttl(bad).unwrap_err().to_string();
            assert!(e.contains("--ttl"), "{bad}: {e}");
        }
    }

    #[test]
    fn tokens_are_as_kubeadm_makes_them() {
        for _ in 0..100 {
            let id = random(6);
            assert_eq!(id.len(), 6);
            assert!(id
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()));
        }
        assert_ne!(random(16), random(16));
    }
}
