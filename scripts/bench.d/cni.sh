#!/usr/bin/env bash
# CNI ADD/DEL per operation: keelson-cni (default background veth removal, and syncDelete)
# beside Debian's reference bridge + host-local, N attachments each, in one run.
# Usage: scripts/bench cni [N] [--masq]     (root; test namespaces only, removed afterwards)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# Release build of the small crate only (the bench profile inherits release).
exec cargo bench -q -p keelson-cni --bench cni -- "${@:-200}"
