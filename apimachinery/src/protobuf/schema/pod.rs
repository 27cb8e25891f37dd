//! k8s.io/api/core/v1: Pod, PodTemplateSpec and the types they contain.

use super::core::LOCAL_OBJECT_REFERENCE;
use super::meta::OBJECT_META;
use super::Kind::*;
use super::{list, ptr, val, Message};

pub static POD: Message = Message {
    name: "Pod",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(2, "spec", Msg(&POD_SPEC)),
        val(3, "status", Msg(&POD_STATUS)),
    ],
};

pub static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[
        val(1, "metadata", Msg(&OBJECT_META)),
        val(2, "spec", Msg(&POD_SPEC)),
    ],
};

static POD_STATUS: Message = Message {
    name: "PodStatus",
    fields: &[
        val(1, "phase", Str),
        val(3, "message", Str),
        val(4, "reason", Str),
        val(5, "hostIP", Str),
        val(6, "podIP", Str),
        list(12, "podIPs", Msg(&POD_IP)),
        ptr(7, "startTime", Time),
    ],
};

static POD_IP: Message = Message {
    name: "PodIP",
    fields: &[val(1, "ip", Str)],
};

static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        list(1, "volumes", Msg(&VOLUME)),
        list(20, "initContainers", Msg(&CONTAINER)),
        list(2, "containers", Msg(&CONTAINER)),
        val(3, "restartPolicy", Str),
        ptr(4, "terminationGracePeriodSeconds", Int64),
        ptr(5, "activeDeadlineSeconds", Int64),
        val(6, "dnsPolicy", Str),
        val(7, "nodeSelector", StringMap),
        val(8, "serviceAccountName", Str),
        val(9, "serviceAccount", Str),
        ptr(21, "automountServiceAccountToken", Bool),
        val(10, "nodeName", Str),
        val(11, "hostNetwork", Bool),
        val(12, "hostPID", Bool),
        val(13, "hostIPC", Bool),
        ptr(27, "shareProcessNamespace", Bool),
        ptr(14, "securityContext", Msg(&POD_SECURITY_CONTEXT)),
        list(15, "imagePullSecrets", Msg(&LOCAL_OBJECT_REFERENCE)),
        val(16, "hostname", Str),
        val(17, "subdomain", Str),
        val(19, "schedulerName", Str),
        list(22, "tolerations", Msg(&TOLERATION)),
        list(23, "hostAliases", Msg(&HOST_ALIAS)),
        val(24, "priorityClassName", Str),
        ptr(25, "priority", Int32),
        ptr(30, "enableServiceLinks", Bool),
        ptr(31, "preemptionPolicy", Str),
        ptr(35, "setHostnameAsFQDN", Bool),
    ],
};

static POD_SECURITY_CONTEXT: Message = Message {
    name: "PodSecurityContext",
    fields: &[
        ptr(2, "runAsUser", Int64),
        ptr(6, "runAsGroup", Int64),
        ptr(3, "runAsNonRoot", Bool),
        list(4, "supplementalGroups", Int64),
        ptr(5, "fsGroup", Int64),
    ],
};

static TOLERATION: Message = Message {
    name: "Toleration",
    fields: &[
        val(1, "key", Str),
        val(2, "operator", Str),
        val(3, "value", Str),
        val(4, "effect", Str),
        ptr(5, "tolerationSeconds", Int64),
    ],
};

static HOST_ALIAS: Message = Message {
    name: "HostAlias",
    fields: &[val(1, "ip", Str), list(2, "hostnames", Str)],
};

static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        val(1, "name", Str),
        val(2, "image", Str),
        list(3, "command", Str),
        list(4, "args", Str),
        val(5, "workingDir", Str),
        list(6, "ports", Msg(&CONTAINER_PORT)),
        list(19, "envFrom", Msg(&ENV_FROM_SOURCE)),
        list(7, "env", Msg(&ENV_VAR)),
        val(8, "resources", Msg(&RESOURCE_REQUIREMENTS)),
        list(9, "volumeMounts", Msg(&VOLUME_MOUNT)),
        ptr(10, "livenessProbe", Msg(&PROBE)),
        ptr(11, "readinessProbe", Msg(&PROBE)),
        ptr(22, "startupProbe", Msg(&PROBE)),
        ptr(12, "lifecycle", Msg(&LIFECYCLE)),
        val(13, "terminationMessagePath", Str),
        val(20, "terminationMessagePolicy", Str),
        val(14, "imagePullPolicy", Str),
        ptr(15, "securityContext", Msg(&SECURITY_CONTEXT)),
        val(16, "stdin", Bool),
        val(17, "stdinOnce", Bool),
        val(18, "tty", Bool),
    ],
};

