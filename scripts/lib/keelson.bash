# Shared by scripts/up and scripts/join: settings from the environment, the build, starting a
# daemon with its PID recorded, waiting, and a node's own processes (containerd, agent, proxy,
# NetworkPolicy).
# Sourced, not run. Callers set `root` (the repository) first.
source "$root/scripts/lib/systemd.bash"

data=${KEELSON_DATA:-/var/lib/keelson}
logs=${KEELSON_LOGS:-/var/log/keelson}
run=${KEELSON_RUN:-/run/keelson/up}
profile=${KEELSON_PROFILE:-release}
netns=${KEELSON_NETNS:-}
cluster_cidr=${KEELSON_CLUSTER_CIDR:-10.244.0.0/16}
export PATH="$HOME/.cargo/bin:$PATH"

in_ns() { if [ -n "$netns" ]; then nsenter --net="/var/run/netns/$netns" "$@"; else "$@"; fi; }
# exec all the way down, so the PID recorded is the daemon's own (scripts/down signals it).
exec_in_ns() { if [ -n "$netns" ]; then exec nsenter --net="/var/run/netns/$netns" "$@"; else exec "$@"; fi; }

need_root() {
  [ "$(id -u)" = 0 ] || { echo "$1: run as root (containerd, network)" >&2; exit 1; }
}

# Installs the Debian packages, then builds (a checkout) or takes the binaries of a release
# tarball (scripts/dist: bin/ beside scripts/, for machines without a Rust toolchain); sets `bin`
# to the folder of the binaries.
install_and_build() {
  echo "==> installing Debian packages"
  "$root/scripts/install-deps"
  if [ -x "$root/bin/keelson-apiserver" ]; then
    bin="$root/bin"
    echo "==> using the tarball's binaries in $bin ($(cat "$root/VERSION" 2>/dev/null || echo unknown version))"
  else
    check_build_tools
    echo "==> building ($profile)"
    case "$profile" in
      release) (cd "$root" && cargo build --release --workspace --bins); bin="${CARGO_TARGET_DIR:-$root/target}/release" ;;
      debug)
        # scripts/test has just built every target: building the binaries alone would compile
        # the workspace again (tokio's test-util, a dev-dependency feature, would drop out).
        [ -n "${KEELSON_DEV_BUILD_DONE:-}" ] || (cd "$root" && cargo build --workspace --bins)
        bin="${CARGO_TARGET_DIR:-$root/target}/debug" ;;
      *) echo "KEELSON_PROFILE is release or debug, not '$profile'" >&2; exit 2 ;;
    esac
  fi
  # kubectl is not a Debian package; a release tarball brings one (a static binary).
  if ! command -v kubectl >/dev/null && [ -x "$bin/kubectl" ]; then
    ln -sf "$bin/kubectl" /usr/local/bin/kubectl
  fi
  command -v kubectl >/dev/null || {
    echo "kubectl is missing: install kubectl $min_kubectl or newer (https://kubernetes.io/docs/tasks/tools/)," >&2
    echo "or use a release tarball (scripts/dist), which brings one" >&2
    exit 1
  }
  local minor
  minor=$(kubectl version --client -o json 2>/dev/null | jq -r '.clientVersion.minor' | tr -dc 0-9)
  if [ "${minor:-0}" -lt "${min_kubectl#1.}" ]; then
    echo "kubectl 1.${minor:-?} is too old: Keelson needs kubectl $min_kubectl or newer" >&2
    exit 1
  fi
}

# What a build from a checkout needs (README: prerequisites), checked before cargo starts.
min_rust=1.89 min_kubectl=1.28
check_build_tools() {
  command -v cargo >/dev/null || {
    echo "cargo is missing: install Rust $min_rust or newer (https://rustup.rs), or use a release" >&2
    echo "tarball (scripts/dist) on machines without a Rust toolchain" >&2
    exit 1
  }
  local have
  have=$(rustc --version 2>/dev/null | awk '{print $2}')
  if [ "$(printf '%s\n%s\n' "$min_rust" "${have:-0}" | sort -V | head -n1)" != "$min_rust" ]; then
    echo "Rust $have is too old: Keelson builds with Rust $min_rust or newer (rustup update)" >&2
    exit 1
  fi
}

# Creates network namespace $netns (no default route) when one is asked for and missing; only a
# namespace made here is removed again by scripts/down (one a test built its links in stays).
ensure_netns() {
  if [ -n "$netns" ]; then
    if [ ! -e "/var/run/netns/$netns" ]; then
      ip netns add "$netns"
      echo "$netns" >"$run/netns-created"
    fi
    ip -n "$netns" link set lo up
  fi
}

# The address the API server advertises (the `kubernetes` Service's endpoint, which pods must
# reach: a loopback address they cannot) and the node's IP, when KEELSON_ADVERTISE_ADDRESS is not
# given: the machine's address on its default route; in a network namespace without one (test
# hosts), 10.255.255.1 added to its loopback link (any address of the host is local to it;
# only 127.0.0.0/8 is out of the pods' reach).
default_advertise_address() {
  local dev addr
  dev=$(in_ns ip -4 route show default | awk '{for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit }}')
  if [ -n "$dev" ]; then
    addr=$(in_ns ip -4 -o addr show dev "$dev" scope global | awk '{print $4}' | cut -d/ -f1 | head -n 1)
  elif [ -n "$netns" ]; then
    ip -n "$netns" addr replace 10.255.255.1/32 dev lo
    addr=10.255.255.1
  fi
  [ -n "${addr:-}" ] || { echo "no default route to take this machine's address from: set KEELSON_ADVERTISE_ADDRESS=IP" >&2; exit 1; }
  echo "$addr"
}

