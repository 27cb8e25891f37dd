//! The Pod Security Standards' checks, each as upstream's pod-security-admission words its
//! finding: a reason ("privileged") and a detail naming the containers, volumes or values.
//! Pure functions of the pod's metadata and spec (JSON), so they serve pods and templates alike.

use serde_json::Value;
use std::collections::BTreeSet;

/// One failed check: upstream's ForbiddenReason and ForbiddenDetail.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub reason: String,
    pub detail: String,
}

/// A check of the pod's metadata and spec; None when it passes.
pub type Check = fn(&Value, &Value) -> Option<Finding>;

/// Baseline's checks in upstream's order (their IDs sorted, which is the order of the reasons in
/// its messages), each with the minor version it appeared in and whether restricted replaces it
/// with a stricter check of its own.
pub const BASELINE: &[(u32, bool, Check)] = &[
    (0, false, app_armor),
    (0, true, capabilities_baseline),
    (0, false, host_namespaces),
    (0, true, host_path_volumes),
    (0, false, host_ports),
    (34, false, host_probes),
    (0, false, privileged),
    (0, false, proc_mount),
    (0, false, se_linux),
    (19, true, seccomp_baseline),
    (0, false, sysctls),
    (0, false, windows_host_process),
];

/// What restricted adds, after baseline's checks, in upstream's order. The number is the minor
/// version each check appeared in (1.x), so an older pinned version (`enforce-version: v1.21`)
/// skips what did not exist then.
pub const RESTRICTED: &[(u32, Check)] = &[
    (8, allow_privilege_escalation),
    (22, capabilities_restricted),
    (0, restricted_volumes),
    (0, run_as_non_root),
    (23, run_as_user),
    (19, seccomp_restricted),
];

fn finding(reason: &str, detail: String) -> Option<Finding> {
    Some(Finding {
        reason: reason.to_string(),
        detail,
    })
}

/// The finding when `failed`.
fn finding_if(failed: bool, reason: &str, detail: String) -> Option<Finding> {
    if failed {
        finding(reason, detail)
    } else {
        None
    }
}

/// `"a", "b"` as upstream's joinQuote.
fn join_quote<S: AsRef<str>>(items: impl IntoIterator<Item = S>) -> String {
    let quoted: Vec<String> = items
        .into_iter()
        .map(|s| format!("\"{}\"", s.as_ref()))
        .collect();
    quoted.join(", ")
}

fn plural<'a>(one: &'a str, many: &'a str, n: usize) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

/// `container "a"` or `containers "a", "b"`.
fn containers_named(names: &[String]) -> String {
    let word = plural("container", "containers", names.len());
    format!("{word} {}", join_quote(names))
}

/// `container "a" uses hostPort 80`: who (`n` of them) uses which of what.
fn uses(who: String, n: usize, what: &str, values: &str) -> String {
    format!("{who} {} {what} {values}", plural("uses", "use", n))
}

/// Init containers, containers, then ephemeral containers, as upstream visits them.
fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .filter_map(|k| spec.get(k).and_then(Value::as_array))
        .flatten()
}

fn name(c: &Value) -> String {
    c.get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// A field of the container's securityContext.
fn sc<'a>(c: &'a Value, field: &str) -> Option<&'a Value> {
    c.get("securityContext")?
        .get(field)
        .filter(|v| !v.is_null())
}

/// A field of the pod's securityContext.
fn pod_sc<'a>(spec: &'a Value, field: &str) -> Option<&'a Value> {
    spec.get("securityContext")?
        .get(field)
        .filter(|v| !v.is_null())
}

/// The names of the containers `bad` picks.
fn bad_containers(spec: &Value, mut bad: impl FnMut(&Value) -> bool) -> Vec<String> {
    containers(spec).filter(|c| bad(c)).map(name).collect()
}

fn annotations(meta: &Value) -> impl Iterator<Item = (&String, &str)> {
    meta.get("annotations")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, v)| (k, v.as_str().unwrap_or("")))
}

fn app_armor(meta: &Value, _spec: &Value) -> Option<Finding> {
    const PREFIX: &str = "container.apparmor.security.beta.kubernetes.io/";
    let allowed = |p: &str| p.is_empty() || p == "runtime/default" || p.starts_with("localhost/");
    let mut bad: Vec<String> = annotations(meta)
        .filter(|(k, v)| k.starts_with(PREFIX) && !allowed(v))
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    bad.sort();
    let reason = plural(
        "forbidden AppArmor profile",
        "forbidden AppArmor profiles",
        bad.len(),
    );
    (!bad.is_empty()).then(|| Finding {
        reason: reason.into(),
        detail: bad.join(", "),
    })
}

