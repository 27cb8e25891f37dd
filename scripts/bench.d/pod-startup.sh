#!/usr/bin/env bash
# Pod startup on one node: N pods (default 30) created at once, creation -> Running observed via
# watch (p50/p99), beside the bare CRI sequence (RunPodSandbox + ImageStatus of the present image +
# CreateContainer + StartContainer, N at once) timed in the same run on the same containerd, each
# with its per-phase breakdown (the CRI calls; the API's delivery, the agent's phases from its
# "pod start phases" log lines, the status's way back); then a burst of 100 pods the same way,
# and the agent's RSS with 30 and with 100 pods. Runs a one-node cluster in two test hosts
# (control plane + node, veth 172.31.254.0/30), removed on exit.
# Env: COUNT (30), BIG (100). Release binaries, as every benchmark.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
count=${COUNT:-30}
big=${BIG:-100}
cd "$root"
echo "pod-startup: building the agent, API server, CNI plugin and the measurement helper (release)"
cargo build --release -q -p keelson-agent --bin keelson-agent --example bench_pod_startup
cargo build --release -q -p keelson-apiserver --bin keelson-apiserver
cargo build --release -q -p keelson-cni
bin=${CARGO_TARGET_DIR:-$root/target}/release
echo "binaries: $bin"
helper=$bin/examples/bench_pod_startup
sfx=$(head -c3 /dev/urandom | od -An -tx1 | tr -d ' \n')
cp=kt-benchc-$sfx node=kt-bench-$sfx nodename=kt-bench-$sfx
tmp=$(mktemp -d)
api_pid="" agent_pid=""
cleanup() {
  set +e
  [ -n "$agent_pid" ] && kill "$agent_pid" 2>/dev/null && wait "$agent_pid" 2>/dev/null
  [ -S "$sock" ] && "$helper" cleanup --socket "$sock" 2>/dev/null
  scripts/containerd/stop "$node" --purge >/dev/null 2>&1
  [ -n "$api_pid" ] && kill "$api_pid" 2>/dev/null && wait "$api_pid" 2>/dev/null
  scripts/registry --netns "$node" stop >/dev/null 2>&1
  ip netns del "$cp" 2>/dev/null; ip netns del "$node" 2>/dev/null
  rm -rf "/var/lib/keelson/${nodename:?}" "$tmp"
  for c in /sys/fs/cgroup/*/"$nodename" /sys/fs/cgroup/*/keelson-bench; do
    [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} \; 2>/dev/null
  done
}
sock=/run/keelson/containerd/$node/containerd.sock
trap cleanup EXIT
# Leftovers of an interrupted run.
for ns in $(ip netns list | awk '{print $1}' | grep '^kt-bench' || true); do
  scripts/containerd/stop "$ns" --purge >/dev/null 2>&1 || true
  scripts/registry --netns "$ns" stop >/dev/null 2>&1 || true
  ip netns del "$ns" 2>/dev/null || true
done

echo "pod-startup: test hosts $cp (apiserver) and $node (containerd + agent)"
ip netns add "$cp"; ip netns add "$node"
ip -n "$cp" link set lo up; ip -n "$node" link set lo up
ip -n "$cp" link add kv0 type veth peer name kv1 netns "$node"
ip -n "$cp" addr add 172.31.254.1/30 dev kv0; ip -n "$cp" link set kv0 up
ip -n "$node" addr add 172.31.254.2/30 dev kv1; ip -n "$node" link set kv1 up
mkdir -p "$tmp/cni-bin" "$tmp/net.d"
for n in keelson-cni keelson-ipam loopback; do ln -s "$bin/keelson-cni" "$tmp/cni-bin/$n"; done
scripts/images/build | tail -1
nsenter --net="/var/run/netns/$cp" "$bin/keelson-apiserver" --data-dir "$tmp/api" --advertise-address 172.31.254.1 \
  >"$tmp/apiserver.log" 2>&1 </dev/null &
api_pid=$!
scripts/containerd/start "$node" --netns "$node" --cni-bin-dir "$tmp/cni-bin" --cni-conf-dir "$tmp/net.d" | tail -1 >/dev/null
for _ in $(seq 100); do
  [ -f "$tmp/api/admin.kubeconfig" ] && nsenter --net="/var/run/netns/$cp" curl -skf -m 1 https://172.31.254.1:6443/readyz >/dev/null 2>&1 && break
  sleep 0.2
