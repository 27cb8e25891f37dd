# A cluster of test hosts (network namespaces with no default route), shared by scripts/e2e-cluster
# and scripts/bench network. Callers set `root` and `px` (a short host-name prefix) first.
#
#   $px-cp  control plane (scripts/up, KEELSON_NODE=0)  172.30.0.1   --+
#   $px-a   node                                         172.30.0.11  --+-- one L2 segment
#   $px-b   node                                         172.30.0.12  --+   (a bridge in $px-cp)
#   $px-r   router                                       172.30.0.254 / 172.30.1.1
#   $px-c   node behind the router                       172.30.1.2
#   LoadBalancer addresses                               172.30.0.200-209 (the segment's)
#
# Nodes join with the command scripts/up prints (scripts/join) and run the vxlan backend with
# direct routing: $px-a and $px-b route to each other directly (host-gw), $px-c is reached only
# through VXLAN.

CP=$px-cp A=$px-a B=$px-b R=$px-r C=$px-c
cluster_hosts=("$CP" "$A" "$B" "$R" "$C")
cluster_nodes=("$A" "$B" "$C")
base_data=/var/lib/keelson/$px-cluster base_run=/run/keelson/$px-cluster
base_logs=/var/log/keelson/$px-cluster
admin=$base_data/$CP/apiserver/admin.kubeconfig
api_url=https://172.30.0.1:6443

on_host() { local h=$1; shift; nsenter --net="/var/run/netns/$h" "$@"; }
k() { on_host "$CP" kubectl --kubeconfig "$admin" "$@"; }
# Runs a command with the scripts/up|join|down environment of host $1.
on() {
  local h=$1; shift
  env KEELSON_NETNS="$h" KEELSON_NODE_NAME="$h" KEELSON_DATA="$base_data/$h" \
    KEELSON_RUN="$base_run/$h" KEELSON_LOGS="$base_logs/$h" "$@"
}
# Polls a command for up to $1 seconds.
until_ok() { local t=$1; shift; for _ in $(seq 1 $((t * 2))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done; return 1; }

cluster_clean() {
  local h
  for h in "${cluster_hosts[@]}"; do on "$h" "$root/scripts/down" >/dev/null 2>&1 || true; done
  for h in "${cluster_hosts[@]}"; do ip netns del "$h" 2>/dev/null || true; done
  rm -rf "$base_data" "$base_run"
}

cluster_topology() {
  local h addr pair
  for h in "${cluster_hosts[@]}"; do ip netns add "$h"; ip -n "$h" link set lo up; done
  ip -n "$CP" link add kcbr type bridge
  ip -n "$CP" addr add 172.30.0.1/24 dev kcbr
  ip -n "$CP" link set kcbr up
  for pair in "$A:172.30.0.11" "$B:172.30.0.12" "$R:172.30.0.254"; do
    h=${pair%%:*} addr=${pair#*:}
    ip -n "$CP" link add "p-${h#"$px"-}" type veth peer name eth0 netns "$h"
    ip -n "$CP" link set "p-${h#"$px"-}" master kcbr up
    ip -n "$h" addr add "$addr/24" dev eth0
    ip -n "$h" link set eth0 up
  done
  ip -n "$R" link add eth1 type veth peer name eth0 netns "$C"
  ip -n "$R" addr add 172.30.1.1/24 dev eth1
  ip -n "$R" link set eth1 up
  ip -n "$C" addr add 172.30.1.2/24 dev eth0
  ip -n "$C" link set eth0 up
  on_host "$R" sysctl -qw net.ipv4.ip_forward=1
  # Routes between the two segments only: still no default route anywhere.
  for h in "$CP" "$A" "$B"; do ip -n "$h" route add 172.30.1.0/24 via 172.30.0.254; done
  ip -n "$C" route add 172.30.0.0/24 via 172.30.1.1
  # A real node has a default route, which is what lets the node itself reach a ClusterIP (the
  # kernel routes the packet before the proxy's rules rewrite it); here a route for the Service
  # range alone stands in for it.
  for h in "$A" "$B"; do ip -n "$h" route add 10.96.0.0/16 via 172.30.0.1; done
  ip -n "$C" route add 10.96.0.0/16 via 172.30.1.1
}

# scripts/up in $CP (control plane only); sets `join` to the command it printed.
cluster_control_plane() {
  mkdir -p "$base_logs"
  on "$CP" env KEELSON_NODE=0 KEELSON_ADVERTISE_ADDRESS=172.30.0.1 \
    KEELSON_LB_RANGE=172.30.0.200-172.30.0.209 "$root/scripts/up" \
    >"$base_logs/up.out" 2>&1 || return 1
  join=$(sed -n 's/^  \(scripts\/join .*\)$/\1/p' "$base_logs/up.out" | tail -n 1)
}

# Joins host $1 with the printed command (from the repository's root).
join_node() {
  local h=$1
  (cd "$root" && on "$h" $join --node-name "$h" --network-backend vxlan --vxlan-direct-routing) \
    >"$base_logs/join-$h.out" 2>&1
}

# The IP of pod $1 and the network namespace (under /var/run/netns) holding it.
pod_ip() { k get pod "$1" -o jsonpath='{.status.podIP}'; }
pod_netns() {
  local ip ns; ip=$(pod_ip "$1")
  for ns in $(ip netns list | awk '/^cni-/ {print $1}'); do
    ip -n "$ns" -4 -o addr show 2>/dev/null | grep -q " $ip/" && { echo "$ns"; return 0; }
  done
  return 1
}
