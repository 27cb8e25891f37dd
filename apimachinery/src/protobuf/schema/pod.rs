//! k8s.io/api/core/v1: Pod, PodTemplateSpec and the types they contain.

use super::core::LOCAL_OBJECT_REFERENCE;
use super::meta::OBJECT_META;

message! { pub POD = "Pod" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(POD_SPEC), 3 status Msg(POD_STATUS),
}}

message! { pub POD_TEMPLATE_SPEC = "PodTemplateSpec" {
    1 metadata Msg(OBJECT_META), 2 spec Msg(POD_SPEC),
}}

message! { POD_STATUS = "PodStatus" {
    1 phase, 3 message, 4 reason, 5 hostIP, 6 podIP, list 12 podIPs Msg(POD_IP),
    ptr 7 startTime Time,
}}

message! { POD_IP = "PodIP" { 1 ip }}

message! { POD_SPEC = "PodSpec" {
    list 1 volumes Msg(VOLUME), list 20 initContainers Msg(CONTAINER),
    list 2 containers Msg(CONTAINER), 3 restartPolicy, ptr 4 terminationGracePeriodSeconds Int64,
    ptr 5 activeDeadlineSeconds Int64, 6 dnsPolicy, 7 nodeSelector StringMap, 8 serviceAccountName,
    9 serviceAccount, ptr 21 automountServiceAccountToken Bool, 10 nodeName, 11 hostNetwork Bool,
    12 hostPID Bool, 13 hostIPC Bool, ptr 27 shareProcessNamespace Bool,
    ptr 14 securityContext Msg(POD_SECURITY_CONTEXT),
    list 15 imagePullSecrets Msg(LOCAL_OBJECT_REFERENCE), 16 hostname, 17 subdomain,
    19 schedulerName, list 22 tolerations Msg(TOLERATION), list 23 hostAliases Msg(HOST_ALIAS),
    24 priorityClassName, ptr 25 priority Int32, ptr 30 enableServiceLinks Bool,
    ptr 31 preemptionPolicy, ptr 35 setHostnameAsFQDN Bool,
}}

message! { POD_SECURITY_CONTEXT = "PodSecurityContext" {
    ptr 2 runAsUser Int64, ptr 6 runAsGroup Int64, ptr 3 runAsNonRoot Bool,
    list 4 supplementalGroups Int64, ptr 5 fsGroup Int64,
}}

message! { TOLERATION = "Toleration" {
    1 key, 2 operator, 3 value, 4 effect, ptr 5 tolerationSeconds Int64,
}}

message! { HOST_ALIAS = "HostAlias" { 1 ip, list 2 hostnames }}

message! { CONTAINER = "Container" {
    1 name, 2 image, list 3 command, list 4 args, 5 workingDir, list 6 ports Msg(CONTAINER_PORT),
    list 19 envFrom Msg(ENV_FROM_SOURCE), list 7 env Msg(ENV_VAR),
    8 resources Msg(RESOURCE_REQUIREMENTS), list 9 volumeMounts Msg(VOLUME_MOUNT),
    ptr 10 livenessProbe Msg(PROBE), ptr 11 readinessProbe Msg(PROBE),
    ptr 22 startupProbe Msg(PROBE), ptr 12 lifecycle Msg(LIFECYCLE), 13 terminationMessagePath,
    20 terminationMessagePolicy, 14 imagePullPolicy, ptr 15 securityContext Msg(SECURITY_CONTEXT),
    16 stdin Bool, 17 stdinOnce Bool, 18 tty Bool,
}}

message! { CONTAINER_PORT = "ContainerPort" {
    1 name, 2 hostPort Int32, 3 containerPort Int32, 4 protocol, 5 hostIP,
}}

message! { ENV_FROM_SOURCE = "EnvFromSource" {
    1 prefix, ptr 2 configMapRef Msg(CONFIG_MAP_ENV_SOURCE), ptr 3 secretRef Msg(SECRET_ENV_SOURCE),
}}

message! { CONFIG_MAP_ENV_SOURCE = "ConfigMapEnvSource" {
    1 localObjectReference Inline(LOCAL_OBJECT_REFERENCE), ptr 2 optional Bool,
}}

message! { SECRET_ENV_SOURCE = "SecretEnvSource" {
    1 localObjectReference Inline(LOCAL_OBJECT_REFERENCE), ptr 2 optional Bool,
}}

message! { ENV_VAR = "EnvVar" { 1 name, 2 value, ptr 3 valueFrom Msg(ENV_VAR_SOURCE) }}

message! { ENV_VAR_SOURCE = "EnvVarSource" {
    ptr 1 fieldRef Msg(OBJECT_FIELD_SELECTOR), ptr 2 resourceFieldRef Msg(RESOURCE_FIELD_SELECTOR),
    ptr 3 configMapKeyRef Msg(CONFIG_MAP_KEY_SELECTOR), ptr 4 secretKeyRef Msg(SECRET_KEY_SELECTOR),
}}

