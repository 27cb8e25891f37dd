#!/usr/bin/env bash
# Ingress benchmark: a release keelson-apiserver and keelson-ingress (with Debian's nginx) in a
# test host of their own (network namespace kb-ingress-<pid>, no default route), backends played
# by one more nginx answering "backend=bN" on 10.251.0.11-14 (the API server refuses loopback
# endpoints). Figures, each beside its floor measured in the same run:
# - time from an Ingress change (a new host) and from an EndpointSlice change (a new single
#   endpoint) to nginx serving it, p50/p99 of ROUNDS each (the write to the API starts the clock,
#   curl polls every ~5 ms); floor: a plain nginx on the same configs keelson-ingress wrote,
#   reloaded with `nginx -s reload` and polled the same way;
# - requests/s through keelson-ingress's nginx to a host with 3 endpoints beside that plain nginx
#   with the same config (wrk, 16 connections, SECONDS_EACH s each, ABAB, medians);
# - CHURN_RATE EndpointSlice changes/s for CHURN_SECONDS s (one of two endpoints swapped out for
#   the other each time, two more staying) while wrk sends requests, once over keep-alive
#   connections and once with a new connection per request: failed requests, requests, and nginx
#   reloads (ingress_nginx_reloads_total) beside the changes. A reload's old workers close their
#   idle keep-alive connections, racing a client's next request on them (wrk does not retry it as
#   browsers and HTTP libraries do), so the keep-alive failures stand beside the plain nginx's,
#   reloaded as often between the same two configs; a failed request with a new connection each,
#   or any 5xx logged while churning (a removed endpoint still used), fails the run.
# Usage: scripts/bench ingress   (as root; ROUNDS=20 SECONDS_EACH=10 CHURN_SECONDS=30 CHURN_RATE=20)
set -euo pipefail
self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
root=$(cd "$(dirname "$0")/../.." && pwd)
rounds=${ROUNDS:-20}
tp_seconds=${SECONDS_EACH:-10}
churn_seconds=${CHURN_SECONDS:-30}
churn_rate=${CHURN_RATE:-20}
prefix=kb-ingress-
api=10.251.0.1
backends=(10.251.0.11 10.251.0.12 10.251.0.13 10.251.0.14)
kport=8080  # keelson-ingress's nginx
pport=8090  # the plain nginx (floor)
mport=10254 # keelson-ingress's /metrics

# --- helpers used inside the test host ---

now_us() { echo "${EPOCHREALTIME/./}"; }
ms() { printf '%d.%d' $(($1 / 1000)) $(($1 % 1000 / 100)); }
# Nearest-rank percentile of the numbers on stdin.
pct() { sort -n | awk -v p="$1" '{a[NR] = $1} END {i = int((NR * p + 99) / 100); if (i < 1) i = 1; print a[i]}'; }
median() { sort -n | awk '{a[NR] = $1} END {m = int((NR + 1) / 2); print (NR % 2) ? a[m] : (a[m] + a[m + 1]) / 2}'; }

# A request to the API server as the admin: method, path, JSON body, content type.
apireq() {
  local code
  code=$(curl -sk -o "$tmp/api.out" -w '%{http_code}' -X "$1" -H "Authorization: Bearer $token" \
    -H "Content-Type: ${4:-application/json}" --data-binary "$3" "https://$api:6443$2")
  case $code in 2??) ;; *) echo "ingress bench: $1 $2 answered $code: $(cat "$tmp/api.out")" >&2; return 1 ;; esac
}

# Polls nginx on port $1 with Host $2 until the answer holds $3 (10 s at most).
await() {
  local deadline body
  deadline=$(($(now_us) + 10000000))
  while :; do
    body=$(curl -s -m 1 -H "Host: $2" "http://127.0.0.1:$1/" || true)
    [[ $body == *"$3"* ]] && return 0
    if (($(now_us) > deadline)); then
      echo "ingress bench: $2 on port $1 never answered '$3' (last: ${body:0:80})" >&2
      return 1
    fi
    sleep 0.005
  done
}

ingress_json() { # name host service
  printf '{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"%s","namespace":"default"},"spec":{"ingressClassName":"keelson","rules":[{"host":"%s","http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"%s","port":{"name":"http"}}}}]}}]}}' "$@"
}
endpoints_patch() { # addresses...
  local eps=() a
  for a in "$@"; do eps+=("{\"addresses\":[\"$a\"],\"conditions\":{\"ready\":true}}"); done
  local IFS=,
  printf '{"endpoints":[%s]}' "${eps[*]}"
}
set_endpoints() { # slice addresses...
  local s=$1; shift
  apireq PATCH "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/$s" \
    "$(endpoints_patch "$@")" application/merge-patch+json
}