done
kc=$tmp/api/admin.kubeconfig
nsenter --net="/var/run/netns/$node" "$bin/keelson-agent" --kubeconfig "$kc" --hostname-override "$nodename" \
  --container-runtime-endpoint "$sock" --node-ip 172.31.254.2 --pod-cidr 10.244.254.0/24 \
  --cni-conf-dir "$tmp/net.d" --root-dir "$tmp/agent" --pod-log-dir "$tmp/logs" --cgroup-root "/$nodename" \
  --eviction-hard "memory.available<100Mi,nodefs.available<1%,imagefs.available<1%" --image-gc-high-threshold 100 \
  >"$tmp/agent.log" 2>&1 </dev/null &
agent_pid=$!
kubectl_cp() { nsenter --net="/var/run/netns/$cp" kubectl --kubeconfig "$kc" "$@"; }
for _ in $(seq 150); do
  kubectl_cp get node "$nodename" 2>/dev/null | grep -q ' Ready' && break
  sleep 0.2
done
kubectl_cp get node "$nodename" | grep -q ' Ready' || { echo "pod-startup: node not Ready; agent log:"; tail -20 "$tmp/agent.log"; exit 1; }

# The default ServiceAccount and the kube-root-ca.crt ConfigMap, which the controller manager
# (not run here) would make: every pod mounts them (kube-api-access), so the agent's
# TokenRequest is part of the measured path.
kubectl_cp create serviceaccount default -n default >/dev/null
kubectl_cp create configmap kube-root-ca.crt -n default --from-file=ca.crt="$tmp/api/ca.crt" >/dev/null

# In the node host: the helper reaches the apiserver and containerd like the agent does.
run_helper() { nsenter --net="/var/run/netns/$node" "$helper" "$@"; }
echo "pod-startup: warm-up (image present, pause image pulled)"
run_helper api --kubeconfig "$kc" --node "$nodename" --count 2 --prefix warm >/dev/null
sleep 3
# CPU seconds used so far (user + system, with reaped children: runc and CNI plugins count in
# the shim's or containerd's) by the processes of one network namespace, less one PID's own.
ns_cpu() {
  local want n total=0 p st
  want=$(stat -L -c 'net:[%i]' "/var/run/netns/$1")
  for p in /proc/[0-9]*; do
    n=$(readlink "$p/ns/net" 2>/dev/null) || continue
    if [ "$n" != "$want" ] || [ "${p#/proc/}" = "${2:-}" ]; then continue; fi
    st=$(cut -d' ' -f14-17 "$p/stat" 2>/dev/null) || continue
    total=$((total + $(echo "$st" | awk '{print $1 + $2 + $3 + $4}')))
  done
  echo "$total"
}
pid_cpu() { awk '{print $14 + $15 + $16 + $17}' "/proc/$1/stat"; }
machine_cpu() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
# Runs a command and appends to $tmp/cpu-<label>.txt the CPU it took per part (seconds).
with_cpu() {
  local label=$1 c0 a0 s0 m0 t0 hz
  shift
  hz=$(getconf CLK_TCK)
  c0=$(ns_cpu "$node" "$agent_pid") a0=$(pid_cpu "$agent_pid") s0=$(pid_cpu "$api_pid") m0=$(machine_cpu) t0=$(date +%s%N)
  "$@"
  awk -v hz="$hz" -v c="$(($(ns_cpu "$node" "$agent_pid") - c0))" -v a="$(($(pid_cpu "$agent_pid") - a0))" \
    -v s="$(($(pid_cpu "$api_pid") - s0))" -v m="$(($(machine_cpu) - m0))" -v w="$(($(date +%s%N) - t0))" \
    'BEGIN {printf "    CPU s: containerd+shims+runc+CNI %.1f, agent %.1f, apiserver %.1f; machine %.1f of %.1f (2 cores x %.1f s)\n",
      c / hz, a / hz, s / hz, m / hz, 2 * w / 1e9, w / 1e9}' >"$tmp/cpu-$label.txt"
}

