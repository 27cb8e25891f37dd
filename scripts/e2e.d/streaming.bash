# kubectl exec, attach, cp and port-forward on the whole node, through the API server and the
# agent to containerd's streaming server: WebSocket first (kubectl 1.32's default), then the SPDY
# fallback older clients use. Sourced by scripts/e2e (k, in_ns, pass, fail, until_ok, $root).
# Everything made here is removed at the end.

st_tmp=$(mktemp -d)
k run e2e-stream --image=127.0.0.1:5000/keelson/busybox:1.35 --restart=Never --command -- \
  sh -c 'i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.3; done' >/dev/null || true
until_ok 90 sh -c "[ \"\$(nsenter --net=/var/run/netns/$KEELSON_NETNS kubectl get pod e2e-stream -o jsonpath='{.status.phase}')\" = Running ]" || true

for st_mode in websocket spdy; do
  if [ "$st_mode" = spdy ]; then
    export KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false KUBECTL_PORT_FORWARD_WEBSOCKETS=false
  fi

  # Both streams and the exit code.
  st_rc=0
  k exec e2e-stream -- sh -c 'echo out; echo err >&2; exit 3' >"$st_tmp/out" 2>"$st_tmp/err" || st_rc=$?
  if [ "$st_rc" = 3 ] && [ "$(cat "$st_tmp/out")" = out ] && grep -q '^err$' "$st_tmp/err"; then
    pass "exec_prints_both_streams_and_exits_3_$st_mode"
  else
    fail "exec_prints_both_streams_and_exits_3_$st_mode" "exit $st_rc, stdout '$(head -c 200 "$st_tmp/out")', stderr '$(head -c 300 "$st_tmp/err")'"
  fi

  # Stdin, to its end.
  st_got=$(printf 'hello\nworld\n' | k exec -i e2e-stream -- sh -c 'cat; echo done' 2>&1 || true)
  if [ "$st_got" = "$(printf 'hello\nworld\ndone')" ]; then
    pass "exec_i_passes_stdin_$st_mode"
  else
    fail "exec_i_passes_stdin_$st_mode" "got '$(echo "$st_got" | head -c 300)'"
  fi

  # A pseudo-terminal: its size at the start and after a resize (SIGWINCH) during the session.
  # The runtime applies a size after it started the process: the command waits for each.
  st_got=$(in_ns script -qec "stty rows 31 cols 101; kubectl exec -it e2e-stream -- sh -c 'sleep 2; stty size; sleep 4; stty size' </dev/tty & sleep 4; stty rows 40 cols 120; kill -WINCH \$!; wait" /dev/null 2>&1 || true)
  # Matched in the shell, not through pipes (the terminal may echo control characters, as ^@).
  if [[ "$st_got" == *"31 101"*"40 120"* ]]; then
    pass "exec_it_follows_the_terminal_size_$st_mode"
  else
    fail "exec_it_follows_the_terminal_size_$st_mode" "got '$(echo "$st_got" | head -c 300)'"
  fi

  # cp in and out, checksums compared.
  head -c 400000 /dev/urandom >"$st_tmp/in.bin"
  st_sum=$(sha256sum <"$st_tmp/in.bin" | cut -d' ' -f1)
  if k cp "$st_tmp/in.bin" "e2e-stream:/tmp/in.bin" >/dev/null 2>"$st_tmp/err" \
    && k cp "e2e-stream:/tmp/in.bin" "$st_tmp/back.bin" >/dev/null 2>>"$st_tmp/err" \
    && [ "$(sha256sum <"$st_tmp/back.bin" | cut -d' ' -f1)" = "$st_sum" ] \
    && k exec e2e-stream -- sha256sum /tmp/in.bin 2>/dev/null | grep -q "^$st_sum "; then
    pass "cp_in_and_out_keeps_the_checksum_$st_mode"
  else
    fail "cp_in_and_out_keeps_the_checksum_$st_mode" "$(head -c 300 "$st_tmp/err")"
  fi
  rm -f "$st_tmp/back.bin"

  # attach sees the running process's output.
  k attach e2e-stream >"$st_tmp/attach" 2>&1 &
  st_pid=$!
  sleep 3
  kill "$st_pid" 2>/dev/null || true
  wait "$st_pid" 2>/dev/null || true
  if [ "$(grep -c '^tick ' "$st_tmp/attach" || true)" -ge 3 ]; then
    pass "attach_sees_output_$st_mode"
  else
    fail "attach_sees_output_$st_mode" "got '$(head -c 300 "$st_tmp/attach")'"
  fi

  # port-forward to one of the web pods: 100 sequential and 10 concurrent requests.
  st_pod=$(k get pods -l app=web -o jsonpath='{.items[0].metadata.name}' 2>/dev/null || true)
  k port-forward "pod/$st_pod" 18080:8080 >"$st_tmp/pf" 2>&1 &
  st_pid=$!
  st_bad=""
  if until_ok 20 in_ns curl -sf -m 5 http://127.0.0.1:18080/; then
    for _ in $(seq 1 100); do
      [ "$(in_ns curl -s -m 5 http://127.0.0.1:18080/ || true)" = "$st_pod" ] || st_bad="sequential request failed"
    done
    st_pids=""
    for i in $(seq 1 10); do
      in_ns curl -s -m 10 -o "$st_tmp/c$i" http://127.0.0.1:18080/ &
      st_pids="$st_pids $!"
    done
    for p in $st_pids; do wait "$p" || true; done
    for i in $(seq 1 10); do
      [ "$(cat "$st_tmp/c$i" 2>/dev/null)" = "$st_pod" ] || st_bad="concurrent request $i failed"
    done
  else
    st_bad="no answer through the forward: $(head -c 300 "$st_tmp/pf")"
  fi
  kill "$st_pid" 2>/dev/null || true
  wait "$st_pid" 2>/dev/null || true
  if [ -z "$st_bad" ]; then
    pass "port_forward_serves_100_sequential_and_10_concurrent_$st_mode"
  else
    fail "port_forward_serves_100_sequential_and_10_concurrent_$st_mode" "$st_bad"
  fi
done
unset KUBECTL_REMOTE_COMMAND_WEBSOCKETS KUBECTL_PORT_FORWARD_WEBSOCKETS

k delete pod e2e-stream --wait=false >/dev/null 2>&1 || true
rm -rf "$st_tmp"
