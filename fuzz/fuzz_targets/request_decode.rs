//! A request body as the API server decodes it (JSON, YAML or protobuf, chosen by the first
//! byte), then checked as each of a few kinds (its typed schema, then validation): no input may
//! panic.
#![no_main]
use keelson_apiserver::negotiate::parse_body;
use libfuzzer_sys::fuzz_target;

const CONTENT_TYPES: [&str; 3] = [
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];
const KINDS: [&str; 8] = [
    "Pod",
    "Service",
    "Deployment",
    "EndpointSlice",
    "Node",
    "Ingress",
    "DaemonSet",
    // Its spec.request and status.certificate go through PEM and X.509 parsing.
    "CertificateSigningRequest",
];

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    let ct = CONTENT_TYPES[usize::from(selector) % CONTENT_TYPES.len()];
    let Ok(obj) = parse_body(Some(ct), body) else {
        return;
    };
    for kind in KINDS {
        if let Some(res) = keelson_apiserver_registry::resources::by_kind(kind) {
            let _ = (res.decode)(&obj);
        }
        let _ = keelson_apiserver_registry::validate(kind, &obj, None);
        let _ = keelson_apiserver_registry::validate(kind, &obj, Some(&obj));
    }
});
