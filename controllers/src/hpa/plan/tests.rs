use super::*;

fn pod(name: &str, ready: bool, request: f64, usage: Option<f64>) -> PodSample {
    PodSample {
        name: name.into(),
        ready,
        request,
        usage,
    }
}

#[test]
fn busy_pods_scale_up_by_the_usage_ratio() {
    // Two pods at 100m of a 100m request against a 50% target: twice as many.
    let pods = [
        pod("a", true, 0.1, Some(0.1)),
        pod("b", true, 0.1, Some(0.1)),
    ];
    let r = utilization_replicas(2, 50, &pods).unwrap();
    assert_eq!((r.replicas, r.utilization), (4, 100));
    assert!((r.average - 0.1).abs() < 1e-9);
}

#[test]
fn within_tolerance_nothing_changes() {
    let pods = [pod("a", true, 0.1, Some(0.054))];
    assert_eq!(utilization_replicas(1, 50, &pods).unwrap().replicas, 1);
    let pods = [
        pod("a", true, 0.1, Some(0.04)),
        pod("b", true, 0.1, Some(0.06)),
    ];
    assert_eq!(utilization_replicas(2, 50, &pods).unwrap().replicas, 2);
}

#[test]
fn idle_pods_scale_down() {
    let pods: Vec<_> = (0..4)
        .map(|i| pod(&format!("p{i}"), true, 0.1, Some(0.001)))
        .collect();
    assert_eq!(utilization_replicas(4, 50, &pods).unwrap().replicas, 1);
}

#[test]
fn missing_metrics_hold_back_a_scale_down() {
    // One idle pod measured, three without metrics assumed at 100%: usage over target, the
    // direction flips, so no change (upstream's rule).
    let mut pods = vec![pod("a", true, 0.1, Some(0.0))];
    pods.extend((0..3).map(|i| pod(&format!("m{i}"), true, 0.1, None)));
    assert_eq!(utilization_replicas(4, 50, &pods).unwrap().replicas, 4);
}

#[test]
fn unready_pods_count_as_idle_when_scaling_up() {
    // One busy ready pod (200%), three unready: 200% over 4 pods = 50% -> no change.
    let mut pods = vec![pod("a", true, 0.1, Some(0.2))];
    pods.extend((0..3).map(|i| pod(&format!("u{i}"), false, 0.1, None)));
    assert_eq!(utilization_replicas(4, 50, &pods).unwrap().replicas, 4);
}

#[test]
fn no_metrics_is_an_error() {
    let pods = [pod("a", true, 0.1, None)];
    assert!(utilization_replicas(1, 50, &pods)
        .unwrap_err()
        .contains("did not receive metrics"));
    assert!(utilization_replicas(1, 50, &[])
        .unwrap_err()
        .contains("no pods"));
}

fn bounds<'a>(
    current: i32,
    up: &'a Rules,
    down: &'a Rules,
    history: &'a [(i64, i32)],
) -> Bounds<'a> {
    Bounds {
        current,
        min: 1,
        max: 10,
        up,
        down,
        history,
    }
}

#[test]
fn scale_down_waits_out_the_window() {
    let (up, down) = (Rules::default_up(), Rules::default_down());
    // 4 recommended 200 s ago, inside the 300 s window: stay at 4.
    assert_eq!(normalize(1, &bounds(4, &up, &down, &[(200, 4)])), (4, None));
    // Recommended 400 s ago only: outside the window, go down.
    assert_eq!(normalize(1, &bounds(4, &up, &down, &[(400, 4)])), (1, None));
}

#[test]
fn scale_up_is_limited_by_the_policies_and_max() {
    let (up, down) = (Rules::default_up(), Rules::default_down());
    // From 1: Pods +4 -> 5, Percent 100% -> 2; Max picks 5.
    assert_eq!(
        normalize(20, &bounds(1, &up, &down, &[])),
        (5, Some("ScaleUpLimit"))
    );
    // From 8: 12 / 16 -> 16, then max 10.
    assert_eq!(
        normalize(20, &bounds(8, &up, &down, &[])),
        (10, Some("TooManyReplicas"))
    );
    let min = Rules {
        select: "Min".into(),
        ..Rules::default_up()
    };
    assert_eq!(normalize(20, &bounds(1, &min, &down, &[])).0, 2);
    let off = Rules {
        select: "Disabled".into(),
        ..Rules::default_up()
    };
    assert_eq!(normalize(20, &bounds(3, &off, &down, &[])).0, 3);
}

#[test]
fn min_replicas_holds() {
    let (up, down) = (Rules::default_up(), Rules::default_down());
    let b = Bounds {
        min: 2,
        ..bounds(3, &up, &down, &[])
    };
    assert_eq!(normalize(1, &b), (2, Some("TooFewReplicas")));
}
