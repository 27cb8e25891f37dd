#!/usr/bin/env bash
# Runs on the control-plane VM of vm-tests/run cluster: checks across the nodes with kubectl.
#   cluster.sh across NODE...            a client pod on each node reaches, through the Service's
#                                        ClusterIP, pods that run on another node
#   cluster.sh failover DEAD LIVE N      after node DEAD lost power: it goes NotReady, its pods are
#                                        replaced on LIVE (N ready there), the Ingress answers from them
# Prints cargo-like "test vm::NAME ... ok|FAILED" lines; exits non-zero on a failure.
set -uo pipefail
source "$(dirname "$0")/checks.sh"
# name=node of each web pod that is not being deleted.
placement() {
  kubectl get pods -l app=web -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.metadata.name}={.spec.nodeName}={.metadata.deletionTimestamp}{"\n"}{end}' |
    awk -F= '$3 == "" {print $1 "=" $2}'
}

across() {
  local ip placed node name names other
  ip=$(kubectl get service web -o jsonpath='{.spec.clusterIP}')
  placed=$(placement)
  for node in "$@"; do
    echo "$placed" | grep -q "=$node\$" || { fail pods_run_on_every_worker "no web pod on $node: $(echo $placed)"; return; }
  done
  pass pods_run_on_every_worker
  for node in "$@"; do
    name=client-$node
    kubectl delete pod "$name" --ignore-not-found >/dev/null 2>&1
    # 40 requests over pods half of which are elsewhere: all landing on this node is 2^-40.
    kubectl run "$name" --image=busybox --restart=Never --overrides="{\"apiVersion\":\"v1\",\"spec\":{\"nodeName\":\"$node\"}}" \
      --command -- sh -c "i=0; while [ \$i -lt 40 ]; do timeout 5 wget -qO- http://$ip/; i=\$((i + 1)); done" >/dev/null
    until_ok 300 sh -c "[ \"\$(kubectl get pod $name -o jsonpath={.status.phase})\" = Succeeded ]"
    names=$(kubectl logs "$name" 2>/dev/null | grep '^web-' | sort -u)
    other=$(for n in $names; do echo "$placed" | grep "^$n=" | grep -v "=$node\$"; done)
    if [ -n "$other" ]; then
      pass "cluster_ip_from_${node//-/_}_reaches_pods_on_other_nodes"
    else
      fail "cluster_ip_from_${node//-/_}_reaches_pods_on_other_nodes" "answers from [$(echo $names)], pods [$(echo $placed)]"
    fi
    kubectl delete pod "$name" --wait=false >/dev/null 2>&1
  done
}

failover() {
  local dead=$1 live=$2 want=$3 seen placed
  if until_ok 180 sh -c "[ \"\$(kubectl get node $dead -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}')\" != True ]"; then
    pass "node_${dead//-/_}_goes_not_ready"
  else
    fail "node_${dead//-/_}_goes_not_ready" "$(kubectl get nodes 2>&1)"
  fi
  ready_on_live() {
    [ "$(placement | grep -c "=$live\$")" -ge "$want" ] && ! placement | grep -q "=$dead\$" &&
      [ "$(kubectl get deployment web -o jsonpath='{.status.readyReplicas}')" = "$want" ]
  }
  if until_ok 300 ready_on_live; then
    pass "pods_of_${dead//-/_}_replaced_on_${live//-/_}"
  else
    fail "pods_of_${dead//-/_}_replaced_on_${live//-/_}" "$(kubectl get pods -o wide 2>&1)"
  fi
  placed=$(placement)
  seen=""
  for _ in $(seq 1 20); do
    seen="$seen $(curl -s -m 5 -H 'Host: web.example.test' http://127.0.0.1/)"
  done
  bad=$(for n in $seen; do echo "$placed" | grep -q "^$n=$live\$" || echo "$n"; done)
  if [ -n "$(echo $seen)" ] && [ -z "$bad" ] && [ "$(echo $seen | wc -w)" = 20 ]; then
    pass ingress_answers_from_the_live_node
  else
    fail ingress_answers_from_the_live_node "answers [$(echo $seen)], pods [$(echo $placed)]"
  fi
}

what=${1:?across or failover}
shift
"$what" "$@"
exit $failed
