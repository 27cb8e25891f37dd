#!/usr/bin/env bash
# The whole node, as a user meets it: scripts/up (release build) in a test host of its own
# (network namespace kb-e2e, no default route), then per round:
#   apply  `kubectl apply -f examples/` -> the Ingress answers from every one of the 3 pods;
#   scale  `kubectl scale deployment/web --replicas=30` -> 30 ready endpoints in the Service's
#          EndpointSlices;
# then `kubectl delete -f examples/` and every pod gone before the next round. RUNS rounds
# (default 5), p50 and worst, beside the floor measured in the same run on the same containerd:
# the bare CRI sequence (sandbox, image check, create, start) for 3 pods at once and for 27 at
# once, the pods each step starts, until the last of them is started. Removes everything on exit, and first what a crashed run left.
# Env: RUNS (5), LIMIT (seconds a step may take, 300).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
runs=${RUNS:-5}
limit=${LIMIT:-300}
# Disk eviction low, as the tests' (this machine's shared disk is past imagefs.available<15%).
# Names outside the cluster are refused: nothing is sent to the machine's resolvers.
export KEELSON_DNS_UPSTREAM=${KEELSON_DNS_UPSTREAM-}
export KEELSON_EVICTION_HARD=${KEELSON_EVICTION_HARD:-"memory.available<100Mi,nodefs.available<1%,imagefs.available<1%,nodefs.inodesFree<1%,imagefs.inodesFree<1%"}
export KEELSON_IMAGE_GC_HIGH=${KEELSON_IMAGE_GC_HIGH:-100}
export KEELSON_NETNS=kb-e2e KEELSON_NODE_NAME=kb-e2e KEELSON_PROFILE=release
export KEELSON_RUN=/run/keelson/bench-e2e KEELSON_DATA=/var/lib/keelson/bench-e2e
export KEELSON_LOGS=/var/log/keelson/bench-e2e
export KUBECONFIG=$KEELSON_DATA/apiserver/admin.kubeconfig
in_ns() { nsenter --net="/var/run/netns/$KEELSON_NETNS" "$@"; }
k() { in_ns kubectl "$@"; }
tmp=$(mktemp -d)
clean() {
  scripts/down >/dev/null 2>&1 || true
  ip netns del "$KEELSON_NETNS" 2>/dev/null || true
  rm -rf "$KEELSON_DATA" "$KEELSON_LOGS" "$KEELSON_RUN" "$tmp"
}
# What a failed step shows before the exit trap removes it.
show_state() {
  echo "bench e2e: $1; the node's state:" >&2
  k get pods,endpointslices -o wide >&2 || true
  for f in "$KEELSON_LOGS"/*.log; do echo "--- last lines of $f" >&2; tail -n 20 "$f" >&2; done
}
clean
mkdir -p "$tmp"
trap clean EXIT

echo "bench e2e: building the helper (release); scripts/up builds the rest"
cargo build --release -q -p keelson-agent --example bench_pod_startup
helper=${CARGO_TARGET_DIR:-$root/target}/release/examples/bench_pod_startup
echo "bench e2e: scripts/up in test host $KEELSON_NETNS"
scripts/up >"$tmp/up.log" 2>&1 || { tail -30 "$tmp/up.log"; show_state "scripts/up failed"; exit 1; }
echo "binaries: ${CARGO_TARGET_DIR:-$root/target}/release"
sock=/run/keelson/containerd/$KEELSON_NODE_NAME/containerd.sock

now_ms() { echo $(($(date +%s%N) / 1000000)); }
# Pod names the Ingress answered with, over 12 requests (nginx spreads them over its upstreams).
ingress_names() {
  local urls=()
  for _ in $(seq 12); do urls+=(http://127.0.0.1/); done
  in_ns curl -s -m 2 -w '\n' -H 'Host: web.example.test' "${urls[@]}" 2>/dev/null | grep '^web-' | sort -u || true
}
ready_endpoints() {
  k get endpointslices -l kubernetes.io/service-name=web \
    -o jsonpath='{range .items[*].endpoints[*]}{.conditions.ready}{"\n"}{end}' 2>/dev/null | grep -c '^true$' || true
}
# Polls `$1` (a function that succeeds when done) until the step's limit; fails with `$2`.
until_done() {
  local deadline=$(($(date +%s) + limit))
  until "$1"; do
    [ "$(date +%s)" -lt "$deadline" ] || { show_state "$2 (after ${limit}s)"; return 1; }
    sleep 0.05
  done
}
# Each of the Deployment's 3 running pods has answered through the Ingress (which routes only
# to Ready endpoints).
every_pod_answers() {
  local want
  want=$(k get pods -l app=web --field-selector=status.phase=Running -o name 2>/dev/null | sed 's|^pod/||' | sort)
  [ "$(echo "$want" | grep -c '^web-')" = 3 ] || return 1
  seen=$(printf '%s\n%s\n' "$seen" "$(ingress_names)" | grep '^web-' | sort -u)
  [ -z "$(comm -23 <(echo "$want") <(echo "$seen"))" ]
}
thirty_ready() { [ "$(ready_endpoints)" -ge 30 ]; }
no_web_pods() { [ -z "$(k get pods -l app=web -o name 2>/dev/null)" ]; }
# The floor: `$1` pods at once through bare CRI calls; prints when the last was started (the
# helper's p99 over so few pods is its slowest), as each step waits for its last pod.
floor() { in_ns "$helper" cri --socket "$sock" --count "$1" | awk '$1 == "bare_cri" {print $3}'; }

# The image and the pause image present, as they are for the measured rounds.
floor 3 >/dev/null
for r in $(seq "$runs"); do
  echo "bench e2e: round $r of $runs"
  seen=""
  t0=$(now_ms)
  k apply -f examples/ >/dev/null
  until_done every_pod_answers "the Ingress did not answer from every pod"
  echo $(($(now_ms) - t0)) >>"$tmp/apply"
  t0=$(now_ms)
  k scale deployment/web --replicas=30 >/dev/null
  until_done thirty_ready "30 endpoints were not ready"
  echo $(($(now_ms) - t0)) >>"$tmp/scale"
  echo "  apply -> every pod answers $(tail -1 "$tmp/apply") ms; scale -> 30 ready $(tail -1 "$tmp/scale") ms"
  k delete -f examples/ --wait=false >/dev/null
  until_done no_web_pods "the deleted pods were not gone"
  floor 3 >>"$tmp/floor3"
  floor 27 >>"$tmp/floor27"
  echo "  floor: 3 pods started in $(tail -1 "$tmp/floor3") ms; 27 pods in $(tail -1 "$tmp/floor27") ms"
done

# p50 (lower median) and the largest of a file of numbers.
p50() { sort -n "$1" | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
worst() { sort -n "$1" | tail -1; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
a50=$(p50 "$tmp/apply") s50=$(p50 "$tmp/scale") f3=$(p50 "$tmp/floor3") f27=$(p50 "$tmp/floor27")
printf '\n%-52s %10s %10s %12s %7s\n' "end to end, $runs rounds" "p50 ms" "worst ms" "floor ms" "ratio"
printf '%-52s %10s %10s %12s %7s\n' "apply examples/ -> Ingress answers from all 3 pods" "$a50" "$(worst "$tmp/apply")" "$f3" "$(ratio "$a50" "$f3")"
printf '%-52s %10s %10s %12s %7s\n' "scale to 30 -> 30 ready endpoints" "$s50" "$(worst "$tmp/scale")" "$f27" "$(ratio "$s50" "$f27")"
echo "(floor: the bare CRI sequence for 3 and for 27 pods at once until the last is started, median of the runs)"
json() { printf '{"bench":"e2e","figure":"%s","value":%s,"unit":"ms","baseline":"%s","baseline_value":%s}\n' "$@"; }
json "apply_to_ingress_all_pods_p50_ms" "$a50" "bare_cri_3_pods_last_started_ms" "$f3"
json "scale_to_30_ready_endpoints_p50_ms" "$s50" "bare_cri_27_pods_last_started_ms" "$f27"
