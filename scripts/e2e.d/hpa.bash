# Resource metrics and autoscaling on the whole node: `kubectl top` shows a CPU-burning pod's
# usage (held at its 300m limit) within 20% of what its own cgroup counted over about the same
# 10 s; an HPA (50% of a 100m request, 1 to 2 replicas, 20 s scale-down window) scales the
# Deployment up while it burns and back down after the load stops. Sourced by scripts/e2e (k, in_ns, pass, fail, until_ok).

hp_ns=e2e-hpa
k delete namespace "$hp_ns" --wait=true --timeout=60s >/dev/null 2>&1 || true
k create namespace "$hp_ns" >/dev/null
k apply -n "$hp_ns" -f - >/dev/null <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: burner}
spec:
  replicas: 1
  selector: {matchLabels: {app: burner}}
  template:
    metadata: {labels: {app: burner}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: burn
        image: 127.0.0.1:5000/keelson/busybox:1.35
        # Burns CPU until /tmp/stop exists, then idles. The limit holds its rate steady when
        # the machine is busy (scripts/test runs the VM stage beside this), so the agent's
        # sampling window and the test's see the same rate.
        command: ["sh", "-c", "while [ ! -e /tmp/stop ]; do :; done; exec sleep 3600"]
        resources: {requests: {cpu: 100m, memory: 16Mi}, limits: {cpu: 300m}}
EOF
k rollout status -n "$hp_ns" deployment/burner --timeout=120s >/dev/null 2>&1 || true
pod=$(k get pods -n "$hp_ns" -l app=burner -o jsonpath='{.items[0].metadata.name}')

# CPU time (ns) the container's cgroup counted: cgroup v1 cpuacct.usage, or v2 cpu.stat usec.
hp_cpu_ns() {
  k exec -n "$hp_ns" "$1" -- sh -c 'if [ -r /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then cat /sys/fs/cgroup/cpuacct/cpuacct.usage;
    else echo $(( $(sed -n "s/^usage_usec //p" /sys/fs/cgroup/cpu.stat) * 1000 )); fi' 2>/dev/null
}
# The agent samples every 10 s: wait for two samples, then measure over the next 10 s.
sleep 12
u1=$(hp_cpu_ns "$pod") t1=$(date +%s%N)
sleep 10
u2=$(hp_cpu_ns "$pod") t2=$(date +%s%N)
top=$(k top pod -n "$hp_ns" "$pod" --no-headers 2>&1 || true)
cgroup_m=$(( (u2 - u1) * 1000 / (t2 - t1) ))
top_m=$(echo "$top" | awk '{print $2}' | tr -d m)
nodes=$(k top nodes --no-headers 2>&1 || true)
if [[ "$top_m" =~ ^[0-9]+$ ]] && [ "$cgroup_m" -gt 0 ] &&
  [ $(( top_m * 100 / cgroup_m )) -ge 80 ] && [ $(( top_m * 100 / cgroup_m )) -le 120 ] &&
  [[ "$nodes" == "$KEELSON_NODE_NAME "* ]]; then
  pass kubectl_top_shows_a_busy_pods_cpu_within_20_percent_of_its_cgroup
  echo "    kubectl top: ${top_m}m, cgroup: ${cgroup_m}m over the same 10 s"
else
  fail kubectl_top_shows_a_busy_pods_cpu_within_20_percent_of_its_cgroup "top [$top] cgroup ${cgroup_m}m; nodes [$nodes]"
fi

k autoscale -n "$hp_ns" deployment burner --cpu-percent=50 --min=1 --max=2 >/dev/null
k patch hpa burner -n "$hp_ns" --type=merge \
  -p '{"spec":{"behavior":{"scaleDown":{"stabilizationWindowSeconds":20}}}}' >/dev/null
hp_replicas() { k get deployment burner -n "$hp_ns" -o jsonpath='{.spec.replicas}' 2>/dev/null; }
t0=$(date +%s)
until_ok 120 sh -c "[ \"\$(nsenter --net=/var/run/netns/$KEELSON_NETNS kubectl get deployment burner -n $hp_ns -o jsonpath='{.spec.replicas}')\" = 2 ]" || true
up_s=$(( $(date +%s) - t0 ))
up=$(hp_replicas)
k rollout status -n "$hp_ns" deployment/burner --timeout=60s >/dev/null 2>&1 || true
for p in $(k get pods -n "$hp_ns" -l app=burner -o jsonpath='{.items[*].metadata.name}'); do
  k exec -n "$hp_ns" "$p" -- touch /tmp/stop >/dev/null 2>&1 || true
done
t0=$(date +%s)
until_ok 150 sh -c "[ \"\$(nsenter --net=/var/run/netns/$KEELSON_NETNS kubectl get deployment burner -n $hp_ns -o jsonpath='{.spec.replicas}')\" = 1 ]" || true
down_s=$(( $(date +%s) - t0 ))
down=$(hp_replicas)
events=$(k get events -n "$hp_ns" --field-selector reason=SuccessfulRescale -o jsonpath='{range .items[*]}{.message}{"\n"}{end}' 2>/dev/null)
# Down no sooner than the 20 s window allows (the load stopped, then usage must be seen low).
if [ "$up" = 2 ] && [ "$down" = 1 ] && [ "$down_s" -ge 20 ] &&
  [[ "$events" == *"New size: 2; reason: cpu resource utilization (percentage of request) above target"* ]] &&
  [[ "$events" == *"New size: 1; reason:"* ]]; then
  pass hpa_scales_up_under_load_and_down_after_its_window
  echo "    up to 2 after ${up_s} s, down to 1 ${down_s} s after the load stopped (window 20 s)"
else
  fail hpa_scales_up_under_load_and_down_after_its_window "replicas up [$up] after ${up_s}s, down [$down] after ${down_s}s; events: $events; hpa: $(k get hpa -n "$hp_ns" -o wide 2>&1 | tail -n 1)"
fi
k delete namespace "$hp_ns" --wait=false >/dev/null 2>&1 || true
