# A private libvirtd for `vm-tests/run vagrant`: it runs inside test host `kvt` (so its networks
# and the VMs live there, with no way off the machine) and in its own mount namespace, where
# /etc/libvirt, /var/lib/libvirt, /run/libvirt, /var/log/libvirt and /var/cache/libvirt are
# folders under $kvt_work/libvirt: the machine's own libvirt configuration and state are not
# touched, and removing $kvt_work removes everything it made. Vagrant runs in the same
# namespaces (nsenter into libvirtd's). Sourced by vm-tests/run after lib/vm.bash.

lv_base=$kvt_work/libvirt
lv_dirs="/etc/libvirt /var/lib/libvirt /run/libvirt /var/log/libvirt /var/cache/libvirt"

# Starts libvirtd in the test host with the private folders; QEMU runs as root with no
# security driver or cgroups (the machine may lack both) and its console log goes to a file.
libvirt_up() {
  [ -d /etc/libvirt ] && command -v libvirtd >/dev/null ||
    { echo "vm-tests: libvirtd missing (vm-tests/deps vagrant)" >&2; return 1; }
  local d
  for d in $lv_dirs; do mkdir -p "$lv_base$d"; done
  # The daemons' settings as the packages made them, and nothing of the machine's own domains,
  # networks, pools or state (which this libvirtd would start): it makes the folders it needs.
  cp -a /etc/libvirt/*.conf "$lv_base/etc/libvirt/"
  cat >>"$lv_base/etc/libvirt/qemu.conf" <<'CONF'
# vm-tests/run vagrant
user = "root"
group = "root"
dynamic_ownership = 0
security_driver = "none"
cgroup_controllers = [ ]
stdio_handler = "file"
CONF
  # /run/libvirt is usually absent: its mount point is made here and removed by vm_cleanup.
  [ -d /run/libvirt ] || { mkdir /run/libvirt && touch "$kvt_state/made-run-libvirt"; }
  local mounts=""
  for d in $lv_dirs; do mounts+="mount --bind '$lv_base$d' '$d' && "; done
  ip netns exec "$kvt_ns" unshare --mount --propagation private sh -c \
    "${mounts}exec libvirtd --daemon --pid-file '$kvt_state/libvirtd.pid'"
  for _ in $(seq 1 100); do
    [ -S "$lv_base/run/libvirt/libvirt-sock" ] && return 0
    sleep 0.1
  done
  echo "vm-tests: libvirtd did not start; its log:" >&2
  tail -n 20 "$lv_base"/var/log/libvirt/*.log >&2 2>/dev/null || true
  return 1
}

# in_libvirt_host COMMAND...: runs a command in libvirtd's network and mount namespaces.
in_libvirt_host() {
  nsenter -t "$(cat "$kvt_state/libvirtd.pid")" -m -n -- "$@"
}

# Ends, by their PID files, what libvirtd started (QEMU, dnsmasq) and then libvirtd; part of
# vm_cleanup. Each PID is checked to still be that program before it is signalled.
libvirt_cleanup() {
  local f
  for f in "$lv_base"/run/libvirt/qemu/*.pid; do kill_pidfile "$f" qemu-system; done
  for f in "$lv_base"/run/libvirt/network/*.pid; do kill_pidfile "$f" dnsmasq; done
  kill_pidfile "$kvt_state/libvirtd.pid" libvirtd
  [ -e "$kvt_state/made-run-libvirt" ] && rmdir /run/libvirt 2>/dev/null
  return 0
}
