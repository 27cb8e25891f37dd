# Cluster DNS on the whole node: a busybox pod (dnsPolicy ClusterFirst, so its resolv.conf names
# 10.96.0.10 and the search path) looks up Services through the proxy's DNAT to keelson-dns.
# Sourced by scripts/e2e (k, in_ns, pass, fail, until_ok, $root). Uses no exec: the pod runs
# every lookup and prints them; its log is read. Everything made here is removed at the end.

dns_tmp=$(mktemp -d)
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
  "-type=SRV _http._tcp.web.default.svc.cluster.local" outside.example.; do
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

# Outside the cluster domain: refused at once (no --upstream), a failure, no address.
dns_out=$(dns_section outside.example.)
if echo "$dns_out" | grep -q 'rc=1' && ! echo "$dns_out" | grep -q '^Address: [0-9]' &&
  echo "$dns_out" | grep -qi 'REFUSED\|can.t find'; then
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
rm -rf "$dns_tmp"