fn host_namespaces(_meta: &Value, spec: &Value) -> Option<Finding> {
    let on: Vec<String> = ["hostNetwork", "hostPID", "hostIPC"]
        .into_iter()
        .filter(|k| spec.get(*k).and_then(Value::as_bool) == Some(true))
        .map(|k| format!("{k}=true"))
        .collect();
    finding_if(!on.is_empty(), "host namespaces", on.join(", "))
}

fn host_ports(_meta: &Value, spec: &Value) -> Option<Finding> {
    let mut ports = BTreeSet::new();
    let bad = bad_containers(spec, |c| {
        let mut uses = false;
        for p in c
            .get("ports")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let port = p.get("hostPort").and_then(Value::as_i64).unwrap_or(0);
            if port != 0 {
                uses = true;
                ports.insert(port.to_string());
            }
        }
        uses
    });
    if bad.is_empty() {
        return None;
    }
    let ports: Vec<String> = ports.into_iter().collect();
    let what = plural("hostPort", "hostPorts", ports.len());
    let detail = uses(containers_named(&bad), bad.len(), what, &ports.join(", "));
    finding("hostPort", detail)
}

/// Probes and lifecycle handlers that name a host (1.34+).
fn host_probes(_meta: &Value, spec: &Value) -> Option<Finding> {
    let mut hosts = BTreeSet::new();
    let mut bad = BTreeSet::new();
    for c in containers(spec) {
        let handlers = ["livenessProbe", "readinessProbe", "startupProbe"]
            .iter()
            .filter_map(|p| c.get(*p))
            .chain(
                ["postStart", "preStop"]
                    .iter()
                    .filter_map(|h| c.get("lifecycle").and_then(|l| l.get(*h))),
            );
        for h in handlers {
            for kind in ["httpGet", "tcpSocket"] {
                let host = h.pointer(&format!("/{kind}/host")).and_then(Value::as_str);
                if let Some(host) = host.filter(|s| !s.is_empty()) {
                    hosts.insert(host.to_string());
                    bad.insert(name(c));
                }
            }
        }
    }
    if bad.is_empty() {
        return None;
    }
    let bad: Vec<String> = bad.into_iter().collect();
    let what = plural(
        "probe or lifecycle host",
        "probe or lifecycle hosts",
        hosts.len(),
    );
    let detail = uses(containers_named(&bad), bad.len(), what, &join_quote(&hosts));
    finding("probe or lifecycle host", detail)
}

fn privileged(_meta: &Value, spec: &Value) -> Option<Finding> {
    let bad = bad_containers(spec, |c| {
        sc(c, "privileged").and_then(Value::as_bool) == Some(true)
    });
    let detail = format!(
        "{} must not set securityContext.privileged=true",
        containers_named(&bad)
    );
    finding_if(!bad.is_empty(), "privileged", detail)
}

fn proc_mount(_meta: &Value, spec: &Value) -> Option<Finding> {
    let mut types = BTreeSet::new();
    let bad = bad_containers(spec, |c| match sc(c, "procMount").and_then(Value::as_str) {
        Some(t) if t != "Default" => {
            types.insert(t.to_string());
            true
        }
        _ => false,
    });
    let detail = format!(
        "{} must not set securityContext.procMount to {}",
        containers_named(&bad),
        join_quote(&types)
    );
    finding_if(!bad.is_empty(), "procMount", detail)
}

/// Which SELinux options a securityContext sets that baseline forbids.
#[derive(Default)]
struct SeLinuxFindings {
    types: BTreeSet<String>,
    user: bool,
    role: bool,
}

impl SeLinuxFindings {
    /// True when `opts` is allowed.
    fn check(&mut self, opts: &Value) -> bool {
        let field = |k: &str| opts.get(k).and_then(Value::as_str).unwrap_or("");
        let t = field("type");
        let mut ok = true;
        if !matches!(
            t,
            "" | "container_t" | "container_init_t" | "container_kvm_t"
        ) {
            self.types.insert(t.to_string());
            ok = false;
        }
        if !field("user").is_empty() {
            self.user = true;
            ok = false;
        }
        if !field("role").is_empty() {
            self.role = true;
            ok = false;
        }
        ok
    }
}

fn se_linux(_meta: &Value, spec: &Value) -> Option<Finding> {
    let mut found = SeLinuxFindings::default();
    let mut setters = Vec::new();
    if let Some(opts) = pod_sc(spec, "seLinuxOptions") {
        if !found.check(opts) {
            setters.push("pod".to_string());
        }
    }
    let bad = bad_containers(spec, |c| {
        sc(c, "seLinuxOptions").is_some_and(|o| !found.check(o))
    });
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    if setters.is_empty() {
        return None;
    }
    // As upstream words it: user and role are named only beside a forbidden type.
    let mut data = Vec::new();
    if !found.types.is_empty() {
        let word = plural("type", "types", found.types.len());
        data.push(format!("{word} {}", join_quote(&found.types)));
        if found.user {
            data.push("user may not be set".to_string());
        }
        if found.role {
            data.push("role may not be set".to_string());
        }
    }
    let detail = format!(
        "{} set forbidden securityContext.seLinuxOptions: {}",
        setters.join(" and "),
        data.join("; ")
    );
    finding("seLinuxOptions", detail)
}

