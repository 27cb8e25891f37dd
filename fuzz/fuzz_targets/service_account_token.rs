//! A bearer token as the API server checks it for a service account: split into a JWT's three
//! parts, base64url-decoded, its header and claims parsed as JSON and its signature verified,
//! then the bound objects looked up. No input may panic.
#![no_main]
use keelson_apiserver::auth::serviceaccount::{KeyConfig, TokenKeys};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

/// One signing key for the whole run, generated into a scratch folder that is removed once the
/// key is in memory (each run left one behind in /tmp otherwise).
fn keys() -> &'static TokenKeys {
    static KEYS: OnceLock<TokenKeys> = OnceLock::new();
    KEYS.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("keelson-fuzz-sa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a key folder");
        let keys = TokenKeys::load(KeyConfig {
            data_dir: &dir,
            signing_key_file: None,
            key_files: &[],
            issuer: "https://kubernetes.default.svc.cluster.local".into(),
            api_audiences: vec![],
        })
        .expect("a generated key");
        let _ = std::fs::remove_dir_all(&dir);
        keys
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else {
        return;
    };
    let k = keys();
    let lookup = |_: &str, _: &str, _: &str| Some(serde_json::json!({"metadata": {"uid": "u"}}));
    let _ = k.verify(token, &k.api_audiences, 1_700_000_000);
    let _ = k.authenticate(token, &k.api_audiences, &lookup, 1_700_000_000);
});
