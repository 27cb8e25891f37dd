# The default StorageClass `local-path`: the controller manager's built-in provisioner
# (rancher.io/local-path, as k3s's) makes each claim a directory on the node of its first pod,
# under $data/storage (the nodePath parameter; the provisioner's own default is
# /var/lib/keelson/storage). Volumes are deleted with their claim (reclaimPolicy Delete).
create_default_storage_class() {
  in_ns kubectl apply -f - >/dev/null <<YAML
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata:
  name: local-path
  annotations: {storageclass.kubernetes.io/is-default-class: "true"}
provisioner: rancher.io/local-path
parameters: {nodePath: $data/storage}
reclaimPolicy: Delete
volumeBindingMode: WaitForFirstConsumer
YAML
}
