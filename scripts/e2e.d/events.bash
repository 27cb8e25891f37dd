# Events and service links on the whole node, as a user reads them: kubectl describe shows the
# deployment controller's ScalingReplicaSet, the scheduler's Scheduled and FailedScheduling
# (upstream's "0/N nodes are available: ..." text, repeats counted into one Event), the ingress
# controller's Sync; a pod started after Service web sees WEB_SERVICE_HOST. Sourced by
# scripts/e2e (k, pass, fail, until_ok). Removes what it makes.

ev_describe_has() { # WHAT NAME TEXT...: kubectl describe WHAT NAME shows every TEXT
  local out
  out=$(k describe "$1" "$2" 2>&1) || return 1
  shift 2
  for t in "$@"; do grep -qF -- "$t" <<<"$out" || return 1; done
}

if until_ok 30 ev_describe_has deployment web ScalingReplicaSet "Scaled up replica set web-" deployment-controller; then
  pass events_describe_deployment_shows_scaling_replica_set
else
  fail events_describe_deployment_shows_scaling_replica_set "$(k describe deployment web 2>&1 | sed -n '/^Events:/,$p' | head -c 800)"
fi

ev_pod=$(k get pods -l app=web -o jsonpath='{.items[0].metadata.name}')
if until_ok 30 ev_describe_has pod "$ev_pod" Scheduled "Successfully assigned default/$ev_pod to" default-scheduler; then
  pass events_describe_pod_shows_scheduled
else
  fail events_describe_pod_shows_scheduled "$(k describe pod "$ev_pod" 2>&1 | sed -n '/^Events:/,$p' | head -c 800)"
fi

if until_ok 30 ev_describe_has ingress web Sync "Scheduled for sync"; then
  pass events_describe_ingress_shows_sync
else
  fail events_describe_ingress_shows_sync "$(k describe ingress web 2>&1 | sed -n '/^Events:/,$p' | head -c 800)"
fi

# A pod no node can take: upstream's message, in describe and in the PodScheduled condition.
k run e2e-events-nowhere --image=127.0.0.1:5000/keelson/busybox:1.35 --restart=Never \
  --overrides='{"spec":{"nodeSelector":{"e2e-events":"nowhere"}}}' --command -- sleep 60 >/dev/null || true
ev_nodes=$(k get nodes -o name | wc -l)
ev_want="0/$ev_nodes nodes are available: $ev_nodes node(s) didn't match Pod's node affinity/selector. preemption: 0/$ev_nodes nodes are available: $ev_nodes Preemption is not helpful for scheduling.."
if until_ok 30 ev_describe_has pod e2e-events-nowhere FailedScheduling "$ev_want"; then
  pass events_unschedulable_pod_shows_failed_scheduling
else
  fail events_unschedulable_pod_shows_failed_scheduling "want $ev_want; got $(k describe pod e2e-events-nowhere 2>&1 | sed -n '/^Conditions:/,$p' | head -c 800)"
fi
# The scheduler tries again at least every 10 s: one Event whose count grows.
ev_counts() { k get events --field-selector involvedObject.name=e2e-events-nowhere,reason=FailedScheduling -o jsonpath='{.items[*].count}'; }
ev_counted() { local c; c=$(ev_counts); [ "$(wc -w <<<"$c")" = 1 ] && [ "$c" -gt 1 ]; }
if until_ok 45 ev_counted; then
  pass events_repeated_failed_scheduling_is_one_counted_event
else
  fail events_repeated_failed_scheduling_is_one_counted_event "counts: $(ev_counts)"
fi
k delete pod e2e-events-nowhere --wait=false >/dev/null 2>&1 || true

# Service links: Service web exists before this pod starts.
k run e2e-events-env --image=127.0.0.1:5000/keelson/busybox:1.35 --restart=Never --command -- sh -c 'env; echo END' >/dev/null || true
ev_web_ip=$(k get service web -o jsonpath='{.spec.clusterIP}')
ev_env_ok() { k logs e2e-events-env 2>/dev/null | grep -qx "WEB_SERVICE_HOST=$ev_web_ip"; }
if until_ok 60 ev_env_ok && k logs e2e-events-env | grep -qx "WEB_PORT_80_TCP_ADDR=$ev_web_ip"; then
  pass events_pod_env_has_web_service_host
else
  fail events_pod_env_has_web_service_host "want WEB_SERVICE_HOST=$ev_web_ip; got: $(k logs e2e-events-env 2>&1 | grep -E '^(WEB|KUBERNETES)_' | head -c 800)"
fi
k delete pod e2e-events-env --wait=false >/dev/null 2>&1 || true
