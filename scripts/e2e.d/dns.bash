# Cluster DNS on the whole node: a busybox pod (dnsPolicy ClusterFirst, so its resolv.conf names
# 10.96.0.10 and the search path) looks up Services through the proxy's DNAT to the keelson-dns
# pods (DaemonSet kube-system/keelson-dns: here one, on the one node).
# Sourced by scripts/e2e (k, in_ns, pass, fail, until_ok, $root). Uses no exec: the pod runs
# every lookup and prints them; its log is read. Everything made here is removed at the end.

dns_tmp=$(mktemp -d)
# The node's DNS pod, ready and behind the kube-dns Service.
dns_replicas_ready() {
  [ "$(k -n kube-system get endpointslices -l kubernetes.io/service-name=kube-dns \
    -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.nodeName}{"\n"}{end}' | grep -cx "$KEELSON_NODE_NAME")" = 1 ]
}
if until_ok 60 dns_replicas_ready; then
  pass dns_runs_a_ready_replica_on_the_node_behind_kube_dns
else
  fail dns_runs_a_ready_replica_on_the_node_behind_kube_dns "$(k -n kube-system get pods -l k8s-app=kube-dns -o wide 2>&1; k -n kube-system get endpointslices -l kubernetes.io/service-name=kube-dns -o yaml 2>&1 | tail -30)"
fi
# The upstream names outside the cluster go to (scripts/e2e's KEELSON_DNS_UPSTREAM, the node's
# bridge gateway, port 5353): a second keelson-dns on the node, serving the domain `example.`
# from the same Services.
# nsenter itself (not in_ns, a function run in a subshell), so that $! is the server's own PID.
nsenter --net="/var/run/netns/$KEELSON_NETNS" "${CARGO_TARGET_DIR:-$root/target}/debug/keelson-dns" --kubeconfig "$KEELSON_DATA/components/dns.kubeconfig" \
  --cluster-domain example --listen "$KEELSON_DNS_UPSTREAM" --health-port 9154 >"$dns_tmp/upstream.log" 2>&1 &
dns_upstream_pid=$!
# For scripts/e2e's clean, should this run be interrupted before the end below.
echo "$dns_upstream_pid" >"$KEELSON_RUN/dns-upstream.pid"
until_ok 30 in_ns curl -sf http://127.0.0.1:9154/readyz || true
# A headless Service over the web Deployment's pods: its name resolves to their addresses.
k apply -f - >/dev/null <<'YAML' || true
apiVersion: v1
kind: Service
metadata: {name: e2e-dns-headless, namespace: default}
spec:
  clusterIP: None
  selector: {app: web}
  ports: [{name: http, port: 8080}]
YAML
# What DNS must answer: the slices' ready addresses, once they are the Deployment's 3 (earlier
# rollouts may leave pods terminating for a while; those are not ready).
dns_ready() {
  k get endpointslices -l kubernetes.io/service-name=e2e-dns-headless \
    -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]}{"\n"}{end}' | grep . | sort
}
until_ok 60 sh -c "[ \"\$(nsenter --net=/var/run/netns/$KEELSON_NETNS kubectl get endpointslices -l kubernetes.io/service-name=e2e-dns-headless -o jsonpath='{range .items[*].endpoints[?(@.conditions.ready==true)]}{.addresses[0]} {end}' | wc -w)\" = 3 ]" || true
dns_pod_ips=$(dns_ready || true)

# Each lookup between markers, with its exit status; nslookup's own retries end each one.
dns_script='for q in web web.default.svc.cluster.local e2e-dns-headless.default.svc.cluster.local \
  "-type=SRV _http._tcp.web.default.svc.cluster.local" web.default.svc.example. outside.example.; do
  echo "=== $q"; nslookup $q; echo "rc=$?"; done; echo "=== resolv.conf"; cat /etc/resolv.conf; echo "=== end"'
