//! The four patch formats applied to an object: the input is two JSON documents (object, patch)
//! separated by a NUL byte. No input may panic, and the result of a merge patch re-applied is
//! unchanged (RFC 7386 is idempotent).
#![no_main]
use keelson_apimachinery::patch::{apply_patch, json_patch, merge_patch, strategic_merge_patch};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(2, |b| *b == 0);
    let (Some(a), Some(b)) = (parts.next(), parts.next()) else {
        return;
    };
    let (Ok(obj), Ok(patch)) = (
        serde_json::from_slice::<Value>(a),
        serde_json::from_slice::<Value>(b),
    ) else {
        return;
    };
    let merged = merge_patch(&obj, &patch);
    assert_eq!(
        merge_patch(&merged, &patch),
        merged,
        "merge patch is not idempotent"
    );
    let _ = json_patch(&obj, &patch);
    for kind in ["Pod", "Deployment", "Service", "ConfigMap"] {
        let _ = strategic_merge_patch(&obj, &patch, kind);
        let _ = apply_patch(Some(&obj), &patch, kind);
        let _ = apply_patch(None, &patch, kind);
    }
});
