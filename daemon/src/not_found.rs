//! Reading an object that may not exist, as client-go's `IsNotFound` decides: a 404 whose reason
//! is NotFound, or one whose reason is not a Kubernetes reason at all. kube's `get_opt` takes
//! only the first; a server Keelson did not write (an emulator, a proxy in front of the API)
//! may answer 404 with a reason of its own ("Object Not Found"), which is still "not there".

use kube::Api;
use serde::de::DeserializeOwned;

/// Reasons upstream's API server gives; a 404 with any other reason means the object is absent.
const KNOWN_REASONS: &[&str] = &[
    "Unauthorized",
    "Forbidden",
    "AlreadyExists",
    "Conflict",
    "Gone",
    "Invalid",
    "ServerTimeout",
    "StoreReadError",
    "Timeout",
    "TooManyRequests",
    "BadRequest",
    "MethodNotAllowed",
    "NotAcceptable",
    "RequestEntityTooLarge",
    "UnsupportedMediaType",
    "InternalError",
    "Expired",
    "ServiceUnavailable",
];

/// Whether `e` says the object does not exist.
pub fn is_not_found(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => {
            s.reason == "NotFound" || (s.code == 404 && !KNOWN_REASONS.contains(&s.reason.as_str()))
        }
        _ => false,
    }
}

/// The object `name`, or None when the server says it does not exist.
pub async fn get_opt<K>(api: &Api<K>, name: &str) -> kube::Result<Option<K>>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.get(name).await {
        Ok(o) => Ok(Some(o)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(
            serde_json::from_value(serde_json::json!({
                "status": "Failure", "message": "m", "reason": reason, "code": code
            }))
            .expect("status"),
        )
    }

    #[test]
    fn a_404_is_not_found_unless_its_reason_is_a_kubernetes_one() {
        assert!(is_not_found(&api_error(404, "NotFound")));
        assert!(is_not_found(&api_error(404, "Object Not Found")));
        assert!(is_not_found(&api_error(404, "")));
        assert!(!is_not_found(&api_error(404, "Forbidden")));
        assert!(!is_not_found(&api_error(403, "Forbidden")));
        assert!(!is_not_found(&api_error(500, "Object Not Found")));
    }
}
