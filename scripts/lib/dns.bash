# Cluster DNS for scripts/up: the kube-dns Service at the conventional ClusterIP, and
# keelson-dns pods behind it: a DaemonSet in kube-system, one replica on every node (critical,
# dnsPolicy Default), so a node failing takes only its own replica out of kube-dns (its pod turns
# not ready) and the others answer. A Deployment of 2, as kubeadm's CoreDNS, would put both on
# the first node to join. Sourced after scripts/lib/keelson.bash.
source "$root/scripts/lib/dns-image.bash"

cluster_dns_ip=${KEELSON_CLUSTER_DNS:-10.96.0.10}

# The Service first, before any other Service can be given its ClusterIP; its endpoints are the
# DNS pods' (the endpointslice controller's, ready ones only).
create_cluster_dns_service() {
  in_ns kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: KeelsonDNS}
  annotations: {prometheus.io/port: "8080", prometheus.io/scrape: "true"}
spec:
  clusterIP: $cluster_dns_ip
  selector: {k8s-app: kube-dns}
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
  - {name: metrics, port: 8080, protocol: TCP, targetPort: 8080}
YAML
  # The EndpointSlice an older scripts/up wrote for its keelson-dns process, if any.
  in_ns kubectl -n kube-system delete endpointslice kube-dns-keelson --ignore-not-found >/dev/null
}

# The DaemonSet (image: this machine's keelson-dns, built into the local registry by
# scripts/images/build on each node). Names outside the cluster go to the node's resolvers
# (dnsPolicy Default: the pod's resolv.conf is the node's, as CoreDNS's
# `forward . /etc/resolv.conf`), or to KEELSON_DNS_UPSTREAM (addresses, comma separated; set and
# empty: refused).
deploy_cluster_dns() {
  local upstream=${KEELSON_DNS_UPSTREAM-/etc/resolv.conf} args="" image
  image=$(dns_image "$bin/keelson-dns")
  [ -n "$upstream" ] && args=", --upstream, $upstream"
  in_ns kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: kube-dns, namespace: kube-system}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: keelson-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns}
spec:
  selector: {matchLabels: {k8s-app: kube-dns}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 1}}
  template:
    metadata:
      labels: {k8s-app: kube-dns}
    spec:
      serviceAccountName: kube-dns
      priorityClassName: system-cluster-critical
      dnsPolicy: Default
      tolerations:
      - {key: CriticalAddonsOnly, operator: Exists}
      - {key: node-role.kubernetes.io/control-plane, effect: NoSchedule}
      containers:
      - name: dns
        image: $image
        args: [--listen, "0.0.0.0:53", --health-address, 0.0.0.0, --health-port, "8080"$args]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        - {name: metrics, containerPort: 8080, protocol: TCP}
        resources:
          requests: {cpu: 100m, memory: 70Mi}
          limits: {memory: 170Mi}
        readinessProbe:
          httpGet: {path: /readyz, port: 8080}
          periodSeconds: 2
        livenessProbe:
          httpGet: {path: /healthz, port: 8080}
          initialDelaySeconds: 10
          periodSeconds: 10
          failureThreshold: 5
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities: {add: [NET_BIND_SERVICE], drop: [ALL]}
YAML
}

# Waits until a DNS pod answers (scripts/up on a machine that is also a node).
wait_cluster_dns() {
  in_ns kubectl -n kube-system rollout status daemonset/keelson-dns --timeout=180s >/dev/null ||
    { echo "cluster DNS did not come up; kubectl -n kube-system get pods -l k8s-app=kube-dns" >&2; exit 1; }
}
