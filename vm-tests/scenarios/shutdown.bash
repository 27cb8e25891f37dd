# vm-tests/run shutdown: a control plane (its node cordoned) and one worker joined with
# --shutdown-grace-period 30s --shutdown-grace-period-critical-pods 10s, under the real logind.
# The worker holds a delay inhibitor (logind's InhibitDelayMaxSec raised by the agent's drop-in);
# `systemctl reboot` on it stops a regular pod, then a critical one, both reported Failed with
# reason Terminated while the node says it is shutting down; after the reboot they stay Failed
# and the agent's metrics give the shutdown's start and end.
control_plane_and_worker --shutdown-grace-period 30s --shutdown-grace-period-critical-pods 10s
phase scenario
check 2 "bash /root/shutdown.sh lock"
check 1 "bash /root/shutdown.sh pods kvt-w1"
log "kvt-w1: rebooting"
on 2 'systemctl reboot' || true
check 1 "bash /root/shutdown.sh stopped kvt-w1"
for _ in $(seq 1 120); do on 2 true 2>/dev/null || break; sleep 1; done
wait_ssh 2 kvt-w1 900
check 1 "bash /root/shutdown.sh after kvt-w1"
