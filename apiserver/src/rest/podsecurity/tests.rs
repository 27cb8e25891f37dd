use super::*;
use serde_json::json;

const RESTRICTED: LevelVersion = LevelVersion {
    level: Level::Restricted,
    minor: None,
};
const BASELINE: LevelVersion = LevelVersion {
    level: Level::Baseline,
    minor: None,
};

fn message(lv: LevelVersion, spec: Value) -> String {
    describe(&evaluate(lv, &json!({}), &spec))
}

/// A pod that passes restricted: every field the standard asks for.
fn compliant() -> Value {
    json!({
        "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{"name": "c", "image": "x", "securityContext": {
            "allowPrivilegeEscalation": false,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
        }}],
        "volumes": [{"name": "cfg", "configMap": {"name": "x"}}, {"name": "tmp", "emptyDir": {}}]
    })
}

#[test]
fn a_compliant_pod_passes_every_level() {
    assert_eq!(evaluate(RESTRICTED, &json!({}), &compliant()), vec![]);
    assert_eq!(evaluate(BASELINE, &json!({}), &compliant()), vec![]);
}

#[test]
fn a_privileged_pod_in_restricted_gets_upstreams_message() {
    let spec = json!({"containers": [{"name": "c", "image": "x", "securityContext": {"privileged": true}}]});
    assert_eq!(
        message(RESTRICTED, spec),
        "privileged (container \"c\" must not set securityContext.privileged=true), \
         allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), \
         unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), \
         runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), \
         seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
}

#[test]
fn baseline_host_namespaces_ports_paths_and_capabilities() {
    let spec = json!({
        "hostNetwork": true, "hostIPC": true,
        "containers": [
            {"name": "a", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81, "hostPort": 81}],
             "securityContext": {"capabilities": {"add": ["NET_ADMIN", "CHOWN", "SYS_ADMIN"]}}},
            {"name": "b", "securityContext": {"capabilities": {"add": ["NET_RAW"]}}}
        ],
        "volumes": [{"name": "root", "hostPath": {"path": "/"}}]
    });
    assert_eq!(
        message(BASELINE, spec),
        "non-default capabilities (containers \"a\", \"b\" must not include \"NET_ADMIN\", \"NET_RAW\", \"SYS_ADMIN\" in securityContext.capabilities.add), \
         host namespaces (hostNetwork=true, hostIPC=true), \
         hostPath volumes (volume \"root\"), \
         hostPort (container \"a\" uses hostPorts 8080, 81)"
    );
}

#[test]
fn baseline_profiles_proc_mount_and_sysctls() {
    let meta = json!({"annotations": {
        "container.apparmor.security.beta.kubernetes.io/c": "unconfined",
        "container.apparmor.security.beta.kubernetes.io/d": "localhost/mine"
    }});
    let spec = json!({
        "securityContext": {
            "seccompProfile": {"type": "Unconfined"},
            "seLinuxOptions": {"type": "spc_t", "user": "root"},
            "sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}, {"name": "kernel.msgmax", "value": "1"}]
        },
        "containers": [{"name": "c", "securityContext": {"procMount": "Unmasked"}}]
    });
    let got = describe(&evaluate(BASELINE, &meta, &spec));
    assert_eq!(
        got,
        "forbidden AppArmor profile (container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"), \
         procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\"), \
         seLinuxOptions (pod set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set), \
         seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\"), \
         forbidden sysctls (kernel.msgmax)"
    );
}

#[test]
fn restricted_volumes_users_and_capabilities() {
    let mut spec = compliant();
    spec["volumes"] = json!([
        {"name": "nfs", "nfs": {"server": "s", "path": "/"}},
        {"name": "host", "hostPath": {"path": "/"}},
        {"name": "ok", "secret": {"secretName": "s"}}
    ]);
    spec["containers"][0]["securityContext"]["runAsUser"] = json!(0);
    spec["containers"][0]["securityContext"]["capabilities"]["add"] = json!(["CHOWN"]);
    spec["initContainers"] = json!([{"name": "init", "securityContext": {
        "allowPrivilegeEscalation": false, "runAsNonRoot": false,
        "capabilities": {"drop": ["ALL"]}
    }}]);
    assert_eq!(
        message(RESTRICTED, spec),
        "unrestricted capabilities (container \"c\" must not include \"CHOWN\" in securityContext.capabilities.add), \
         restricted volume types (volumes \"nfs\", \"host\" use restricted volume types \"hostPath\", \"nfs\"), \
         runAsNonRoot != true (container \"init\" must not set securityContext.runAsNonRoot=false), \
         runAsUser=0 (container \"c\" must not set runAsUser=0)"
    );
}

#[test]
fn container_settings_stand_in_for_the_pods() {
    let spec = json!({"containers": [{"name": "c", "securityContext": {
        "allowPrivilegeEscalation": false, "runAsNonRoot": true,
        "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"},
        "capabilities": {"drop": ["ALL"]}
    }}]});
    assert_eq!(message(RESTRICTED, spec), "");
}

#[test]
fn labels_pick_the_policy_and_fail_closed() {
    let labels = |v: Value| Policy::from_labels(v.as_object());
    let none = labels(json!({}));
    assert!(none.is_privileged());
    let p = labels(json!({"pod-security.kubernetes.io/enforce": "baseline"}));
    assert_eq!(p.enforce.to_string(), "baseline:latest");
    // warn follows a stricter enforce level; audit does not.
    assert_eq!(p.warn.to_string(), "baseline:latest");
    assert_eq!(p.audit.to_string(), "privileged:latest");
    let p = labels(json!({
        "pod-security.kubernetes.io/enforce": "baseline",
        "pod-security.kubernetes.io/enforce-version": "v1.25",
        "pod-security.kubernetes.io/warn": "restricted"
    }));
    assert_eq!(p.enforce.to_string(), "baseline:v1.25");
    assert_eq!(p.warn.to_string(), "restricted:latest");
    let p = labels(json!({"pod-security.kubernetes.io/enforce": "strict"}));
    assert_eq!(p.enforce.to_string(), "restricted:latest");
}

#[test]
fn an_older_version_skips_newer_checks() {
    let spec = json!({"containers": [{"name": "c", "securityContext": {
        "allowPrivilegeEscalation": false, "runAsNonRoot": true,
        "seccompProfile": {"type": "RuntimeDefault"}, "runAsUser": 0
    }}]});
    let v121 = LevelVersion {
        level: Level::Restricted,
        minor: Some(21),
    };
    // capabilities (1.22) and runAsUser (1.23) came later.
    assert_eq!(message(v121, spec.clone()), "");
    assert!(message(RESTRICTED, spec).contains("runAsUser=0"));
}
