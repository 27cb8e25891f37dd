//! The HorizontalPodAutoscaler controller against a real keelson-apiserver and the real
//! controller manager, without nodes: the replica bounds are enforced without metrics, and a
//! target in range whose pods have no metrics gets upstream's FailedGetResourceMetric (the
//! metrics themselves, from real pods, are scripts/e2e.d/hpa.bash's).

use std::time::Duration;

mod common;

use common::Cluster;
use keelson_testing::eventually;

fn events(c: &Cluster, reason: &str) -> String {
    c.ok(&[
        "get",
        "events",
        "--field-selector",
        &format!("reason={reason}"),
        "-o",
        "jsonpath={range .items[*]}{.message}{\"\\n\"}{end}",
    ])
}

#[test]
fn replicas_below_min_are_raised_and_missing_metrics_are_reported() {
    let c = Cluster::start();
    c.ok(&[
        "create",
        "deployment",
        "web",
        "--image=busybox",
        "--replicas=1",
    ]);
    c.ok(&[
        "set",
        "resources",
        "deployment",
        "web",
        "--requests=cpu=100m",
    ]);
    c.ok(&[
        "autoscale",
        "deployment",
        "web",
        "--min=2",
        "--max=4",
        "--cpu-percent=50",
    ]);
    eventually("scaled to minReplicas", Duration::from_secs(60), || {
        let r = c.ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}",
        ]);
        (r == "2").then_some(()).ok_or(r)
    });
    let rescaled = events(&c, "SuccessfulRescale");
    assert!(
        rescaled.contains("New size: 2; reason: Current number of replicas below Spec.MinReplicas"),
        "{rescaled}"
    );
    // In range now, and no agent reports usage: the controller says so and changes nothing.
    eventually("FailedGetResourceMetric", Duration::from_secs(60), || {
        let e = events(&c, "FailedGetResourceMetric");
        (!e.is_empty()).then_some(e.clone()).ok_or(e)
    });
    let active = c.ok(&[
        "get",
        "hpa",
        "web",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"ScalingActive\")].status}",
    ]);
    assert_eq!(active, "False");
    let row = c.ok(&["get", "hpa", "web", "--no-headers"]);
    assert!(
        row.contains("Deployment/web") && row.contains(" 2 "),
        "{row}"
    );
    assert_eq!(
        c.ok(&[
            "get",
            "deployment",
            "web",
            "-o",
            "jsonpath={.spec.replicas}"
        ]),
        "2"
    );
}
