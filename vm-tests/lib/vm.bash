# Host side of the VM tests: one test host (network namespace `kvt`, no default route) holding a
# bridge and one tap per VM, QEMU processes started inside it, SSH to the VMs through it.
# Nothing here touches the machine's own network: no user-mode networking, no libvirt network.
# Sourced by vm-tests/run. Callers set `here` (vm-tests/) and `image` (vm-tests/image's folder).

kvt_ns=kvt
kvt_bridge=kvt-br
kvt_net=172.31.77
kvt_state=/run/keelson-vm
kvt_work=${KVT_WORK:-/var/tmp/keelson-vm}
ssh_opts=(-o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
  -o LogLevel=ERROR -o ConnectTimeout=5 -o ServerAliveInterval=10 -o ServerAliveCountMax=6)

log() { echo "[$(date +%T)] $*"; }

# Ends the QEMU processes this tool started (their PIDs, checked to still be QEMU on our disks),
# removes the test host with its bridge and taps, and the VMs' disks. Safe to run twice, and
# first thing on every run, for what a crashed run left.
vm_cleanup() {
  local f
  for f in "$kvt_state"/kvt-*.pid; do kill_pidfile "$f" "qemu-system.*$kvt_work/"; done
  libvirt_cleanup
  ip netns del "$kvt_ns" 2>/dev/null || true
  rm -rf "$kvt_work" "$kvt_state"
}

# kill_pidfile FILE PATTERN: ends the process FILE names if its command line still matches
# PATTERN (a PID may have been reused), TERM then KILL after 5 s, and removes FILE.
kill_pidfile() {
  [ -e "$1" ] || return 0
  local pid
  pid=$(cat "$1" 2>/dev/null)
  if [ -n "$pid" ] && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "$2"; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$1"
}

# Ends a process this script started and its descendants, by PID, deepest first.
kill_tree() {
  local child
  for child in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$child"; done
  kill "$1" 2>/dev/null || true
}

# The test host: bridge $kvt_net.1/24, no default route, no forwarding.
host_up() {
  mkdir -p "$kvt_state" "$kvt_work"
  ip netns add "$kvt_ns"
  ip -n "$kvt_ns" link set lo up
  ip -n "$kvt_ns" link add "$kvt_bridge" type bridge
  ip -n "$kvt_ns" addr add "$kvt_net.1/24" dev "$kvt_bridge"
  ip -n "$kvt_ns" link set "$kvt_bridge" up
}

# KVM when a guest kernel really runs on it (here /dev/kvm exists but does not: the answer is
# cached per machine), else TCG. KVT_ACCEL=kvm|tcg decides instead.
pick_accel() {
  if [ -n "${KVT_ACCEL:-}" ]; then echo "$KVT_ACCEL"; return; fi
  local cached="$kvt_cache/accel"
  if [ -s "$cached" ]; then cat "$cached"; return; fi
  local accel=tcg out
  if [ -w /dev/kvm ]; then
    out=$(mktemp)
    # The kernel alone, no root: under working KVM it prints its banner and panics within seconds.
    timeout 30 qemu-system-x86_64 -accel kvm -cpu host -m 256 -display none -no-reboot \
      -kernel "$image/vmlinuz" -append "console=ttyS0 panic=-1 root=/dev/null" \
      -serial "file:$out" -monitor none >/dev/null 2>&1 || true
    grep -q 'Linux version' "$out" && grep -qi 'panic\|VFS' "$out" && accel=kvm
    rm -f "$out"
  fi
  echo "$accel" >"$cached"
  echo "$accel"
}

