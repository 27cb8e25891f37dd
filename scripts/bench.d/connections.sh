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
. scripts/lib/release-apiserver.bash
start_release_apiserver connections
"$target/release/examples/connections" "$dir" "$port" "${1:-1000}"
echo "server log: $(wc -c <"$dir/server.log") bytes; open fds: $(ls /proc/$pid/fd | wc -l)"
