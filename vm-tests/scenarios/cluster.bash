# vm-tests/run cluster: three VMs, a control plane (scripts/up, its own node cordoned as upstream
# taints control planes) and two workers that join it with the printed command (scripts/join);
# the three flows across the VMs, a pod on each worker reaching pods on the other through the
# ClusterIP, then one worker powered off: its pods are replaced on the other.
vm_names=([1]=kvt-cp [2]=kvt-w1 [3]=kvt-w2)
phase boot
vm_boot 1 kvt-cp 3072
vm_boot 2 kvt-w1 2048
vm_boot 3 kvt-w2 2048
for n in 1 2 3; do wait_ssh "$n" "${vm_names[$n]}" 900; done
phase install
install_keelson 1 KEELSON_ADVERTISE_ADDRESS="$(vm_ip 1)"
k cordon kvt-cp
join=$(on 1 /root/keelson/scripts/token create --print-join-command)
log "join: ${join%% --token*} --token ..."
install_keelson 2 -- ${join#scripts/join } &
w1=$!
install_keelson 3 -- ${join#scripts/join } &
w2=$!
wait $w1 && wait $w2
interruptible on 1 "KUBECONFIG=/var/lib/keelson/apiserver/admin.kubeconfig kubectl wait --for=condition=Ready node/kvt-w1 node/kvt-w2 --timeout=300s"
phase scenario
# Replaced 10 s after their node is lost (upstream's default toleration is 300 s); flows.sh's
# apply keeps what this patch adds.
k apply -f /root/keelson/examples/ >/dev/null
k patch deployment web --type=merge -p "'{\"spec\":{\"template\":{\"spec\":{\"tolerations\":[
  {\"key\":\"node.kubernetes.io/unreachable\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":10},
  {\"key\":\"node.kubernetes.io/not-ready\",\"operator\":\"Exists\",\"effect\":\"NoExecute\",\"tolerationSeconds\":10}]}}}}'" \
  >/dev/null
check 1 "bash /root/flows.sh /root/keelson/examples 4"
check 1 "bash /root/cluster.sh across kvt-w1 kvt-w2"
vm_power_off kvt-w2
check 1 "bash /root/cluster.sh failover kvt-w2 kvt-w1 4"
