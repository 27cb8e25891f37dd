//! The machine's kubectl against a real keelson-apiserver with the kubeconfig it wrote.

use keelson_testing::process::wait_until;
use keelson_testing::{examples_dir, Apiserver};
use std::process::Stdio;
use std::time::Duration;

fn examples() -> String {
    examples_dir().to_str().unwrap().to_string()
}

#[test]
fn apply_examples_then_again_is_unchanged() {
    let s = Apiserver::start();
    let ex = examples();
    let first = s.kubectl_ok(&["apply", "-f", &ex]);
    for what in [
        "deployment.apps/web created",
        "service/web created",
        "ingress.networking.k8s.io/web created",
    ] {
        assert!(first.contains(what), "{first}");
    }
    let second = s.kubectl_ok(&["apply", "-f", &ex]);
    assert!(
        !second.contains("created") && !second.contains("configured"),
        "{second}"
    );
    assert_eq!(
        second.matches("unchanged").count(),
        first.lines().count(),
        "{second}"
    );
}

#[test]
fn apply_merges_an_edited_container_and_a_new_one() {
    let s = Apiserver::start();
    let path = examples_dir().join("deployment.yaml");
    s.kubectl_ok(&["apply", "-f", path.to_str().unwrap()]);
    let original = std::fs::read_to_string(&path).unwrap();
    let edited = original
        .replace("podname-http:1", "podname-http:2")
        .replace(
            "      containers:\n",
            "      containers:\n      - name: side\n        image: busybox\n",
        );
    let out = s.apply(&edited);
    assert!(out.contains("deployment.apps/web configured"), "{out}");
    let web = s.jsonpath_ok(
        &["deploy", "web"],
        "{.spec.template.spec.containers[?(@.name==\"web\")]}",
    );
    let web: serde_json::Value = serde_json::from_str(&web).unwrap();
    assert_eq!(web["image"], "127.0.0.1:5000/keelson/podname-http:2");
    assert_eq!(web["ports"][0]["containerPort"], 8080);
    assert_eq!(web["env"][0]["name"], "POD_NAME");
    let names = s.jsonpath_ok(
        &["deploy", "web"],
        "{.spec.template.spec.containers[*].name}",
    );
    assert_eq!(names, "side web");
    let generation = s.jsonpath_ok(&["deploy", "web"], "{.metadata.generation}");
    assert_eq!(generation, "2");
}

const NODE: &str = r#"
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels: {kubernetes.io/hostname: node-a}
status:
  addresses: [{type: InternalIP, address: 172.31.0.2}]
  conditions: [{type: Ready, status: "True", reason: KubeletReady, message: ok}]
  nodeInfo: {kubeletVersion: v1.32.0-keelson, containerRuntimeVersion: "containerd://1.6.20", osImage: Debian, kernelVersion: "6.1", architecture: amd64, operatingSystem: linux, bootID: "", machineID: "", systemUUID: "", kubeProxyVersion: ""}
"#;

const SLICE: &str = r#"
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc12
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [10.244.0.5]
  conditions: {ready: true}
"#;

const POD: &str = r#"
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  labels: {app: web, tier: front}
spec:
  nodeName: node-a
  containers:
  - name: web
    image: 127.0.0.1:5000/keelson/podname-http:1
"#;

fn header(s: &Apiserver, args: &[&str]) -> Vec<String> {
    let out = s.kubectl_ok(args);
    out.lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .map(String::from)
        .collect()
}

#[test]
fn get_prints_upstream_columns() {
    let s = Apiserver::start();
    s.kubectl_ok(&["apply", "-f", &examples()]);
    for doc in [NODE, SLICE, POD] {
        s.apply(doc);
    }
    assert_eq!(
        header(&s, &["get", "pods"]),
        ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    );
    assert_eq!(
        header(&s, &["get", "deployments"]),
        ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    );
    assert_eq!(
        header(&s, &["get", "services"]),
        [
            "NAME",
            "TYPE",
            "CLUSTER-IP",
            "EXTERNAL-IP",
            "PORT(S)",
            "AGE"
        ]
    );
    assert_eq!(
        header(&s, &["get", "endpointslices"]),
        ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    );
    assert_eq!(
        header(&s, &["get", "nodes"]),
        ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    );
    let pods = s.kubectl_ok(&["get", "pods"]);
    let row: Vec<&str> = pods.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(&row[..4], ["web-1", "0/1", "Pending", "0"]);
    let svc = s.kubectl_ok(&["get", "svc", "web"]);
    let row: Vec<&str> = svc.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!((row[1], row[3], row[4]), ("ClusterIP", "<none>", "80/TCP"));
    assert!(row[2].starts_with("10.96."), "{svc}");
    let nodes = s.kubectl_ok(&["get", "nodes"]);
    assert!(
        nodes.contains("node-a") && nodes.contains("Ready"),
        "{nodes}"
    );
    let slices = s.kubectl_ok(&["get", "endpointslices"]);
    assert!(
        slices.contains("IPv4") && slices.contains("8080") && slices.contains("10.244.0.5"),
        "{slices}"
    );
    let wide = header(&s, &["get", "pods", "-o", "wide"]);
    assert_eq!(&wide[5..7], ["IP", "NODE"]);
}

