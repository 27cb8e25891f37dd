//! The HorizontalPodAutoscaler's arithmetic, as upstream's replica calculator and
//! normalizeDesiredReplicasWithBehaviors: per-metric replicas from utilization (tolerance,
//! missing and unready pods), stabilization windows, rate policies, min/max.

/// One pod as the calculator sees it for one resource.
#[derive(Debug, Clone)]
pub struct PodSample {
    pub name: String,
    /// Running, Ready and not being deleted; the others count as unready (CPU) or are ignored.
    pub ready: bool,
    /// The sum of its containers' requests for the resource.
    pub request: f64,
    /// From the metrics API; None when the pod has no metrics (yet).
    pub usage: Option<f64>,
}

/// What one Utilization metric asks for.
#[derive(Debug, Clone, PartialEq)]
pub struct Recommendation {
    pub replicas: i32,
    /// The average utilization (percent of request) of the pods with metrics.
    pub utilization: i32,
    /// The average usage of those pods (cores or bytes).
    pub average: f64,
}

/// Upstream's default tolerance: no change while usage is within 10% of the target.
pub const TOLERANCE: f64 = 0.1;

/// Replicas for a target average utilization (percent), as upstream's GetResourceReplicas.
pub fn utilization_replicas(
    current: i32,
    target: i32,
    pods: &[PodSample],
) -> Result<Recommendation, String> {
    if pods.is_empty() {
        return Err("no pods returned by selector while calculating replica count".into());
    }
    let measured: Vec<&PodSample> = pods
        .iter()
        .filter(|p| p.ready && p.usage.is_some())
        .collect();
    if measured.is_empty() {
        return Err("did not receive metrics for targeted pods (pods might be unready)".into());
    }
    let missing: Vec<&PodSample> = pods
        .iter()
        .filter(|p| p.ready && p.usage.is_none())
        .collect();
    let unready = pods.iter().filter(|p| !p.ready).count();
    let (usage, requests) = sums(measured.iter().copied());
    if requests <= 0.0 {
        return Err("missing request for the resource in the targeted pods".into());
    }
    let utilization = usage / requests * 100.0;
    let ratio = utilization / f64::from(target);
    let average = usage / measured.len() as f64;
    let rec = |replicas: i32| Recommendation {
        replicas,
        utilization: utilization.round() as i32,
        average,
    };
    let scale_up_with_unready = unready > 0 && ratio > 1.0;
    if !scale_up_with_unready && missing.is_empty() {
        if (1.0 - ratio).abs() <= TOLERANCE {
            return Ok(rec(current));
        }
        return Ok(rec((ratio * measured.len() as f64).ceil() as i32));
    }
    // Rebalance conservatively: pods without metrics are assumed at 100% of their request when
    // scaling down and idle when scaling up; unready pods idle when scaling up.
    let mut usage = usage;
    let mut requests = requests;
    let mut counted = measured.len();
    for p in &missing {
        if ratio < 1.0 {
            usage += p.request;
        }
        requests += p.request;
        counted += 1;
    }
    if scale_up_with_unready {
        for p in pods.iter().filter(|p| !p.ready) {
            requests += p.request;
            counted += 1;
        }
    }
    let new_ratio = usage / requests * 100.0 / f64::from(target);
    if (1.0 - new_ratio).abs() <= TOLERANCE
        || (ratio < 1.0 && new_ratio > 1.0)
        || (ratio > 1.0 && new_ratio < 1.0)
    {
        return Ok(rec(current));
    }
    let replicas = (new_ratio * counted as f64).ceil() as i32;
    if (new_ratio < 1.0 && replicas > current) || (new_ratio > 1.0 && replicas < current) {
        return Ok(rec(current));
    }
    Ok(rec(replicas))
}

fn sums<'a>(pods: impl Iterator<Item = &'a PodSample>) -> (f64, f64) {
    pods.fold((0.0, 0.0), |(u, r), p| {
        (u + p.usage.unwrap_or(0.0), r + p.request)
    })
}

/// A scaling rule (behavior.scaleUp or scaleDown) with upstream's defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct Rules {
    pub window_seconds: i64,
    /// "Max", "Min" or "Disabled".
    pub select: String,
    /// (type "Pods" or "Percent", value, period seconds).
    pub policies: Vec<(String, i32, i32)>,
}

impl Rules {
    pub fn default_up() -> Rules {
        Rules {
            window_seconds: 0,
            select: "Max".into(),
            policies: vec![("Pods".into(), 4, 15), ("Percent".into(), 100, 15)],
        }
    }

    pub fn default_down() -> Rules {
        Rules {
            window_seconds: 300,
            select: "Max".into(),
            policies: vec![("Percent".into(), 100, 15)],
        }
    }
}

/// The inputs of one normalization.
pub struct Bounds<'a> {
    pub current: i32,
    pub min: i32,
    pub max: i32,
    pub up: &'a Rules,
    pub down: &'a Rules,
    /// Earlier recommendations as (seconds ago, replicas).
    pub history: &'a [(i64, i32)],
}

/// The replicas to set, and why they differ from the recommendation (the ScalingLimited reason),
/// as upstream: stabilized within the windows, then limited by the rate policies, then by
/// min/max. Rate policies here limit each change against the current count (upstream also
/// subtracts changes made earlier in the period; one change per 15 s sync period is the same).
pub fn normalize(recommended: i32, b: &Bounds) -> (i32, Option<&'static str>) {
    let mut up = recommended;
    let mut down = recommended;
    for &(age, replicas) in b.history {
        if age <= b.up.window_seconds {
            up = up.min(replicas);
        }
        if age <= b.down.window_seconds {
            down = down.max(replicas);
        }
    }
    let stable = b.current.max(up).min(down);
    let (mut desired, mut why) = (stable, None);
    if stable > b.current {
        let limit = rate_limit(b.current, b.up, true);
        if desired > limit {
            (desired, why) = (limit, Some("ScaleUpLimit"));
        }
    } else if stable < b.current {
        let limit = rate_limit(b.current, b.down, false);
        if desired < limit {
            (desired, why) = (limit, Some("ScaleDownLimit"));
        }
    }
    if desired > b.max {
        (desired, why) = (b.max, Some("TooManyReplicas"));
    } else if desired < b.min {
        (desired, why) = (b.min, Some("TooFewReplicas"));
    }
    (desired, why)
}

/// The farthest one step may go from `current` under `rules`.
fn rate_limit(current: i32, rules: &Rules, up: bool) -> i32 {
    if rules.select == "Disabled" {
        return current;
    }
    let limits = rules.policies.iter().map(|(kind, value, _)| {
        let c = f64::from(current);
        match (kind.as_str(), up) {
            ("Pods", true) => current.saturating_add(*value),
            ("Pods", false) => current.saturating_sub(*value),
            (_, true) => (c * (1.0 + f64::from(*value) / 100.0)).ceil() as i32,
            (_, false) => (c * (1.0 - f64::from(*value) / 100.0)).floor() as i32,
        }
    });
    // "Max" picks the policy allowing the biggest change.
    let biggest = rules.select != "Min";
    match (up, biggest) {
        (true, true) | (false, false) => limits.max(),
        (true, false) | (false, true) => limits.min(),
    }
    .unwrap_or(current)
}

#[cfg(test)]
mod tests;
