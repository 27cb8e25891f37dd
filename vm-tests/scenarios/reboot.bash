# vm-tests/run reboot: a control plane (its node cordoned) and one worker running the example
# Deployment; the worker reboots. Its node comes back Ready under systemd with no command run,
# the same pods run again (containers restarted), the Ingress answers, and the worker holds
# exactly one veth, one NAT chain and one address allocation per pod: nothing left from before.
control_plane_and_worker
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