# keelson-ingress's current nginx.conf as the plain nginx's: its directory and port.
plain_conf() { sed -e "s|$tmp/keelson|$tmp/plain|g" -e "s|127\.0\.0\.1:$kport\b|127.0.0.1:$pport|g" "$1"; }
plain_reload() { nginx -p "$tmp/plain" -c "$tmp/plain/nginx.conf" -s reload 2>>"$tmp/plain/reload.log"; }
reloads() { curl -s "http://127.0.0.1:$mport/metrics" | awk '$1 == "ingress_nginx_reloads_total" {print $2}'; }

# wrk's figures: requests/s, requests, failed (non-2xx answers and socket errors).
wrk_figures() {
  awk '/^Requests\/sec:/ {rps = $2}
       /requests in/ {n = $1}
       /Non-2xx or 3xx responses:/ {bad += $NF}
       /Socket errors:/ {gsub(",", ""); bad += $4 + $6 + $8 + $10}
       END {printf "%s %d %d\n", rps, n, bad}' "$1"
}

# Everything after the setup of the test host runs here, inside it: $1 the work dir, $2 binaries.
inside() {
  tmp=$1 bin=$2
  mkdir -p "$tmp/backends/logs" "$tmp/plain/logs" "$tmp/plain/tmp" "$tmp/snap"
  {
    echo "worker_processes 1; pid $tmp/backends/nginx.pid; error_log $tmp/backends/logs/error.log;"
    echo "events { worker_connections 1024; }"
    echo "http { access_log off; keepalive_requests 100000;"
    for i in "${!backends[@]}"; do
      echo "  server { listen ${backends[$i]}:9000; location / { return 200 \"backend=b$((i + 1))\"; } }"
    done
    echo "}"
  } >"$tmp/backends/nginx.conf"
  nginx -p "$tmp/backends" -c "$tmp/backends/nginx.conf" -g 'daemon off;' >"$tmp/backends/out.log" 2>&1 &

  "$bin/keelson-apiserver" --data-dir "$tmp/api" --bind-address "$api" --advertise-address "$api" \
    >"$tmp/apiserver.log" 2>&1 </dev/null &
  for _ in $(seq 150); do
    [ -f "$tmp/api/admin.token" ] && curl -skf -m 1 "https://$api:6443/readyz" >/dev/null 2>&1 && break
    sleep 0.2
  done
  token=$(cat "$tmp/api/admin.token")
  curl -skf -m 1 "https://$api:6443/readyz" >/dev/null || { echo "API server not ready:"; tail -5 "$tmp/apiserver.log"; return 1; }

  # lat: the new hosts' Service; ep: a single endpoint moved around; tp: throughput and churn.
  kubectl --kubeconfig "$tmp/api/admin.kubeconfig" apply -f - >/dev/null <<EOF
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: keelson}
spec: {controller: keelson.dev/ingress-nginx}
$(for s in lat ep tp; do printf -- '---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: default}\nspec: {ports: [{name: http, port: 80, targetPort: 9000}]}\n' "$s"
  printf -- '---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata: {name: %s-1, namespace: default, labels: {kubernetes.io/service-name: %s}}\naddressType: IPv4\nports: [{name: http, port: 9000, protocol: TCP}]\nendpoints: [{addresses: ["%s"], conditions: {ready: true}}]\n' "$s" "$s" "${backends[0]}"
done)
EOF
  apireq POST /apis/networking.k8s.io/v1/namespaces/default/ingresses "$(ingress_json ep ep.bench.test ep)"
  apireq POST /apis/networking.k8s.io/v1/namespaces/default/ingresses "$(ingress_json tp tp.bench.test tp)"
  set_endpoints tp-1 "${backends[@]:0:3}"

  echo "ingress: keelson-ingress and its nginx on 127.0.0.1:$kport"
  RUST_LOG=info "$bin/keelson-ingress" --kubeconfig "$tmp/api/admin.kubeconfig" --bind-address 127.0.0.1 \
    --http-port "$kport" --https-port 8443 --conf-dir "$tmp/keelson" --metrics-bind-address "127.0.0.1:$mport" \
    >"$tmp/ingress.log" 2>&1 </dev/null &
  await "$kport" tp.bench.test backend=b3 || { tail -5 "$tmp/ingress.log"; return 1; }
  await "$kport" ep.bench.test backend=b1
  local i t0 us k
  sleep 1
  cp "$tmp/keelson/nginx.conf" "$tmp/snap/ing-0"

  echo "ingress: $rounds new Ingresses (a new host each), write -> served"
  for i in $(seq "$rounds"); do
    t0=$(now_us)
    apireq POST /apis/networking.k8s.io/v1/namespaces/default/ingresses "$(ingress_json "lat-$i" "lat-$i.bench.test" lat)"
    await "$kport" "lat-$i.bench.test" backend=b1
    us=$(($(now_us) - t0))
    echo "$us" >>"$tmp/ing.us"
    cp "$tmp/keelson/nginx.conf" "$tmp/snap/ing-$i"
    sleep 0.2
  done
  echo "ingress: $rounds EndpointSlice changes (the one endpoint moves), write -> served"
  cp "$tmp/snap/ing-$rounds" "$tmp/snap/ep-0"
  for i in $(seq "$rounds"); do
    k=$((i % 4))
    t0=$(now_us)
    set_endpoints ep-1 "${backends[$k]}"
    await "$kport" ep.bench.test "backend=b$((k + 1))"
    us=$(($(now_us) - t0))
    echo "$us" >>"$tmp/ep.us"
    cp "$tmp/keelson/nginx.conf" "$tmp/snap/ep-$i"
    sleep 0.2
  done

  echo "ingress: floor, a plain nginx on 127.0.0.1:$pport with the same configs, nginx -s reload"
  plain_conf "$tmp/snap/ing-0" >"$tmp/plain/nginx.conf"
  nginx -p "$tmp/plain" -c "$tmp/plain/nginx.conf" -g 'daemon off;' >"$tmp/plain/out.log" 2>&1 &
  await "$pport" tp.bench.test backend=b
  for i in $(seq "$rounds"); do
    plain_conf "$tmp/snap/ing-$i" >"$tmp/plain/nginx.conf.new"
    t0=$(now_us)
    mv "$tmp/plain/nginx.conf.new" "$tmp/plain/nginx.conf"
    plain_reload
    await "$pport" "lat-$i.bench.test" backend=b1
    echo $(($(now_us) - t0)) >>"$tmp/ing-floor.us"
    sleep 0.2
  done
  for i in $(seq "$rounds"); do
    k=$((i % 4))
    plain_conf "$tmp/snap/ep-$i" >"$tmp/plain/nginx.conf.new"
    t0=$(now_us)
    mv "$tmp/plain/nginx.conf.new" "$tmp/plain/nginx.conf"
    plain_reload
    await "$pport" ep.bench.test "backend=b$((k + 1))"
    echo $(($(now_us) - t0)) >>"$tmp/ep-floor.us"
    sleep 0.2
  done

  echo "ingress: requests/s to tp.bench.test (3 endpoints), wrk 2 threads 16 connections ${tp_seconds}s, ABAB"
  plain_conf "$tmp/keelson/nginx.conf" >"$tmp/plain/nginx.conf"
  plain_reload
  sleep 1
  for i in 1 2; do
    for side in keelson plain; do
      local port=$kport
      [ $side = plain ] && port=$pport
      wrk -t2 -c16 -d"${tp_seconds}s" -H 'Host: tp.bench.test' "http://127.0.0.1:$port/" >"$tmp/wrk-$side-$i.txt"
      read -r rps _ bad < <(wrk_figures "$tmp/wrk-$side-$i.txt")
      echo "  $side round $i: $rps req/s ($bad failed)"
      echo "$rps" >>"$tmp/rps-$side"
    done
  done

  # One of b3/b4 swapped for the other per change, b1 and b2 staying, while wrk sends requests.
  churn() { # label, wrk's extra arguments
    local label=$1 n=0 start r0 r1 next req bad rps
    shift
    set_endpoints tp-1 "${backends[@]:0:3}"
    await "$kport" tp.bench.test backend=b3
    sleep 0.5
    r0=$(reloads)
    local total=$((churn_seconds * churn_rate)) step=$((1000000 / churn_rate))
    wrk -t1 -c4 -d"$((churn_seconds + 2))s" "$@" -H 'Host: tp.bench.test' "http://127.0.0.1:$kport/" >"$tmp/churn-$label.txt" &
    local wrk_pid=$!
    sleep 1
    start=$(now_us)
    while ((n < total)); do
      next=$((start + n * step))
      while (($(now_us) < next)); do sleep 0.002; done
      if ((n % 2 == 0)); then set_endpoints tp-1 "${backends[@]:0:2}" "${backends[3]}"; else set_endpoints tp-1 "${backends[@]:0:3}"; fi
      n=$((n + 1))
    done
    local took=$(($(now_us) - start))
    wait "$wrk_pid"
    sleep 0.5
    r1=$(reloads)
    read -r rps req bad < <(wrk_figures "$tmp/churn-$label.txt")
    echo "  $label: $n changes in $(ms $((took / 1000)))s, $req requests, $bad failed, $((r1 - r0)) nginx reloads"
    [ "$bad" = 0 ] || sed 's/^/    wrk: /' "$tmp/churn-$label.txt" | grep -E 'error|Non-2xx' || true
    echo "$label $n $req $bad $((r1 - r0))" >>"$tmp/churn"
  }
  # The same wrk against the plain nginx, reloaded as often in the same time between the same two
  # configs (b3 or b4 as the third endpoint): what nginx's reload alone does to keep-alive clients.
  churn_floor() { # reloads
    local n=0 start next step req bad rps
    step=$((churn_seconds * 1000000 / $1))
    wrk -t1 -c4 -d"$((churn_seconds + 2))s" -H 'Host: tp.bench.test' "http://127.0.0.1:$pport/" >"$tmp/churn-floor.txt" &
    local wrk_pid=$!
    sleep 1
    start=$(now_us)
    while ((n < $1)); do
      next=$((start + n * step))
      while (($(now_us) < next)); do sleep 0.002; done
      cp "$tmp/plain/churn-$((n % 2))" "$tmp/plain/nginx.conf"
      plain_reload
      n=$((n + 1))
    done
    wait "$wrk_pid"
    read -r rps req bad < <(wrk_figures "$tmp/churn-floor.txt")
    echo "  floor, plain nginx reloaded $n times: $req requests, $bad failed"
    [ "$bad" = 0 ] || sed 's/^/    wrk: /' "$tmp/churn-floor.txt" | grep -E 'error|Non-2xx' || true
    echo "$n $req $bad" >"$tmp/churn-floor"
  }
  echo "ingress: $churn_rate EndpointSlice changes/s for ${churn_seconds}s while wrk (1 thread, 4 connections) sends requests"
  # The configs the churn moves between, for the floor.
  set_endpoints tp-1 "${backends[@]:0:2}" "${backends[3]}"
  await "$kport" tp.bench.test backend=b4
  plain_conf "$tmp/keelson/nginx.conf" >"$tmp/plain/churn-0"
  set_endpoints tp-1 "${backends[@]:0:3}"
  await "$kport" tp.bench.test backend=b3
  plain_conf "$tmp/keelson/nginx.conf" >"$tmp/plain/churn-1"
  : >"$tmp/keelson/logs/access.log"
  churn keepalive
  churn new-connection -H 'Connection: close'
  # What nginx answered while churning: a removed endpoint still used would show as 502/504.
  awk '{print $9}' "$tmp/keelson/logs/access.log" | sort | uniq -c | sed 's/^ */  nginx access log while churning: status /'
  local rl errors5xx
  errors5xx=$(awk '$9 ~ /^5/ {n++} END {print n + 0}' "$tmp/keelson/logs/access.log")
  read -r _ _ _ _ rl < <(grep '^keepalive ' "$tmp/churn")
  churn_floor "$rl"

  # --- report ---
  local ip50 ip99 fp50 fp99 ep50 ep99 efp50 efp99 krps prps
  ip50=$(pct 50 <"$tmp/ing.us") ip99=$(pct 99 <"$tmp/ing.us")
  fp50=$(pct 50 <"$tmp/ing-floor.us") fp99=$(pct 99 <"$tmp/ing-floor.us")
  ep50=$(pct 50 <"$tmp/ep.us") ep99=$(pct 99 <"$tmp/ep.us")
  efp50=$(pct 50 <"$tmp/ep-floor.us") efp99=$(pct 99 <"$tmp/ep-floor.us")
  krps=$(median <"$tmp/rps-keelson") prps=$(median <"$tmp/rps-plain")
  printf '\n%-48s %10s %10s\n' "change -> served, $rounds rounds" "p50 ms" "p99 ms"
  printf '%-48s %10s %10s\n' "new Ingress host, keelson-ingress" "$(ms "$ip50")" "$(ms "$ip99")"
  printf '%-48s %10s %10s\n' "  floor: same configs, nginx -s reload" "$(ms "$fp50")" "$(ms "$fp99")"
  printf '%-48s %10s %10s\n' "EndpointSlice change, keelson-ingress" "$(ms "$ep50")" "$(ms "$ep99")"
  printf '%-48s %10s %10s\n' "  floor: same configs, nginx -s reload" "$(ms "$efp50")" "$(ms "$efp99")"
  printf '%-48s %10s\n' "requests/s, keelson-ingress's nginx" "$krps"
  printf '%-48s %10s\n' "  floor: plain nginx, same config" "$prps"
  json() { printf '{"bench":"ingress","figure":"%s","value":%s,"unit":"%s","baseline":{"name":"%s","value":%s}}\n' "$@"; }
  json ingress_change_p50_ms "$(ms "$ip50")" ms nginx_reload_p50_ms "$(ms "$fp50")"
  json ingress_change_p99_ms "$(ms "$ip99")" ms nginx_reload_p99_ms "$(ms "$fp99")"
  json endpoint_change_p50_ms "$(ms "$ep50")" ms nginx_reload_p50_ms "$(ms "$efp50")"
  json endpoint_change_p99_ms "$(ms "$ep99")" ms nginx_reload_p99_ms "$(ms "$efp99")"
  json requests_per_s "$krps" req/s plain_nginx_requests_per_s "$prps"
  local label n req bad fn freq fbad failed=0
  read -r fn freq fbad <"$tmp/churn-floor"
  while read -r label n req bad rl; do
    printf '%-48s %s requests, %s failed, %s reloads for %s changes\n' "churn ($label)" "$req" "$bad" "$rl" "$n"
    if [ "$label" = keepalive ]; then
      printf '%-48s %s requests, %s failed, %s reloads\n' "  floor: plain nginx, same reloads" "$freq" "$fbad" "$fn"
      json "churn_${label}_failed_requests" "$bad" requests plain_nginx_same_reloads_failed "$fbad"
    else
      json "churn_${label}_failed_requests" "$bad" requests target 0
      # A new connection per request must never fail: nothing in flight is lost on a reload.
      [ "$bad" = 0 ] || failed=1
    fi
    json "churn_${label}_requests" "$req" requests none 0
    json "churn_${label}_nginx_reloads" "$rl" reloads endpoint_changes "$n"
  done <"$tmp/churn"
  [ "$errors5xx" = 0 ] || { echo "ingress bench: nginx answered $errors5xx requests with 5xx while churning" >&2; failed=1; }
  return "$failed"
}

