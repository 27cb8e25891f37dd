# Under systemd as PID 1 (users' machines and VMs) scripts/up and scripts/join install each daemon
# as a unit, enabled, so the node comes back after a reboot; elsewhere (containers, CI, and always
# inside a KEELSON_NETNS test host) they stay background processes with PID files.
# KEELSON_SYSTEMD=0 or 1 overrides the choice. Sourced, not run.

use_systemd() {
  case "${KEELSON_SYSTEMD:-auto}" in
    1) return 0 ;;
    0) return 1 ;;
  esac
  [ -d /run/systemd/system ] && [ -z "${KEELSON_NETNS:-}" ]
}

units_dir=${KEELSON_UNITS_DIR:-/etc/systemd/system}

# One argument as systemd's ExecStart reads it: quoted, with its specifiers and variables escaped.
unit_quote() {
  local a=$1
  a=${a//\\/\\\\}; a=${a//\"/\\\"}; a=${a//%/%%}; a=${a//\$/\$\$}
  printf '"%s"' "$a"
}

# install_unit UNIT AFTER LOG -- COMMAND...: writes UNIT.service (started after the units in AFTER,
# which it wants; output appended to LOG), enables it and (re)starts it. Written to a temporary
# file and renamed, so a failed run leaves the previous unit whole.
install_unit() {
  local unit=$1 after=$2 log=$3 exec="" a
  shift 3
  [ "${1:-}" = -- ] && shift
  for a in "$@"; do exec+="$(unit_quote "$a") "; done
  mkdir -p "$units_dir" "$(dirname "$log")"
  cat >"$units_dir/$unit.service.tmp" <<UNIT
# Written by Keelson's scripts/up or scripts/join; scripts/down removes it.
[Unit]
Description=Keelson ${unit#keelson-}
After=network-online.target $after
Wants=network-online.target $after

[Service]
ExecStart=${exec% }
Restart=always
RestartSec=2
StandardOutput=append:$log
StandardError=inherit
LimitNOFILE=1048576

[Install]
WantedBy=multi-user.target
UNIT
  mv "$units_dir/$unit.service.tmp" "$units_dir/$unit.service"
  systemctl daemon-reload
  systemctl enable --quiet "$unit.service"
  systemctl restart "$unit.service"
}

# The main PID of a unit (0 when it is not running).
unit_pid() { systemctl show -p MainPID --value "$1.service" 2>/dev/null || echo 0; }

# remove_unit UNIT...: stops, disables and removes units install_unit wrote; one reload.
remove_unit() {
  local unit
  for unit in "$@"; do
    systemctl disable --now --quiet "$unit.service" 2>/dev/null || true
    rm -f "$units_dir/$unit.service"
  done
  systemctl daemon-reload 2>/dev/null || true
}

# Stops, disables and removes every unit install_unit wrote (scripts/down).
remove_units() {
  local f units=()
  for f in "$units_dir"/keelson-*.service; do
    [ -e "$f" ] || continue
    units+=("$(basename "$f" .service)")
    echo "stopping ${units[-1]}"
  done
  [ ${#units[@]} -eq 0 ] || remove_unit "${units[@]}"
}
