#!/usr/bin/env bash
# Benchmarks keelson-apiserver's /readyz latency (release build, a new TLS connection per request)
# beside N connections that never start the TLS handshake and N that sent half a header (default
# 1,000 each), beside the floor of the same requests with none, in the same run. Loopback only.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
echo "building (release)..." >&2
cargo build --release -q -p keelson-apiserver --bin keelson-apiserver --example connections
target=${CARGO_TARGET_DIR:-target}
dir=$(mktemp -d /tmp/keelson-bench-connections.XXXXXX)
port=$((20000 + RANDOM % 9000))
"$target/release/keelson-apiserver" --data-dir "$dir" --bind-address 127.0.0.1 --secure-port "$port" >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
for _ in $(seq 1 100); do curl -sfk "https://127.0.0.1:$port/readyz" >/dev/null && break; sleep 0.1; done
"$target/release/examples/connections" "$dir" "$port" "${1:-1000}"
echo "server log: $(wc -c <"$dir/server.log") bytes; open fds: $(ls /proc/$pid/fd | wc -l)"
