# NetworkPolicy on the whole node (keelson-netpol, real pods): three namespaces x three pods
# serving HTTP on a named port, every pair probed from inside the pods; a default deny with an
# allow from one namespace on the named port, also through a ClusterIP; how long a new policy
# takes to reach the kernel; removing every policy opens everything and leaves no table.
# Sourced by scripts/e2e (k, in_ns, pass, fail, until_ok). Removes what it makes.

np_nss="x y z"
np_pods="a b c"
np_cleanup() { for n in $np_nss; do k delete namespace "e2e-np-$n" --wait=false >/dev/null 2>&1 || true; done; }

np_manifest() {
  local n p
  for n in $np_nss; do
    printf -- '---\napiVersion: v1\nkind: Namespace\nmetadata: {name: e2e-np-%s, labels: {e2e-np: "%s"}}\n' "$n" "$n"
    for p in $np_pods; do
      cat <<EOF
---
apiVersion: v1
kind: Pod
metadata: {name: $p, namespace: e2e-np-$n, labels: {app: $p}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: 127.0.0.1:5000/keelson/podname-http:1
    ports: [{name: http, containerPort: 8080}]
EOF
    done
  done
}

# "ns/pod ip" of every pod, once all are Running with an address.
np_ips() {
  local n
  for n in $np_nss; do
    k get pods -n "e2e-np-$n" -o jsonpath='{range .items[*]}{.metadata.namespace}/{.metadata.name} {.status.podIP} {.status.phase}{"\n"}{end}'
  done | sed 's/^e2e-np-//' | awk '$3 == "Running" && $2 != "" {print $1, $2}'
}

# Every pod asks every pod (and $1, an extra "name=ip", when given) on port 8080, all at once;
# prints "src->dst ok|no" sorted.
np_probe() {
  local extra=${1:-} targets src out
  targets=$(np_ips | awk '{printf "%s=%s ", $1, $2}')$extra
  out=$(mktemp -d)
  for src in $(np_ips | awk '{print $1}'); do
    k exec -n "e2e-np-${src%/*}" "${src#*/}" -- sh -c "
      for t in $targets; do
        (if timeout 2 wget -q -O /dev/null http://\${t#*=}:8080/ 2>/dev/null; then echo \"$src->\${t%%=*} ok\"; else echo \"$src->\${t%%=*} no\"; fi) 2>/dev/null &
      done; wait" >"$out/${src/\//-}" 2>&1 &
  done
  wait
  cat "$out"/* | sort
  rm -rf "$out"
}

# Compares a probe with the truth `np_want SRC_NS SRC_POD DST_NS DST_POD` (0: connects); prints
# the wrong ones. A pod reaching its own address never leaves it, so no policy applies.
np_check() {
  local line pair res s d want wrong=0 total=0
  while read -r pair res; do
    s=${pair%%->*} d=${pair#*->}
    if [ "$s" = "$d" ] || np_want "${s%/*}" "${s#*/}" "${d%/*}" "${d#*/}"; then want=ok; else want=no; fi
    total=$((total + 1))
    [ "$res" = "$want" ] || { wrong=$((wrong + 1)); echo "  $pair: $res (want $want)"; }
  done
  [ "$total" -ge 81 ] || echo "  only $total probes"
}

np_cleanup
until_ok 60 sh -c "! nsenter --net=/var/run/netns/$KEELSON_NETNS kubectl get namespace e2e-np-x e2e-np-y e2e-np-z >/dev/null 2>&1" || true
np_manifest | k apply -f - >/dev/null
until_ok 120 sh -c "[ \$(nsenter --net=/var/run/netns/$KEELSON_NETNS kubectl get pods -A -l 'app in (a,b,c)' --no-headers 2>/dev/null | grep e2e-np- | grep -c Running) = 9 ]" || true

np_want() { return 0; }
wrong=$(np_probe | np_check)
if [ "$(np_ips | wc -l)" = 9 ] && [ -z "$wrong" ]; then
  pass netpol_without_policies_every_pod_reaches_every_pod
else
  fail netpol_without_policies_every_pod_reaches_every_pod "$(np_ips | wc -l) pods running; wrong:
$wrong"
fi

# Default deny in x, and an allow from namespace y on the named port only.
k apply -f - >/dev/null <<'EOF'
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: e2e-np-x}
spec: {podSelector: {}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-y, namespace: e2e-np-x}
spec:
  podSelector: {}
  ingress:
  - from: [{namespaceSelector: {matchLabels: {e2e-np: "y"}}}]
    ports: [{port: http}]
---
apiVersion: v1
kind: Service
metadata: {name: a, namespace: e2e-np-x}
spec:
  selector: {app: a}
  ports: [{port: 8080, targetPort: http}]
EOF
np_want() { [ "$3" != x ] || [ "$1" = y ]; }
svc=$(k get service a -n e2e-np-x -o jsonpath='{.spec.clusterIP}')
until_ok 10 sh -c "nsenter --net=/var/run/netns/$KEELSON_NETNS nft list table inet keelson-netpol | grep -q 'e2e-np-x/from-y'" || true
until_ok 20 sh -c "[ \$(nsenter --net=/var/run/netns/$KEELSON_NETNS kubectl get endpointslices -n e2e-np-x -o jsonpath='{.items[0].endpoints[0].addresses[0]}' | wc -c) -gt 0 ]" || true
probe=$(np_probe "svc=$svc")
# The ClusterIP leads to x/a: policy judges the pod address after the proxy's DNAT.
wrong=$(echo "$probe" | grep -v -- '->svc ' | np_check)
svc_from=$(echo "$probe" | grep -- '->svc ok' | sed 's/->.*//' | sed 's/\/.*//' | sort -u | tr '\n' ' ')
if [ -z "$wrong" ] && [ "$svc_from" = "y " ]; then
  pass netpol_default_deny_with_allow_from_namespace_on_named_port_also_through_cluster_ip
else
  fail netpol_default_deny_with_allow_from_namespace_on_named_port_also_through_cluster_ip "wrong:
$wrong
ClusterIP reached from namespaces [$svc_from] (want [y ])"
fi

# A new policy reaches the kernel within 2 s of kubectl apply.
t0=$(date +%s%N)
k apply -f - >/dev/null <<'EOF'
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny, namespace: e2e-np-z}
spec: {podSelector: {}}
EOF
for _ in $(seq 1 100); do
  in_ns nft list chain inet keelson-netpol ingress 2>/dev/null | grep -q 'e2e-np-z/deny' && break
  sleep 0.1
