#!/usr/bin/env bash
# Proxy benchmark: N services x 4 endpoints (N = 1,000 / 5,000 / 10,000), per backend:
#   full sync, one-service change, each beside the raw load time of the same rule text
#   (iptables-restore / nft -f) and of a kube-proxy-shaped rule set of the same size.
# Everything runs inside throw-away network namespaces (kp-bench-<pid>-*); every command is
# capped (PROXY_BENCH_CAP seconds, default 120): iptables-nft needs minutes at 5,000+ services.
# Usage: scripts/bench proxy [N ...]     (PROXY_BENCH_BACKENDS="nftables iptables-legacy iptables")
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cap=${PROXY_BENCH_CAP:-120}
sizes=${*:-1000 5000 10000}
backends=${PROXY_BENCH_BACKENDS:-nftables iptables-legacy iptables}
[ "$(id -u)" = 0 ] || { echo "proxy bench: needs root (network namespaces)" >&2; exit 1; }

echo "building release proxy_bench ..." >&2
(cd "$root" && cargo build --release -q -p keelson-proxy --bins --example proxy_bench)
bin="$root/target/release/examples/proxy_bench"
tmp=$(mktemp -d)
made=()
cleanup() {
  for ns in "${made[@]}"; do ip netns del "$ns" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT
# Leftovers of crashed runs (their pid is gone).
for ns in $(ip netns list | awk '{print $1}' | grep '^kp-bench-' || true); do
  pid=${ns#kp-bench-}; pid=${pid%%-*}
  [ -d "/proc/$pid" ] || ip netns del "$ns" 2>/dev/null || true
done
# Sets $ns to a new namespace, recorded for the cleanup (not in a $(...) subshell, which would
# lose the record and leak the namespace).
newns() { ns="kp-bench-$$-$RANDOM"; ip netns add "$ns"; made+=("$ns"); }

# seconds taken by a command in a fresh namespace, or "timeout"/"failed"
raw_load() { # file program args...
  local file=$1; shift
  local ns; newns
  local t0 t1 rc=0
  t0=$(date +%s.%N)
  timeout "$cap" ip netns exec "$ns" "$@" < "$file" > /dev/null 2> "$tmp/err" || rc=$?
  t1=$(date +%s.%N)
  ip netns del "$ns"
  if [ $rc = 124 ]; then echo "timeout(>${cap}s)"; elif [ $rc != 0 ]; then echo "failed"; sed 's/^/  /' "$tmp/err" | head -3 >&2; else awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.3f", b-a}'; fi
}

json() { echo "{\"bench\":\"proxy\",\"figure\":\"$1\",\"backend\":\"$2\",\"services\":$3,\"value\":\"$4\",\"unit\":\"$5\"}"; }
get() { { grep "\"figure\":\"$1\"" "$2" 2>/dev/null || true; } | sed 's/.*"value":\([0-9.]*\).*/\1/' | head -1; }

printf '%-16s %8s | %10s %12s %14s | %11s %14s | %8s\n' backend services "full sync" "raw same" "kube-shaped" "1 change" "1 change raw" "max RSS"
printf '%-16s %8s | %10s %12s %14s | %11s %14s | %8s\n' "" "" "(s)" "text (s)" "raw load (s)" "(ms)" "same text (ms)" "(MiB)"
for n in $sizes; do
  "$bin" render iptables "$n" "$tmp/ipt.txt" 2>/dev/null
  "$bin" render nftables "$n" "$tmp/nft.txt" 2>/dev/null
  "$bin" kube-nft "$n" "$tmp/kube-nft.txt"
  for b in $backends; do
    newns
    rc=0
    timeout "$cap" ip netns exec "$ns" "$bin" sync "$b" "$n" > "$tmp/out.json" 2> "$tmp/err" || rc=$?
    ip netns del "$ns"
    cat "$tmp/out.json"
    full=$(get full_sync "$tmp/out.json"); change=$(get one_service_change "$tmp/out.json")
    change_raw=$(get one_service_change_raw "$tmp/out.json"); rss=$(get max_rss "$tmp/out.json")
    [ $rc = 124 ] && { full=${full:-"timeout(>${cap}s)"}; change=${change:-"-"}; }
    [ $rc != 0 ] && [ $rc != 124 ] && sed 's/^/  /' "$tmp/err" | head -3 >&2
    case $b in
      nftables)        same=$(raw_load "$tmp/nft.txt" nft -f -); kube=$(raw_load "$tmp/kube-nft.txt" nft -f -) ;;
      iptables-legacy) same=$(raw_load "$tmp/ipt.txt" iptables-legacy-restore --noflush); kube=$same ;;
      iptables)        same=$(raw_load "$tmp/ipt.txt" iptables-nft-restore --noflush); kube=$same ;;
    esac
    json raw_full_load "$b" "$n" "$same" s
    json kube_proxy_shaped_load "$b" "$n" "$kube" s
    printf '%-16s %8s | %10s %12s %14s | %11s %14s | %8s\n' "$b" "$n" "${full:--}" "$same" "$kube" "${change:--}" "${change_raw:--}" "${rss:--}"
  done
