# KEELSON_STORE=etcd scripts/up: one local etcd member as the API server's store, on loopback,
# with TLS and client-certificate authentication as kubeadm sets it up (an etcd open on a port
# would hand every Secret to any local user; the SQLite file is root's alone). Data in
# $data/etcd, certificates in $data/etcd-pki, log in $logs/etcd.log, PID tracked like the other
# daemons (scripts/down stops it last: it started first). Sourced by scripts/up after keelson.bash.

# Not etcd's usual 2379/2380: Debian's etcd-server package starts its own etcd there on machines
# run by systemd, and this one must not meet it.
etcd_port=${KEELSON_ETCD_PORT:-2479}
etcd_url="https://127.0.0.1:$etcd_port"
etcd_pki="$data/etcd-pki"
# What the API server is given (scripts/up adds them to its flags).
etcd_flags=(--etcd-servers "$etcd_url" --etcd-cafile "$etcd_pki/ca.crt"
  --etcd-certfile "$etcd_pki/apiserver-etcd-client.crt" --etcd-keyfile "$etcd_pki/apiserver-etcd-client.key")
# An etcd cluster of one's own (several control-plane machines, README.md) instead of the local
# member: KEELSON_ETCD_SERVERS (comma-separated URLs) with KEELSON_ETCD_CAFILE,
# KEELSON_ETCD_CERTFILE and KEELSON_ETCD_KEYFILE, passed on as they are.
if [ -n "${KEELSON_ETCD_SERVERS:-}" ]; then
  etcd_flags=(--etcd-servers "$KEELSON_ETCD_SERVERS"
    ${KEELSON_ETCD_CAFILE:+--etcd-cafile "$KEELSON_ETCD_CAFILE"}
    ${KEELSON_ETCD_CERTFILE:+--etcd-certfile "$KEELSON_ETCD_CERTFILE"}
    ${KEELSON_ETCD_KEYFILE:+--etcd-keyfile "$KEELSON_ETCD_KEYFILE"})
fi

# The etcd CA, etcd's serving certificate (127.0.0.1) and the API server's client certificate,
# made once and kept (a restart must find the same CA).
make_etcd_pki() {
  "$bin/keelson-apiserver" etcd-pki --dir "$etcd_pki" >/dev/null
}

# etcdctl as the API server (its client certificate).
local_etcdctl() {
  ETCDCTL_API=3 in_ns etcdctl --endpoints "$etcd_url" --cacert "$etcd_pki/ca.crt" \
    --cert "$etcd_pki/apiserver-etcd-client.crt" --key "$etcd_pki/apiserver-etcd-client.key" "$@"
}

# Starts the local member, unless KEELSON_ETCD_SERVERS names an etcd elsewhere.
start_local_etcd() {
  [ -n "${KEELSON_ETCD_SERVERS:-}" ] && return 0
  local peer="http://127.0.0.1:$((etcd_port + 1))"
  if in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/$etcd_port" 2>/dev/null; then
    echo "something already listens on 127.0.0.1:$etcd_port; stop it or set KEELSON_ETCD_PORT" >&2
    exit 1
  fi
  make_etcd_pki
  # A single member: the peer port only ever talks to itself, on loopback.
  start etcd etcd --name keelson --data-dir "$data/etcd" \
    --listen-client-urls "$etcd_url" --advertise-client-urls "$etcd_url" \
    --client-cert-auth --trusted-ca-file "$etcd_pki/ca.crt" \
    --cert-file "$etcd_pki/server.crt" --key-file "$etcd_pki/server.key" \
    --listen-peer-urls "$peer" --initial-advertise-peer-urls "$peer" \
    --initial-cluster "keelson=$peer" --initial-cluster-state new --logger zap
  wait_for "etcd ($etcd_url)" 30 local_etcdctl endpoint health
}