if [ "${1:-}" = --inside ]; then
  inside "$2" "$3"
  exit
fi

# --- outside: build, the test host, cleanup ---
[ "$(id -u)" = 0 ] || { echo "ingress bench: needs root (network namespaces)" >&2; exit 1; }
command -v wrk >/dev/null || apt-get install -y -q wrk >/dev/null
for tool in nginx wrk curl kubectl nsenter; do
  command -v "$tool" >/dev/null || { echo "ingress bench: $tool missing (scripts/install-deps)" >&2; exit 1; }
done
began=$(date +%s)
cd "$root"
echo "ingress: building keelson-ingress and keelson-apiserver (release)"
cargo build --release -q -p keelson-ingress --bin keelson-ingress -p keelson-apiserver --bin keelson-apiserver
bin=${CARGO_TARGET_DIR:-$root/target}/release
echo "binaries: $bin"
built=$(date +%s)

# Everything this run started lives in its test host: stop it all by pid, then drop the host.
stop_host() {
  local ns=$1 pids=()
  mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null || true)
  [ ${#pids[@]} -gt 0 ] && { kill "${pids[@]}" 2>/dev/null || true; }
  for _ in $(seq 30); do
    mapfile -t pids < <(ip netns pids "$ns" 2>/dev/null || true)
    [ ${#pids[@]} -eq 0 ] && break
    sleep 0.1
  done
  [ ${#pids[@]} -gt 0 ] && { kill -9 "${pids[@]}" 2>/dev/null || true; }
  ip netns del "$ns" 2>/dev/null || true
}
# Leftovers of a run that died (its pid is gone).
for old in $(ip netns list | awk '{print $1}' | grep "^$prefix" || true); do
  [ -d "/proc/${old#"$prefix"}" ] || stop_host "$old"
done
for old in /tmp/keelson-bench-ingress.*; do
  [ -d "$old" ] && [ ! -d "/proc/${old##*.}" ] && rm -rf "$old"
done

ns=$prefix$$
tmp=/tmp/keelson-bench-ingress.$$
cleanup() {
  set +e
  stop_host "$ns"
  rm -rf "$tmp"
  echo "ingress: total $(($(date +%s) - began)) s ($((${built:-$began} - began)) s of it building)"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
mkdir -p "$tmp"
echo "ingress: test host $ns"
ip netns add "$ns"
ip -n "$ns" link set lo up
for a in "$api" "${backends[@]}"; do ip -n "$ns" addr add "$a/32" dev lo; done
nsenter --net="/var/run/netns/$ns" "$self" --inside "$tmp" "$bin"
