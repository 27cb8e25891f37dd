# Cluster DNS for scripts/up: the kube-dns Service at the conventional ClusterIP, and
# keelson-dns on the node behind it. Sourced after scripts/lib/keelson.bash.

cluster_dns_ip=${KEELSON_CLUSTER_DNS:-10.96.0.10}

# The Service first, before any other Service can be given its ClusterIP. No selector: its
# EndpointSlice is written here (start_cluster_dns), not by the endpointslice controller.
create_cluster_dns_service() {
  in_ns kubectl apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels: {k8s-app: kube-dns, kubernetes.io/name: KeelsonDNS}
spec:
  clusterIP: $cluster_dns_ip
  ports:
  - {name: dns, port: 53, protocol: UDP, targetPort: 53}
  - {name: dns-tcp, port: 53, protocol: TCP, targetPort: 53}
YAML
}

# The first address of a pod CIDR: the pod bridge's gateway (the agent's CNI config), which
# every pod on the node routes through.
pod_cidr_gateway() {
  local a b c d n
  IFS=. read -r a b c d <<<"${1%/*}"
  n=$(((a << 24 | b << 16 | c << 8 | d) + 1))
  echo "$((n >> 24 & 255)).$((n >> 16 & 255)).$((n >> 8 & 255)).$((n & 255))"
}

# keelson-dns as system:kube-dns, answering on the node's bridge gateway (pods reach it there;
# the address needs no bridge yet), and the Service's EndpointSlice pointing at it, so the
# proxy DNATs $cluster_dns_ip:53 to it. Argument: the node's name.
start_cluster_dns() {
  local node=$1 cidr="" gateway
  for _ in $(seq 1 300); do
    cidr=$(in_ns kubectl get node "$node" -o jsonpath='{.spec.podCIDR}' 2>/dev/null || true)
    [ -n "$cidr" ] && break
    sleep 0.1
  done
  [ -n "$cidr" ] || { echo "node $node has no pod CIDR: cluster DNS not started" >&2; exit 1; }
  gateway=$(pod_cidr_gateway "$cidr")
  # Names outside the cluster go to the node's resolvers (CoreDNS's `forward . /etc/resolv.conf`),
  # or to KEELSON_DNS_UPSTREAM (addresses, comma separated; set and empty: refused).
  local upstream=${KEELSON_DNS_UPSTREAM-/etc/resolv.conf}
  start dns "$bin/keelson-dns" --kubeconfig "$components/dns.kubeconfig" \
    --listen "$gateway:53" --health-port 9153 ${upstream:+--upstream "$upstream"}
  wait_for "keelson-dns" 30 in_ns curl -sf http://127.0.0.1:9153/readyz
  in_ns kubectl apply -f - >/dev/null <<YAML
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kube-dns-keelson
  namespace: kube-system
  labels:
    kubernetes.io/service-name: kube-dns
    endpointslice.kubernetes.io/managed-by: scripts-up.keelson.dev
addressType: IPv4
ports:
- {name: dns, port: 53, protocol: UDP}
- {name: dns-tcp, port: 53, protocol: TCP}
endpoints:
- addresses: ["$gateway"]
  conditions: {ready: true}
  nodeName: $node
YAML
}