# name, command... Under systemd a unit keelson-NAME (after the units in `unit_after`), else a
# background process with its PID in $run/NAME.pid.
start() {
  local name=$1; shift
  echo "==> starting $name"
  if use_systemd; then
    install_unit "keelson-$name" "${unit_after:-}" "$logs/$name.log" -- "$@"
    return
  fi
  (exec_in_ns nohup "$@" >"$logs/$name.log" 2>&1) &
  echo $! >"$run/$name.pid"
}

wait_for() { # what, seconds, command...
  local what=$1 seconds=$2; shift 2
  for _ in $(seq 1 $((seconds * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "$what did not come up within $seconds s; see $logs" >&2
  exit 1
}

# A component's own kubeconfig (scripts/up, which holds the cluster CA): API server data dir,
# server URL, user, output file, then groups. A client certificate for that user, a year long.
write_component_kubeconfig() {
  local api=$1 server=$2 user=$3 out=$4; shift 4
  local groups=() g
  for g in "$@"; do groups+=(--group "$g"); done
  mkdir -p "$(dirname "$out")"
  "$bin/keelson-apiserver" kubeconfig --data-dir "$api" --user "$user" "${groups[@]}" \
    --server "$server" --out "$out"
}

# A node's own processes. Arguments: node name, bootstrap kubeconfig, node IP (empty: the agent
# takes the namespace's first global address), then extra agent flags. The agent obtains its own
# client certificate with the bootstrap token and writes $data/node/kubeconfig; the proxy then
# runs with that identity (group system:nodes may do what system:node-proxier does), unless
# `proxy_kubeconfig` names its own (scripts/up: user system:kube-proxy). Nothing on the node
# holds the admin credentials.
start_node() {
  local node=$1 bootstrap=$2 node_ip=$3; shift 3
  local dir="$data/node" kubeconfig="$data/node/kubeconfig"
  mkdir -p "$dir/cni/net.d"
  echo "$node" >"$run/node-name"
  echo "==> local registry and test images"
  if [ -n "$netns" ]; then "$root/scripts/registry" start; "$root/scripts/registry" --netns "$netns" start; else "$root/scripts/registry" start; fi
  KEELSON_DNS_BIN="$bin/keelson-dns" "$root/scripts/images/build"
  # Pods on one bridge reach each other through a ClusterIP only when bridged traffic passes
  # iptables (br_netfilter, its bridge-nf-call-* sysctls default to 1): loaded now and, as
  # kubeadm's install guide does, at every boot.
  if [ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ]; then
    modprobe br_netfilter || { echo "the kernel module br_netfilter is missing: pods could not reach Services" >&2; exit 1; }
  fi
  if use_systemd; then
    echo br_netfilter >/etc/modules-load.d/keelson.conf
  fi
  echo "==> CNI plugin"
  "$bin/keelson-cni" install /opt/keelson/cni/bin
  echo "==> containerd"
  local sock
  sock=$("$root/scripts/containerd/start" "$node" ${netns:+--netns "$netns"} --cni-conf-dir "$dir/cni/net.d" | tail -n 1)
  # The agent's port 10250 accepts client certificates of the cluster CA (the API server's
  # kubelet client certificate for kubectl logs): the CA the bootstrap kubeconfig trusts.
  local client_ca="$dir/client-ca.crt"
  kubectl config view --kubeconfig "$bootstrap" --raw \
    -o jsonpath='{.clusters[0].cluster.certificate-authority-data}' | base64 -d >"$client_ca"
  unit_after="containerd.service keelson-registry.service" start agent "$bin/keelson-agent" --bootstrap-kubeconfig "$bootstrap" --kubeconfig "$kubeconfig" \
    --client-ca-file "$client_ca" \
    --cert-dir "$dir/pki" --root-dir "$dir/agent" --cni-conf-dir "$dir/cni/net.d" \
    --pod-log-dir "$logs/pods" --container-runtime-endpoint "$sock" --hostname-override "$node" \
    ${node_ip:+--node-ip "$node_ip"} --cluster-cidr "$cluster_cidr" \
    ${KEELSON_EVICTION_HARD:+--eviction-hard "$KEELSON_EVICTION_HARD"} \
    ${KEELSON_IMAGE_GC_HIGH:+--image-gc-high-threshold "$KEELSON_IMAGE_GC_HIGH"} \
    ${KEELSON_SHUTDOWN_GRACE_PERIOD:+--shutdown-grace-period "$KEELSON_SHUTDOWN_GRACE_PERIOD"} \
    ${KEELSON_SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS:+--shutdown-grace-period-critical-pods "$KEELSON_SHUTDOWN_GRACE_PERIOD_CRITICAL_PODS"} "$@"
  wait_for "the agent's own credentials ($kubeconfig)" 120 test -s "$kubeconfig"
  # The proxy also announces the LoadBalancer addresses it is elected for on the node's segment.
  start proxy "$bin/keelson-proxy" --kubeconfig "${proxy_kubeconfig:-$kubeconfig}" --hostname-override "$node" \
    --cluster-cidr "$cluster_cidr" --announce-load-balancers
  # NetworkPolicy, with the proxy's identity (ClusterRole keelson:network-policy).
  start netpol "$bin/keelson-netpol" --kubeconfig "${proxy_kubeconfig:-$kubeconfig}" --hostname-override "$node"
  wait_for "node $node to be Ready" 120 \
    in_ns kubectl --kubeconfig "$kubeconfig" wait --for=condition=Ready "node/$node" --timeout=1s
}