# vm_boot N NAME [MEM_MB]: VM N (address $kvt_net.(10+N)) named NAME, on a copy-on-write disk over
# the image, one vCPU, its serial console in $kvt_work/NAME.console.log.
vm_boot() {
  local n=$1 name=$2 mem=${3:-2048}
  local tap="kvt-tap$n" disk="$kvt_work/$name.qcow2" cpu=max
  [ "$accel" = kvm ] && cpu=host
  if [ ! -e "$disk" ]; then
    qemu-img create -q -f qcow2 -F qcow2 -b "$image/rootfs.qcow2" "$disk"
  fi
  ip -n "$kvt_ns" link show "$tap" >/dev/null 2>&1 || {
    ip -n "$kvt_ns" tuntap add dev "$tap" mode tap
    ip -n "$kvt_ns" link set "$tap" master "$kvt_bridge" up
  }
  ip netns exec "$kvt_ns" qemu-system-x86_64 -name "$name" -machine q35 -accel "$accel" -cpu "$cpu" -smp 1 -m "$mem" \
    -kernel "$image/vmlinuz" -initrd "$image/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 quiet kvt.hostname=$name kvt.ip=$kvt_net.$((10 + n))/24 kvt.gw=$kvt_net.1" \
    -drive "file=$disk,if=virtio,format=qcow2,cache=unsafe,discard=unmap" \
    -netdev "tap,id=net0,ifname=$tap,script=no,downscript=no" \
    -device "virtio-net-pci,netdev=net0,mac=52:54:00:4b:77:$(printf %02x "$n")" \
    -device virtio-rng-pci \
    -display none -monitor none -serial "file:$kvt_work/$name.console.log" \
    -pidfile "$kvt_state/$name.pid" -daemonize
  log "$name: booting ($accel, ${mem} MiB, $kvt_net.$((10 + n)))"
}

vm_ip() { echo "$kvt_net.$((10 + $1))"; }

# on N COMMAND...: runs a shell command line on VM N as root.
on() { local n=$1; shift; ip netns exec "$kvt_ns" ssh "${ssh_opts[@]}" -i "$image/id_ed25519" "root@$(vm_ip "$n")" "$@"; }
# copy_to N FILE... DEST
copy_to() {
  local n=$1; shift
  local dest=${*: -1} files=("${@:1:$#-1}")
  ip netns exec "$kvt_ns" scp -q "${ssh_opts[@]}" -i "$image/id_ed25519" "${files[@]}" "root@$(vm_ip "$n"):$dest"
}

# wait_ssh N NAME SECONDS: until VM N answers on SSH, with a line of progress every 30 s.
wait_ssh() {
  local n=$1 name=$2 limit=$3 start=$SECONDS
  while ! on "$n" true 2>/dev/null; do
    if [ $((SECONDS - start)) -ge "$limit" ]; then
      log "$name: no SSH within $limit s; last console lines:"
      tail -n 20 "$kvt_work/$name.console.log" | tr -d '\r'
      return 1
    fi
    [ $(((SECONDS - start) % 30)) -lt 3 ] && [ $((SECONDS - start)) -ge 30 ] && log "$name: waiting for SSH ($((SECONDS - start)) s)"
    sleep 3
  done
  log "$name: up after $((SECONDS - start)) s"
}

# The VM's end without warning (a power cut): its QEMU process is killed.
vm_power_off() {
  local name=$1 pid
  pid=$(cat "$kvt_state/$name.pid")
  kill -9 "$pid"
  rm -f "$kvt_state/$name.pid"
  log "$name: powered off"
}

# Copies each VM's Keelson logs, journal and console to $1 (on failure).
collect_logs() {
  local dest=$1 n name
  mkdir -p "$dest"
  for n in "${!vm_names[@]}"; do
    name=${vm_names[$n]}
    cp "$kvt_work/$name.console.log" "$dest/" 2>/dev/null
    save_machine_logs "$dest" "$name" on "$n"
  done
  log "logs of every VM in $dest"
}

# save_machine_logs DEST NAME RUN...: a machine's Keelson logs (a tarball) and journal into DEST,
# NAME-logs.tar.gz and NAME-journal.log; `RUN... COMMAND` runs COMMAND on the machine.
save_machine_logs() {
  local dest=$1 name=$2
  shift 2
  "$@" 'tar -C / -czf - var/log/keelson 2>/dev/null; true' >"$dest/$name-logs.tar.gz" 2>/dev/null
  "$@" 'journalctl -b --no-pager 2>/dev/null | tail -n 2000' >"$dest/$name-journal.log" 2>/dev/null
}
