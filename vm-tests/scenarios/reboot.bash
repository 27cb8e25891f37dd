# vm-tests/run reboot: a control plane (its node cordoned) and one worker running the example
# Deployment; the worker reboots. Its node comes back Ready under systemd with no command run,
# the same pods run again (containers restarted), the Ingress answers, and the worker holds
# exactly one veth, one NAT chain and one address allocation per pod: nothing left from before.
vm_names=([1]=kvt-cp [2]=kvt-w1)
k() { on 1 "KUBECONFIG=/var/lib/keelson/apiserver/admin.kubeconfig kubectl $*"; }
phase boot
vm_boot 1 kvt-cp 3072
vm_boot 2 kvt-w1 2048
for n in 1 2; do wait_ssh "$n" "${vm_names[$n]}" 900; done
phase install
install_keelson 1 KEELSON_ADVERTISE_ADDRESS="$(vm_ip 1)"
k cordon kvt-cp
join=$(on 1 /root/keelson/scripts/token create --print-join-command)
install_keelson 2 -- ${join#scripts/join }
phase scenario
check 1 "bash /root/flows.sh /root/keelson/examples 3"
# Pods with an address on the worker, as the API server has them.
running_on_w1() { k get pods -A --field-selector spec.nodeName=kvt-w1,status.phase=Running -o name | grep -c / || true; }
check 2 "bash /root/reboot.sh leftovers kvt-w1 $(running_on_w1)"
before=$(k get pods -l app=web -o "jsonpath='{range .items[*]}{.metadata.name} {end}'")
log "kvt-w1: rebooting (pods: $before)"
on 2 'systemctl reboot' || true
# Down first (its SSH gone), then up again.
for _ in $(seq 1 60); do on 2 true 2>/dev/null || break; sleep 1; done
wait_ssh 2 kvt-w1 900
check 1 "bash /root/reboot.sh back kvt-w1 '$before'"
check 2 "bash /root/reboot.sh leftovers kvt-w1 $(running_on_w1)"
