//! The patch metadata upstream reads from Go struct tags (`patchStrategy`, `patchMergeKey`):
//! which lists merge, by which key, and which type lies below a field. Without OpenAPI here, it
//! is a hand-written table over a few schema types; pod templates in every workload kind share
//! the `PodSpec` entries. Fields not listed behave like upstream untagged fields: maps merge
//! recursively and lists are replaced wholesale.

/// How a list field is patched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ListMerge {
    /// The patch list replaces the live list (untagged and `listType=atomic` fields).
    Replace,
    /// Elements are maps matched by this key (`patchStrategy:"merge"` + `patchMergeKey`).
    ByKey(&'static str),
    /// A set of scalars: union with the live list (`finalizers`, `podCIDRs`).
    Primitive,
}

/// Schema types that hold tagged fields somewhere below them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ty {
    Unknown,
    Object(Kind),
    ObjectMeta,
    PodTemplateSpec,
    PodSpec,
    Container,
    WorkloadSpec,
    CronJobSpec,
    JobTemplateSpec,
    ServiceSpec,
    NodeSpec,
    Status,
}

/// Kinds whose top level differs; everything else is `Other`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Pod,
    /// Deployment, ReplicaSet, DaemonSet, StatefulSet, Job, ReplicationController:
    /// `spec.template` is a PodTemplateSpec.
    Workload,
    CronJob,
    PodTemplate,
    Service,
    Node,
    ServiceAccount,
    Other,
}

/// The patch rule for one field: list strategy, and the type of the value (or list element).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    pub list: ListMerge,
    pub ty: Ty,
}

const fn field(list: ListMerge, ty: Ty) -> Field {
    Field { list, ty }
}

const PLAIN: Field = field(ListMerge::Replace, Ty::Unknown);

fn by_key(key: &'static str) -> Field {
    field(ListMerge::ByKey(key), Ty::Unknown)
}

fn of(ty: Ty) -> Field {
    field(ListMerge::Replace, ty)
}

pub(crate) fn root(kind: &str) -> Ty {
    Ty::Object(match kind {
        "Pod" => Kind::Pod,
        "Deployment"
        | "ReplicaSet"
        | "DaemonSet"
        | "StatefulSet"
        | "Job"
        | "ReplicationController" => Kind::Workload,
        "CronJob" => Kind::CronJob,
        "PodTemplate" => Kind::PodTemplate,
        "Service" => Kind::Service,
        "Node" => Kind::Node,
        "ServiceAccount" => Kind::ServiceAccount,
        _ => Kind::Other,
    })
}

/// Looks up `name` inside a value of type `ty`.
pub(crate) fn lookup(ty: Ty, name: &str) -> Field {
    match ty {
        Ty::Object(kind) => object_field(kind, name),
        Ty::ObjectMeta => match name {
            "ownerReferences" => by_key("uid"),
            "finalizers" => field(ListMerge::Primitive, Ty::Unknown),
            _ => PLAIN,
        },
        Ty::PodTemplateSpec | Ty::JobTemplateSpec => match name {
            "metadata" => of(Ty::ObjectMeta),
            "spec" if ty == Ty::PodTemplateSpec => of(Ty::PodSpec),
            "spec" => of(Ty::WorkloadSpec),
            _ => PLAIN,
        },
        Ty::PodSpec => pod_spec_field(name),
        Ty::Container => container_field(name),
        Ty::WorkloadSpec => match name {
            "template" => of(Ty::PodTemplateSpec),
            _ => PLAIN,
        },
        Ty::CronJobSpec => match name {
            "jobTemplate" => of(Ty::JobTemplateSpec),
            _ => PLAIN,
        },
        Ty::ServiceSpec => match name {
            "ports" => by_key("port"),
            _ => PLAIN,
        },
        Ty::NodeSpec => match name {
            "podCIDRs" => field(ListMerge::Primitive, Ty::Unknown),
            _ => PLAIN,
        },
        // Pod, Node, Namespace and workload statuses.
        Ty::Status => match name {
            "conditions" | "addresses" => by_key("type"),
            "podIPs" | "hostIPs" => by_key("ip"),
            _ => PLAIN,
        },
        Ty::Unknown => PLAIN,
    }
}