#[test]
fn get_selectors_and_output_formats() {
    let s = Apiserver::start();
    assert!(s.kubectl_stdin(&["apply", "-f", "-"], POD).status.success());
    s.apply("apiVersion: v1\nkind: Namespace\nmetadata: {name: other}\n");
    s.kubectl_ok(&[
        "run",
        "lone",
        "-n",
        "other",
        "--image=busybox",
        "--labels=app=db",
    ]);
    let all = s.kubectl_ok(&["get", "pods", "-A"]);
    assert!(all.starts_with("NAMESPACE"), "{all}");
    assert!(
        all.contains("default")
            && all.contains("web-1")
            && all.contains("other")
            && all.contains("lone"),
        "{all}"
    );
    assert_eq!(
        s.kubectl_ok(&["get", "pods", "-A", "-l", "app=web", "-o", "name"]),
        "pod/web-1\n"
    );
    assert_eq!(
        s.kubectl_ok(&[
            "get",
            "pods",
            "-A",
            "-l",
            "app in (db),tier!=front",
            "-o",
            "name"
        ]),
        "pod/lone\n"
    );
    assert_eq!(
        s.kubectl_ok(&[
            "get",
            "pods",
            "-A",
            "--field-selector",
            "spec.nodeName=node-a",
            "-o",
            "name"
        ]),
        "pod/web-1\n"
    );
    assert_eq!(
        s.kubectl_ok(&[
            "get",
            "pods",
            "-n",
            "other",
            "--field-selector",
            "metadata.name=lone",
            "-o",
            "name"
        ]),
        "pod/lone\n"
    );
    let labels = s.kubectl_ok(&["get", "pods", "--show-labels"]);
    assert!(
        labels.lines().next().unwrap().ends_with("LABELS") && labels.contains("app=web,tier=front"),
        "{labels}"
    );
    let yaml = s.kubectl_ok(&["get", "pod", "web-1", "-o", "yaml"]);
    assert!(
        yaml.contains("kind: Pod")
            && yaml.contains("uid:")
            && yaml.contains("restartPolicy: Always"),
        "{yaml}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "pods", "-o", "json"])).unwrap();
    assert_eq!(json["items"][0]["metadata"]["name"], "web-1");
    assert_eq!(json["items"][0]["status"]["phase"], "Pending");
    let wide = s.kubectl_ok(&["get", "pods", "-o", "wide"]);
    assert!(wide.contains("node-a"), "{wide}");
    let none = s.kubectl_ok(&["get", "pods", "-l", "app=nothing"]);
    assert_eq!(none, "");
}

#[test]
fn get_watch_prints_later_changes() {
    let s = Apiserver::start();
    assert!(s.kubectl_stdin(&["apply", "-f", "-"], POD).status.success());
    let mut w = s
        .kubectl_cmd()
        .command(&["get", "pods", "-w", "--request-timeout=0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = w.stdout.take().unwrap();
    let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let l2 = lines.clone();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            l2.lock().unwrap().push(line);
        }
    });
    wait_until("the initial listing", Duration::from_secs(10), || {
        lines.lock().unwrap().iter().any(|l| l.starts_with("web-1"))
    });
    s.kubectl_ok(&["run", "later", "--image=busybox"]);
    wait_until("the new pod in the watch", Duration::from_secs(10), || {
        lines.lock().unwrap().iter().any(|l| l.starts_with("later"))
    });
    let _ = w.kill();
    let _ = w.wait();
}

#[test]
fn describe_deployment_and_pod() {
    let s = Apiserver::start();
    s.kubectl_ok(&[
        "apply",
        "-f",
        examples_dir().join("deployment.yaml").to_str().unwrap(),
    ]);
    assert!(s.kubectl_stdin(&["apply", "-f", "-"], POD).status.success());
    let d = s.kubectl_ok(&["describe", "deployment", "web"]);
    assert!(
        d.contains("Name:")
            && d.contains("web")
            && d.contains("3 desired")
            && d.contains("podname-http:1"),
        "{d}"
    );
    let p = s.kubectl_ok(&["describe", "pod", "web-1"]);
    assert!(
        p.contains("Node:")
            && p.contains("node-a")
            && p.contains("Status:")
            && p.contains("Pending"),
        "{p}"
    );
}

