# Deployment rollouts and cascading deletion on the whole node, with real pods, as a user drives
# them with kubectl: pause, two template changes, resume -> one rollout to the last template;
# rollout undo --to-revision=1 and the history it leaves; a rollout that never becomes ready ->
# ProgressDeadlineExceeded; delete --cascade=foreground returns after the pods are gone;
# --cascade=orphan leaves the ReplicaSet and its pods running without an owner. Sourced by
# scripts/e2e (k, pass, fail, until_ok) under set -euo pipefail: every command that may fail is
# guarded. Removes what it makes.

ro_image=127.0.0.1:5000/keelson/busybox:1.35

ro_deployment() { # NAME [EXTRA SPEC LINES]: 2 busybox replicas that exit at once on SIGTERM
  k apply -f - >/dev/null <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: 2
  revisionHistoryLimit: 2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: c
        image: $ro_image
        command: [sh, -c, "trap 'exit 0' TERM; sleep 3600 & wait"]
${2:-}
EOF
}

ro_progressing() { k get deploy "$1" -o jsonpath='{.status.conditions[?(@.type=="Progressing")].reason}'; }
ro_is() { [ "$(ro_progressing "$1")" = "$2" ]; }
# "revision=V" of each ReplicaSet of app=$1 (V: the template's env V, empty for none), sorted.
ro_revisions() {
  k get rs -l "app=$1" -o jsonpath='{range .items[*]}{.metadata.annotations.deployment\.kubernetes\.io/revision}={.spec.template.spec.containers[0].env[0].value}{"\n"}{end}' | sort -n
}
ro_rolled() { k rollout status "deployment/$1" --timeout=5s; }

# Pause, change the template twice, resume: one rollout, to the last template.
ro_deployment e2e-roll || true
until_ok 90 ro_rolled e2e-roll || true
k rollout pause deployment/e2e-roll >/dev/null || true
ro_paused_ok=$(until_ok 30 ro_is e2e-roll DeploymentPaused && echo yes || true)
k set env deployment/e2e-roll V=2 >/dev/null || true
k set env deployment/e2e-roll V=3 >/dev/null || true
sleep 3
ro_while_paused=$(ro_revisions e2e-roll | tr '\n' ' ' || true)
k rollout resume deployment/e2e-roll >/dev/null || true
if [ "$ro_paused_ok" = yes ] && [ "$ro_while_paused" = "1= " ] && until_ok 90 ro_rolled e2e-roll \
  && [ "$(ro_revisions e2e-roll | tr '\n' ' ')" = "1= 2=3 " ]; then
  pass rollouts_pause_then_resume_rolls_once_to_the_last_template
else
  fail rollouts_pause_then_resume_rolls_once_to_the_last_template "paused condition: $ro_paused_ok; while paused: $ro_while_paused; after: $(ro_revisions e2e-roll | tr '\n' ' ')"
fi

# Undo to revision 1: its ReplicaSet comes back as revision 3, every pod without V.
ro_pods_without_v() {
  local envs
  envs=$(k get pods -l app=e2e-roll -o jsonpath='{range .items[?(@.status.phase=="Running")]}{.spec.containers[0].env}{"\n"}{end}')
  [ "$(k get pods -l app=e2e-roll -o name | wc -l)" = 2 ] && [ "$(grep -c . <<<"$envs")" = 0 ] \
    && [ "$(k get pods -l app=e2e-roll -o jsonpath='{.items[*].status.phase}')" = "Running Running" ]
}
k rollout undo deployment/e2e-roll --to-revision=1 >/dev/null 2>&1 || true
if until_ok 90 ro_rolled e2e-roll && until_ok 60 ro_pods_without_v \
  && [ "$(ro_revisions e2e-roll | tr '\n' ' ')" = "2=3 3= " ] \
  && [ "$(k rollout history deployment/e2e-roll | awk 'NR>2 && NF {print $1}' | tr '\n' ' ')" = "2 3 " ]; then
  pass rollouts_undo_to_revision_1_returns_to_the_first_template
else
  fail rollouts_undo_to_revision_1_returns_to_the_first_template "revisions: $(ro_revisions e2e-roll | tr '\n' ' '); history: $(k rollout history deployment/e2e-roll 2>&1 | tr '\n' ' ')"
fi
k delete deployment e2e-roll --wait=false >/dev/null 2>&1 || true

# A rollout whose pods never become ready: ProgressDeadlineExceeded, and rollout status says so.
ro_deployment e2e-stuck "  progressDeadlineSeconds: 10" || true
k patch deployment e2e-stuck --type=json -p '[{"op":"add","path":"/spec/template/spec/containers/0/readinessProbe","value":{"exec":{"command":["false"]},"periodSeconds":2}}]' >/dev/null || true
ro_stuck_ok=$(until_ok 60 ro_is e2e-stuck ProgressDeadlineExceeded && echo yes || true)
# rollout status fails here, as it should; its message is what counts.
ro_status=$(k rollout status deployment/e2e-stuck --timeout=10s 2>&1 || true)
if [ "$ro_stuck_ok" = yes ] && grep -q 'deployment "e2e-stuck" exceeded its progress deadline' <<<"$ro_status"; then
  pass rollouts_never_ready_rollout_exceeds_its_progress_deadline
else
  fail rollouts_never_ready_rollout_exceeds_its_progress_deadline "Progressing: $(ro_progressing e2e-stuck); rollout status: $ro_status"
fi
k delete deployment e2e-stuck --wait=false >/dev/null 2>&1 || true

# Foreground: kubectl delete returns once the pods are gone, not merely marked.
ro_deployment e2e-fg || true
until_ok 90 ro_rolled e2e-fg || true
if k delete deployment e2e-fg --cascade=foreground --timeout=120s >/dev/null \
  && [ -z "$(k get pods,rs -l app=e2e-fg -o name)" ]; then
  pass rollouts_foreground_delete_returns_after_the_pods_are_gone
else
  fail rollouts_foreground_delete_returns_after_the_pods_are_gone "left: $(k get pods,rs -l app=e2e-fg -o name | tr '\n' ' ')"
fi

# Orphan: the ReplicaSet loses its owner; it and its pods keep running.
ro_deployment e2e-orph || true
until_ok 90 ro_rolled e2e-orph || true
k delete deployment e2e-orph --cascade=orphan >/dev/null || true
sleep 5
ro_owners=$(k get rs -l app=e2e-orph -o jsonpath='{.items[*].metadata.ownerReferences}' || true)
ro_phases=$(k get pods -l app=e2e-orph -o jsonpath='{.items[*].status.phase}' || true)
if [ "$(k get rs -l app=e2e-orph -o name | wc -l)" = 1 ] && [ -z "$ro_owners" ] && [ "$ro_phases" = "Running Running" ]; then
  pass rollouts_orphan_delete_leaves_the_replicaset_and_pods_running
else
  fail rollouts_orphan_delete_leaves_the_replicaset_and_pods_running "rs owners: $ro_owners; pods: $ro_phases"
fi
k delete rs -l app=e2e-orph --wait=false >/dev/null 2>&1 || true
