#!/usr/bin/env bash
# Checks of vm-tests/run shutdown, run inside a VM. Prints cargo-like "test vm::..." lines.
#   shutdown.sh lock            (on the worker) logind's InhibitDelayMaxSec raised to the grace
#                               period by the agent's drop-in; the agent holds a delay lock
#   shutdown.sh pods NODE       (control plane) a regular pod (2 s to exit after SIGTERM) and a
#                               critical one (system-node-critical) Running on NODE
#   shutdown.sh stopped NODE    (control plane, NODE shutting down) both Failed, Terminated, the
#                               critical one stopped after the regular one; NODE not Ready,
#                               "node is shutting down"
#   shutdown.sh after NODE      (control plane, NODE back) the pods still Failed; NODE's
#                               kubelet_graceful_shutdown_{start,end}_time_seconds set
set -uo pipefail
source "$(dirname "$0")/checks.sh"
message="Pod was terminated in response to imminent node shutdown."

lock() {
  local delay drop_in
  drop_in=$(cat /etc/systemd/logind.conf.d/99-keelson-agent.conf 2>&1)
  delay=$(busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec 2>&1)
  if [ "$delay" = "t 30000000" ] && echo "$drop_in" | grep -qx 'InhibitDelayMaxSec=30'; then
    pass logind_inhibit_delay_raised
  else
    fail logind_inhibit_delay_raised "InhibitDelayMaxUSec: $delay; drop-in: $drop_in"
  fi
  local locks
  locks=$(systemd-inhibit --list --mode=delay --no-legend 2>&1)
  if echo "$locks" | grep -q 'keelson-agent.*shutdown.*delay'; then
    pass agent_holds_shutdown_delay_lock
  else
    fail agent_holds_shutdown_delay_lock "$locks"
  fi
}

pod() { # NAME NODE SECONDS-TO-EXIT [PRIORITY-CLASS]
  local class=${4:+"priorityClassName: $4"}
  kubectl apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeName: $2
  terminationGracePeriodSeconds: 20
  $class
  containers:
  - name: app
    image: busybox
    command: [sh, -c, "trap 'sleep $3; exit 0' TERM; while true; do sleep 1; done"]
POD
}
phase() { kubectl get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
running() { [ "$(phase "$1")" = Running ]; }
failed() { [ "$(phase "$1")" = Failed ]; }

pods() {
  pod regular "$1" 2
  pod critical "$1" 0 system-node-critical
  if until_ok 300 running regular && until_ok 60 running critical; then
    pass pods_run_before_shutdown
  else
    fail pods_run_before_shutdown "$(kubectl get pods -o wide 2>&1)"
  fi
}

stopped() {
  local node=$1 ready=""
  # The node's status says why while it goes down (until node lifecycle marks it Unknown).
  for _ in $(seq 1 60); do
    ready=$(kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}')
    case $ready in "False node is shutting down"*) break ;; esac
    sleep 1
  done
  case $ready in
    "False node is shutting down"*) pass node_not_ready_while_shutting_down ;;
    *) fail node_not_ready_while_shutting_down "Ready: $ready" ;;
  esac
  if until_ok 120 failed regular && until_ok 60 failed critical; then
    pass pods_failed_at_shutdown
  else
    fail pods_failed_at_shutdown "$(kubectl get pods -o wide 2>&1)"
  fi
  local p got
  for p in regular critical; do
    got=$(kubectl get pod "$p" -o jsonpath='{.status.reason}|{.status.message}|{.status.conditions[?(@.type=="DisruptionTarget")].reason}')
    if [ "$got" = "Terminated|$message|TerminationByKubelet" ]; then
      pass "${p}_pod_terminated_by_shutdown"
    else
      fail "${p}_pod_terminated_by_shutdown" "reason|message|DisruptionTarget: $got"
    fi
  done
  local regular_end critical_end
  regular_end=$(kubectl get pod regular -o jsonpath='{.status.containerStatuses[0].state.terminated.finishedAt}')
  critical_end=$(kubectl get pod critical -o jsonpath='{.status.containerStatuses[0].state.terminated.finishedAt}')
  if [ -n "$regular_end" ] && [ -n "$critical_end" ] && [[ ! "$critical_end" < "$regular_end" ]]; then
    pass critical_pod_stopped_last
  else
    fail critical_pod_stopped_last "regular ended at '$regular_end', critical at '$critical_end'"
  fi
}

after() {
  local node=$1
  if until_ok 300 kubectl wait --for=condition=Ready "node/$node" --timeout=1s; then
    pass node_ready_after_reboot
  else
    fail node_ready_after_reboot "$(kubectl get nodes 2>&1)"
  fi
  sleep 10
  if failed regular && failed critical; then
    pass shutdown_pods_stay_failed
  else
    fail shutdown_pods_stay_failed "$(kubectl get pods -o wide 2>&1)"
  fi
  # The agent's metrics, read with the admin's token (the agent has it reviewed).
  local ip token metrics start end
  ip=$(kubectl get node "$node" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
  token=$(kubectl config view --raw -o jsonpath='{.users[0].user.token}')
  metrics=$(curl -sk -m 10 -H "Authorization: Bearer $token" "https://$ip:10250/metrics" 2>&1)
  start=$(echo "$metrics" | awk '$1 == "kubelet_graceful_shutdown_start_time_seconds" {print $2}')
  end=$(echo "$metrics" | awk '$1 == "kubelet_graceful_shutdown_end_time_seconds" {print $2}')
  if [ -n "$start" ] && [ -n "$end" ] && awk -v s="$start" -v e="$end" 'BEGIN {exit !(s > 0 && e >= s)}'; then
    pass shutdown_times_in_metrics
  else
    fail shutdown_times_in_metrics "start '$start', end '$end': $(echo "$metrics" | grep -i shutdown | head -5) $(echo "$metrics" | head -c 300)"
  fi
}

"$@"
exit $failed
