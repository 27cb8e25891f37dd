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
. scripts/lib/release-apiserver.bash
start_release_apiserver scheduler
"$target/release/examples/bench_scheduler" "$dir/admin.kubeconfig" "$target/release/keelson-scheduler" "${1:-3000}"
