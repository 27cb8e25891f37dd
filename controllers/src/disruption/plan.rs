//! A PodDisruptionBudget's status from its pods, as upstream's disruption controller computes
//! it: how many pods are expected, how many must stay healthy, how many are, and so how many
//! voluntary disruptions (evictions) are allowed now.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// What the budget is computed from.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// The selected pods that are Ready and not being deleted, minus those already evicted
    /// (disruptedPods) and not yet gone.
    pub healthy: i32,
    /// The selected pods (not terminated).
    pub pods: i32,
    /// The replicas their controllers ask for (summed over distinct controllers); None when a
    /// pod has no controller with a scale, which a percentage or maxUnavailable needs.
    pub controllers_scale: Option<i32>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    pub expected: i32,
    pub desired_healthy: i32,
    pub allowed: i32,
}

/// `value` of `total`: an int as is, a percentage rounded up (upstream's
/// GetScaledValueFromIntOrPercent with roundUp).
fn scaled(value: &IntOrString, total: i32) -> Result<i32, String> {
    match value {
        IntOrString::Int(n) => Ok(*n),
        IntOrString::String(s) => {
            let pct: i32 = s
                .strip_suffix('%')
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| format!("invalid value for IntOrString: invalid type: string is not a percentage: {s:?}"))?;
            Ok((i64::from(pct) * i64::from(total)).div_euclid(100) as i32
                + i32::from((i64::from(pct) * i64::from(total)) % 100 != 0))
        }
    }
}

/// The budget, or why it cannot be computed (upstream then allows no disruption).
pub fn budget(
    min_available: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    i: &Inputs,
) -> Result<Budget, String> {
    let need_scale = || {
        i.controllers_scale
            .ok_or_else(|| "found no controllers for the pods of this budget".to_string())
    };
    let (expected, desired_healthy) = match (min_available, max_unavailable) {
        (_, Some(max)) => {
            let expected = need_scale()?;
            (expected, expected - scaled(max, expected)?)
        }
        (Some(IntOrString::Int(n)), None) => (i.pods, *n),
        (Some(pct), None) => {
            let expected = need_scale()?;
            (expected, scaled(pct, expected)?)
        }
        // Neither set: policy/v1's default is minAvailable 1 only when written; nothing to keep.
        (None, None) => (i.pods, 0),
    };
    let desired_healthy = desired_healthy.max(0);
    Ok(Budget {
        expected,
        desired_healthy,
        allowed: (i.healthy - desired_healthy).max(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(healthy: i32, pods: i32, scale: Option<i32>) -> Inputs {
        Inputs {
            healthy,
            pods,
            controllers_scale: scale,
        }
    }

    #[test]
    fn min_available_count() {
        let two = IntOrString::Int(2);
        let b = budget(Some(&two), None, &inputs(2, 2, None)).unwrap();
        assert_eq!((b.expected, b.desired_healthy, b.allowed), (2, 2, 0));
        let b = budget(Some(&two), None, &inputs(3, 3, None)).unwrap();
        assert_eq!(b.allowed, 1);
    }

    #[test]
    fn percentages_round_up_against_the_controllers_scale() {
        let half = IntOrString::String("50%".into());
        let b = budget(Some(&half), None, &inputs(3, 3, Some(3))).unwrap();
        assert_eq!((b.expected, b.desired_healthy, b.allowed), (3, 2, 1));
        let b = budget(None, Some(&half), &inputs(3, 3, Some(3))).unwrap();
        assert_eq!((b.desired_healthy, b.allowed), (1, 2));
        assert!(budget(Some(&half), None, &inputs(3, 3, None))
            .unwrap_err()
            .contains("no controllers"));
    }

    #[test]
    fn max_unavailable_count_and_an_unhealthy_app() {
        let one = IntOrString::Int(1);
        let b = budget(None, Some(&one), &inputs(1, 3, Some(3))).unwrap();
        assert_eq!((b.expected, b.desired_healthy, b.allowed), (3, 2, 0));
        let bad = IntOrString::String("x".into());
        assert!(budget(Some(&bad), None, &inputs(1, 1, Some(1))).is_err());
    }
}