#[test]
fn scale_changes_replicas() {
    let s = Apiserver::start();
    s.kubectl_ok(&[
        "apply",
        "-f",
        examples_dir().join("deployment.yaml").to_str().unwrap(),
    ]);
    let out = s.kubectl_ok(&["scale", "deployment", "web", "--replicas=5"]);
    assert!(out.contains("scaled"), "{out}");
    assert_eq!(
        s.kubectl_ok(&["get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"]),
        "5"
    );
}

#[test]
fn delete_returns_when_objects_are_gone() {
    let s = Apiserver::start();
    let ex = examples();
    s.kubectl_ok(&["apply", "-f", &ex]);
    let out = s.kubectl_ok(&["delete", "-f", &ex, "--timeout=20s"]);
    assert!(out.contains("deployment.apps \"web\" deleted"), "{out}");
    let left = s.kubectl_ok(&["get", "deploy,svc,ing", "-o", "name"]);
    // Only the server's own Service is left.
    assert_eq!(left, "service/kubernetes\n");
    // A pod on a node is deleted gracefully: it stays, marked, until its agent removes it.
    assert!(s.kubectl_stdin(&["apply", "-f", "-"], POD).status.success());
    s.kubectl_ok(&["delete", "pod", "web-1", "--wait=false"]);
    let ts = s.jsonpath_ok(&["pod", "web-1"], "{.metadata.deletionTimestamp}");
    assert!(!ts.is_empty());
    assert!(s.kubectl_ok(&["get", "pods"]).contains("Terminating"));
    s.kubectl_ok(&["delete", "pod", "web-1", "--grace-period=0", "--force"]);
    assert_eq!(s.kubectl_ok(&["get", "pods", "-o", "name"]), "");
}

#[test]
fn rollout_status_waits_for_observed_generation() {
    let s = Apiserver::start();
    s.kubectl_ok(&[
        "apply",
        "-f",
        examples_dir().join("deployment.yaml").to_str().unwrap(),
    ]);
    let mut rollout = s
        .kubectl_cmd()
        .command(&["rollout", "status", "deployment/web", "--timeout=30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        rollout.try_wait().unwrap().is_none(),
        "rollout status returned before the controller observed the deployment"
    );
    // What the deployment controller will write once 3 replicas are ready.
    let status = r#"{"status":{"observedGeneration":1,"replicas":3,"updatedReplicas":3,"readyReplicas":3,"availableReplicas":3,"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable","message":"ok"},{"type":"Progressing","status":"True","reason":"NewReplicaSetAvailable","message":"ok"}]}}"#;
    s.kubectl_ok(&[
        "patch",
        "deployment",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        status,
    ]);
    let out = rollout.wait_with_output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("successfully rolled out"), "{stdout}");
}

#[test]
fn create_subcommands_send_protobuf_and_work() {
    let s = Apiserver::start();
    s.kubectl_ok(&["create", "namespace", "team"]);
    s.kubectl_ok(&[
        "create",
        "deployment",
        "api",
        "-n",
        "team",
        "--image=busybox",
        "--replicas=2",
        "--port=8080",
    ]);
    s.kubectl_ok(&[
        "create",
        "configmap",
        "cfg",
        "-n",
        "team",
        "--from-literal=a=b",
    ]);
    s.kubectl_ok(&[
        "create",
        "secret",
        "generic",
        "sec",
        "-n",
        "team",
        "--from-literal=pw=x",
    ]);
    s.kubectl_ok(&[
        "create",
        "service",
        "nodeport",
        "api",
        "-n",
        "team",
        "--tcp=80:8080",
    ]);
    assert_eq!(
        s.kubectl_ok(&[
            "get",
            "deploy",
            "api",
            "-n",
            "team",
            "-o",
            "jsonpath={.spec.replicas} {.spec.template.spec.containers[0].ports[0].containerPort}"
        ]),
        "2 8080"
    );
    assert_eq!(
        s.kubectl_ok(&["get", "cm", "cfg", "-n", "team", "-o", "jsonpath={.data.a}"]),
        "b"
    );
    assert_eq!(
        s.kubectl_ok(&[
            "get",
            "secret",
            "sec",
            "-n",
            "team",
            "-o",
            "jsonpath={.data.pw}"
        ]),
        "eA=="
    );
    let np = s.kubectl_ok(&[
        "get",
        "svc",
        "api",
        "-n",
        "team",
        "-o",
        "jsonpath={.spec.type} {.spec.ports[0].nodePort}",
    ]);
    let (ty, port) = np.split_once(' ').unwrap();
    assert_eq!(ty, "NodePort");
    assert!(
        (30000..=32767).contains(&port.parse::<u16>().unwrap()),
        "{np}"
    );
}
