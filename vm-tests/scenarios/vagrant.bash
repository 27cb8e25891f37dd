# vm-tests/run vagrant: the repository's Vagrantfile, as a user runs it: the box made from the
# VM image (vm-tests/box), `vagrant up` with the libvirt provider against a private libvirtd
# inside test host `kvt` (lib/libvirt.bash; the management network isolated), a control plane
# and KVT_VAGRANT_WORKERS (1) workers; then the nodes Ready and the three flows with kubectl on
# the control plane, and `vagrant destroy`.
workers=${KVT_VAGRANT_WORKERS:-1}
driver=kvm
[ "$accel" = kvm ] || driver=qemu
vagrant_env=(env VAGRANT_CWD="$root" VAGRANT_HOME="$kvt_work/vagrant.d" VAGRANT_DOTFILE_PATH="$kvt_work/dot-vagrant"
  VAGRANT_CHECKPOINT_DISABLE=1 VAGRANT_BOX_UPDATE_CHECK_DISABLE=1
  KEELSON_TARBALL="$tarball" KEELSON_WORKERS="$workers" KEELSON_LIBVIRT_DRIVER="$driver"
  KEELSON_LIBVIRT_NETWORK_MODE=none)
vg() { in_libvirt_host "${vagrant_env[@]}" vagrant "$@"; }
# The same, without the progress lines Vagrant redraws while copying a box.
vg_quiet() { vg "$@" 2>&1 | stdbuf -oL tr '\r' '\n' | grep --line-buffered -v 'Progress: '; return "${PIPESTATUS[0]}"; }
# vcheck MACHINE COMMAND: a check on a machine through `vagrant ssh`.
vcheck() {
  vg ssh "$1" -c "$2" >"$kvt_state/check.out" 2>&1 &
  wait $! || true
  tally "$1" "$kvt_state/check.out"
}
pass() { echo "test vm::vagrant::$1 ... ok"; passed=$((passed + 1)); }
# vssh MACHINE COMMAND: COMMAND on a machine, given up on after 10 s without an answer.
vssh() { vg ssh "$1" -c "$2" -- -o ConnectTimeout=10 -o ServerAliveInterval=5 -o ServerAliveCountMax=2; }
# The machines `vagrant status` reports running.
running_machines() { vg status --machine-readable | awk -F, '$3 == "state" && $4 == "running" {print $2}'; }
# On a failure (vm-tests/run's finish): each running machine's Keelson logs and journal, and
# libvirt's logs.
collect_scenario_logs() {
  local dest=$1 m
  [ -s "$kvt_state/libvirtd.pid" ] || return 0
  mkdir -p "$dest"
  cp -a "$lv_base/var/log/libvirt" "$dest/libvirt" 2>/dev/null
  for m in $(running_machines 2>/dev/null); do save_machine_logs "$dest" "$m" vssh "$m"; done
  log "logs of every machine in $dest"
}

phase box
box=$("$here/box" "$image" | tail -n 1)
phase libvirt
libvirt_up
interruptible vg_quiet box add --name keelson/bookworm "$box"
phase "vagrant up"
interruptible vg_quiet up --provider libvirt
machines=$(running_machines | sort | tr '\n' ' ')
expected=$(printf '%s\n' keelson-cp $(seq -f 'keelson-w%g' 1 "$workers") | sort | tr '\n' ' ')
[ "$machines" = "$expected" ] && pass "every_machine_is_running" ||
  { echo "test vm::vagrant::every_machine_is_running ... FAILED: running: $machines, expected: $expected"; failed=$((failed + 1)); }
phase scenario
(cd "$here/scenarios" && tar -cf - ./*.sh) | vg ssh keelson-cp -c 'tar -C /root -xf -'
kube="KUBECONFIG=/var/lib/keelson/apiserver/admin.kubeconfig"
nodes=$(printf 'node/%s ' $expected)
vcheck keelson-cp "$kube kubectl wait --for=condition=Ready $nodes --timeout=300s >/dev/null &&
  echo 'test vm::vagrant::every_node_joins_and_is_ready ... ok' ||
  { echo 'test vm::vagrant::every_node_joins_and_is_ready ... FAILED'; $kube kubectl get nodes; }"
vcheck keelson-cp "bash /root/flows.sh /root/keelson/examples 3"
phase "vagrant destroy"
interruptible vg destroy --force
