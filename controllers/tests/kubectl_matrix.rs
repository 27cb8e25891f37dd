//! The kubectl commands operators use every day, run one after another against a real
//! keelson-apiserver with the controller manager (no nodes: what needs a running container,
//! such as logs, exec and top, is the e2e suite's). Each row is a command and what its output
//! must contain; the table is the list of verbs Keelson claims to support.

use keelson_testing::eventually;
use std::time::Duration;

mod common;

use common::Cluster;

/// (arguments, stdin, text the output must contain).
type Row = (&'static [&'static str], Option<&'static str>, &'static str);

const POD: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: p1\n  labels: {app: p1}\nspec:\n  containers: [{name: c, image: busybox}]\n";
const CRD: &str = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.example.com\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {plural: gadgets, kind: Gadget}\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}\n";
const GADGET: &str =
    "apiVersion: example.com/v1\nkind: Gadget\nmetadata:\n  name: g1\nspec: {a: 1}\n";

const MATRIX: &[Row] = &[
    (&["version"], None, "Server Version"),
    (&["cluster-info"], None, "is running at"),
    (&["api-versions"], None, "apps/v1"),
    (&["api-resources"], None, "deployments"),
    (&["auth", "whoami"], None, "keelson-admin"),
    (&["auth", "can-i", "create", "deployments"], None, "yes"),
    (
        &["create", "namespace", "team"],
        None,
        "namespace/team created",
    ),
    (
        &[
            "create",
            "deployment",
            "web",
            "--image=busybox",
            "--replicas=2",
        ],
        None,
        "deployment.apps/web created",
    ),
    (&["get", "deployments"], None, "web"),
    (&["describe", "deployment", "web"], None, "Replicas:"),
    (
        &["scale", "deployment", "web", "--replicas=3"],
        None,
        "scaled",
    ),
    (
        &["set", "image", "deployment/web", "busybox=busybox:1.36"],
        None,
        "image updated",
    ),
    (
        &["set", "env", "deployment/web", "MODE=prod"],
        None,
        "env updated",
    ),
    (
        &[
            "set",
            "resources",
            "deployment",
            "web",
            "--requests=cpu=10m",
        ],
        None,
        "resource requirements updated",
    ),
    (&["rollout", "history", "deployment/web"], None, "REVISION"),
    (&["rollout", "restart", "deployment/web"], None, "restarted"),
    (&["rollout", "undo", "deployment/web"], None, "rolled back"),
    (&["rollout", "pause", "deployment/web"], None, "paused"),
    (&["rollout", "resume", "deployment/web"], None, "resumed"),
    (
        &["expose", "deployment", "web", "--port=80"],
        None,
        "service/web exposed",
    ),
    (&["get", "service", "web", "-o", "wide"], None, "ClusterIP"),
    (
        &["label", "deployment", "web", "tier=front"],
        None,
        "labeled",
    ),
    (
        &["annotate", "deployment", "web", "owner=me"],
        None,
        "annotated",
    ),
    (
        &[
            "patch",
            "deployment",
            "web",
            "-p",
            "{\"spec\":{\"minReadySeconds\":1}}",
        ],
        None,
        "patched",
    ),
    (&["apply", "-f", "-"], Some(POD), "pod/p1 created"),
    (&["diff", "-f", "-"], Some(POD), ""),
    (
        &["get", "pods", "-l", "app=p1", "-o", "name"],
        None,
        "pod/p1",
    ),
    (
        &[
            "get",
            "pod",
            "p1",
            "-o",
            "jsonpath={.spec.containers[0].image}",
        ],
        None,
        "busybox",
    ),
    (&["get", "pod", "p1", "-o", "yaml"], None, "kind: Pod"),
    (&["describe", "pod", "p1"], None, "Containers:"),
    (
        &["run", "r1", "--image=busybox", "--restart=Never"],
        None,
        "pod/r1 created",
    ),
    (
        &["create", "configmap", "cm", "--from-literal=a=b"],
        None,
        "configmap/cm created",
    ),
    (
        &["create", "secret", "generic", "s", "--from-literal=a=b"],
        None,
        "secret/s created",
    ),
    (
        &["create", "serviceaccount", "bot"],
        None,
        "serviceaccount/bot created",
    ),
    (&["create", "token", "bot"], None, "eyJ"),
    (
        &["create", "role", "reader", "--verb=get", "--resource=pods"],
        None,
        "role.rbac.authorization.k8s.io/reader created",
    ),
    (
        &[
            "create",
            "rolebinding",
            "bot-reader",
            "--role=reader",
            "--serviceaccount=default:bot",
        ],
        None,
        "created",
    ),
    (
        &[
            "auth",
            "can-i",
            "get",
            "pods",
            "--as=system:serviceaccount:default:bot",
        ],
        None,
        "yes",
    ),
    (
        &[
            "create",
            "clusterrole",
            "node-reader",
            "--verb=get",
            "--resource=nodes",
        ],
        None,
        "created",
    ),
    (
        &["create", "job", "once", "--image=busybox"],
        None,
        "job.batch/once created",
    ),
    (
        &[
            "create",
            "cronjob",
            "nightly",
            "--image=busybox",
            "--schedule=0 0 * * *",
        ],
        None,
        "cronjob.batch/nightly created",
    ),
    (
        &[
            "create",
            "ingress",
            "web",
            "--rule=web.example.test/=web:80",
        ],
        None,
        "ingress.networking.k8s.io/web created",
    ),
    (
        &[
            "create",
            "pdb",
            "web",
            "--selector=app=web",
            "--min-available=1",
        ],
        None,
        "poddisruptionbudget.policy/web created",
    ),
    (
        &["create", "quota", "q", "--hard=pods=50"],
        None,
        "resourcequota/q created",
    ),
    (
        &["create", "priorityclass", "batch", "--value=100"],
        None,
        "priorityclass.scheduling.k8s.io/batch created",
    ),
    (
        &[
            "autoscale",
            "deployment",
            "web",
            "--min=1",
            "--max=4",
            "--cpu-percent=80",
        ],
        None,
        "autoscaled",
    ),
    (&["get", "hpa,pdb,quota,pc"], None, "web"),
    (
        &["apply", "-f", "-"],
        Some(CRD),
        "customresourcedefinition.apiextensions.k8s.io/gadgets.example.com created",
    ),
    (
        &[
            "wait",
            "--for=condition=established",
            "crd/gadgets.example.com",
        ],
        None,
        "condition met",
    ),
    (
        &["apply", "-f", "-"],
        Some(GADGET),
        "gadget.example.com/g1 created",
    ),
    (&["get", "gadgets"], None, "g1"),
    (&["explain", "gadget"], None, "KIND:       Gadget"),
    (
        &["explain", "pod.spec.containers.image"],
        None,
        "Container image name",
    ),
    (&["get", "crd"], None, "gadgets.example.com"),
    (&["get", "all"], None, "deployment.apps/web"),
    (&["get", "events", "-A"], None, "LAST SEEN"),
    (&["get", "service", "kubernetes"], None, "443/TCP"),
    (
        &["taint", "node", "n1", "dedicated=x:NoSchedule"],
        None,
        "tainted",
    ),
    (&["cordon", "n1"], None, "cordoned"),
    (&["uncordon", "n1"], None, "uncordoned"),
    (
        &["drain", "n1", "--ignore-daemonsets", "--timeout=20s"],
        None,
        "drained",
    ),
    (&["config", "view", "--minify"], None, "clusters:"),
    (&["delete", "pod", "p1", "r1"], None, "deleted"),
    (
        &["delete", "deployment", "web"],
        None,
        "deployment.apps \"web\" deleted",
    ),
    (
        &["delete", "namespace", "team"],
        None,
        "namespace \"team\" deleted",
    ),
];

#[test]
fn everyday_kubectl_commands_work() {
    let c = Cluster::start();
    c.api
        .apply("apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n");
    // The controllers make the namespace's default ServiceAccount a moment after start.
    eventually(
        "the default ServiceAccount",
        Duration::from_secs(20),
        || {
            c.api
                .kubectl_cmd()
                .run(&["get", "serviceaccount", "default"])
                .map(|_| ())
        },
    );
    let mut failed = Vec::new();
    for (args, stdin, want) in MATRIX {
        let out = match stdin {
            Some(input) => c.api.kubectl_stdin(args, input),
            None => c.api.kubectl(args),
        };
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // `kubectl diff` exits 0 when nothing differs, 1 when something does.
        let ok = out.status.success() || (args[0] == "diff" && out.status.code() == Some(1));
        if !ok || !text.contains(want) {
            failed.push(format!("kubectl {}: {text}", args.join(" ")));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} commands failed:\n{}",
        failed.len(),
        MATRIX.len(),
        failed.join("\n")
    );
}