static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        val(1, "name", Str),
        val(2, "hostPort", Int32),
        val(3, "containerPort", Int32),
        val(4, "protocol", Str),
        val(5, "hostIP", Str),
    ],
};

static ENV_FROM_SOURCE: Message = Message {
    name: "EnvFromSource",
    fields: &[
        val(1, "prefix", Str),
        ptr(2, "configMapRef", Msg(&CONFIG_MAP_ENV_SOURCE)),
        ptr(3, "secretRef", Msg(&SECRET_ENV_SOURCE)),
    ],
};

static CONFIG_MAP_ENV_SOURCE: Message = Message {
    name: "ConfigMapEnvSource",
    fields: &[
        val(1, "localObjectReference", Inline(&LOCAL_OBJECT_REFERENCE)),
        ptr(2, "optional", Bool),
    ],
};

static SECRET_ENV_SOURCE: Message = Message {
    name: "SecretEnvSource",
    fields: &[
        val(1, "localObjectReference", Inline(&LOCAL_OBJECT_REFERENCE)),
        ptr(2, "optional", Bool),
    ],
};

static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[
        val(1, "name", Str),
        val(2, "value", Str),
        ptr(3, "valueFrom", Msg(&ENV_VAR_SOURCE)),
    ],
};

static ENV_VAR_SOURCE: Message = Message {
    name: "EnvVarSource",
    fields: &[
        ptr(1, "fieldRef", Msg(&OBJECT_FIELD_SELECTOR)),
        ptr(2, "resourceFieldRef", Msg(&RESOURCE_FIELD_SELECTOR)),
        ptr(3, "configMapKeyRef", Msg(&CONFIG_MAP_KEY_SELECTOR)),
        ptr(4, "secretKeyRef", Msg(&SECRET_KEY_SELECTOR)),
    ],
};

static OBJECT_FIELD_SELECTOR: Message = Message {
    name: "ObjectFieldSelector",
    fields: &[val(1, "apiVersion", Str), val(2, "fieldPath", Str)],
};

static RESOURCE_FIELD_SELECTOR: Message = Message {
    name: "ResourceFieldSelector",
    fields: &[
        val(1, "containerName", Str),
        val(2, "resource", Str),
        val(3, "divisor", Quantity),
    ],
};

static CONFIG_MAP_KEY_SELECTOR: Message = Message {
    name: "ConfigMapKeySelector",
    fields: &[
        val(1, "localObjectReference", Inline(&LOCAL_OBJECT_REFERENCE)),
        val(2, "key", Str),
        ptr(3, "optional", Bool),
    ],
};

static SECRET_KEY_SELECTOR: Message = Message {
    name: "SecretKeySelector",
    fields: &[
        val(1, "localObjectReference", Inline(&LOCAL_OBJECT_REFERENCE)),
        val(2, "key", Str),
        ptr(3, "optional", Bool),
    ],
};

static RESOURCE_REQUIREMENTS: Message = Message {
    name: "ResourceRequirements",
    fields: &[
        val(1, "limits", QuantityMap),
        val(2, "requests", QuantityMap),
    ],
};

static VOLUME_MOUNT: Message = Message {
    name: "VolumeMount",
    fields: &[
        val(1, "name", Str),
        val(2, "readOnly", Bool),
        val(3, "mountPath", Str),
        val(4, "subPath", Str),
        ptr(5, "mountPropagation", Str),
        val(6, "subPathExpr", Str),
    ],
};

static PROBE: Message = Message {
    name: "Probe",
    fields: &[
        val(1, "handler", Inline(&PROBE_HANDLER)),
        val(2, "initialDelaySeconds", Int32),
        val(3, "timeoutSeconds", Int32),
        val(4, "periodSeconds", Int32),
        val(5, "successThreshold", Int32),
        val(6, "failureThreshold", Int32),
        ptr(7, "terminationGracePeriodSeconds", Int64),
    ],
};

