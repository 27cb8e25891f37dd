#!/usr/bin/env bash
# Checks of vm-tests/run reboot, run inside a VM. Prints cargo-like "test vm::..." lines.
#   reboot.sh back NODE 'POD...'   (control plane) NODE Ready again and the same pods Ready, each
#                                  container restarted; the Ingress answers from them
#   reboot.sh leftovers NODE N     (on NODE) exactly N pod veths, N per-pod NAT chains and N
#                                  address allocations, the N being its running pods
set -uo pipefail
source "$(dirname "$0")/checks.sh"

back() {
  local node=$1 pods=$2
  if until_ok 300 kubectl wait --for=condition=Ready "node/$node" --timeout=1s; then
    pass node_ready_after_reboot
  else
    fail node_ready_after_reboot "$(kubectl get nodes 2>&1)"
  fi
  restarted() {
    local p
    for p in $pods; do
      [ "$(kubectl get pod "$p" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ] || return 1
      [ "$(kubectl get pod "$p" -o jsonpath='{.status.containerStatuses[0].restartCount}')" -ge 1 ] || return 1
    done
  }
  if until_ok 300 restarted; then
    pass pods_run_again_after_reboot
  else
    fail pods_run_again_after_reboot "$(kubectl get pods -o wide 2>&1)"
  fi
  local seen=""
  for _ in $(seq 1 60); do
    seen=$(printf '%s\n%s\n' "$seen" "$(curl -s -m 5 -H 'Host: web.example.test' http://127.0.0.1/)" | grep '^web-' | sort -u)
    [ "$(echo "$seen" | grep -c '^web-')" -ge 2 ] && break
    sleep 1
  done
  if [ "$(echo "$seen" | grep -c '^web-')" -ge 2 ]; then
    pass ingress_answers_after_reboot
  else
    fail ingress_answers_after_reboot "saw [$(echo $seen)]"
  fi
}

leftovers() {
  local node=$1 want=$2 veths chains allocs
  # The pods' own count settles once every sandbox is up.
  sleep 5
  veths=$(ip -o link show type veth | wc -l)
  chains=$(iptables-save -t nat | grep -c '^:KCNI-')
  # The address allocations: one file per address in the IPAM's data folder of the node.
  allocs=$(find "/var/lib/keelson/$node/cni" -type f -name '[0-9]*.[0-9]*.[0-9]*.[0-9]*' 2>/dev/null | wc -l)
  if [ "$veths" = "$want" ] && [ "$chains" = "$want" ] && [ "$allocs" = "$want" ]; then
    pass "no_leftovers_on_${node//-/_}"
  else
    fail "no_leftovers_on_${node//-/_}" "want $want each: veths $veths, KCNI chains $chains, allocations $allocs ($(find "/var/lib/keelson/$node/cni" -type f | head -20 | tr '\n' ' '))"
  fi
}

what=${1:?back or leftovers}
shift
"$what" "$@"
exit $failed
