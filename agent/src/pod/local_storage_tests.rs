use super::*;

fn pod(spec: serde_json::Value) -> Pod {
    serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}, "spec": spec})).unwrap()
}

fn usage(empty_dirs: &[(&str, u64)], containers: &[(&str, u64)]) -> Usage {
    let owned = |l: &[(&str, u64)]| l.iter().map(|(k, v)| (k.to_string(), *v)).collect();
    Usage {
        empty_dirs: owned(empty_dirs),
        containers: owned(containers),
    }
}

const MI: u64 = 1024 * 1024;

#[test]
fn an_empty_dir_past_its_size_limit_evicts_with_upstreams_message() {
    let p = pod(serde_json::json!({
        "volumes": [
            {"name": "scratch", "emptyDir": {"sizeLimit": "1Mi"}},
            {"name": "ram", "emptyDir": {"medium": "Memory", "sizeLimit": "1Mi"}},
        ],
        "containers": [{"name": "app"}],
    }));
    assert!(has_limits(&p));
    assert_eq!(
        check(&p, &usage(&[("scratch", MI)], &[])),
        None,
        "at the limit is fine"
    );
    let r = check(&p, &usage(&[("scratch", MI + 4096)], &[])).expect("evicted");
    assert_eq!(r.reason, "Evicted");
    assert_eq!(
        r.message,
        "Usage of EmptyDir volume \"scratch\" exceeds the limit \"1Mi\". "
    );
    // A Memory emptyDir is a tmpfs of that size: the kernel holds it, nothing to evict for.
    assert_eq!(check(&p, &usage(&[("ram", 5 * MI)], &[])), None);
}

#[test]
fn containers_past_their_ephemeral_storage_limits_evict_the_pod() {
    let limited = |n: &str, l: &str| serde_json::json!({"name": n, "resources": {"limits": {"ephemeral-storage": l}}});
    let p = pod(serde_json::json!({
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "containers": [limited("a", "2Mi"), limited("b", "1Mi")],
    }));
    assert!(has_limits(&p));
    assert_eq!(check(&p, &usage(&[], &[("a", MI), ("b", MI)])), None);
    let r = check(&p, &usage(&[], &[("a", MI), ("b", MI + 1)])).unwrap();
    assert_eq!(
        r.message,
        "Container b exceeded its local ephemeral storage limit \"1Mi\". "
    );
    // The pod as a whole, emptyDirs counted: past the sum of its containers' limits.
    let r = check(
        &p,
        &usage(&[("scratch", 2 * MI + 1)], &[("a", MI), ("b", 0)]),
    )
    .unwrap();
    assert_eq!(
        r.message,
        "Pod ephemeral local storage usage exceeds the total limit of containers 3Mi. "
    );
    let plain = pod(
        serde_json::json!({"volumes": [{"name": "s", "emptyDir": {}}], "containers": [{"name": "a"}]}),
    );
    assert!(!has_limits(&plain));
}

#[test]
fn an_eviction_is_recorded_in_the_status_and_stays() {
    let mut p = pod(serde_json::json!({"containers": [{"name": "a"}]}));
    assert_eq!(recorded(&p), None);
    p.status = serde_json::from_value(
        serde_json::json!({"phase": "Failed", "reason": "Evicted", "message": "m"}),
    )
    .unwrap();
    assert_eq!(recorded(&p).map(|r| r.message), Some("m".to_string()));
}

#[test]
fn disk_usage_counts_blocks_below_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/data"), vec![7u8; 256 * 1024]).unwrap();
    // A sparse file holds no blocks: what is on disk counts, not its length.
    let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
    sparse.set_len(64 * MI).unwrap();
    let used = disk_usage(dir.path());
    assert!((256 * 1024..MI).contains(&used), "{used}");
    assert_eq!(disk_usage(&dir.path().join("missing")), 0);
}
