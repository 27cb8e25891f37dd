//! Deployment rollouts and cascading deletion against a real keelson-apiserver and the real
//! controller manager, driven by kubectl as a user would: pause and resume, rollout history
//! and undo --to-revision, revisionHistoryLimit, progressDeadlineSeconds, and
//! `kubectl delete --cascade=foreground|orphan`. The test plays the node agent: it reports Pods
//! Running and Ready, and removes Pods that finished their graceful deletion.

use std::time::Duration;

mod common;

use common::Cluster;
use keelson_testing::ChildGuard;

/// A keelson-apiserver with the controller manager against it.
impl Cluster {
    /// `kubectl get <what> -o jsonpath=<path>`, empty when it fails.
    fn jsonpath(&self, what: &[&str], path: &str) -> String {
        let path = format!("jsonpath={path}");
        let mut args = vec!["get"];
        args.extend(what);
        args.extend(["-o", &path]);
        self.api.kubectl_cmd().run(&args).unwrap_or_default()
    }

    fn eventually(&self, what: &str, mut f: impl FnMut() -> bool) {
        keelson_testing::eventually(what, Duration::from_secs(90), || {
            f().then_some(())
                .ok_or_else(|| format!("controller log:\n{}", self.log()))
        })
    }

    /// Pods of `selector` not being deleted.
    fn pods(&self, selector: &str) -> Vec<String> {
        let out = self.jsonpath(
            &["pods", "-l", selector],
            "{range .items[*]}{.metadata.name} {.metadata.deletionTimestamp}{\"\\n\"}{end}",
        );
        out.lines()
            .filter(|l| l.split_whitespace().count() == 1)
            .map(|l| l.trim().to_string())
            .collect()
    }

    /// What a node agent reports once a Pod's containers run and pass readiness.
    fn mark_ready(&self, selector: &str) {
        for p in self.pods(selector) {
            // A Pod deleted meanwhile is no failure.
            let _ = self.api.kubectl_cmd().mark_pod_ready(&p, None);
        }
    }

    /// Plays the agent until the Deployment's rollout is complete.
    fn roll_to_completion(&self, deploy: &str, selector: &str) {
        self.eventually(&format!("the rollout of {deploy} to complete"), || {
            self.mark_ready(selector);
            self.api
                .kubectl_cmd()
                .run(&[
                    "rollout",
                    "status",
                    &format!("deployment/{deploy}"),
                    "--timeout=3s",
                ])
                .is_ok()
        });
    }

    /// "revision=image" of each ReplicaSet of `selector`, sorted by revision.
    fn revisions(&self, selector: &str) -> Vec<String> {
        let out = self.jsonpath(
            &["rs", "-l", selector],
            "{range .items[*]}{.metadata.annotations.deployment\\.kubernetes\\.io/revision}={.spec.template.spec.containers[0].image}{\"\\n\"}{end}",
        );
        let mut v: Vec<String> = out.lines().map(String::from).collect();
        v.sort_by_key(|l| l.split('=').next().and_then(|n| n.parse::<u32>().ok()));
        v
    }
}

/// A Deployment `name` of the Pods labelled app=`name`: `spec` is more of its spec (YAML lines),
/// `pod` its Pod spec (a YAML mapping).
fn deployment(name: &str, spec: &str, pod: &str) -> String {
    format!(
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {name}}}\nspec:\n{spec}  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {pod}\n"
    )
}

fn web() -> String {
    deployment(
        "web",
        "  replicas: 2\n  revisionHistoryLimit: 1\n",
        "{containers: [{name: web, image: 'example.test/web:1'}]}",
    )
}

/// The REVISION column of `kubectl rollout history`.
fn history(c: &Cluster) -> Vec<String> {
    c.ok(&["rollout", "history", "deployment/web"])
        .lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .collect()
}

#[test]
fn pause_resume_history_and_undo_to_a_revision() {
    let c = Cluster::start();
    c.api.apply(&web());
    c.roll_to_completion("web", "app=web");

    // Paused: the template changes twice and nothing rolls.
    c.ok(&["rollout", "pause", "deployment/web"]);
    c.eventually("the DeploymentPaused condition", || {
        c.jsonpath(
            &["deploy", "web"],
            "{.status.conditions[?(@.type==\"Progressing\")].reason}",
        ) == "DeploymentPaused"
    });
    c.ok(&["set", "image", "deployment/web", "web=example.test/web:2"]);
    c.ok(&["set", "image", "deployment/web", "web=example.test/web:3"]);
    c.eventually("the paused deployment's generation to be observed", || {
        let g = c.jsonpath(
            &["deploy", "web"],
            "{.metadata.generation}/{.status.observedGeneration}",
        );
        g.split('/').next() == g.split('/').nth(1)
    });
    assert_eq!(c.revisions("app=web"), ["1=example.test/web:1"]);

    // Rolled to completion: the ReplicaSets' "revision=image" and the history's revisions.
    let rolled = |revisions: [&str; 2], revision_column: [&str; 2]| {
        c.roll_to_completion("web", "app=web");
        assert_eq!(c.revisions("app=web"), revisions);
        assert_eq!(history(&c), revision_column);
    };

    // Resumed: one rollout, to the last template.
    c.ok(&["rollout", "resume", "deployment/web"]);
    rolled(["1=example.test/web:1", "2=example.test/web:3"], ["1", "2"]);

    // Undo to revision 1: its ReplicaSet becomes current again as revision 3; no number twice.
    let out = c.ok(&["rollout", "undo", "deployment/web", "--to-revision=1"]);
    assert!(out.contains("rolled back"), "{out}");
    rolled(["2=example.test/web:3", "3=example.test/web:1"], ["2", "3"]);
    let rev3 = c.ok(&["rollout", "history", "deployment/web", "--revision=3"]);
    assert!(rev3.contains("example.test/web:1"), "{rev3}");
    let moved = c.jsonpath(
        &["rs", "-l", "app=web"],
        "{.items[*].metadata.annotations.deployment\\.kubernetes\\.io/revision-history}",
    );
    assert_eq!(moved, "1");
    let images = c.jsonpath(
        &["pods", "-l", "app=web"],
        "{.items[*].spec.containers[0].image}",
    );
    assert!(
        images.split(' ').all(|i| i == "example.test/web:1"),
        "{images}"
    );

    // revisionHistoryLimit 1: a new rollout drops the lowest old revision.
    c.ok(&["set", "image", "deployment/web", "web=example.test/web:4"]);
    c.roll_to_completion("web", "app=web");
    c.eventually("one old ReplicaSet kept", || {
        c.revisions("app=web") == ["3=example.test/web:1", "4=example.test/web:4"]
    });
    assert_eq!(history(&c), ["3", "4"]);
}

