//! Which API permission a request on port 10250 needs, as the kubelet asks the API server
//! (upstream's pkg/kubelet/server/auth.go): the verb from the HTTP method, and a subresource of
//! this node's Node object chosen by path. /stats, /metrics, /logs and /spec (and what is under
//! them) have their own subresources, so that monitoring can be granted without the rest;
//! everything else (/containerLogs, /pods, /exec, /run, ...) is nodes/proxy.

/// The resource attributes of a SubjectAccessReview about this node (group "", version v1,
/// resource nodes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Attributes {
    /// "" for a method the kubelet does not map (RBAC then allows it to nobody but `*`).
    pub verb: &'static str,
    pub subresource: &'static str,
    /// The node's name (the Node object the subresource belongs to).
    pub name: String,
}

pub const RESOURCE: &str = "nodes";

/// Paths with a subresource of their own; the rest is `proxy`.
const SUBRESOURCES: [(&str, &str); 4] = [
    ("/stats", "stats"),
    ("/metrics", "metrics"),
    ("/logs", "log"),
    ("/spec", "spec"),
];

/// The attributes of `method` on `path`, for the node `node`.
pub fn of(method: &http::Method, path: &str, node: &str) -> Attributes {
    let subresource = SUBRESOURCES
        .iter()
        .find(|(prefix, _)| is_subpath(path, prefix))
        .map_or("proxy", |(_, sub)| sub);
    Attributes {
        verb: verb(method),
        subresource,
        name: node.to_string(),
    }
}

/// The API verb of an HTTP method, as the kubelet maps them.
fn verb(method: &http::Method) -> &'static str {
    match *method {
        http::Method::GET => "get",
        http::Method::POST => "create",
        http::Method::PUT => "update",
        http::Method::PATCH => "patch",
        http::Method::DELETE => "delete",
        _ => "",
    }
}

/// `path` is `prefix` or below it: "/metrics/cadvisor" is under "/metrics", "/metricsfoo" is not.
fn is_subpath(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Method;

    fn sub(path: &str) -> &'static str {
        of(&Method::GET, path, "n1").subresource
    }

    #[test]
    fn paths_map_to_upstreams_subresources() {
        assert_eq!(sub("/stats"), "stats");
        assert_eq!(sub("/stats/summary"), "stats");
        assert_eq!(sub("/metrics"), "metrics");
        assert_eq!(sub("/metrics/cadvisor"), "metrics");
        assert_eq!(sub("/logs/"), "log");
        assert_eq!(sub("/logs/syslog"), "log");
        assert_eq!(sub("/spec/"), "spec");
        assert_eq!(sub("/containerLogs/default/web/app"), "proxy");
        assert_eq!(sub("/pods"), "proxy");
        assert_eq!(sub("/exec/default/web/app"), "proxy");
        assert_eq!(sub("/run/default/web/app"), "proxy");
        // Only whole path segments count.
        assert_eq!(sub("/metricsfoo"), "proxy");
        assert_eq!(sub("/statsx/summary"), "proxy");
        assert_eq!(sub("/"), "proxy");
    }

    #[test]
    fn methods_map_to_verbs_and_the_name_is_the_node() {
        let a = of(&Method::POST, "/exec/default/web/app", "n1");
        assert_eq!(
            a,
            Attributes {
                verb: "create",
                subresource: "proxy",
                name: "n1".into()
            }
        );
        assert_eq!(of(&Method::GET, "/pods", "n1").verb, "get");
        assert_eq!(of(&Method::PUT, "/pods", "n1").verb, "update");
        assert_eq!(of(&Method::PATCH, "/pods", "n1").verb, "patch");
        assert_eq!(of(&Method::DELETE, "/pods", "n1").verb, "delete");
        assert_eq!(of(&Method::HEAD, "/pods", "n1").verb, "");
        assert_eq!(of(&Method::OPTIONS, "/pods", "n1").verb, "");
    }
}
