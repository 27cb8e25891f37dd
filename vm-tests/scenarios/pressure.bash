# vm-tests/run pressure: one VM (cgroup v2), Keelson installed as README says; inside it
# (scenarios/pressure.sh) each QoS class's oom_score_adj and QoS cgroups, then a BestEffort pod
# filling memory evicted before a Guaranteed one while the node shows MemoryPressure.
vm_names=([1]=kvt-pressure)
phase boot
vm_boot 1 kvt-pressure 3072
wait_ssh 1 kvt-pressure 600
phase install
install_keelson 1
phase scenario
check 1 "bash /root/pressure.sh"
