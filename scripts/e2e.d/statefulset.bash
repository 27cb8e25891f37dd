# A StatefulSet on the whole node, as a user checks it: three pods with claims on the default
# StorageClass (local-path, made by scripts/up) start in order; a file pod 1 wrote is there after
# pod 1 is deleted and made again; each pod's name resolves through the headless Service
# (<pod>.<service>); scaling down keeps the claims. Sourced by scripts/e2e (k, pass, fail,
# until_ok). Removes what it makes, claims included.

k apply -f - >/dev/null <<'YAML' || true
apiVersion: v1
kind: Service
metadata: {name: e2e-sts, namespace: default}
spec:
  clusterIP: None
  selector: {app: e2e-sts}
  ports: [{name: tcp, port: 7}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: e2e-sts, namespace: default}
spec:
  replicas: 3
  serviceName: e2e-sts
  selector: {matchLabels: {app: e2e-sts}}
  template:
    metadata: {labels: {app: e2e-sts}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: c
        image: 127.0.0.1:5000/keelson/busybox:1.35
        command: [sh, -c, 'trap "exit 0" TERM; while true; do sleep 1; done']
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 16Mi}}
YAML

sts_ready() { [ "$(k get sts e2e-sts -o jsonpath='{.status.readyReplicas}')" = "$1" ]; }
sts_jp() { k get "$1" "$2" -o jsonpath="$3" 2>/dev/null; }

# In order: each pod was made only after the one before it became Ready.
if until_ok 180 sts_ready 3; then
  sts_order=ok
  for sts_i in 1 2; do
    sts_prev_ready=$(sts_jp pod "e2e-sts-$((sts_i - 1))" '{.status.conditions[?(@.type=="Ready")].lastTransitionTime}')
    sts_made=$(sts_jp pod "e2e-sts-$sts_i" '{.metadata.creationTimestamp}')
    if [ -z "$sts_prev_ready" ] || [[ "$sts_made" < "$sts_prev_ready" ]]; then
      sts_order="e2e-sts-$sts_i made at $sts_made, before e2e-sts-$((sts_i - 1)) was ready at $sts_prev_ready"
    fi
  done
  if [ "$sts_order" = ok ]; then pass statefulset_pods_start_in_order; else fail statefulset_pods_start_in_order "$sts_order"; fi
else
  fail statefulset_pods_start_in_order "not 3 ready pods: $(k get sts,pods,pvc -l app=e2e-sts 2>&1 | head -c 800); $(k describe pod e2e-sts-0 2>&1 | sed -n '/^Events:/,$p' | head -c 600)"
fi

sts_claims() { k get pvc -o jsonpath='{range .items[*]}{.metadata.name}={.status.phase} {end}' 2>/dev/null | tr ' ' '\n' | grep '^data-e2e-sts-' | sort | tr '\n' ' '; }
sts_want_claims='data-e2e-sts-0=Bound data-e2e-sts-1=Bound data-e2e-sts-2=Bound '
sts_claims_bound() { [ "$(sts_claims)" = "$sts_want_claims" ]; }
if until_ok 30 sts_claims_bound; then
  pass statefulset_claims_are_bound_on_local_path
else
  fail statefulset_claims_are_bound_on_local_path "want $sts_want_claims; got $(sts_claims)"
fi

if [ "$(k exec e2e-sts-0 -- hostname 2>&1)" = e2e-sts-0 ]; then
  pass statefulset_pod_hostname_is_its_name
else
  fail statefulset_pod_hostname_is_its_name "got $(k exec e2e-sts-0 -- hostname 2>&1 | head -c 300)"
fi

# Pod 1's data outlives pod 1.
sts_token="kept-$RANDOM$RANDOM"
k exec e2e-sts-1 -- sh -c "echo $sts_token > /data/token" >/dev/null 2>&1 || true
sts_old_uid=$(sts_jp pod e2e-sts-1 '{.metadata.uid}')
k delete pod e2e-sts-1 --wait=true --timeout=60s >/dev/null 2>&1 || true
sts_back() { local uid; uid=$(sts_jp pod e2e-sts-1 '{.metadata.uid}'); [ -n "$uid" ] && [ "$uid" != "$sts_old_uid" ] && sts_ready 3; }
if until_ok 120 sts_back && [ "$(k exec e2e-sts-1 -- cat /data/token 2>&1)" = "$sts_token" ]; then
  pass statefulset_pod_data_survives_pod_deletion
else
  fail statefulset_pod_data_survives_pod_deletion "want $sts_token; got $(k exec e2e-sts-1 -- cat /data/token 2>&1 | head -c 300); $(k get pods -l app=e2e-sts -o wide 2>&1 | head -c 600)"
fi

# Stable DNS names through the headless Service, from another pod. Full names: busybox's nslookup
# applies the search path only to names without a dot, unlike libc's resolver with ndots:5.
sts_ip0=$(sts_jp pod e2e-sts-0 '{.status.podIP}')
sts_ip2=$(sts_jp pod e2e-sts-2 '{.status.podIP}')
k run e2e-sts-dns --image=127.0.0.1:5000/keelson/busybox:1.35 --restart=Never --command -- sh -c \
  'echo "=== short"; nslookup e2e-sts-0.e2e-sts.default.svc.cluster.local; echo "=== full"; nslookup e2e-sts-2.e2e-sts.default.svc.cluster.local; echo "=== end"' >/dev/null 2>&1 || true
sts_dns_done() { [ "$(sts_jp pod e2e-sts-dns '{.status.phase}')" = Succeeded ]; }
until_ok 120 sts_dns_done || true
sts_dns=$(k logs e2e-sts-dns 2>&1)
sts_section() { awk -v q="=== $1" '$0 == q {on = 1; next} /^=== / {on = 0} on' <<<"$sts_dns"; }
if [ -n "$sts_ip0" ] && sts_section short | grep -q "^Address: $sts_ip0\$" &&
  [ -n "$sts_ip2" ] && sts_section full | grep -q "^Address: $sts_ip2\$"; then
  pass statefulset_pod_names_resolve_through_the_headless_service
else
  fail statefulset_pod_names_resolve_through_the_headless_service "want $sts_ip0 and $sts_ip2; got: $(head -c 800 <<<"$sts_dns")"
fi
k delete pod e2e-sts-dns --wait=false >/dev/null 2>&1 || true

# Scale down: the highest ordinals go, their claims stay.
k scale sts e2e-sts --replicas=1 >/dev/null 2>&1 || true
sts_one() { [ "$(k get pods -l app=e2e-sts -o jsonpath='{.items[*].metadata.name}')" = e2e-sts-0 ] && sts_ready 1; }
if until_ok 90 sts_one && [ "$(sts_claims)" = "$sts_want_claims" ]; then
  pass statefulset_scale_down_keeps_the_claims
else
  fail statefulset_scale_down_keeps_the_claims "pods $(k get pods -l app=e2e-sts -o name 2>&1 | tr '\n' ' '); claims $(sts_claims)"
fi

k delete sts e2e-sts --wait=true --timeout=60s >/dev/null 2>&1 || true
k delete service e2e-sts >/dev/null 2>&1 || true
sts_gone() { [ -z "$(k get pods -l app=e2e-sts -o name 2>/dev/null)" ]; }
until_ok 60 sts_gone || true
k delete pvc data-e2e-sts-0 data-e2e-sts-1 data-e2e-sts-2 --wait=false >/dev/null 2>&1 || true
