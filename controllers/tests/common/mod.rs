//! The cluster most controller tests run against: a real keelson-apiserver with the real
//! controller manager under its own identity. Each test file adds the methods only it needs
//! (`impl Cluster` in the test's own crate), such as playing the agent for its pods.

#![allow(dead_code)]

use keelson_testing::{Apiserver, Daemon};
use serde_json::Value;

pub struct Cluster {
    pub api: Apiserver,
    pub cm: Daemon,
}

impl Cluster {
    pub fn start() -> Cluster {
        let api = Apiserver::start();
        let cm = Daemon::controller_manager(&api, &[]);
        Cluster { api, cm }
    }

    pub fn log(&self) -> String {
        self.cm.log()
    }

    /// Reconciles finished so far, from the controller manager's /metrics.
    pub fn reconciles(&self) -> f64 {
        self.cm
            .metric("keelson_controller_reconciles_total")
            .unwrap_or(0.0)
    }

    /// kubectl that must succeed; its stdout (else a panic with the controller manager's log).
    pub fn ok(&self, args: &[&str]) -> String {
        self.api
            .kubectl_cmd()
            .run(args)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}\ncontroller log:\n{}", self.log()))
    }

    /// kubectl's JSON output, which must parse (else a panic with the log).
    pub fn json(&self, args: &[&str]) -> Value {
        self.api
            .kubectl_cmd()
            .json(args)
            .unwrap_or_else(|e| panic!("kubectl {args:?}: {e}\ncontroller log:\n{}", self.log()))
    }

    /// The objects `kubectl get WHAT...` lists that are not being deleted (what a controller
    /// still counts); a failure panics with the log.
    pub fn live(&self, what: &[&str]) -> Vec<Value> {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        let list = self.json(&args);
        list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|o| o["metadata"]["deletionTimestamp"].is_null())
            .cloned()
            .collect()
    }
}
