#!/usr/bin/env bash
# Runs inside a VM where Keelson's scripts/up ran: the three flows with kubectl, as a user checks
# them. Prints cargo-like "test vm::NAME ... ok|FAILED" lines and exits non-zero on a failure.
#   flows.sh EXAMPLES_DIR [REPLICAS]
set -uo pipefail
examples=${1:?examples dir}
replicas=${2:-3}
source "$(dirname "$0")/checks.sh"

# The node as systemd runs it: the units are active and enabled (they come back after a reboot),
# on the unified cgroup hierarchy.
units=$(systemctl list-units --no-legend --plain 'keelson-*' containerd.service | awk '{print $1 "=" $3}' | tr '\n' ' ')
if [ "$(stat -fc %T /sys/fs/cgroup)" = cgroup2fs ] &&
  systemctl is-enabled --quiet keelson-apiserver keelson-agent containerd &&
  ! echo "$units" | grep -q '=failed\|=inactive'; then
  pass node_runs_as_systemd_units_on_cgroup_v2
else
  fail node_runs_as_systemd_units_on_cgroup_v2 "cgroup $(stat -fc %T /sys/fs/cgroup), units: $units"
fi

# A container's limits reach its cgroup, whichever layout the node has (v2 here: memory.max,
# cpu.max; v1: the memory and cpu controllers' files), as the same numbers.
kubectl delete pod vm-limits --ignore-not-found >/dev/null 2>&1
kubectl apply -f - >/dev/null <<'POD'
apiVersion: v1
kind: Pod
metadata: {name: vm-limits}
spec:
  restartPolicy: Never
  containers:
  - name: c
    image: busybox
    command: [sh, -c, 'if [ -e /sys/fs/cgroup/cpu.max ]; then echo limits $(cat /sys/fs/cgroup/memory.max) $(cat /sys/fs/cgroup/cpu.max); else echo limits $(cat /sys/fs/cgroup/memory/memory.limit_in_bytes) $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us); fi']
    resources:
      limits: {cpu: 250m, memory: 64Mi}
POD
until_ok 300 sh -c '[ "$(kubectl get pod vm-limits -o jsonpath={.status.phase})" = Succeeded ]'
if kubectl logs vm-limits 2>/dev/null | grep -qx 'limits 67108864 25000 100000'; then
  pass limits_reach_the_containers_cgroup
else
  fail limits_reach_the_containers_cgroup "phase $(kubectl get pod vm-limits -o jsonpath='{.status.phase}'), log: $(kubectl logs vm-limits 2>&1 | head -3)"
fi
kubectl delete pod vm-limits --wait=false >/dev/null 2>&1

kubectl apply -f "$examples/" >/dev/null || fail apply "kubectl apply -f $examples/"
[ "$replicas" = 3 ] || kubectl scale deployment/web --replicas="$replicas" >/dev/null

# Flow 1: the Deployment's pods run and are Ready (pods of an earlier rollout still shutting down
# are not counted).
if kubectl rollout status deployment/web --timeout=600s >/dev/null &&
  [ "$(kubectl get pods -l app=web -o jsonpath='{range .items[*]}{.status.phase}/{.metadata.deletionTimestamp}{"\n"}{end}' | grep -c '^Running/$')" = "$replicas" ]; then
  pass deployment_becomes_ready_pods
else
  fail deployment_becomes_ready_pods "$(kubectl get pods -o wide 2>&1)"
fi

# Flow 2: from a pod, the Service ClusterIP answers with two different pods' names.
ip=$(kubectl get service web -o jsonpath='{.spec.clusterIP}')
kubectl delete pod vm-client --ignore-not-found --wait=true >/dev/null 2>&1
kubectl run vm-client --image=busybox --restart=Never --command -- sh -c "
  first=''; i=0; while [ \$i -lt 300 ]; do n=\$(timeout 5 wget -qO- http://$ip/); echo \"\$n\";
    if [ -n \"\$n\" ] && [ -n \"\$first\" ] && [ \"\$n\" != \"\$first\" ]; then exit 0; fi
    [ -z \"\$first\" ] && first=\$n; i=\$((i + 1)); sleep 0.2; done; exit 1" >/dev/null
until_ok 300 sh -c '[ "$(kubectl get pod vm-client -o jsonpath={.status.phase})" = Succeeded ]'
names=$(kubectl logs vm-client 2>/dev/null | grep '^web-' | sort -u)
if [ "$(echo "$names" | grep -c '^web-')" -ge 2 ]; then
  pass service_cluster_ip_reaches_the_pods
else
  fail service_cluster_ip_reaches_the_pods "phase $(kubectl get pod vm-client -o jsonpath='{.status.phase}'), saw: $(kubectl logs vm-client 2>&1 | head -5)"
fi
kubectl delete pod vm-client --wait=false >/dev/null 2>&1

# Flow 3: the Ingress routes Host web.example.test to the pods; an unknown host gets 404.
seen=""
for _ in $(seq 1 240); do
  seen=$(printf '%s\n%s\n' "$seen" "$(curl -s -m 5 -H 'Host: web.example.test' http://127.0.0.1/)" | grep '^web-' | sort -u)
  [ "$(echo "$seen" | grep -c '^web-')" -ge 2 ] && break
  sleep 0.5
done
unknown=$(curl -s -m 5 -o /dev/null -w '%{http_code}' -H 'Host: nope.example.test' http://127.0.0.1/)
if [ "$(echo "$seen" | grep -c '^web-')" -ge 2 ] && [ "$unknown" = 404 ]; then
  pass ingress_routes_http_to_the_pods
else
  fail ingress_routes_http_to_the_pods "saw [$(echo $seen)], unknown host $unknown"
fi
exit $failed
