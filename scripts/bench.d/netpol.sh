#!/usr/bin/env bash
# NetworkPolicy benchmark: 100 policies over 1,000 pods on one node (test hosts), release build.
# Full load and one-pod update beside nft loading the same text alone; TCP connections/s
# through the policies beside the same traffic with no policy table.
# Usage: scripts/bench netpol [seconds per traffic round, default 3]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
[ "$(id -u)" = 0 ] || { echo "netpol bench: needs root (network namespaces)" >&2; exit 1; }
echo "building release netpol_bench ..." >&2
(cd "$root" && cargo build --release -q -p keelson-netpol --example netpol_bench)
exec "$root/target/release/examples/netpol_bench" "$@"
