#!/usr/bin/env bash
# Pod network: TCP throughput and round-trip latency (qperf tcp_bw / tcp_lat) between pods on one
# node, across nodes with host-gw routes, and across nodes through VXLAN, each beside the same
# traffic between two plain test hosts over the same links (the floor), in one run. The cluster
# is the one scripts/e2e-cluster uses (scripts/lib/cluster.bash: a control plane, two nodes on one
# segment that route directly, a third behind a router that only VXLAN reaches), built with
# release binaries; everything is removed on exit, also after a failure.
# Env: SECONDS_EACH (3) per measurement; KEELSON_PROFILE (release).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export KEELSON_PROFILE=${KEELSON_PROFILE:-release}
each=${SECONDS_EACH:-3}
px=kb
source scripts/lib/cluster.bash
busybox=127.0.0.1:5000/keelson/busybox:1.35
servers=()
out=$(mktemp)
cleanup() {
  set +e
  for p in "${servers[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  cluster_clean
  for h in "$px-f0" "$px-f1" "$px-f2"; do ip netns del "$h" 2>/dev/null; done
}
trap 'cleanup; rm -f "$out"' EXIT
command -v qperf >/dev/null || { echo "network: installing qperf"; apt-get install -y -q qperf >/dev/null; }
cleanup

echo "network: cluster in test hosts ($KEELSON_PROFILE build; the first build takes a while)"
cluster_topology
cluster_control_plane || { tail -20 "$base_logs/up.out"; exit 1; }
for h in "$A" "$B" "$C"; do
  echo "network: joining $h"
  join_node "$h" || { tail -20 "$base_logs/join-$h.out"; exit 1; }
done
for pod in "a1:$A" "a2:$A" "b:$B" "c:$C"; do
  k run "net-${pod%%:*}" --image="$busybox" --restart=Never \
    --overrides="{\"spec\":{\"nodeName\":\"${pod#*:}\"}}" --command -- sleep 3600 >/dev/null
done
k wait --for=condition=Ready pod/net-a1 pod/net-a2 pod/net-b pod/net-c --timeout=120s >/dev/null

# The one-node floor: two plain hosts joined by veth pairs to a bridge, as pods are on a node.
ip netns add "$px-f0"; ip netns add "$px-f1"; ip netns add "$px-f2"
ip -n "$px-f0" link add br0 type bridge && ip -n "$px-f0" link set br0 up
for i in 1 2; do
  ip -n "$px-f0" link add "v$i" type veth peer name eth0 netns "$px-f$i"
  ip -n "$px-f0" link set "v$i" master br0 up
  ip -n "$px-f$i" addr add "10.99.0.$i/24" dev eth0
  ip -n "$px-f$i" link set eth0 up
  ip -n "$px-f$i" link set lo up
done

# Runs qperf between two network namespaces; prints "Gbit/s us".
measure() { # server netns, server IP, client netns
  [ -n "$1" ] && [ -n "$2" ] && [ -n "$3" ] || { echo "network: a pod has no namespace or IP" >&2; exit 1; }
  nsenter --net="/var/run/netns/$1" qperf >/dev/null 2>&1 &
  servers+=($!)
  local text
  for _ in $(seq 1 20); do
    text=$(nsenter --net="/var/run/netns/$3" qperf -t "$each" "$2" tcp_bw tcp_lat 2>&1) && break
    sleep 0.2
  done
  kill "${servers[-1]}" 2>/dev/null; wait "${servers[-1]}" 2>/dev/null || true
  echo "$text" | awk '
    /bw *=/ { v = $3; u = $4; f = (u ~ /^GB/) ? 8 : (u ~ /^MB/) ? 0.008 : (u ~ /^KB/) ? 0.000008 : 0; bw = v * f }
    /latency *=/ { v = $3; u = $4; f = (u == "ms") ? 1000 : (u == "sec") ? 1000000 : (u == "ns") ? 0.001 : 1; lat = v * f }
    END { printf "%.2f %.1f\n", bw, lat }'
}

echo "network: measuring (${each} s each)"
ns_of() { pod_netns "net-$1" || { echo "network: no namespace for pod net-$1" >&2; exit 1; }; }
measure "$(ns_of a2)" "$(pod_ip net-a2)" "$(ns_of a1)" >"$out"; read -r one_bw one_lat <"$out"
measure "$px-f2" 10.99.0.2 "$px-f1" >"$out"; read -r one_fbw one_flat <"$out"
measure "$(ns_of b)" "$(pod_ip net-b)" "$(ns_of a1)" >"$out"; read -r gw_bw gw_lat <"$out"
measure "$B" 172.30.0.12 "$A" >"$out"; read -r gw_fbw gw_flat <"$out"
measure "$(ns_of c)" "$(pod_ip net-c)" "$(ns_of a1)" >"$out"; read -r vx_bw vx_lat <"$out"
measure "$C" 172.30.1.2 "$A" >"$out"; read -r vx_fbw vx_flat <"$out"

printf '\n%-34s %12s %12s %12s %12s\n' "pod to pod (qperf, ${each} s)" "Gbit/s" "floor" "latency us" "floor"
printf '%-34s %12s %12s %12s %12s\n' "one node (bridge)" "$one_bw" "$one_fbw" "$one_lat" "$one_flat"
printf '%-34s %12s %12s %12s %12s\n' "across nodes, host-gw route" "$gw_bw" "$gw_fbw" "$gw_lat" "$gw_flat"
printf '%-34s %12s %12s %12s %12s\n' "across nodes, vxlan (routed hop)" "$vx_bw" "$vx_fbw" "$vx_lat" "$vx_flat"
echo "floors: the same qperf between plain test hosts over the same links (bridge; node to node)"
echo "binaries: target/$KEELSON_PROFILE"
json() { printf '{"bench":"network","figure":"%s","value":%s,"unit":"%s","baseline":"%s","baseline_value":%s}\n' "$@"; }
json one_node_gbps "$one_bw" Gbit/s floor_bridge_gbps "$one_fbw"
json one_node_latency_us "$one_lat" us floor_bridge_latency_us "$one_flat"
json host_gw_gbps "$gw_bw" Gbit/s floor_hosts_gbps "$gw_fbw"
json host_gw_latency_us "$gw_lat" us floor_hosts_latency_us "$gw_flat"
json vxlan_gbps "$vx_bw" Gbit/s floor_routed_hosts_gbps "$vx_fbw"
json vxlan_latency_us "$vx_lat" us floor_routed_hosts_latency_us "$vx_flat"
