# shellcheck shell=bash disable=SC2034
# Sourced by the checks that run inside the VMs (flows.sh, cluster.sh, reboot.sh): cargo-like
# result lines, which vm-tests/run counts, and a bounded retry.
export KUBECONFIG=/var/lib/keelson/apiserver/admin.kubeconfig
failed=0
pass() { echo "test vm::$1 ... ok"; }
fail() { echo "test vm::$1 ... FAILED: $2"; failed=1; }
# until_ok SECONDS COMMAND...: until COMMAND succeeds, at most SECONDS.
until_ok() { local end=$((SECONDS + $1)); shift; while [ $SECONDS -lt $end ]; do "$@" >/dev/null 2>&1 && return 0; sleep 1; done; return 1; }