fn object_field(kind: Kind, name: &str) -> Field {
    match (kind, name) {
        (_, "metadata") => of(Ty::ObjectMeta),
        (_, "status") => of(Ty::Status),
        (Kind::Pod, "spec") => of(Ty::PodSpec),
        (Kind::Workload, "spec") => of(Ty::WorkloadSpec),
        (Kind::CronJob, "spec") => of(Ty::CronJobSpec),
        (Kind::PodTemplate, "template") => of(Ty::PodTemplateSpec),
        (Kind::Service, "spec") => of(Ty::ServiceSpec),
        (Kind::Node, "spec") => of(Ty::NodeSpec),
        (Kind::ServiceAccount, "secrets") => by_key("name"),
        _ => PLAIN,
    }
}

fn pod_spec_field(name: &str) -> Field {
    match name {
        "containers" | "initContainers" | "ephemeralContainers" => {
            field(ListMerge::ByKey("name"), Ty::Container)
        }
        "volumes" | "imagePullSecrets" | "schedulingGates" | "resourceClaims" => by_key("name"),
        "hostAliases" => by_key("ip"),
        "topologySpreadConstraints" => by_key("topologyKey"),
        // tolerations, readinessGates, ...: replaced.
        _ => PLAIN,
    }
}

fn container_field(name: &str) -> Field {
    match name {
        "ports" => by_key("containerPort"),
        "env" => by_key("name"),
        "volumeMounts" => by_key("mountPath"),
        "volumeDevices" => by_key("devicePath"),
        // envFrom, command, args, and resizePolicy (`listType=atomic` upstream): replaced.
        _ => PLAIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(kind: &str, path: &str) -> ListMerge {
        let f = path
            .split('.')
            .fold(of(root(kind)), |f, name| lookup(f.ty, name));
        f.list
    }

    #[test]
    fn pod_templates_share_the_pod_spec_table() {
        let by_name = ListMerge::ByKey("name");
        assert_eq!(list("Pod", "spec.containers"), by_name);
        for kind in [
            "Deployment",
            "ReplicaSet",
            "DaemonSet",
            "StatefulSet",
            "Job",
            "ReplicationController",
        ] {
            assert_eq!(
                list(kind, "spec.template.spec.containers"),
                by_name,
                "{kind}"
            );
        }
        let cron = "spec.jobTemplate.spec.template.spec.volumes";
        assert_eq!(list("CronJob", cron), by_name);
        assert_eq!(list("PodTemplate", "template.spec.initContainers"), by_name);
        let fin = "spec.template.metadata.finalizers";
        assert_eq!(list("Deployment", fin), ListMerge::Primitive);
    }

    #[test]
    fn container_and_other_fields() {
        let cases = [
            (
                "Deployment",
                "spec.template.spec.containers.env",
                ListMerge::ByKey("name"),
            ),
            (
                "Pod",
                "spec.containers.ports",
                ListMerge::ByKey("containerPort"),
            ),
            (
                "Pod",
                "spec.containers.volumeMounts",
                ListMerge::ByKey("mountPath"),
            ),
            ("Pod", "spec.containers.envFrom", ListMerge::Replace),
            ("Pod", "spec.containers.resizePolicy", ListMerge::Replace),
            ("Pod", "spec.tolerations", ListMerge::Replace),
            ("Pod", "spec.hostAliases", ListMerge::ByKey("ip")),
            ("Pod", "status.conditions", ListMerge::ByKey("type")),
            ("Service", "spec.ports", ListMerge::ByKey("port")),
            ("Node", "status.addresses", ListMerge::ByKey("type")),
            ("Node", "spec.podCIDRs", ListMerge::Primitive),
            (
                "ConfigMap",
                "metadata.ownerReferences",
                ListMerge::ByKey("uid"),
            ),
            ("ServiceAccount", "secrets", ListMerge::ByKey("name")),
            ("EndpointSlice", "endpoints", ListMerge::Replace),
            ("Ingress", "spec.rules", ListMerge::Replace),
            // A Pod's spec table does not leak into kinds with a different spec.
            ("Service", "spec.containers", ListMerge::Replace),
        ];
        for (kind, path, want) in cases {
            assert_eq!(list(kind, path), want, "{kind} {path}");
        }
    }
}
