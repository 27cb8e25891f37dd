# vm-tests/run single: one VM, Keelson installed from the release tarball as README says
# (scripts/up), the three flows with kubectl inside it.
vm_names=([1]=kvt-single)
phase boot
vm_boot 1 kvt-single 3072
wait_ssh 1 kvt-single 600
phase install
install_keelson 1
phase scenario
check 1 "bash /root/flows.sh /root/keelson/examples 3"