done
ms=$((($(date +%s%N) - t0) / 1000000))
blocked=$(k exec -n e2e-np-y a -- sh -c "(timeout 2 wget -q -O /dev/null http://$(np_ips | awk '$1 == "z/a" {print $2}'):8080/) 2>/dev/null && echo open || echo blocked" 2>/dev/null | tail -n 1)
if [ "$ms" -le 2000 ] && [ "$blocked" = blocked ]; then
  pass netpol_a_new_policy_takes_effect_within_2s
  echo "    in the kernel $ms ms after kubectl apply began (0.1 s polling)"
else
  fail netpol_a_new_policy_takes_effect_within_2s "$ms ms; y/a -> z/a: $blocked"
fi

metrics=$(in_ns curl -s -m 3 http://127.0.0.1:10262/metrics || true)
k delete networkpolicy --all -n e2e-np-x >/dev/null
k delete networkpolicy --all -n e2e-np-z >/dev/null
until_ok 10 sh -c "! nsenter --net=/var/run/netns/$KEELSON_NETNS nft list table inet keelson-netpol >/dev/null 2>&1" || true
np_want() { return 0; }
wrong=$(np_probe | np_check)
table=$(in_ns nft list table inet keelson-netpol 2>&1 | head -3 || true)
if [ -z "$wrong" ] && [[ "$table" == *"No such file"* ]] && [[ "$metrics" == *"keelson_netpol_policies 3"* ]]; then
  pass netpol_removing_every_policy_opens_everything_and_leaves_no_table
else
  fail netpol_removing_every_policy_opens_everything_and_leaves_no_table "wrong:
$wrong
table: $table
metrics: $(echo "$metrics" | grep keelson_netpol_ | head -5)"
fi
np_cleanup
