//! Real etcd members (Debian's etcd-server) for the API server's etcd backend: one member or a
//! cluster of several, each on free loopback ports with plain HTTP (or HTTPS with client
//! certificates required, as kubeadm sets etcd up), in a temporary directory, killed on drop.
//! Members can be killed and restarted to test faults.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use crate::process::{eventually, free_port, ChildGuard};
use crate::tls::{test_pki, TestPki};

/// One member: its name, URLs and data directory, and its process while it runs.
pub struct EtcdMember {
    pub name: String,
    pub client_url: String,
    pub peer_url: String,
    data_dir: PathBuf,
    log: PathBuf,
    child: Option<ChildGuard>,
}

/// A cluster of real etcd members on loopback.
pub struct Etcd {
    pub members: Vec<EtcdMember>,
    initial_cluster: String,
    token: String,
    pub dir: tempfile::TempDir,
    /// With `start_tls`: the CA, etcd's serving certificate and a client certificate.
    pub tls: Option<TestPki>,
}

impl Etcd {
    /// One member, started and healthy.
    pub fn start() -> Etcd {
        Etcd::cluster(1)
    }

    /// One member serving clients over HTTPS only to clients with a certificate of its CA
    /// (`tls.client_cert`), as kubeadm runs etcd.
    pub fn start_tls() -> Etcd {
        Etcd::build(1, |dir| Some(test_pki(dir, "kube-apiserver-etcd-client")))
    }

    /// One member over HTTPS with the PKI `make` writes into the directory it is given (e.g.
    /// the one `keelson-apiserver etcd-pki` makes, to prove etcd takes it).
    pub fn start_with_pki(make: impl FnOnce(&std::path::Path) -> TestPki) -> Etcd {
        Etcd::build(1, |dir| Some(make(dir)))
    }

    /// `n` members forming one cluster, each started; returns once the cluster has a leader.
    pub fn cluster(n: usize) -> Etcd {
        Etcd::build(n, |_| None)
    }

    fn build(n: usize, pki: impl FnOnce(&std::path::Path) -> Option<TestPki>) -> Etcd {
        crate::require_tools(&["etcd", "etcdctl"]);
        let dir = tempfile::Builder::new()
            .prefix("keelson-etcd-test")
            .tempdir()
            .expect("a temporary directory for etcd");
        let tls = pki(dir.path());
        let scheme = if tls.is_some() { "https" } else { "http" };
        let members: Vec<EtcdMember> = (0..n)
            .map(|i| {
                let name = format!("m{i}");
                EtcdMember {
                    client_url: format!("{scheme}://127.0.0.1:{}", free_port()),
                    peer_url: format!("http://127.0.0.1:{}", free_port()),
                    data_dir: dir.path().join(format!("{name}.etcd")),
                    log: dir.path().join(format!("{name}.log")),
                    name,
                    child: None,
                }
            })
            .collect();
        let initial_cluster = members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url))
            .collect::<Vec<_>>()
            .join(",");
        let mut etcd = Etcd {
            members,
            initial_cluster,
            token: format!("keelson-test-{}", crate::random_suffix()),
            dir,
            tls,
        };
        for i in 0..n {
            etcd.spawn(i);
        }
        etcd.wait_healthy();
        etcd
    }

    /// The client URLs, comma-separated: the value of `--etcd-servers`.
    pub fn endpoints(&self) -> String {
        self.members
            .iter()
            .map(|m| m.client_url.clone())
            .collect::<Vec<_>>()
            .join(",")
    }

    fn spawn(&mut self, i: usize) {
        let m = &self.members[i];
        let mut cmd = Command::new("etcd");
        cmd.args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&m.data_dir)
            .args(["--listen-client-urls", &m.client_url])
            .args(["--advertise-client-urls", &m.client_url])
            .args(["--listen-peer-urls", &m.peer_url])
            .args(["--initial-advertise-peer-urls", &m.peer_url])
            .args(["--initial-cluster", &self.initial_cluster])
            .args(["--initial-cluster-token", &self.token])
            .args(["--initial-cluster-state", "new"])
            // Short timeouts so that fault tests see elections within seconds.
            .args(["--heartbeat-interval", "100", "--election-timeout", "1000"])
            .args(["--log-level", "warn", "--logger", "zap"]);
        if let Some(pki) = &self.tls {
            cmd.arg("--cert-file")
                .arg(&pki.server_cert)
                .arg("--key-file")
                .arg(&pki.server_key)
                .arg("--trusted-ca-file")
                .arg(&pki.ca)
                .arg("--client-cert-auth");
        }
        let child = ChildGuard::spawn_logged(&mut cmd, &m.log);
        self.members[i].child = Some(child);
    }

    /// Waits (30 s) until every running member answers `endpoint health`.
    pub fn wait_healthy(&self) {
        let running: Vec<String> = self
            .members
            .iter()
            .filter(|m| m.child.is_some())
            .map(|m| m.client_url.clone())
            .collect();
        eventually("etcd members healthy", Duration::from_secs(30), || {
            // Only the running members: a second --endpoints would add to etcdctl()'s list of
            // every member, and a member still down would fail the check.
            let out = self
                .etcdctl_to(&running.join(","))
                .args(["endpoint", "health"])
                .output()
                .map_err(|e| format!("etcdctl: {e}"))?;
            match out.status.success() {
                true => Ok(()),
                false => Err(format!(
                    "{}{}\nlogs:\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr),
                    self.logs()
                )),
            }
        })
    }

    /// etcdctl speaking the v3 API (etcd 3.4's default too, said for clarity).
    pub fn etcdctl(&self) -> Command {
        self.etcdctl_to(&self.endpoints())
    }

    /// etcdctl speaking to these endpoints only, with the client certificate under TLS.
    fn etcdctl_to(&self, endpoints: &str) -> Command {
        let mut cmd = Command::new("etcdctl");
        cmd.env("ETCDCTL_API", "3").args(["--endpoints", endpoints]);
        if let Some(pki) = &self.tls {
            cmd.arg("--cacert")
                .arg(&pki.ca)
                .arg("--cert")
                .arg(&pki.client_cert)
                .arg("--key")
                .arg(&pki.client_key);
        }
        cmd
    }

    /// SIGKILL member `i` (its data stays, so `restart` brings it back as the same member).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.members[i].child.take() {
            c.kill9();
        }
    }

    /// Starts member `i` again on its data directory and waits until it is healthy.
    pub fn restart(&mut self, i: usize) {
        self.spawn(i);
        self.wait_healthy();
    }

    /// Every member's log, for failure messages.
    pub fn logs(&self) -> String {
        self.members
            .iter()
            .map(|m| {
                let text = std::fs::read_to_string(&m.log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(30).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("--- {} ---\n{}", m.name, tail.join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}