k run e2e-dns --image=127.0.0.1:5000/keelson/busybox:1.35 --restart=Never --command -- sh -c "$dns_script" >/dev/null || true
until_ok 120 sh -c "[ \"\$(nsenter --net=/var/run/netns/$KEELSON_NETNS kubectl get pod e2e-dns -o jsonpath='{.status.phase}')\" = Succeeded ]" || true
k logs e2e-dns >"$dns_tmp/log" 2>&1 || true
# The lines of one lookup's section.
dns_section() { awk -v q="=== $1" '$0 == q {on = 1; next} /^=== / {on = 0} on' "$dns_tmp/log"; }

web_ip=$(k get service web -o jsonpath='{.spec.clusterIP}')
for dns_name in web web.default.svc.cluster.local; do
  if dns_section "$dns_name" | grep -q "Address: $web_ip\$" && dns_section "$dns_name" | grep -q 'Name:.*web.default.svc.cluster.local'; then
    pass "dns_nslookup_${dns_name//./_}_gives_the_cluster_ip"
  else
    fail "dns_nslookup_${dns_name//./_}_gives_the_cluster_ip" "want $web_ip; got: $(dns_section "$dns_name" | head -c 600)"
  fi
done

dns_got=$(dns_section e2e-dns-headless.default.svc.cluster.local | sed -n 's/^Address: \([0-9.]*\)$/\1/p' | sort)
if [ -n "$dns_got" ] && [ "$dns_got" = "$dns_pod_ips" ]; then
  pass dns_headless_service_gives_the_ready_pod_ips
else
  fail dns_headless_service_gives_the_ready_pod_ips "want $(echo $dns_pod_ips); got: $(dns_section e2e-dns-headless.default.svc.cluster.local | head -c 600)"
fi

dns_srv=$(dns_section "-type=SRV _http._tcp.web.default.svc.cluster.local")
if echo "$dns_srv" | grep -q 'service = 0 100 80 web.default.svc.cluster.local'; then
  pass dns_srv_names_the_named_port
else
  fail dns_srv_names_the_named_port "got: $(echo "$dns_srv" | head -c 600)"
fi

# Outside the cluster domain: forwarded to the upstream, which knows web under `example.`...
if dns_section web.default.svc.example. | grep -q "Address: $web_ip\$"; then
  pass dns_outside_name_resolves_through_the_upstream
else
  fail dns_outside_name_resolves_through_the_upstream "want $web_ip; got: $(dns_section web.default.svc.example. | head -c 600) $(tail -n 5 "$dns_tmp/upstream.log")"
fi
# ... and denies what it does not have: a failure, no address.
dns_out=$(dns_section outside.example.)
if echo "$dns_out" | grep -q 'rc=1' && ! echo "$dns_out" | grep -q '^Address: [0-9]' &&
  echo "$dns_out" | grep -qi 'NXDOMAIN\|can.t find'; then
  pass dns_outside_the_cluster_fails_cleanly
else
  fail dns_outside_the_cluster_fails_cleanly "got: $(echo "$dns_out" | head -c 600)"
fi

dns_conf=$(dns_section resolv.conf)
if echo "$dns_conf" | grep -q '^nameserver 10.96.0.10$' &&
  echo "$dns_conf" | grep -q '^search default.svc.cluster.local svc.cluster.local cluster.local' &&
  echo "$dns_conf" | grep -q 'ndots:5'; then
  pass dns_pod_resolv_conf_is_cluster_first
else
  fail dns_pod_resolv_conf_is_cluster_first "got: $dns_conf"
fi

k delete pod e2e-dns --wait=false >/dev/null 2>&1 || true
k delete service e2e-dns-headless >/dev/null 2>&1 || true
kill "$dns_upstream_pid" 2>/dev/null || true
wait "$dns_upstream_pid" 2>/dev/null || true
rm -f "$KEELSON_RUN/dns-upstream.pid"
rm -rf "$dns_tmp"