done

# The whole proxy with the API: memory and first sync at 10,000 Services from keelson-apiserver.
api_bin=""
for b in "$root/target/release/keelson-apiserver" "$root/target/debug/keelson-apiserver"; do
  [ -x "$b" ] && { api_bin=$b; break; }
done
if [ -n "$api_bin" ] && command -v kubectl >/dev/null && [ "${PROXY_BENCH_API:-1}" = 1 ]; then
  n=${PROXY_BENCH_API_SERVICES:-10000}
  d="$tmp/api"; mkdir -p "$d"
  port=$((20000 + RANDOM % 10000)); mport=$((20000 + RANDOM % 10000))
  "$api_bin" --data-dir "$d" --bind-address 127.0.0.1 --secure-port "$port" > "$d/api.log" 2>&1 &
  api_pid=$!
  for _ in $(seq 100); do [ -f "$d/admin.kubeconfig" ] && curl -sk "https://127.0.0.1:$port/readyz" > /dev/null && break; sleep 0.2; done
  "$bin" k8s-objects "$n" "$d/objects.json"
  t0=$(date +%s)
  timeout "$cap" kubectl --kubeconfig "$d/admin.kubeconfig" create -f "$d/objects.json" > /dev/null
  echo "api: created $n Services + $n EndpointSlices in $(( $(date +%s) - t0 )) s (kubectl, one request each)" >&2
  newns
  t0=$(date +%s.%N)
  "$root/target/release/keelson-proxy" --kubeconfig "$d/admin.kubeconfig" --hostname-override node \
    --proxy-mode nftables --netns "/var/run/netns/$ns" --metrics-bind-address "127.0.0.1:$mport" > "$d/proxy.log" 2>&1 &
  px=$!
  for _ in $(seq $((cap * 5))); do curl -s "127.0.0.1:$mport/healthz" | grep -q ok && break; sleep 0.2; done
  t1=$(date +%s.%N)
  first=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
  sleep 3
  rss=$(awk '/VmRSS/{printf "%.1f", $2/1024}' "/proc/$px/status"); hwm=$(awk '/VmHWM/{printf "%.1f", $2/1024}' "/proc/$px/status")
  kill "$px" "$api_pid" 2>/dev/null || true; wait "$px" "$api_pid" 2>/dev/null || true
  echo "keelson-proxy (nftables) with $n Services from keelson-apiserver: start to first sync ${first} s, RSS ${rss} MiB (peak ${hwm} MiB; target <= 50 MiB)"
  json api_first_sync nftables "$n" "$first" s
  json api_proxy_rss nftables "$n" "$rss" MiB
  json api_proxy_peak_rss nftables "$n" "$hwm" MiB
fi
echo "(iptables rows: the rule text is kube-proxy's own layout, so 'raw same text' is also the kube-proxy-shaped baseline)"
echo "(1 change: median of 10 changes, from the start of the sync until the tool returned; 1 change raw: the same texts loaded directly)"
echo "(targets, performance.md: full sync of 10,000 services <= 3 s; one-service change at 10,000 <= 20 ms)"
