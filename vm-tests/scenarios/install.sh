#!/bin/sh
# Runs on a VM: installs Keelson from the release tarball as README.md tells a user, for the VM
# tests and the Vagrantfile alike:
#   install.sh TARBALL up            (environment for scripts/up passes through)
#   install.sh TARBALL join URL --token ... --ca-cert-hash ...
# Unpacks to /root/keelson-VERSION (/root/keelson points at it), then runs scripts/up or join.
set -eu
tarball=$1
shift
case "${1:-}" in
  up | join) ;;
  *) echo "install.sh: up or join, not '${1:-}'" >&2; exit 2 ;;
esac
rm -rf /root/keelson-*/
tar -C /root -xzf "$tarball"
# The tarball's one folder, keelson-VERSION (the only one left after the rm above).
for dir in /root/keelson-*/; do :; done
ln -sfn "${dir%/}" /root/keelson
cmd=$1
shift
exec /root/keelson/scripts/"$cmd" "$@"
