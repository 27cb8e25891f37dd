//! The machine's kubectl (v1.32) against a kubeconfig, optionally from inside a test host; or
//! the kubectl named by KEELSON_KUBECTL (scripts/test runs the kubectl command matrix again with
//! the newest, from scripts/interop/kubectl).

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::{json, Value};

#[derive(Clone, Debug)]
pub struct Kubectl {
    pub kubeconfig: PathBuf,
    /// The test host's namespace file, when the API server is reachable only from there.
    pub netns: Option<PathBuf>,
}

impl Kubectl {
    pub fn new(kubeconfig: impl Into<PathBuf>) -> Self {
        Kubectl {
            kubeconfig: kubeconfig.into(),
            netns: None,
        }
    }

    /// A kubectl command with the kubeconfig set; stdin closed.
    pub fn command(&self, args: &[&str]) -> Command {
        let kubectl = std::env::var("KEELSON_KUBECTL").unwrap_or_else(|_| "kubectl".into());
        let mut cmd = crate::hosts::command_in(self.netns.as_deref(), &kubectl);
        cmd.args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::null());
        cmd
    }

    /// Runs kubectl to the end, whatever its exit status.
    pub fn output(&self, args: &[&str]) -> Output {
        self.command(args)
            .output()
            .expect("kubectl (v1.32) must be installed on this machine")
    }

    /// kubectl's stdout, or its stderr as the error.
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        let out = self.output(args);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!(
                "kubectl {args:?}: {}{}",
                String::from_utf8_lossy(&out.stderr),
                String::from_utf8_lossy(&out.stdout)
            ))
        }
    }

    /// kubectl that must succeed; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        self.run(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `kubectl get <what> -o jsonpath=<path>`; empty when it fails (e.g. not found yet), for
    /// checks that wait for something to appear.
    pub fn jsonpath(&self, what: &[&str], path: &str) -> String {
        self.get_jsonpath(what, path).unwrap_or_default()
    }

    /// `kubectl get <what> -o jsonpath=<path>` that must succeed.
    pub fn jsonpath_ok(&self, what: &[&str], path: &str) -> String {
        self.get_jsonpath(what, path)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn get_jsonpath(&self, what: &[&str], path: &str) -> Result<String, String> {
        let path = format!("jsonpath={path}");
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        args.extend(["-o", &path]);
        self.run(&args)
    }

    /// `kubectl ... -o json` parsed.
    pub fn json(&self, args: &[&str]) -> Result<Value, String> {
        let mut all = args.to_vec();
        all.extend(["-o", "json"]);
        let text = self.run(&all)?;
        serde_json::from_str(&text).map_err(|e| format!("kubectl {args:?}: not JSON: {e}"))
    }

    /// kubectl with `input` on stdin, whatever its exit status.
    pub fn with_stdin(&self, args: &[&str], input: &str) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("kubectl (v1.32) must be installed on this machine");
        if let Some(mut stdin) = child.stdin.take() {
            // kubectl may exit before reading everything (bad flags); its output says why.
            let _ = stdin.write_all(input.as_bytes());
        }
        child.wait_with_output().expect("wait for kubectl")
    }

    /// `kubectl patch KIND NAME --type=merge -p PATCH`; `Err` with kubectl's message.
    pub fn patch_merge(&self, kind: &str, name: &str, patch: &str) -> Result<String, String> {
        self.run(&["patch", kind, name, "--type=merge", "-p", patch])
    }

    /// `kubectl patch KIND NAME --subresource=status --type=merge -p STATUS`: a status as an
    /// agent or a controller writes it; `Err` with kubectl's message (e.g. the object is gone).
    pub fn patch_status(&self, kind: &str, name: &str, status: &str) -> Result<String, String> {
        self.run(&[
            "patch",
            kind,
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        ])
    }

    /// Reports a Pod Running and Ready, as its node's agent does once its containers pass
    /// readiness; with `pod_ip` as its podIP when given (EndpointSlices list only Pods with one).
    pub fn mark_pod_ready(&self, name: &str, pod_ip: Option<&str>) -> Result<String, String> {
        let mut status = json!({
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True"}],
        });
        if let Some(ip) = pod_ip {
            status["podIP"] = json!(ip);
        }
        self.patch_status("pod", name, &json!({ "status": status }).to_string())
    }

    /// Reports a Node Ready (reason KubeletReady), as its agent does, with the status fields in
    /// `more` (allocatable, capacity, addresses ...) beside the condition.
    pub fn mark_node_ready(&self, name: &str, more: Value) -> Result<String, String> {
        let mut status = json!({
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
        });
        if let (Some(status), Value::Object(more)) = (status.as_object_mut(), more) {
            status.extend(more);
        }
        self.patch_status("node", name, &json!({ "status": status }).to_string())
    }

    /// `kubectl apply -f -` that must succeed.
    pub fn apply(&self, yaml: &str) -> String {
        let out = self.with_stdin(&["apply", "-f", "-"], yaml);
        assert!(
            out.status.success(),
            "kubectl apply failed: {}\n{yaml}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}
