#!/usr/bin/env bash
# Cluster DNS benchmark: N Services (default 1,000) in a release keelson-apiserver, answered by a
# release keelson-dns, beside nsd (Debian's authoritative server) loaded with a static zone of the
# same A records, in the same run. The load generator (dns/examples/bench_dns.rs) keeps C queries
# in flight over UDP for S seconds, cycling through every Service name; both servers on loopback.
# Then forwarding: the same names under `example.` (a zone nsd also serves, outside the cluster
# domain) asked of keelson-dns with --upstream nsd (its cache answers after the first round),
# beside unbound (Debian's caching resolver) forwarding to nsd the same way.
# Usage: scripts/bench dns [N]   (DNS_BENCH_SECONDS=10, DNS_BENCH_CONCURRENCY=16,
#        DNS_BENCH_PROFILE=release|debug). Installs nsd and unbound when they are missing.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
n=${1:-1000}
seconds=${DNS_BENCH_SECONDS:-10}
concurrency=${DNS_BENCH_CONCURRENCY:-16}
profile=${DNS_BENCH_PROFILE:-release}
target=${CARGO_TARGET_DIR:-target}
command -v nsd >/dev/null || [ -x /usr/sbin/nsd ] || apt-get install -y -q nsd >/dev/null
command -v unbound >/dev/null || [ -x /usr/sbin/unbound ] || apt-get install -y -q unbound >/dev/null
echo "building ($profile)..." >&2
flag=(); [ "$profile" = release ] && flag=(--release)
cargo build "${flag[@]}" -q -p keelson-apiserver --bin keelson-apiserver
cargo build "${flag[@]}" -q -p keelson-dns --bin keelson-dns --example bench_dns
bin="$target/$profile"

# The API server (as start_release_apiserver, for either profile), stopped with everything else.
dir=$(mktemp -d /tmp/keelson-bench-dns.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$dir"; }
trap cleanup EXIT
"$bin/keelson-apiserver" --data-dir "$dir" --bind-address 127.0.0.1 --secure-port 0 >"$dir/server.log" 2>&1 &
pids+=($!)
port=""
for _ in $(seq 1 100); do
  port=$(sed -n 's|.*server: https://127.0.0.1:\([0-9]*\).*|\1|p' "$dir/admin.kubeconfig" 2>/dev/null || true)
  [ -n "$port" ] && curl -sfk "https://127.0.0.1:$port/readyz" >/dev/null && break
  port=""; sleep 0.1
done
[ -n "$port" ] || { echo "keelson-apiserver did not come up: $(tail -5 "$dir/server.log")" >&2; exit 1; }
export KUBECONFIG=$dir/admin.kubeconfig

echo "creating $n Services..." >&2
for i in $(seq 1 "$n"); do
  printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: default}\nspec: {ports: [{name: http, port: 80}]}\n' "$i"
done >"$dir/services.yaml"
kubectl apply -f "$dir/services.yaml" >/dev/null
kubectl get services -n default -o jsonpath='{range .items[*]}{.metadata.name} {.spec.clusterIP}{"\n"}{end}' |
  grep '^svc-' >"$dir/records"
sed 's/^\([^ ]*\) .*/\1.default.svc.cluster.local./' "$dir/records" >"$dir/names"
sed 's/^\([^ ]*\) .*/\1.example./' "$dir/records" >"$dir/outside-names"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null || echo $((20000 + RANDOM % 20000)); }

# nsd with the same records as static zones: cluster.local, and example. for the forwarding round.
nsd_port=$(free_port)
zone() { # origin, owner suffix
  echo "\$ORIGIN $1"
  echo '$TTL 30'
  echo "@ IN SOA ns.dns.$1 hostmaster.$1 1 7200 1800 86400 30"
  echo "@ IN NS ns.dns.$1"
  while read -r name ip; do echo "$name$2 IN A $ip"; done <"$dir/records"
}
zone cluster.local. .default.svc >"$dir/cluster.local.zone"
zone example. "" >"$dir/example.zone"

# keelson-dns, as its own identity, forwarding other names to nsd.
"$bin/keelson-apiserver" kubeconfig --data-dir "$dir" --user system:kube-dns \
  --server "https://127.0.0.1:$port" --out "$dir/dns.kubeconfig"
dns_port=$(free_port) health_port=$(free_port)
"$bin/keelson-dns" --kubeconfig "$dir/dns.kubeconfig" --listen "127.0.0.1:$dns_port" \
  --health-port "$health_port" --upstream "127.0.0.1:$nsd_port" >"$dir/dns.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$health_port/readyz" >/dev/null && break; sleep 0.1; done
cat >"$dir/nsd.conf" <<CONF
server:
  ip-address: 127.0.0.1@$nsd_port
  username: ""
  chroot: ""
  zonesdir: "$dir"
  database: ""
  pidfile: "$dir/nsd.pid"
  xfrdfile: "$dir/xfrd.state"
  zonelistfile: "$dir/zone.list"
  logfile: "$dir/nsd.log"
  server-count: 1
  verbosity: 0
remote-control:
  control-enable: no
zone:
  name: cluster.local
  zonefile: "$dir/cluster.local.zone"
zone:
  name: example
  zonefile: "$dir/example.zone"
CONF
nsd=$(command -v nsd || echo /usr/sbin/nsd)
"$nsd" -d -c "$dir/nsd.conf" >"$dir/nsd.out" 2>&1 &
pids+=($!)
# unbound forwarding everything to nsd, caching as keelson-dns does (30 s at most).
unbound_port=$(free_port)
cat >"$dir/unbound.conf" <<CONF
server:
  interface: 127.0.0.1@$unbound_port
  port: $unbound_port
  do-daemonize: no
  username: ""
  chroot: ""
  directory: "$dir"
  pidfile: "$dir/unbound.pid"
  use-syslog: no
  logfile: "$dir/unbound.log"
  num-threads: 1
  do-not-query-localhost: no
  access-control: 127.0.0.0/8 allow
  cache-max-ttl: 30
  cache-max-negative-ttl: 30
  module-config: "iterator"
forward-zone:
  name: "."
  forward-addr: 127.0.0.1@$nsd_port
CONF
unbound=$(command -v unbound || echo /usr/sbin/unbound)
"$unbound" -d -c "$dir/unbound.conf" >"$dir/unbound.out" 2>&1 &
pids+=($!)
sleep 1

run() { # label, server, names
  local out
  out=$("$target/$profile/examples/bench_dns" "$2" "$3" "$seconds" "$concurrency")
  echo "$1: $out" >&2
  echo "{\"bench\": \"dns\", \"server\": \"$1\", \"services\": $n, \"seconds\": $seconds, \"concurrency\": $concurrency, \"result\": $out}"
}
run keelson-dns "127.0.0.1:$dns_port" "$dir/names"
run nsd "127.0.0.1:$nsd_port" "$dir/names"
run keelson-dns-forwarding "127.0.0.1:$dns_port" "$dir/outside-names"
run unbound-forwarding "127.0.0.1:$unbound_port" "$dir/outside-names"