# One round: the bare sequence then the same number of pods through the API (kept running);
# the helpers' outputs in $tmp/bare<n>.txt and $tmp/api<n>.txt.
round() {
  local n=$1
  echo "pod-startup: bare CRI sequence, $n pods at once"
  with_cpu "bare$n" run_helper cri --socket "$sock" --count "$n" >"$tmp/bare$n.txt"
  sleep 2
  echo "pod-startup: through the API and the agent, $n pods at once"
  KEEP_PODS=1 with_cpu "api$n" run_helper api --kubeconfig "$kc" --node "$nodename" --count "$n" --prefix "p$n" \
    --agent-log "$tmp/agent.log" >"$tmp/api$n.txt"
  sleep 2
}
figure() { awk -v f="$1" '$1 == f {print $2, $3}' "$2"; }
# The phases of both paths side by side: name, p50, p99.
breakdown() {
  local n=$1
  printf '\n%-44s %10s %10s\n' "where the time goes, $n pods at once" "p50 ms" "p99 ms"
  for f in bare api; do
    [ $f = bare ] && echo "  bare CRI sequence:" || echo "  through the API and keelson-agent:"
    awk '$1 == "phase" { name = $2; for (i = 3; i <= NF - 2; i++) name = name " " $i
      printf "    %-40s %10s %10s\n", name, $(NF - 1), $NF }' "$tmp/$f$n.txt"
    cat "$tmp/cpu-$f$n.txt"
  done
}
round "$count"
read -r bare50 bare99 < <(figure bare_cri "$tmp/bare$count.txt")
read -r agent50 agent99 < <(figure agent_pod_startup "$tmp/api$count.txt")
rss30=$(awk '/VmRSS/ {print $2}' "/proc/$agent_pid/status")
kubectl_cp delete pods -l "bench=p$count" --wait=true >/dev/null
round "$big"
read -r bigbare50 bigbare99 < <(figure bare_cri "$tmp/bare$big.txt")
read -r big50 big99 < <(figure agent_pod_startup "$tmp/api$big.txt")
sleep 1
rss100=$(awk '/VmRSS/ {print $2}' "/proc/$agent_pid/status")
# The agent's CPU while 100 pods just run (relist, resyncs, lease): 20 s of idle.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$agent_pid/stat"; }
t0=$(cpu_ticks); sleep 20; t1=$(cpu_ticks)
idle_cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.1f", (b - a) / hz / 20 * 100}')
kubectl_cp delete pods -l "bench=p$big" --wait=true >/dev/null

ratio50=$(awk -v a="$agent50" -v b="$bare50" 'BEGIN {printf "%.2f", a / b}')
ratio99=$(awk -v a="$agent99" -v b="$bare99" 'BEGIN {printf "%.2f", a / b}')
bigratio50=$(awk -v a="$big50" -v b="$bigbare50" 'BEGIN {printf "%.2f", a / b}')
bigratio99=$(awk -v a="$big99" -v b="$bigbare99" 'BEGIN {printf "%.2f", a / b}')
breakdown "$count"
breakdown "$big"
printf '\n%-40s %10s %10s\n' "pod startup, $count pods at once" "p50 ms" "p99 ms"
printf '%-40s %10s %10s\n' "bare CRI sequence (floor)" "$bare50" "$bare99"
printf '%-40s %10s %10s\n' "keelson-agent, creation -> Running" "$agent50" "$agent99"
printf '%-40s %10s %10s\n' "ratio agent / floor" "$ratio50" "$ratio99"
printf '%-40s %10s %10s\n' "bare CRI sequence, $big at once" "$bigbare50" "$bigbare99"
printf '%-40s %10s %10s\n' "keelson-agent, $big at once" "$big50" "$big99"
printf '%-40s %10s %10s\n' "ratio agent / floor, $big at once" "$bigratio50" "$bigratio99"
printf '%-40s %10s\n' "agent RSS with $count pods (MiB)" "$((rss30 / 1024))"
printf '%-40s %10s\n' "agent RSS with $big pods (MiB)" "$((rss100 / 1024))"
printf '%-40s %10s\n' "agent CPU, $big pods idle (% of a core)" "$idle_cpu"
echo "binaries: $bin"
json() { printf '{"bench":"pod-startup","figure":"%s","value":%s,"unit":"%s","baseline":"%s","baseline_value":%s}\n' "$@"; }
json "agent_p50_ms" "$agent50" ms "bare_cri_p50_ms" "$bare50"
json "agent_p99_ms" "$agent99" ms "bare_cri_p99_ms" "$bare99"
json "agent_over_floor_p50" "$ratio50" ratio "target" 1.1
json "agent_over_floor_p99" "$ratio99" ratio "target" 1.1
json "agent_${big}_pods_p50_ms" "$big50" ms "bare_cri_${big}_pods_p50_ms" "$bigbare50"
json "agent_${big}_pods_p99_ms" "$big99" ms "bare_cri_${big}_pods_p99_ms" "$bigbare99"
json "agent_rss_${count}_pods_kib" "$rss30" KiB "target_100_pods_kib" $((30 * 1024))
json "agent_rss_${big}_pods_kib" "$rss100" KiB "target_100_pods_kib" $((30 * 1024))
json "agent_idle_cpu_${big}_pods_percent" "$idle_cpu" percent "none" 0
