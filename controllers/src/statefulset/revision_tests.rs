use super::identity::{claims, new_pod, scaled_away_claims};
use super::revision::*;
use k8s_openapi::api::apps::v1::{ControllerRevision, StatefulSet};
use k8s_openapi::api::core::v1::Pod;
use serde_json::json;

fn sts(image: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": { "name": "web", "namespace": "ns", "uid": "set-uid", "annotations": { "a": "b" } },
        "spec": {
            "replicas": 2,
            "selector": { "matchLabels": { "app": "db" } },
            "serviceName": "db-headless",
            "template": { "metadata": { "labels": { "app": "db" } },
                "spec": { "containers": [{ "name": "c", "image": image }],
                    "volumes": [{ "name": "data", "emptyDir": {} }] } },
            "volumeClaimTemplates": [{ "metadata": { "name": "data", "labels": { "t": "1" } },
                "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } } }],
        },
    }))
    .unwrap()
}

fn stored(set: &StatefulSet, number: i64) -> ControllerRevision {
    new_revision(set, number, 0)
}

#[test]
fn a_revision_holds_the_template_as_a_replace_patch_and_gives_it_back() {
    let set = sts("i:1");
    let rev = stored(&set, 1);
    assert_eq!(rev.data.0["spec"]["template"]["$patch"], "replace");
    assert_eq!(template_of(&rev), Some(set.spec.template.clone()));
    let name = rev.metadata.name.clone().unwrap();
    let hash = name.strip_prefix("web-").unwrap();
    assert_eq!(hash, super::revision::hash(&patch(&set), 0));
    let labels = rev.metadata.labels.clone().unwrap();
    assert_eq!(labels["app"], "db");
    assert_eq!(labels["controller.kubernetes.io/hash"], hash);
    assert_eq!(rev.metadata.annotations.clone().unwrap()["a"], "b");
    assert_ne!(
        super::revision::hash(&patch(&set), 1),
        hash,
        "collisions change the name"
    );
    assert_ne!(stored(&sts("i:2"), 1).metadata.name.unwrap(), name);
}

#[test]
fn the_update_revision_is_found_again_and_renumbered_when_it_comes_back() {
    let (one, two) = (sts("i:1"), sts("i:2"));
    let revs = [stored(&one, 1), stored(&two, 2)];
    let back = choose(&one, &revs);
    assert_eq!(back.update.as_ref(), Some(&revs[0]));
    assert_eq!(
        back.renumber,
        Some((revs[0].metadata.name.clone().unwrap(), 3))
    );
    let same = choose(&two, &revs);
    assert_eq!(
        (same.update.as_ref(), same.renumber),
        (Some(&revs[1]), None)
    );
    let new = choose(&sts("i:3"), &revs);
    assert_eq!((new.update, new.next), (None, 3));
}

#[test]
fn history_keeps_the_limit_and_every_revision_in_use() {
    let revs: Vec<ControllerRevision> = (1..=5)
        .map(|n| stored(&sts(&format!("i:{n}")), n))
        .collect();
    let name = |i: usize| revs[i].metadata.name.clone().unwrap();
    let mut pod = Pod::default();
    pod.metadata.labels = Some([("controller-revision-hash".to_string(), name(0))].into());
    let gone = prune(&revs, &[pod], &[&name(4), &name(3)], 1);
    assert_eq!(gone, [name(1)]);
    assert!(prune(&revs, &[], &[&name(4)], 10).is_empty());
}

#[test]
fn pods_get_their_stable_identity_and_claims() {
    let set = sts("i:1");
    let pod = new_pod(&set, &set.spec.template, "web-abc", 1);
    assert_eq!(pod.metadata.name.as_deref(), Some("web-1"));
    let labels = pod.metadata.labels.clone().unwrap();
    assert_eq!(labels["statefulset.kubernetes.io/pod-name"], "web-1");
    assert_eq!(labels["apps.kubernetes.io/pod-index"], "1");
    assert_eq!(labels["controller-revision-hash"], "web-abc");
    let spec = pod.spec.unwrap();
    assert_eq!(spec.hostname.as_deref(), Some("web-1"));
    assert_eq!(spec.subdomain.as_deref(), Some("db-headless"));
    // The claim template's volume replaces the template's volume of the same name.
    let volumes = spec.volumes.unwrap();
    assert_eq!(volumes.len(), 1);
    let claim = volumes[0].persistent_volume_claim.as_ref().unwrap();
    assert_eq!(claim.claim_name, "data-web-1");
    let owner = &pod.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("StatefulSet", Some(true))
    );
    let made = claims(&set, 1);
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].metadata.name.as_deref(), Some("data-web-1"));
    assert_eq!(made[0].metadata.namespace.as_deref(), Some("ns"));
    let labels = made[0].metadata.labels.clone().unwrap();
    assert_eq!((labels["t"].as_str(), labels["app"].as_str()), ("1", "db"));
    assert_eq!(
        made[0].metadata.owner_references, None,
        "Retain: nothing owns the claims"
    );
}

#[test]
fn claims_of_a_set_that_deletes_them_are_owned_by_it() {
    let mut set = sts("i:1");
    set.spec.persistent_volume_claim_retention_policy =
        serde_json::from_value(json!({ "whenDeleted": "Delete", "whenScaled": "Retain" })).unwrap();
    let owners = claims(&set, 0)[0]
        .metadata
        .owner_references
        .clone()
        .unwrap();
    assert_eq!(
        (owners[0].uid.as_str(), owners[0].controller),
        ("set-uid", None)
    );
}

#[test]
fn scaled_away_claims_are_those_past_the_range_whose_pods_are_gone() {
    let set = sts("i:1");
    let names: Vec<String> = [
        "data-web-0",
        "data-web-1",
        "data-web-2",
        "data-web-3",
        "data-web-03",
        "other-web-5",
        "data-webx-4",
    ]
    .map(String::from)
    .to_vec();
    let still_running = new_pod(&set, &set.spec.template, "r", 2);
    // replicas 2: ordinals 0 and 1 stay; web-2 still runs, so only data-web-3 goes.
    assert_eq!(
        scaled_away_claims(&set, &names, &[still_running]),
        ["data-web-3"]
    );
    assert_eq!(
        scaled_away_claims(&set, &names, &[]),
        ["data-web-2", "data-web-3"]
    );
}
