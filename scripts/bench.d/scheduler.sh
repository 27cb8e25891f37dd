#!/usr/bin/env bash
# Benchmarks keelson-scheduler (release build): N pending Pods (default 3000) bound across 100
# Nodes, timed from the scheduler's start until the last binding is seen, beside the floor of the
# same number of bindings POSTed straight to the API server in the same run. Loopback only.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
echo "building (release)..." >&2
cargo build --release -q -p keelson-apiserver --bin keelson-apiserver
cargo build --release -q -p keelson-scheduler --bin keelson-scheduler --example bench_scheduler
target=${CARGO_TARGET_DIR:-target}
dir=$(mktemp -d /tmp/keelson-bench-scheduler.XXXXXX)
port=$((20000 + RANDOM % 9000))
"$target/release/keelson-apiserver" --data-dir "$dir" --bind-address 127.0.0.1 --secure-port "$port" >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do curl -sfk "https://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
"$target/release/examples/bench_scheduler" "$dir/admin.kubeconfig" "$target/release/keelson-scheduler" "${1:-3000}"
