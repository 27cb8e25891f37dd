//! autoscaling/v2 HorizontalPodAutoscaler through the machine's kubectl: `kubectl autoscale`
//! (which writes autoscaling/v1 in kubectl 1.32), `kubectl get hpa` columns, upstream's
//! defaults and validation messages, and the v1 view of the same object.

use keelson_testing::Apiserver;

fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn with_deployment() -> Apiserver {
    let s = Apiserver::start();
    s.kubectl_ok(&["create", "deployment", "web", "--image=nginx"]);
    s
}

#[test]
fn kubectl_autoscale_creates_an_hpa_that_get_prints() {
    let s = with_deployment();
    let discovery = s.kubectl_ok(&["api-resources", "--api-group=autoscaling"]);
    let row = discovery
        .lines()
        .find(|l| l.starts_with("horizontalpodautoscalers "))
        .unwrap_or_else(|| panic!("{discovery}"));
    assert_eq!(
        words(row),
        [
            "horizontalpodautoscalers",
            "hpa",
            "autoscaling/v2",
            "true",
            "HorizontalPodAutoscaler"
        ]
    );
    let out = s.kubectl_ok(&[
        "autoscale",
        "deployment",
        "web",
        "--cpu-percent=50",
        "--min=1",
        "--max=5",
    ]);
    assert_eq!(
        out.trim(),
        "horizontalpodautoscaler.autoscaling/web autoscaled"
    );

    let table = s.kubectl_ok(&["get", "hpa"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        words(lines[0]),
        [
            "NAME",
            "REFERENCE",
            "TARGETS",
            "MINPODS",
            "MAXPODS",
            "REPLICAS",
            "AGE"
        ]
    );
    assert_eq!(
        words(lines[1])[..8],
        [
            "web",
            "Deployment/web",
            "cpu:",
            "<unknown>/50%",
            "1",
            "5",
            "0",
            words(lines[1])[7]
        ]
    );
    let v2: serde_json::Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "hpa", "web", "-o", "json"])).unwrap();
    assert_eq!(v2["apiVersion"], "autoscaling/v2");
    assert_eq!(
        v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"],
        50
    );
    assert_eq!(v2["spec"]["scaleTargetRef"]["name"], "web");

    // The controller's status write shows in TARGETS, and in v1's field for it.
    let status = r#"{"status": {"currentReplicas": 2, "desiredReplicas": 2, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 20,
        "averageValue": "100m"}}}]}}"#;
    s.kubectl_ok(&[
        "patch",
        "hpa",
        "web",
        "--subresource=status",
        "--type=merge",
        "-p",
        status,
    ]);
    let row = s.kubectl_ok(&["get", "hpa", "web", "--no-headers"]);
    assert_eq!(
        words(&row)[1..7],
        ["Deployment/web", "cpu:", "20%/50%", "1", "5", "2"],
        "{row}"
    );
    let v1 = s.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers/web",
    ]);
    let v1: serde_json::Value = serde_json::from_str(&v1).unwrap();
    assert_eq!(v1["apiVersion"], "autoscaling/v1");
    assert_eq!(v1["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(v1["status"]["currentCPUUtilizationPercentage"], 20);
    let list = s.kubectl_ok(&[
        "get",
        "--raw",
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
    ]);
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    assert_eq!(
        (list["kind"].as_str(), list["apiVersion"].as_str()),
        (Some("HorizontalPodAutoscalerList"), Some("autoscaling/v1"))
    );
    assert_eq!(
        list["items"][0]["spec"]["targetCPUUtilizationPercentage"],
        50
    );

    let all = s.kubectl_ok(&["get", "all", "-o", "name"]);
    assert!(
        all.contains("horizontalpodautoscaler.autoscaling/web"),
        "{all}"
    );
    s.kubectl_ok(&["delete", "hpa", "web"]);
    assert_eq!(s.kubectl_ok(&["get", "hpa", "-o", "name"]).trim(), "");
}

#[test]
fn upstream_defaults_and_validation_messages() {
    let s = with_deployment();
    let hpa = |name: &str, spec: &str| {
        format!("apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n{spec}")
    };
    s.apply(&hpa("plain", "  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}\n  maxReplicas: 3\n  behavior:\n    scaleDown: {stabilizationWindowSeconds: 60}\n"));
    let got: serde_json::Value =
        serde_json::from_str(&s.kubectl_ok(&["get", "hpa", "plain", "-o", "json"])).unwrap();
    let spec = &got["spec"];
    assert_eq!(spec["minReplicas"], 1);
    assert_eq!(
        spec["metrics"][0]["resource"]["target"]["averageUtilization"],
        80
    );
    assert_eq!(
        spec["behavior"]["scaleUp"]["policies"][0],
        serde_json::json!({"type": "Pods", "value": 4, "periodSeconds": 15})
    );
    assert_eq!(
        spec["behavior"]["scaleDown"]["stabilizationWindowSeconds"],
        60
    );

    let bad = hpa("bad", "  scaleTargetRef: {name: web}\n  minReplicas: 3\n  maxReplicas: 2\n  metrics:\n  - type: Resource\n    resource: {name: cpu, target: {type: Utilization, averageUtilization: 0}}\n");
    let out = s.kubectl_stdin(&["apply", "-f", "-"], &bad);
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    for want in [
        "spec.scaleTargetRef.kind: Required value",
        "spec.maxReplicas: Invalid value: 2: must be greater than or equal to `minReplicas`",
        "spec.metrics[0].resource.target.averageUtilization: Invalid value: 0: must be greater than 0",
    ] {
        assert!(err.contains(want), "missing {want:?} in {err}");
    }
    // The same rules hold for a v1 client (kubectl checks --min and --max itself first).
    let v1 = r#"{"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "zero"}, "spec": {"scaleTargetRef": {"kind": "Deployment",
        "name": "web"}, "minReplicas": 0, "maxReplicas": 2}}"#;
    let path = "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers";
    let out = s.kubectl_stdin(&["create", "--raw", path, "-f", "-"], v1);
    let err = stderr(&out);
    assert!(
        err.contains("spec.minReplicas: Invalid value: 0: must be greater than or equal to 1"),
        "{err}"
    );
    assert_eq!(
        s.kubectl_ok(&["get", "hpa", "-o", "name"]).trim(),
        "horizontalpodautoscaler.autoscaling/plain"
    );
}
