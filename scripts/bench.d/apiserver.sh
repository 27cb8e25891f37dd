#!/usr/bin/env bash
# Benchmarks keelson-apiserver (release build) on a fresh data directory: create latency,
# durable writes/s with 1 and 64 writers, list of 10,000 pods, watch delivery to 100 watchers;
# beside raw SQLite commits on the same disk, measured in the same run; the server's RSS after
# the run and after a restart on the same data. Then (or alone, with the argument "authz") the
# cost of authorization per request: a user bound to `edit` by a RoleBinding, against a server
# with the default --authorization-mode Node,RBAC and one with AlwaysAllow.
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

if [ "${1:-}" = authz ]; then
  authz
  exit 0
fi

dir=$(mktemp -d /tmp/keelson-bench-apiserver.XXXXXX)
dirs+=("$dir")
port=$((20000 + RANDOM % 9000))
target/release/keelson-apiserver --data-dir "$dir" --bind-address 127.0.0.1 --secure-port "$port" >"$dir/server.log" 2>&1 &
pid=$!
pids+=("$pid")
ready "$port"
target/release/examples/bench "$dir/admin.kubeconfig" "$dir"
echo "server RSS after the run: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
# The store alone: the same data (10,000 pods and the writes above) loaded by a fresh server.
kill "$pid"; wait "$pid" 2>/dev/null || true
start=$(date +%s%N)
target/release/keelson-apiserver --data-dir "$dir" --bind-address 127.0.0.1 --secure-port "$port" >>"$dir/server.log" 2>&1 &
pid=$!
pids+=("$pid")
ready "$port"
echo "restart until ready: $(( ($(date +%s%N) - start) / 1000000 )) ms"
echo "server RSS after a restart on the same data: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
kill "$pid"; wait "$pid" 2>/dev/null || true
authz