/// ProbeHandler (called Handler before v1.23; same numbers), also used by Lifecycle hooks.
static PROBE_HANDLER: Message = Message {
    name: "ProbeHandler",
    fields: &[
        ptr(1, "exec", Msg(&EXEC_ACTION)),
        ptr(2, "httpGet", Msg(&HTTP_GET_ACTION)),
        ptr(3, "tcpSocket", Msg(&TCP_SOCKET_ACTION)),
    ],
};

static LIFECYCLE: Message = Message {
    name: "Lifecycle",
    fields: &[
        ptr(1, "postStart", Msg(&PROBE_HANDLER)),
        ptr(2, "preStop", Msg(&PROBE_HANDLER)),
    ],
};

static EXEC_ACTION: Message = Message {
    name: "ExecAction",
    fields: &[list(1, "command", Str)],
};

static HTTP_GET_ACTION: Message = Message {
    name: "HTTPGetAction",
    fields: &[
        val(1, "path", Str),
        val(2, "port", IntOrString),
        val(3, "host", Str),
        val(4, "scheme", Str),
        list(5, "httpHeaders", Msg(&HTTP_HEADER)),
    ],
};

static HTTP_HEADER: Message = Message {
    name: "HTTPHeader",
    fields: &[val(1, "name", Str), val(2, "value", Str)],
};

static TCP_SOCKET_ACTION: Message = Message {
    name: "TCPSocketAction",
    fields: &[val(1, "port", IntOrString), val(2, "host", Str)],
};

static SECURITY_CONTEXT: Message = Message {
    name: "SecurityContext",
    fields: &[
        ptr(1, "capabilities", Msg(&CAPABILITIES)),
        ptr(2, "privileged", Bool),
        ptr(4, "runAsUser", Int64),
        ptr(8, "runAsGroup", Int64),
        ptr(5, "runAsNonRoot", Bool),
        ptr(6, "readOnlyRootFilesystem", Bool),
        ptr(7, "allowPrivilegeEscalation", Bool),
    ],
};

static CAPABILITIES: Message = Message {
    name: "Capabilities",
    fields: &[list(1, "add", Str), list(2, "drop", Str)],
};

static VOLUME: Message = Message {
    name: "Volume",
    fields: &[
        val(1, "name", Str),
        val(2, "volumeSource", Inline(&VOLUME_SOURCE)),
    ],
};

static VOLUME_SOURCE: Message = Message {
    name: "VolumeSource",
    fields: &[
        ptr(1, "hostPath", Msg(&HOST_PATH_VOLUME_SOURCE)),
        ptr(2, "emptyDir", Msg(&EMPTY_DIR_VOLUME_SOURCE)),
        ptr(6, "secret", Msg(&SECRET_VOLUME_SOURCE)),
        ptr(10, "persistentVolumeClaim", Msg(&PVC_VOLUME_SOURCE)),
        ptr(19, "configMap", Msg(&CONFIG_MAP_VOLUME_SOURCE)),
    ],
};

static HOST_PATH_VOLUME_SOURCE: Message = Message {
    name: "HostPathVolumeSource",
    fields: &[val(1, "path", Str), ptr(2, "type", Str)],
};

static EMPTY_DIR_VOLUME_SOURCE: Message = Message {
    name: "EmptyDirVolumeSource",
    fields: &[val(1, "medium", Str), ptr(2, "sizeLimit", Quantity)],
};

static SECRET_VOLUME_SOURCE: Message = Message {
    name: "SecretVolumeSource",
    fields: &[
        val(1, "secretName", Str),
        list(2, "items", Msg(&KEY_TO_PATH)),
        ptr(3, "defaultMode", Int32),
        ptr(4, "optional", Bool),
    ],
};

static CONFIG_MAP_VOLUME_SOURCE: Message = Message {
    name: "ConfigMapVolumeSource",
    fields: &[
        val(1, "localObjectReference", Inline(&LOCAL_OBJECT_REFERENCE)),
        list(2, "items", Msg(&KEY_TO_PATH)),
        ptr(3, "defaultMode", Int32),
        ptr(4, "optional", Bool),
    ],
};

static PVC_VOLUME_SOURCE: Message = Message {
    name: "PersistentVolumeClaimVolumeSource",
    fields: &[val(1, "claimName", Str), val(2, "readOnly", Bool)],
};

static KEY_TO_PATH: Message = Message {
    name: "KeyToPath",
    fields: &[
        val(1, "key", Str),
        val(2, "path", Str),
        ptr(3, "mode", Int32),
    ],
};
