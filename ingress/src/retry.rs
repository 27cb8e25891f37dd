//! Retrying a request on the next endpoint, as ingress-nginx does: its ConfigMap defaults for
//! every location (`DEFAULTS`), and its per-Ingress annotations checked and turned into nginx
//! directives. A pod that vanished between two reloads (connection refused, or no answer to the
//! connect) then costs a retry on another pod, not a failed request. nginx never passes a
//! non-idempotent request (POST, PATCH, LOCK) on once it was sent, unless `non_idempotent` is
//! asked for, as in ingress-nginx.

use k8s_openapi::api::networking::v1::Ingress;

/// When to try the next endpoint: nginx's `proxy_next_upstream` conditions, space-separated.
pub const NEXT_UPSTREAM_ANNOTATION: &str = "nginx.ingress.kubernetes.io/proxy-next-upstream";
/// How many endpoints one request may try in all (0: no limit).
pub const NEXT_UPSTREAM_TRIES_ANNOTATION: &str =
    "nginx.ingress.kubernetes.io/proxy-next-upstream-tries";
/// Seconds one request may spend trying endpoints (0: no limit).
pub const NEXT_UPSTREAM_TIMEOUT_ANNOTATION: &str =
    "nginx.ingress.kubernetes.io/proxy-next-upstream-timeout";
/// Seconds to wait for a connection to an endpoint before trying the next.
pub const CONNECT_TIMEOUT_ANNOTATION: &str = "nginx.ingress.kubernetes.io/proxy-connect-timeout";

/// ingress-nginx's ConfigMap defaults (proxy-connect-timeout 5, proxy-next-upstream "error
/// timeout", proxy-next-upstream-tries 3, proxy-next-upstream-timeout 0), for the http block.
/// The short connect timeout matters: nginx's own 60 s would hold a request that long on an
/// endpoint whose pod is gone before trying the next.
pub const DEFAULTS: &str = "    proxy_connect_timeout 5s;
    proxy_next_upstream error timeout;
    proxy_next_upstream_tries 3;
    proxy_next_upstream_timeout 0;
";

/// What nginx's `proxy_next_upstream` takes.
const CONDITIONS: &[&str] = &[
    "error",
    "timeout",
    "invalid_header",
    "http_500",
    "http_502",
    "http_503",
    "http_504",
    "http_403",
    "http_404",
    "http_429",
    "non_idempotent",
    "off",
];

/// The directives an Ingress's annotations ask for, in a fixed order, or what is wrong with a
/// value (the Ingress is then left out, as ingress-nginx's annotation validation does).
pub fn directives(ing: &Ingress) -> Result<Vec<(&'static str, String)>, String> {
    let Some(annotations) = ing.metadata.annotations.as_ref() else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    if let Some(v) = annotations.get(NEXT_UPSTREAM_ANNOTATION) {
        let words: Vec<&str> = v.split_whitespace().collect();
        if words.is_empty() || words.iter().any(|w| !CONDITIONS.contains(w)) {
            return Err(format!(
                "{NEXT_UPSTREAM_ANNOTATION} {v:?} is not a list of {}",
                CONDITIONS.join(", ")
            ));
        }
        out.push(("proxy_next_upstream", words.join(" ")));
    }
    for (name, directive, unit) in [
        (
            NEXT_UPSTREAM_TRIES_ANNOTATION,
            "proxy_next_upstream_tries",
            "",
        ),
        (
            NEXT_UPSTREAM_TIMEOUT_ANNOTATION,
            "proxy_next_upstream_timeout",
            "s",
        ),
        (CONNECT_TIMEOUT_ANNOTATION, "proxy_connect_timeout", "s"),
    ] {
        if let Some(v) = annotations.get(name) {
            // Whole numbers as ingress-nginx parses them; nginx itself refuses what overflows.
            if v.is_empty() || v.len() > 9 || !v.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!("{name} {v:?} is not a whole number"));
            }
            out.push((directive, format!("{v}{unit}")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ing(annotations: serde_json::Value) -> Ingress {
        serde_json::from_value(json!({"metadata": {"name": "a", "annotations": annotations}}))
            .unwrap()
    }

    #[test]
    fn annotations_become_directives() {
        assert_eq!(directives(&ing(json!({}))), Ok(vec![]));
        let all = ing(json!({
            NEXT_UPSTREAM_ANNOTATION: "error  timeout http_502",
            NEXT_UPSTREAM_TRIES_ANNOTATION: "5",
            NEXT_UPSTREAM_TIMEOUT_ANNOTATION: "10",
            CONNECT_TIMEOUT_ANNOTATION: "2",
        }));
        assert_eq!(
            directives(&all),
            Ok(vec![
                ("proxy_next_upstream", "error timeout http_502".to_string()),
                ("proxy_next_upstream_tries", "5".to_string()),
                ("proxy_next_upstream_timeout", "10s".to_string()),
                ("proxy_connect_timeout", "2s".to_string()),
            ])
        );
    }

    #[test]
    fn bad_values_are_named() {
        for (name, value) in [
            (NEXT_UPSTREAM_ANNOTATION, "error; return 200"),
            (NEXT_UPSTREAM_ANNOTATION, " "),
            (NEXT_UPSTREAM_TRIES_ANNOTATION, "3x"),
            (NEXT_UPSTREAM_TIMEOUT_ANNOTATION, "-1"),
            (CONNECT_TIMEOUT_ANNOTATION, "5s"),
            (CONNECT_TIMEOUT_ANNOTATION, "99999999999"),
        ] {
            let err = directives(&ing(json!({ name: value }))).unwrap_err();
            assert!(err.contains(name) && err.contains(value), "{err}");
        }
    }
}
