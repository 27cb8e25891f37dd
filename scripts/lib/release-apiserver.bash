# Sourced by benchmarks: starts the release keelson-apiserver on 127.0.0.1 with a port the
# kernel picks, on a fresh data directory, and stops it and removes the directory on exit.
# Usage: start_release_apiserver NAME   -> sets $dir, $port, $pid (the server's log: $dir/server.log)
start_release_apiserver() {
  local target=${CARGO_TARGET_DIR:-target}
  dir=$(mktemp -d "/tmp/keelson-bench-$1.XXXXXX")
  "$target/release/keelson-apiserver" --data-dir "$dir" --bind-address 127.0.0.1 --secure-port 0 \
    >"$dir/server.log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
  port=""
  for _ in $(seq 1 100); do
    # The kubeconfig is written once the port is bound; it names the port.
    port=$(sed -n 's|.*server: https://127.0.0.1:\([0-9]*\).*|\1|p' "$dir/admin.kubeconfig" 2>/dev/null || true)
    [ -n "$port" ] && curl -sfk "https://127.0.0.1:$port/readyz" >/dev/null && return 0
    sleep 0.1
  done
  echo "keelson-apiserver did not become ready; its log:" >&2
  tail -20 "$dir/server.log" >&2
  return 1
}
