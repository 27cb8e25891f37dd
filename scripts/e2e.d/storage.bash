# Storage on the whole node, as a user checks it: the default StorageClass local-path; a claim
# on it used by a pod that writes a file, the pod deleted and made again, the file still there
# (and in the volume's directory on the node); the claim's volume and its directory deleted
# with the claim (reclaim Delete); a claim of a class that does not exist keeps its pod Pending with events
# saying why. Sourced by scripts/e2e (k, pass, fail, until_ok). Removes what it makes.

st_image=127.0.0.1:5000/keelson/busybox:1.35
st_pod() { # NAME CLAIM SCRIPT
  k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: $st_image
    command: [sh, -c, '$3; sleep 3600']
    volumeMounts: [{name: data, mountPath: /data}]
  volumes:
  - name: data
    persistentVolumeClaim: {claimName: $2}
YAML
}
st_claim() { # NAME [CLASS]
  k apply -f - >/dev/null <<YAML
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: $1}
spec:
  ${2:+storageClassName: $2}
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
YAML
}
st_logs_are() { [ "$(k logs "$1" 2>/dev/null)" = "$2" ]; }
st_describe_has() { # WHAT NAME TEXT
  k describe "$1" "$2" 2>/dev/null | grep -qF -- "$3"
}

if k get storageclass 2>&1 | grep -qE '^local-path \(default\) +rancher.io/local-path +Delete +WaitForFirstConsumer'; then
  pass storage_default_class_local_path
else
  fail storage_default_class_local_path "$(k get storageclass 2>&1 | head -c 400)"
fi

st_claim e2e-storage-data
st_pod e2e-storage-writer e2e-storage-data 'echo kept-by-writer > /data/file; cat /data/file'
if until_ok 120 st_logs_are e2e-storage-writer kept-by-writer \
  && [ "$(k get pvc e2e-storage-data -o jsonpath='{.status.phase}')" = Bound ]; then
  pass storage_claim_bound_and_written
else
  fail storage_claim_bound_and_written "$(k describe pvc e2e-storage-data 2>&1 | tail -n 8 | head -c 600) $(k describe pod e2e-storage-writer 2>&1 | tail -n 8 | head -c 600)"
fi
st_pv=$(k get pvc e2e-storage-data -o jsonpath='{.spec.volumeName}')
k delete pod e2e-storage-writer --wait=true >/dev/null 2>&1 || true
st_pod e2e-storage-reader e2e-storage-data 'cat /data/file'
st_dir="${KEELSON_DATA:-/var/lib/keelson}/storage/$st_pv"
if until_ok 120 st_logs_are e2e-storage-reader kept-by-writer && [ "$(cat "$st_dir/file" 2>&1)" = kept-by-writer ]; then
  pass storage_file_kept_across_pods
else
  fail storage_file_kept_across_pods "reader: $(k logs e2e-storage-reader 2>&1 | head -c 300); $st_dir/file: $(cat "$st_dir/file" 2>&1 | head -c 200)"
fi
k delete pod e2e-storage-reader --wait=true >/dev/null 2>&1 || true
k delete pvc e2e-storage-data --wait=true >/dev/null 2>&1 || true
st_pv_gone() { ! k get pv "$st_pv" >/dev/null 2>&1 && [ ! -e "$st_dir" ]; }
if [ -n "$st_pv" ] && until_ok 60 st_pv_gone; then
  pass storage_volume_and_directory_deleted_with_claim
else
  fail storage_volume_and_directory_deleted_with_claim "$(k get pv "$st_pv" -o jsonpath='{.status.phase} {.metadata.finalizers}' 2>&1 | head -c 300); dir: $(ls -d "$st_dir" 2>&1)"
fi

st_claim e2e-storage-nope nope
st_pod e2e-storage-stuck e2e-storage-nope 'true'
if until_ok 30 st_describe_has pod e2e-storage-stuck "pod has unbound immediate PersistentVolumeClaims" \
  && until_ok 30 st_describe_has pvc e2e-storage-nope 'storageclass.storage.k8s.io "nope" not found' \
  && [ "$(k get pod e2e-storage-stuck -o jsonpath='{.status.phase}')" = Pending ]; then
  pass storage_unbindable_claim_keeps_pod_pending_with_events
else
  fail storage_unbindable_claim_keeps_pod_pending_with_events "$(k describe pod e2e-storage-stuck 2>&1 | tail -n 6 | head -c 600) $(k describe pvc e2e-storage-nope 2>&1 | tail -n 6 | head -c 400)"
fi
k delete pod e2e-storage-stuck --wait=false >/dev/null 2>&1 || true
k delete pvc e2e-storage-nope --wait=false >/dev/null 2>&1 || true
