use super::*;
use serde_json::json;

fn keys(dir: &Path) -> TokenKeys {
    TokenKeys::load(KeyConfig {
        data_dir: dir,
        signing_key_file: None,
        key_files: &[],
        issuer: "https://kubernetes.default.svc.cluster.local".into(),
        api_audiences: vec![],
    })
    .unwrap()
}

fn claims(exp: i64, pod: Option<Ref>) -> Claims {
    Claims {
        aud: vec!["https://kubernetes.default.svc.cluster.local".into()],
        exp,
        iat: 100,
        iss: "https://kubernetes.default.svc.cluster.local".into(),
        jti: "j1".into(),
        kubernetes: Private {
            namespace: "ns".into(),
            serviceaccount: Ref {
                name: "default".into(),
                uid: "sa-uid".into(),
            },
            pod,
            node: None,
        },
        nbf: 100,
        sub: "system:serviceaccount:ns:default".into(),
    }
}

#[test]
fn signs_and_verifies_and_keeps_the_generated_key() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path());
    let aud = k.api_audiences.clone();
    let token = k.sign(&claims(200, None)).unwrap();
    assert_eq!(k.verify(&token, &aud, 150).unwrap(), claims(200, None));
    // A restart loads the same key: its tokens stay valid.
    assert!(keys(dir.path()).verify(&token, &aud, 150).is_ok());
    assert_eq!(
        k.verify(&token, &aud, 200).unwrap_err(),
        "service account token has expired"
    );
    assert!(k.verify(&token, &aud, 99).is_err(), "before nbf");
    assert!(k.verify(&token, &["other".into()], 150).is_err());
    // Another server's key does not verify it.
    let other = tempfile::tempdir().unwrap();
    assert_eq!(
        keys(other.path()).verify(&token, &aud, 150).unwrap_err(),
        "invalid signature"
    );
    // Changed claims break the signature.
    let parts: Vec<&str> = token.split('.').collect();
    let forged = B64.encode(serde_json::to_vec(&claims(9999, None)).unwrap());
    let forged = format!("{}.{forged}.{}", parts[0], parts[2]);
    assert_eq!(
        k.verify(&forged, &aud, 150).unwrap_err(),
        "invalid signature"
    );
}

#[test]
fn user_and_extra_as_upstream() {
    let c = claims(
        200,
        Some(Ref {
            name: "p".into(),
            uid: "pod-uid".into(),
        }),
    );
    let u = c.user();
    assert_eq!(u.name, "system:serviceaccount:ns:default");
    assert_eq!(
        u.groups,
        vec!["system:serviceaccounts", "system:serviceaccounts:ns"]
    );
    assert_eq!(
        c.extra()["authentication.kubernetes.io/pod-name"],
        json!(["p"])
    );
}

#[test]
fn bound_objects_must_still_exist_with_the_same_uid() {
    let dir = tempfile::tempdir().unwrap();
    let k = keys(dir.path());
    let aud = k.api_audiences.clone();
    let pod = Ref {
        name: "p".into(),
        uid: "pod-uid".into(),
    };
    let token = k.sign(&claims(200, Some(pod))).unwrap();
    let stored = |pod_uid: &'static str| {
        move |plural: &str, _: &str, _: &str| match plural {
            "serviceaccounts" => Some(json!({"metadata": {"uid": "sa-uid"}})),
            "pods" if !pod_uid.is_empty() => Some(json!({"metadata": {"uid": pod_uid}})),
            _ => None,
        }
    };
    assert!(k
        .authenticate(&token, &aud, &stored("pod-uid"), 150)
        .is_ok());
    let err = k.authenticate(&token, &aud, &stored(""), 150).unwrap_err();
    assert_eq!(err, "pods ns/p not found");
    let err = k
        .authenticate(&token, &aud, &stored("new-uid"), 150)
        .unwrap_err();
    assert!(err.contains("does not match"), "{err}");
}

#[test]
fn key_files_name_what_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("k.pem");
    std::fs::write(&f, "not a key").unwrap();
    let e = TokenKeys::load(KeyConfig {
        data_dir: dir.path(),
        signing_key_file: Some(&f),
        key_files: &[],
        issuer: "i".into(),
        api_audiences: vec![],
    })
    .unwrap_err();
    assert_eq!(e.to_string(), format!("{}: no private key", f.display()));
}
