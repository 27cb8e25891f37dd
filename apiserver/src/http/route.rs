//! URL paths of the Kubernetes API, parsed into the resource, namespace, name and subresource.

use crate::resources::{self, Resource};

#[derive(Debug, Clone, PartialEq)]
pub enum Route {
    /// /api, /apis, /api/v1, /apis/{group}, /apis/{group}/{version}
    CoreVersions,
    Groups,
    Group(String),
    ResourceList {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResourcePath {
    pub res: &'static Resource,
    pub namespace: String,
    pub name: String,
    pub sub: String,
    /// The deprecated /watch/ path form.
    pub legacy_watch: bool,
}

/// Parses a request path; None when it names nothing this server serves.
pub fn parse(path: &str) -> Option<Route> {
    let segs: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segs.as_slice() {
        ["api"] => return Some(Route::CoreVersions),
        ["apis"] => return Some(Route::Groups),
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g] => return Some(Route::Group(g.to_string())),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    if rest.is_empty() {
        let known = !resources::in_group(group, version).is_empty();
        return known.then(|| Route::ResourceList {
            group: group.into(),
            version: version.into(),
        });
    }
    let (legacy_watch, rest) = match rest {
        ["watch", r @ ..] => (true, r),
        r => (false, r),
    };
    let rp = |res, namespace: &str, name: &str, sub: &str| {
        Some(Route::Resource(ResourcePath {
            res,
            namespace: namespace.into(),
            name: name.into(),
            sub: sub.into(),
            legacy_watch,
        }))
    };
    match rest {
        ["namespaces", ns, plural, tail @ ..] if is_namespaced(group, version, plural) => {
            let res = resources::lookup(group, version, plural)?;
            match tail {
                [] => rp(res, ns, "", ""),
                [name] => rp(res, ns, name, ""),
                [name, sub] if res.has_subresource(sub) => rp(res, ns, name, sub),
                _ => None,
            }
        }
        [plural, tail @ ..] => {
            let res = resources::lookup(group, version, plural)?;
            match (res.namespaced, tail) {
                (_, []) => rp(res, "", "", ""),
                (false, [name]) => rp(res, "", name, ""),
                (false, [name, sub])
                    if res.has_subresource(sub)
                        || (res.kind == "Namespace" && *sub == "finalize") =>
                {
                    rp(res, "", name, sub)
                }
                _ => None,
            }
        }
        [] => None,
    }
}

fn is_namespaced(group: &str, version: &str, plural: &str) -> bool {
    resources::lookup(group, version, plural).is_some_and(|r| r.namespaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path) {
            Some(Route::Resource(r)) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn namespaced_and_cluster_paths() {
        let r = res("/api/v1/namespaces/default/pods/web/status");
        assert_eq!(
            (
                r.res.plural,
                r.namespace.as_str(),
                r.name.as_str(),
                r.sub.as_str()
            ),
            ("pods", "default", "web", "status")
        );
        let r = res("/api/v1/pods");
        assert_eq!((r.res.plural, r.namespace.as_str()), ("pods", ""));
        let r = res("/api/v1/namespaces/kube-system");
        assert_eq!(
            (r.res.plural, r.name.as_str()),
            ("namespaces", "kube-system")
        );
        let r = res("/api/v1/nodes/n1/status");
        assert_eq!((r.res.plural, r.sub.as_str()), ("nodes", "status"));
        let r = res("/apis/apps/v1/namespaces/default/deployments/web/scale");
        assert_eq!(r.sub, "scale");
        let r = res("/api/v1/watch/namespaces/default/pods");
        assert!(r.legacy_watch);
        let r = res("/api/v1/namespaces/default/pods/web/ephemeralcontainers");
        assert_eq!(
            (r.name.as_str(), r.sub.as_str()),
            ("web", "ephemeralcontainers")
        );
    }

    #[test]
    fn discovery_paths_and_unknowns() {
        assert_eq!(parse("/api"), Some(Route::CoreVersions));
        assert_eq!(
            parse("/apis/apps/v1"),
            Some(Route::ResourceList {
                group: "apps".into(),
                version: "v1".into()
            })
        );
        assert_eq!(parse("/api/v1/widgets"), None);
        assert_eq!(parse("/apis/apps/v2"), None);
        assert_eq!(parse("/api/v1/namespaces/default/pods/web/widgets"), None);
        assert_eq!(parse("/api/v1/pods/web"), None);
    }
}