fn sysctls(_meta: &Value, spec: &Value) -> Option<Finding> {
    const SAFE: &[&str] = &[
        "kernel.shm_rmid_forced",
        "net.ipv4.ip_local_port_range",
        "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range",
        "net.ipv4.ip_unprivileged_port_start",
    ];
    let bad: Vec<&str> = pod_sc(spec, "sysctls")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|s| s.get("name").and_then(Value::as_str))
        .filter(|n| !SAFE.contains(n))
        .collect();
    finding_if(!bad.is_empty(), "forbidden sysctls", bad.join(", "))
}

fn windows_host_process(_meta: &Value, spec: &Value) -> Option<Finding> {
    let host_process =
        |opts: Option<&Value>| opts.and_then(|o| o.get("hostProcess")?.as_bool()) == Some(true);
    let mut setters = Vec::new();
    if host_process(pod_sc(spec, "windowsOptions")) {
        setters.push("pod".to_string());
    }
    let bad = bad_containers(spec, |c| host_process(sc(c, "windowsOptions")));
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    let detail = format!(
        "{} must not set securityContext.windowsOptions.hostProcess=true",
        setters.join(" and ")
    );
    finding_if(!setters.is_empty(), "hostProcess", detail)
}

/// Capabilities a baseline container may add.
const DEFAULT_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

fn capability_list<'a>(c: &'a Value, which: &str) -> impl Iterator<Item = &'a str> {
    sc(c, "capabilities")
        .and_then(|caps| caps.get(which))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
}

/// Containers adding a capability `allowed` refuses, and those capabilities.
fn adding(spec: &Value, allowed: impl Fn(&str) -> bool) -> (Vec<String>, BTreeSet<String>) {
    let mut caps = BTreeSet::new();
    let bad = bad_containers(spec, |c| {
        let mut any = false;
        for cap in capability_list(c, "add").filter(|cap| !allowed(cap)) {
            caps.insert(cap.to_string());
            any = true;
        }
        any
    });
    (bad, caps)
}

fn capabilities_baseline(_meta: &Value, spec: &Value) -> Option<Finding> {
    let (bad, caps) = adding(spec, |cap| DEFAULT_CAPABILITIES.contains(&cap));
    let detail = format!(
        "{} must not include {} in securityContext.capabilities.add",
        containers_named(&bad),
        join_quote(&caps)
    );
    finding_if(!bad.is_empty(), "non-default capabilities", detail)
}

fn host_path_volumes(_meta: &Value, spec: &Value) -> Option<Finding> {
    let bad: Vec<String> = volumes(spec)
        .filter(|v| v.get("hostPath").is_some_and(|h| !h.is_null()))
        .map(name)
        .collect();
    let word = plural("volume", "volumes", bad.len());
    let detail = format!("{word} {}", join_quote(&bad));
    finding_if(!bad.is_empty(), "hostPath volumes", detail)
}

