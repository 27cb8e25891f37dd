#!/usr/bin/env bash
# Benchmarks keelson-apiserver (release build) on a fresh data directory: create latency,
# durable writes/s with 1 and 64 writers, list of 10,000 pods, watch delivery to 100 watchers;
# beside raw SQLite commits on the same disk, measured in the same run; the server's RSS after
# the run and after a restart on the same data.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
echo "building (release)..." >&2
cargo build --release -q -p keelson-apiserver --bin keelson-apiserver --example bench
dir=$(mktemp -d /tmp/keelson-bench-apiserver.XXXXXX)
port=$((20000 + RANDOM % 9000))
target/release/keelson-apiserver --data-dir "$dir" --bind-address 127.0.0.1 --secure-port "$port" >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do curl -sfk "https://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
target/release/examples/bench "$dir/admin.kubeconfig" "$dir"
echo "server RSS after the run: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
# The store alone: the same data (10,000 pods and the writes above) loaded by a fresh server.
kill $pid; wait $pid 2>/dev/null || true
start=$(date +%s%N)
target/release/keelson-apiserver --data-dir "$dir" --bind-address 127.0.0.1 --secure-port "$port" >>"$dir/server.log" 2>&1 &
pid=$!
for _ in $(seq 1 300); do curl -sfk "https://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
echo "restart until ready: $(( ($(date +%s%N) - start) / 1000000 )) ms"
echo "server RSS after a restart on the same data: $(awk '/VmRSS/ {print $2, $3}' /proc/$pid/status)"
