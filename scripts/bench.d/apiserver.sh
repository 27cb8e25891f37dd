#!/usr/bin/env bash
# Benchmarks keelson-apiserver (release build) on a fresh data directory: create latency,
# durable writes/s with 1 and 64 writers, list of 10,000 pods, watch delivery to 100 watchers;
# beside raw SQLite commits on the same disk, measured in the same run (writes/s: the median of
# five 1 s rounds, the server's and the bare store's in turn); the server's RSS after
# the run and after a restart on the same data. Then (or alone, with the argument "authz") the
# cost of authorization per request: a user bound to `edit` by a RoleBinding, against a server
# with the default --authorization-mode Node,RBAC and one with AlwaysAllow.
# With `scale [PODS] [WATCHERS]` (50,000 and 1,000): a large store instead: RSS beside the size of
# the stored JSON (goal <= 2.5x), full and chunked list times, one write's delivery to that many
# watches beside one, and the restart time on that store (goal <= 5 s) and RSS after it.
# With `--backend etcd`: the same figures for a server storing in a fresh local etcd member
# (Debian's etcd, plain HTTP on loopback, data on the same disk), beside raw etcd transactions
# (the etcd-client crate, as the backend writes them) and beside the SQLite server's figures,
# all in the same run, with the ratios the goals are set on (writes/s >= 0.7x raw etcd; list
# and watch within 1.5x of SQLite).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
echo "building (release)..." >&2
cargo build --release -q -p keelson-apiserver --bin keelson-apiserver --example bench --example bench_authz

# What the script started and made, undone however it ends.
pids=()
dirs=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for d in "${dirs[@]}"; do rm -rf "$d"; done
}
trap cleanup EXIT

ready() {
  for _ in $(seq 1 300); do curl -sfk "https://127.0.0.1:$1/readyz" >/dev/null && return 0; sleep 0.1; done
  echo "keelson-apiserver on port $1 did not become ready" >&2
  return 1
}

# Two servers, Node,RBAC and AlwaysAllow, each knowing bob's token; bob's kubeconfigs are the
# admin's with his token.
authz() {
  local adir port_rbac port_allow port flags
  adir=$(mktemp -d /tmp/keelson-bench-authz.XXXXXX)
  dirs+=("$adir")
  echo "bob-token-0123456789,bob,2001" >"$adir/tokens.csv"
  port_rbac=$((20000 + RANDOM % 9000))
  port_allow=$((port_rbac + 1))
  for mode in rbac allow; do
    port=$port_rbac flags=()
    if [ $mode = allow ]; then port=$port_allow flags=(--authorization-mode AlwaysAllow); fi
    target/release/keelson-apiserver --data-dir "$adir/$mode" --bind-address 127.0.0.1 --secure-port "$port" \
      --token-auth-file "$adir/tokens.csv" "${flags[@]}" >"$adir/$mode.log" 2>&1 &
    pids+=($!)
  done
  ready "$port_rbac"
  ready "$port_allow"
  for mode in rbac allow; do
    sed 's/token: .*/token: bob-token-0123456789/' "$adir/$mode/admin.kubeconfig" >"$adir/$mode-bob.kubeconfig"
  done
  target/release/examples/bench_authz "$adir/rbac/admin.kubeconfig" "$adir/rbac-bob.kubeconfig" \
    "$adir/allow/admin.kubeconfig" "$adir/allow-bob.kubeconfig"
}

# A fresh local etcd member on free loopback ports; sets etcd_url.
start_etcd() {
  local edir cport
  command -v etcd >/dev/null || { echo "etcd is not installed (scripts/install-deps: etcd-server)" >&2; exit 1; }
  edir=$(mktemp -d /tmp/keelson-bench-etcd.XXXXXX)
  dirs+=("$edir")
  cport=$((30000 + RANDOM % 9000))
  etcd_url="http://127.0.0.1:$cport"
  etcd --name bench --data-dir "$edir/data" --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --listen-peer-urls "http://127.0.0.1:$((cport + 1))" --initial-advertise-peer-urls "http://127.0.0.1:$((cport + 1))" \
    --initial-cluster "bench=http://127.0.0.1:$((cport + 1))" --log-level warn --logger zap >"$edir/etcd.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 300); do
    ETCDCTL_API=3 etcdctl --endpoints "$etcd_url" endpoint health >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "etcd did not become healthy; its log:" >&2
  cat "$edir/etcd.log" >&2
  exit 1
}

