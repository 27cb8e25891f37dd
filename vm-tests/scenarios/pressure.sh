#!/usr/bin/env bash
# Runs inside a VM (cgroup v2) where scripts/up ran. First the QoS classes as the kubelet sets
# them: each container's oom_score_adj (Guaranteed -997, BestEffort 1000, Burstable by its
# memory request; the build machine's containerd cannot show negative values outside a VM) and
# the pods' QoS cgroups. Then memory pressure: with allocatable memory made small
# (--kube-reserved), a BestEffort pod filling memory is evicted before a Guaranteed one, and the
# node's MemoryPressure comes and clears.
set -uo pipefail
source "$(dirname "$0")/checks.sh"
node=$(kubectl get nodes -o jsonpath='{.items[0].metadata.name}')
root=/sys/fs/cgroup/keelson/$node
mem_total_kib=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)

pod() { # NAME RESOURCES [COMMAND]
  kubectl apply -f - >/dev/null <<POD
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeName: $node
  terminationGracePeriodSeconds: 2
  volumes: [{name: mem, emptyDir: {medium: Memory, sizeLimit: 700Mi}}]
  containers:
  - name: app
    image: busybox
    command: [sh, -c, '${3:-sleep 3600}']
    volumeMounts: [{name: mem, mountPath: /mem}]
    resources: $2
POD
}
running() { [ "$(kubectl get pod "$1" -o jsonpath='{.status.phase}')" = Running ]; }
uid() { kubectl get pod "$1" -o jsonpath='{.metadata.uid}'; }
oom() { kubectl exec "$1" -- cat /proc/1/oom_score_adj 2>&1; }

pod gold '{limits: {cpu: 100m, memory: 64Mi}}'
pod silver '{requests: {cpu: 100m, memory: 512Mi}}'
pod bronze '{}'
for p in gold silver bronze; do until_ok 300 running "$p" || fail "${p}_runs" "$(kubectl get pod "$p" -o wide 2>&1)"; done

silver_want=$((1000 - 1000 * 512 * 1024 / mem_total_kib))
got="$(oom gold) $(oom silver) $(oom bronze)"
if [ "$got" = "-997 $silver_want 1000" ]; then
  pass oom_score_adj_by_qos_class
else
  fail oom_score_adj_by_qos_class "gold silver bronze: $got, want -997 $silver_want 1000"
fi

gold_cg=$root/pod$(uid gold) silver_cg=$root/burstable/pod$(uid silver) bronze_cg=$root/besteffort/pod$(uid bronze)
got="$(cat "$gold_cg/memory.max" "$gold_cg/cpu.max" "$silver_cg/cpu.weight" "$silver_cg/memory.max" "$root/besteffort/cpu.weight" "$bronze_cg/cpu.weight" 2>&1 | tr '\n' ' ')"
# cpu.weight: runc's conversion of cpu.shares (100m: 102 shares -> 4; BestEffort: 2 -> 1).
if [ "$got" = "67108864 10000 100000 4 max 1 1 " ]; then
  pass qos_cgroups_on_cgroup_v2
else
  fail qos_cgroups_on_cgroup_v2 "gold memory.max, cpu.max; silver cpu.weight, memory.max; besteffort, bronze cpu.weight: $got"
fi
kubectl delete pod gold silver bronze --wait=true >/dev/null 2>&1

# Allocatable memory 600Mi (700Mi less the 100Mi hard threshold): pods together past it are
# under pressure, and the node-level cgroup (700Mi) keeps the kernel's OOM killer out of it.
# The eviction frees the memory at once: the condition stays the transition period (60 s) after.
unit=/etc/systemd/system/keelson-agent.service
reserved=$((mem_total_kib - 700 * 1024))
sed -i "s|^ExecStart=.*|& --kube-reserved memory=${reserved}Ki --housekeeping-interval 1s --eviction-pressure-transition-period 60s|" "$unit"
systemctl daemon-reload && systemctl restart keelson-agent
until_ok 120 sh -c "[ \"\$(kubectl get node $node -o jsonpath='{.status.allocatable.memory}')\" = 614400Ki ]" ||
  fail allocatable_follows_kube_reserved "$(kubectl get node "$node" -o jsonpath='{.status.allocatable}')"
pressure() { kubectl get node "$node" -o jsonpath='{.status.conditions[?(@.type=="MemoryPressure")].status}'; }
pod steady '{limits: {cpu: 100m, memory: 200Mi}}' 'dd if=/dev/zero of=/mem/f bs=1M count=80; sleep 3600'
until_ok 300 running steady || fail steady_runs "$(kubectl get pod steady -o wide 2>&1)"
pod greedy '{}' 'dd if=/dev/zero of=/mem/f bs=1M count=560; sleep 3600'
if until_ok 120 sh -c "[ \"\$(kubectl get pod greedy -o jsonpath='{.status.reason}')\" = Evicted ]" &&
  [ "$(pressure)" = True ] && running steady; then
  pass best_effort_pod_is_evicted_before_the_guaranteed_one
else
  fail best_effort_pod_is_evicted_before_the_guaranteed_one "node MemoryPressure $(pressure); $(kubectl get pods -o wide 2>&1); $(journalctl -u keelson-agent -n 20 --no-pager 2>&1)"
fi
if until_ok 180 sh -c "[ \"\$(kubectl get node $node -o jsonpath='{.status.conditions[?(@.type==\"MemoryPressure\")].status}')\" = False ]" &&
  running steady; then
  pass memory_pressure_clears_and_the_guaranteed_pod_stays
else
  fail memory_pressure_clears_and_the_guaranteed_pod_stays "MemoryPressure $(pressure); $(kubectl get pods -o wide 2>&1)"
fi
kubectl delete pod steady greedy --wait=false >/dev/null 2>&1
exit "$failed"
