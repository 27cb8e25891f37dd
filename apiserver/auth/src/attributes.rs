//! What a request asks to do, in the authorizers' terms, with no HTTP types: the HTTP layer
//! builds them from a route and a query, review requests from their spec.

use std::borrow::Cow;

/// What a request asks to do, in RBAC's terms.
#[derive(Debug, PartialEq)]
pub struct Attributes<'a> {
    pub verb: &'a str,
    /// None for a non-resource path such as /version.
    pub resource: Option<ResourceAttributes<'a>>,
    pub path: &'a str,
}

#[derive(Debug, PartialEq)]
pub struct ResourceAttributes<'a> {
    pub group: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub namespace: &'a str,
    /// The object's name; for a list or watch, the name its `metadata.name` field selector
    /// names, as upstream's RequestInfo reads it (nodes watch single Secrets that way).
    pub name: Cow<'a, str>,
    /// A list's or watch's field selector, decoded ("" when none).
    pub field_selector: Cow<'a, str>,
}

impl<'a> Attributes<'a> {
    /// A request on one resource with no field selector (what review requests and tests ask).
    pub fn on_resource(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        namespace: &'a str,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            verb,
            resource: Some(ResourceAttributes {
                group,
                resource,
                subresource,
                namespace,
                name: Cow::Borrowed(name),
                field_selector: Cow::Borrowed(""),
            }),
            path: "",
        }
    }
}

/// The value a selector of one term `field=value` (or `==`) requires of `field`.
pub fn selector_value<'s>(selector: &'s str, field: &str) -> Option<&'s str> {
    if selector.contains(',') {
        return None;
    }
    let rest = selector.strip_prefix(field)?;
    rest.strip_prefix("==").or_else(|| rest.strip_prefix('='))
}
