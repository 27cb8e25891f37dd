# On `KEELSON_STORE=etcd scripts/e2e` (the whole node's flows on the local etcd of scripts/up):
# the run really used etcd, so its passes say something about the etcd backend: the Deployment's
# pods are keys under /registry in that etcd, and the API server's /readyz shows its etcd check.
# On the default SQLite run there is nothing to check here. Sourced by scripts/e2e (k, in_ns,
# pass, fail).

if [ "${KEELSON_STORE:-sqlite}" = etcd ]; then
  etcd_keys() {
    local pki=$KEELSON_DATA/etcd-pki
    ETCDCTL_API=3 in_ns etcdctl --endpoints "https://127.0.0.1:${KEELSON_ETCD_PORT:-2479}" \
      --cacert "$pki/ca.crt" --cert "$pki/apiserver-etcd-client.crt" --key "$pki/apiserver-etcd-client.key" \
      get --prefix --keys-only "$1"
  }
  etcd_pods=$(etcd_keys /registry/core/pods/default/ 2>&1 | grep -c '^/registry/core/pods/default/web-' || true)
  if [ "$etcd_pods" -ge 3 ] && k get --raw '/readyz?verbose' 2>/dev/null | grep -qF '[+]etcd ok'; then
    pass etcd_store_holds_the_pods_and_readyz_checks_it
  else
    fail etcd_store_holds_the_pods_and_readyz_checks_it \
      "$etcd_pods web pods in etcd; $(etcd_keys /registry/core/pods/ 2>&1 | head -5); $(k get --raw '/readyz?verbose' 2>&1 | head -5)"
  fi
fi
