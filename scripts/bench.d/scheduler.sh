#!/usr/bin/env bash
# Benchmarks keelson-scheduler (release build): N pending Pods (default 3000) bound across 100,
# 1,000 and 5,000 Nodes (upstream scheduler_perf's SchedulingBasic shape), each timed from the
# scheduler's start until the last binding is seen, and from the first binding seen to the last
# (what it sustains once running, as scheduler_perf measures), beside the floor of the same number
# of bindings POSTed straight to the API server in the same run, timed until the same watch sees
# the last; the scheduler's peak RSS and CPU time. Each size runs on a fresh API server. Loopback
# only.
# `scripts/bench scheduler workloads [NAME...] [-- MEASURED]` runs upstream scheduler_perf's
# workloads at 5,000 nodes instead (SchedulingBasic, SchedulingNodeAffinity,
# SchedulingPodAntiAffinity, SchedulingPodAffinity, SchedulingPreferredPodAffinity,
# SchedulingPreferredPodAntiAffinity, MixedSchedulingBasePod,
# SchedulingRequiredPodAntiAffinityWithNSSelector, TopologySpreading, PreferredTopologySpreading;
# all by default), each on a fresh API server beside the same floor.
# Usage: scripts/bench scheduler [pods] [nodes...]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [ "${1:-}" = workloads ]; then
  shift
  names=()
  measured=0
  while [ $# -gt 0 ]; do
    if [ "$1" = -- ]; then measured=${2:-0}; break; fi
    names+=("$1"); shift
  done
  [ ${#names[@]} -gt 0 ] || names=(SchedulingBasic SchedulingNodeAffinity SchedulingPodAntiAffinity
    SchedulingPodAffinity SchedulingPreferredPodAffinity SchedulingPreferredPodAntiAffinity
    MixedSchedulingBasePod SchedulingRequiredPodAntiAffinityWithNSSelector TopologySpreading
    PreferredTopologySpreading)
  echo "building (release)..." >&2
  cargo build --release -q -p keelson-apiserver --bin keelson-apiserver
  cargo build --release -q -p keelson-scheduler --bin keelson-scheduler --example bench_scheduler
  target=${CARGO_TARGET_DIR:-target}
  . scripts/lib/release-apiserver.bash
  for name in "${names[@]}"; do
    echo "== $name"
    (
      start_release_apiserver scheduler
      "$target/release/examples/bench_scheduler" "$dir/admin.kubeconfig" \
        "$target/release/keelson-scheduler" workload "$name" "$measured"
    )
  done
  exit 0
fi
pods=${1:-3000}
shift || true
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(100 1000 5000)
echo "building (release)..." >&2
cargo build --release -q -p keelson-apiserver --bin keelson-apiserver
cargo build --release -q -p keelson-scheduler --bin keelson-scheduler --example bench_scheduler
target=${CARGO_TARGET_DIR:-target}
echo "binaries: $target/release"
. scripts/lib/release-apiserver.bash
for nodes in "${sizes[@]}"; do
  echo "== $pods pods over $nodes nodes"
  # A subshell per size: its API server and data directory go when it ends.
  (
    start_release_apiserver scheduler
    "$target/release/examples/bench_scheduler" "$dir/admin.kubeconfig" "$target/release/keelson-scheduler" "$pods" "$nodes"
  )
done