message! { OBJECT_FIELD_SELECTOR = "ObjectFieldSelector" { 1 apiVersion, 2 fieldPath }}

message! { RESOURCE_FIELD_SELECTOR = "ResourceFieldSelector" {
    1 containerName, 2 resource, 3 divisor Quantity,
}}

message! { CONFIG_MAP_KEY_SELECTOR = "ConfigMapKeySelector" {
    1 localObjectReference Inline(LOCAL_OBJECT_REFERENCE), 2 key, ptr 3 optional Bool,
}}

message! { SECRET_KEY_SELECTOR = "SecretKeySelector" {
    1 localObjectReference Inline(LOCAL_OBJECT_REFERENCE), 2 key, ptr 3 optional Bool,
}}

message! { RESOURCE_REQUIREMENTS = "ResourceRequirements" {
    1 limits QuantityMap, 2 requests QuantityMap,
}}

message! { VOLUME_MOUNT = "VolumeMount" {
    1 name, 2 readOnly Bool, 3 mountPath, 4 subPath, ptr 5 mountPropagation, 6 subPathExpr,
}}

message! { PROBE = "Probe" {
    1 handler Inline(PROBE_HANDLER), 2 initialDelaySeconds Int32, 3 timeoutSeconds Int32,
    4 periodSeconds Int32, 5 successThreshold Int32, 6 failureThreshold Int32,
    ptr 7 terminationGracePeriodSeconds Int64,
}}

// ProbeHandler (called Handler before v1.23; same numbers), also used by Lifecycle hooks.
message! { PROBE_HANDLER = "ProbeHandler" {
    ptr 1 exec Msg(EXEC_ACTION), ptr 2 httpGet Msg(HTTP_GET_ACTION),
    ptr 3 tcpSocket Msg(TCP_SOCKET_ACTION),
}}

message! { LIFECYCLE = "Lifecycle" {
    ptr 1 postStart Msg(PROBE_HANDLER), ptr 2 preStop Msg(PROBE_HANDLER),
}}

message! { EXEC_ACTION = "ExecAction" { list 1 command }}

message! { HTTP_GET_ACTION = "HTTPGetAction" {
    1 path, 2 port IntOrString, 3 host, 4 scheme, list 5 httpHeaders Msg(HTTP_HEADER),
}}

message! { HTTP_HEADER = "HTTPHeader" { 1 name, 2 value }}

message! { TCP_SOCKET_ACTION = "TCPSocketAction" { 1 port IntOrString, 2 host }}

message! { SECURITY_CONTEXT = "SecurityContext" {
    ptr 1 capabilities Msg(CAPABILITIES), ptr 2 privileged Bool, ptr 4 runAsUser Int64,
    ptr 8 runAsGroup Int64, ptr 5 runAsNonRoot Bool, ptr 6 readOnlyRootFilesystem Bool,
    ptr 7 allowPrivilegeEscalation Bool,
}}

message! { CAPABILITIES = "Capabilities" { list 1 add, list 2 drop }}

message! { VOLUME = "Volume" { 1 name, 2 volumeSource Inline(VOLUME_SOURCE) }}

message! { VOLUME_SOURCE = "VolumeSource" {
    ptr 1 hostPath Msg(HOST_PATH_VOLUME_SOURCE), ptr 2 emptyDir Msg(EMPTY_DIR_VOLUME_SOURCE),
    ptr 6 secret Msg(SECRET_VOLUME_SOURCE), ptr 10 persistentVolumeClaim Msg(PVC_VOLUME_SOURCE),
    ptr 19 configMap Msg(CONFIG_MAP_VOLUME_SOURCE),
}}

message! { HOST_PATH_VOLUME_SOURCE = "HostPathVolumeSource" { 1 path, ptr 2 type }}

message! { EMPTY_DIR_VOLUME_SOURCE = "EmptyDirVolumeSource" { 1 medium, ptr 2 sizeLimit Quantity }}

message! { SECRET_VOLUME_SOURCE = "SecretVolumeSource" {
    1 secretName, list 2 items Msg(KEY_TO_PATH), ptr 3 defaultMode Int32, ptr 4 optional Bool,
}}

message! { CONFIG_MAP_VOLUME_SOURCE = "ConfigMapVolumeSource" {
    1 localObjectReference Inline(LOCAL_OBJECT_REFERENCE), list 2 items Msg(KEY_TO_PATH),
    ptr 3 defaultMode Int32, ptr 4 optional Bool,
}}

message! { PVC_VOLUME_SOURCE = "PersistentVolumeClaimVolumeSource" {
    1 claimName, 2 readOnly Bool,
}}

message! { KEY_TO_PATH = "KeyToPath" { 1 key, 2 path, ptr 3 mode Int32 }}