#[test]
fn a_rollout_that_never_becomes_ready_exceeds_its_progress_deadline() {
    let c = Cluster::start();
    c.api.apply(&deployment(
        "slow",
        "  replicas: 1\n  progressDeadlineSeconds: 5\n",
        "{containers: [{name: c, image: 'example.test/never-ready:1'}]}",
    ));
    let progressing = || {
        c.jsonpath(
            &["deploy", "slow"],
            "{.status.conditions[?(@.type==\"Progressing\")].status} {.status.conditions[?(@.type==\"Progressing\")].reason}",
        )
    };
    c.eventually("the rollout to start", || {
        progressing().starts_with("True ")
    });
    c.eventually("ProgressDeadlineExceeded", || {
        progressing() == "False ProgressDeadlineExceeded"
    });
    let out = c
        .api
        .kubectl(&["rollout", "status", "deployment/slow", "--timeout=20s"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("deployment \"slow\" exceeded its progress deadline"),
        "{err}"
    );
}

/// A Deployment whose Pods sit on node-a with a long grace period: deleted, they stay until
/// "the agent" (the test) removes them.
fn graceful(name: &str) -> String {
    deployment(
        name,
        "  replicas: 2\n",
        "{nodeName: node-a, terminationGracePeriodSeconds: 300, containers: [{name: c, image: 'example.test/web:1'}]}",
    )
}

#[test]
fn foreground_deletion_waits_for_the_pods_and_orphan_deletion_leaves_them() {
    let c = Cluster::start();
    c.api.apply(&graceful("fg"));
    c.roll_to_completion("fg", "app=fg");

    let log = c.api.dir.path().join("delete-fg.log");
    let mut delete = ChildGuard::spawn_logged(
        &mut c.api.kubectl_cmd().command(&[
            "delete",
            "deployment",
            "fg",
            "--cascade=foreground",
            "--timeout=300s",
        ]),
        &log,
    );
    c.eventually("the pods to terminate", || {
        let all = c.jsonpath(&["pods", "-l", "app=fg"], "{.items[*].metadata.name}");
        c.pods("app=fg").is_empty() && !all.is_empty()
    });
    // Held in the foreground while its Pods terminate: the Deployment and its ReplicaSet.
    let held = c.jsonpath(&["deploy", "fg"], "{.metadata.finalizers}");
    assert_eq!(held, r#"["foregroundDeletion"]"#);
    let rs = c.jsonpath(&["rs", "-l", "app=fg"], "{.items[*].metadata.finalizers}");
    assert_eq!(rs, r#"["foregroundDeletion"]"#);
    assert!(
        delete.is_running(),
        "kubectl delete returned before the pods were gone"
    );

    // The agent confirms each Pod gone; then the ReplicaSet and the Deployment go, and kubectl
    // returns (long before its own timeout).
    c.ok(&[
        "delete",
        "pods",
        "-l",
        "app=fg",
        "--grace-period=0",
        "--force",
    ]);
    c.eventually("kubectl delete --cascade=foreground to return", || {
        !delete.is_running()
    });
    let out = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(out.contains("deleted") && !out.contains("error"), "{out}");
    assert_eq!(
        c.ok(&["get", "deploy,rs,pods", "-l", "app=fg", "-o", "name"]),
        ""
    );

    // Orphan: the ReplicaSet loses its owner and keeps its running Pods.
    c.api.apply(&graceful("orph"));
    c.roll_to_completion("orph", "app=orph");
    c.ok(&["delete", "deployment", "orph", "--cascade=orphan"]);
    let owners = c.jsonpath(
        &["rs", "-l", "app=orph"],
        "{.items[*].metadata.ownerReferences}",
    );
    assert_eq!(owners, "");
    // Several garbage collection sweeps later, nothing was collected.
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(c.pods("app=orph").len(), 2);
    let pod_owner = c.jsonpath(
        &["pods", "-l", "app=orph"],
        "{.items[*].metadata.ownerReferences[0].kind}",
    );
    assert_eq!(pod_owner, "ReplicaSet ReplicaSet");
    assert_eq!(
        c.ok(&["get", "rs", "-l", "app=orph", "-o", "name"])
            .lines()
            .count(),
        1
    );
}