fn volumes(spec: &Value) -> impl Iterator<Item = &Value> {
    spec.get("volumes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
}

/// The seccomp profile types restricted allows, and baseline when one is set.
fn valid_seccomp(t: &str) -> bool {
    t == "RuntimeDefault" || t == "Localhost"
}

fn seccomp_type(profile: &Value) -> &str {
    profile.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Who sets a forbidden seccomp profile (pod, containers) and which types; containers
/// that set none while the pod sets no valid one.
fn seccomp_findings(spec: &Value) -> (Vec<String>, BTreeSet<String>, Vec<String>) {
    let mut setters = Vec::new();
    let mut types = BTreeSet::new();
    let mut pod_valid = false;
    if let Some(p) = pod_sc(spec, "seccompProfile") {
        if valid_seccomp(seccomp_type(p)) {
            pod_valid = true;
        } else {
            setters.push("pod".to_string());
            types.insert(seccomp_type(p).to_string());
        }
    }
    let mut unset = Vec::new();
    let bad = bad_containers(spec, |c| match sc(c, "seccompProfile") {
        Some(p) if !valid_seccomp(seccomp_type(p)) => {
            types.insert(seccomp_type(p).to_string());
            true
        }
        Some(_) => false,
        None => {
            if !pod_valid {
                unset.push(name(c));
            }
            false
        }
    });
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    (setters, types, unset)
}

fn seccomp_explicit(setters: &[String], types: &BTreeSet<String>) -> Option<Finding> {
    let detail = format!(
        "{} must not set securityContext.seccompProfile.type to {}",
        setters.join(" and "),
        join_quote(types)
    );
    finding_if(!setters.is_empty(), "seccompProfile", detail)
}

fn seccomp_baseline(_meta: &Value, spec: &Value) -> Option<Finding> {
    let (setters, types, _) = seccomp_findings(spec);
    seccomp_explicit(&setters, &types)
}

fn seccomp_restricted(_meta: &Value, spec: &Value) -> Option<Finding> {
    let (setters, types, unset) = seccomp_findings(spec);
    if let Some(f) = seccomp_explicit(&setters, &types) {
        return Some(f);
    }
    let detail = format!(
        "pod or {} must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\"",
        containers_named(&unset)
    );
    finding_if(!unset.is_empty(), "seccompProfile", detail)
}

fn allow_privilege_escalation(_meta: &Value, spec: &Value) -> Option<Finding> {
    let bad = bad_containers(spec, |c| {
        sc(c, "allowPrivilegeEscalation").and_then(Value::as_bool) != Some(false)
    });
    let detail = format!(
        "{} must set securityContext.allowPrivilegeEscalation=false",
        containers_named(&bad)
    );
    finding_if(!bad.is_empty(), "allowPrivilegeEscalation != false", detail)
}

fn capabilities_restricted(_meta: &Value, spec: &Value) -> Option<Finding> {
    let missing_drop = bad_containers(spec, |c| !capability_list(c, "drop").any(|d| d == "ALL"));
    let (adding, caps) = adding(spec, |cap| cap == "NET_BIND_SERVICE");
    let mut details = Vec::new();
    if !missing_drop.is_empty() {
        details.push(format!(
            "{} must set securityContext.capabilities.drop=[\"ALL\"]",
            containers_named(&missing_drop)
        ));
    }
    if !adding.is_empty() {
        details.push(format!(
            "{} must not include {} in securityContext.capabilities.add",
            containers_named(&adding),
            join_quote(&caps)
        ));
    }
    finding_if(
        !details.is_empty(),
        "unrestricted capabilities",
        details.join("; "),
    )
}

/// Volume sources restricted allows.
const RESTRICTED_VOLUME_SOURCES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

fn restricted_volumes(_meta: &Value, spec: &Value) -> Option<Finding> {
    let mut types = BTreeSet::new();
    let mut bad = Vec::new();
    for v in volumes(spec) {
        let sources: Vec<&String> = v
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(k, val)| k.as_str() != "name" && !val.is_null())
            .map(|(k, _)| k)
            .collect();
        if sources
            .iter()
            .any(|s| RESTRICTED_VOLUME_SOURCES.contains(&s.as_str()))
        {
            continue;
        }
        bad.push(name(v));
        let source = sources.first().map(|s| s.as_str()).unwrap_or("unknown");
        types.insert(source.to_string());
    }
    let volumes = format!(
        "{} {}",
        plural("volume", "volumes", bad.len()),
        join_quote(&bad)
    );
    let what = plural(
        "restricted volume type",
        "restricted volume types",
        types.len(),
    );
    let detail = uses(volumes, bad.len(), what, &join_quote(&types));
    finding_if(!bad.is_empty(), "restricted volume types", detail)
}

fn run_as_non_root(_meta: &Value, spec: &Value) -> Option<Finding> {
    let mut setters = Vec::new();
    let pod = pod_sc(spec, "runAsNonRoot").and_then(Value::as_bool);
    if pod == Some(false) {
        setters.push("pod".to_string());
    }
    let explicit = bad_containers(spec, |c| {
        sc(c, "runAsNonRoot").and_then(Value::as_bool) == Some(false)
    });
    let implicit = bad_containers(spec, |c| {
        sc(c, "runAsNonRoot").is_none() && pod != Some(true)
    });
    if !explicit.is_empty() {
        setters.push(containers_named(&explicit));
    }
    let reason = "runAsNonRoot != true";
    if !setters.is_empty() {
        let detail = format!(
            "{} must not set securityContext.runAsNonRoot=false",
            setters.join(" and ")
        );
        return finding(reason, detail);
    }
    let detail = format!(
        "pod or {} must set securityContext.runAsNonRoot=true",
        containers_named(&implicit)
    );
    finding_if(!implicit.is_empty(), reason, detail)
}

fn run_as_user(_meta: &Value, spec: &Value) -> Option<Finding> {
    let mut setters = Vec::new();
    if pod_sc(spec, "runAsUser").and_then(Value::as_i64) == Some(0) {
        setters.push("pod".to_string());
    }
    let bad = bad_containers(spec, |c| {
        sc(c, "runAsUser").and_then(Value::as_i64) == Some(0)
    });
    if !bad.is_empty() {
        setters.push(containers_named(&bad));
    }
    let detail = format!("{} must not set runAsUser=0", setters.join(" and "));
    finding_if(!setters.is_empty(), "runAsUser=0", detail)
}
