#!/usr/bin/env bash
# Every benchmark in sequence with its default arguments (release builds, each beside its floor),
# then one summary table of their JSON figures. A benchmark that fails or runs past its limit is
# reported as such and the next one runs; each cleans up after itself on exit.
# Env: BENCHES (the names, in order; default all of them), BENCH_LIMIT (seconds each, 2400).
# Logs stay in a directory named at the end.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"
benches=${BENCHES:-cni connections network dns proxy netpol ingress pod-startup e2e scheduler apiserver apiserver-etcd}
limit=${BENCH_LIMIT:-2400}
logs=$(mktemp -d /tmp/keelson-bench-all.XXXXXX)
status=()
for b in $benches; do
  args=()
  name=$b
  # The etcd backend's figures are `scripts/bench apiserver --backend etcd`.
  [ "$b" = apiserver-etcd ] && { name=apiserver; args=(--backend etcd); }
  if [ ! -x "$here/$name.sh" ] || [ "$name" = all ]; then
    echo "unknown benchmark '$b'" >&2
    exit 2
  fi
  echo "=== $b (limit ${limit}s; log $logs/$b.log)"
  start=$(date +%s)
  # timeout signals the benchmark's whole process group, so its exit trap cleans up.
  timeout "$limit" "$here/$name.sh" "${args[@]}" 2>&1 | tee "$logs/$b.log" | grep -v '^{' | sed 's/^/  /'
  rc=${PIPESTATUS[0]}
  took=$(($(date +%s) - start))
  case $rc in
    0) status+=("$b: ok in ${took}s") ;;
    124) status+=("$b: TIMED OUT after ${limit}s") ;;
    *) status+=("$b: FAILED (exit $rc) after ${took}s") ;;
  esac
done

echo
echo "=== summary (figures beside their floors; logs in $logs)"
# Benchmarks write their floor as {"baseline":{"name","value"}} or "baseline" + "baseline_value".
cat "$logs"/*.log | grep '^{' | jq -rs '
  def num: if type == "number" then . else null end;
  .[] | select(type == "object" and has("bench"))
  | (.value // .p50_ms // .mean_ms | num) as $v
  | (if (.baseline | type) == "object" then .baseline.name else .baseline end) as $bn
  | (if (.baseline | type) == "object" then .baseline.value else .baseline_value end | num) as $bv
  | [ .bench + (if .backend then " (" + .backend + ")" else "" end),
      (.figure + (if .plugin then " [" + .plugin + "]" else "" end)),
      (if $v then ($v * 1000 | round / 1000 | tostring) + " " + (.unit // "") else "-" end),
      (if $bv and $bn then ($bn | tostring) + ": " + ($bv * 1000 | round / 1000 | tostring) else "" end),
      (if $v and $bv and $bv != 0 then ($v / $bv * 100 | round / 100 | tostring) + "x" else "" end) ]
  | @tsv' | column -t -s $'\t' -N "BENCH,FIGURE,VALUE,FLOOR,RATIO"
echo
printf '%s\n' "${status[@]}"
printf '%s\n' "${status[@]}" | grep -qv ': ok in ' && exit 1
exit 0