# One server's figures, then a restart on its data: backend (sqlite or etcd), then the server's
# extra flags. The JSON lines are kept in $figures.
server_bench() {
  local backend=$1 dir port pid start floor=(); shift
  dir=$(mktemp -d /tmp/keelson-bench-apiserver.XXXXXX)
  dirs+=("$dir")
  port=$((20000 + RANDOM % 9000))
  [ "$backend" = etcd ] && floor=("$etcd_url")
  echo "== keelson-apiserver on $backend"
  target/release/keelson-apiserver --data-dir "$dir" --bind-address 127.0.0.1 --secure-port "$port" "$@" >"$dir/server.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  ready "$port"
  target/release/examples/bench "$dir/admin.kubeconfig" "$dir" "${floor[@]}" | tee -a "$figures"
  echo "server RSS after the run: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
  # The store alone: the same data (10,000 pods and the writes above) loaded by a fresh server.
  kill "$pid"; wait "$pid" 2>/dev/null || true
  start=$(date +%s%N)
  target/release/keelson-apiserver --data-dir "$dir" --bind-address 127.0.0.1 --secure-port "$port" "$@" >>"$dir/server.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  ready "$port"
  echo "restart until ready: $(( ($(date +%s%N) - start) / 1000000 )) ms"
  echo "server RSS after a restart on the same data: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

# A large store: the example creates and measures; RSS and restart are taken here.
scale_bench() {
  local pods=${1:-50000} watchers=${2:-1000} dir port pid start ms rss stored
  # Every watch is a connection: as many descriptors as allowed.
  ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
  dir=$(mktemp -d /tmp/keelson-bench-apiserver.XXXXXX)
  dirs+=("$dir")
  port=$((20000 + RANDOM % 9000))
  echo "== keelson-apiserver (sqlite) with $pods pods and $watchers watchers"
  target/release/keelson-apiserver --data-dir "$dir" --bind-address 127.0.0.1 --secure-port "$port" >"$dir/server.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  ready "$port"
  target/release/examples/bench scale "$dir/admin.kubeconfig" "$pods" "$watchers" | tee -a "$figures"
  stored=$(jq -r 'select(.figure? == "stored JSON of the pods") | .value' <(grep '^{' "$figures"))
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
  figure_line "server RSS after the run" "$(awk -v k="$rss" 'BEGIN {print k / 1024}')" MiB "stored JSON x 2.5 (goal)" \
    "$(awk -v s="$stored" 'BEGIN {print s * 1e6 / 1048576 * 2.5}')"
  # Where the resident memory is: the heap's anonymous pages, and what the allocator has freed
  # lazily (MADV_FREE: counted in RSS until the kernel needs the pages).
  awk '/^(Anonymous|LazyFree|Private_Dirty):/ {printf "  %s %d MiB", $1, $2 / 1024} END {print ""}' "/proc/$pid/smaps_rollup"
  kill "$pid"; wait "$pid" 2>/dev/null || true
  start=$(date +%s%N)
  target/release/keelson-apiserver --data-dir "$dir" --bind-address 127.0.0.1 --secure-port "$port" >>"$dir/server.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  ready "$port"
  ms=$(( ($(date +%s%N) - start) / 1000000 ))
  figure_line "restart until ready, $pods pods stored" "$ms" ms "goal" 5000
  rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
  figure_line "server RSS after a restart" "$(awk -v k="$rss" 'BEGIN {print k / 1024}')" MiB "stored JSON x 2.5 (goal)" \
    "$(awk -v s="$stored" 'BEGIN {print s * 1e6 / 1048576 * 2.5}')"
  kill "$pid"; wait "$pid" 2>/dev/null || true
}

# A figure taken by this script, as the example prints its own: a line and a JSON line.
figure_line() {
  printf '%-44s %12.3f %s   (baseline %s: %.3f %s)\n' "$1" "$2" "$3" "$4" "$5" "$3"
  jq -cn --arg f "$1" --argjson v "$2" --arg u "$3" --arg b "$4" --argjson bv "$5" \
    '{bench: "apiserver", backend: "sqlite", figure: $f, value: $v, unit: $u, baseline: {name: $b, value: $bv}}'
}

# The etcd server's figures against their goals: writes/s over raw etcd's, list and watch over
# the SQLite server's.
ratios() {
  local json
  json=$(grep '^{' "$figures")
  jq -rs '
    def v(b; f): map(select(.backend == b and .figure == f)) | first;
    def line(name; x; goal): "\(name): \(x * 100 | round / 100)x\(goal)";
    (v("etcd"; "durable writes/s, 1 writer")) as $w1
    | (v("etcd"; "durable writes/s, 64 writers")) as $w64
    | line("etcd server writes/s, 1 writer / raw etcd"; $w1.value / $w1.baseline.value; " (goal >= 0.7)"),
      line("etcd server writes/s, 64 writers / raw etcd"; $w64.value / $w64.baseline.value; " (goal >= 0.7)"),
      line("list 10,000 pods, etcd / SQLite";
        v("etcd"; "list 10,000 pods (median of 5)").value / v("sqlite"; "list 10,000 pods (median of 5)").value; " (goal <= 1.5)"),
      line("watch delivery p99, etcd / SQLite";
        v("etcd"; "watch delivery p99, 100 watchers").value / v("sqlite"; "watch delivery p99, 100 watchers").value; " (goal <= 1.5)"),
      line("create latency p99, etcd / SQLite";
        v("etcd"; "create latency p99").value / v("sqlite"; "create latency p99").value; "")
  ' <<<"$json"
}

backend=sqlite
case "${1:-}" in
  authz) authz; exit 0 ;;
  scale) backend=scale ;;
  --backend) backend=${2:-} ;;
  --backend=*) backend=${1#--backend=} ;;
  "") ;;
  *) echo "usage: scripts/bench apiserver [authz | scale [PODS] [WATCHERS] | --backend sqlite|etcd]" >&2; exit 2 ;;
esac
figures=$(mktemp /tmp/keelson-bench-figures.XXXXXX)
dirs+=("$figures")
case "$backend" in
  sqlite)
    server_bench sqlite
    authz
    ;;
  scale) scale_bench "${2:-}" "${3:-}" ;;
  etcd)
    start_etcd
    server_bench etcd --etcd-servers "$etcd_url"
    server_bench sqlite
    echo "== etcd against its goals"
    ratios
    ;;
  *) echo "--backend is sqlite or etcd, not '$backend'" >&2; exit 2 ;;
esac
