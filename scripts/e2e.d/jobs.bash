# Jobs and CronJobs on the whole node, with real pods, as a user checks them with kubectl: a Job
# of completions 5 / parallelism 2 finishes with 5 succeeded; an Indexed Job's pods print their
# JOB_COMPLETION_INDEX; a failing Job stops at backoffLimit with BackoffLimitExceeded; a CronJob
# every minute runs once (real time: up to a minute's wait). Sourced by scripts/e2e (k, pass,
# fail, until_ok). The four start together to keep the wait short; removes what it makes.

jb_image=127.0.0.1:5000/keelson/busybox:1.35
jb_template() { # INDENT COMMAND: the pod template of busybox running COMMAND under sh -c
  printf '%s\n' 'template:' '  spec:' '    restartPolicy: Never' '    containers:' '    - name: c' \
    "      image: $jb_image" "      command: [\"sh\", \"-c\", \"$2\"]" | sed "s/^/$1/"
}
jb_job() { # NAME SPEC-LINES COMMAND: a Job of busybox running COMMAND under sh -c
  k apply -f - >/dev/null <<EOF
apiVersion: batch/v1
kind: Job
metadata:
  name: $1
spec:
$2
$(jb_template '  ' "$3")
EOF
}

jb_job e2e-jobs-five "  completions: 5
  parallelism: 2" 'echo done; sleep 1'
jb_job e2e-jobs-idx "  completions: 3
  parallelism: 3
  completionMode: Indexed" 'echo index=$JOB_COMPLETION_INDEX'
jb_job e2e-jobs-fail "  backoffLimit: 1" 'exit 3'
k apply -f - >/dev/null <<EOF
apiVersion: batch/v1
kind: CronJob
metadata:
  name: e2e-jobs-cron
spec:
  schedule: "*/1 * * * *"
  successfulJobsHistoryLimit: 1
  jobTemplate:
    spec:
$(jb_template '      ' 'echo tick')
EOF

jb_row() { k get job "$1" --no-headers 2>/dev/null | awk '{print $2, $3}'; }
if k wait --for=condition=complete job/e2e-jobs-five --timeout=180s >/dev/null 2>&1 &&
  [ "$(k get job e2e-jobs-five -o jsonpath='{.status.succeeded}')" = 5 ] &&
  [ "$(jb_row e2e-jobs-five)" = "Complete 5/5" ]; then
  pass jobs_completions_5_parallelism_2_finish_with_5_succeeded
else
  fail jobs_completions_5_parallelism_2_finish_with_5_succeeded "$(k get job e2e-jobs-five -o jsonpath='{.status}' 2>&1 | head -c 800)"
fi

jb_indexes() { k logs -l batch.kubernetes.io/job-name=e2e-jobs-idx --tail=-1 2>/dev/null | sort | tr '\n' ' '; }
if k wait --for=condition=complete job/e2e-jobs-idx --timeout=120s >/dev/null 2>&1 &&
  [ "$(jb_indexes)" = "index=0 index=1 index=2 " ]; then
  pass jobs_indexed_pods_print_their_index
else
  fail jobs_indexed_pods_print_their_index "logs: $(jb_indexes); status: $(k get job e2e-jobs-idx -o jsonpath='{.status}' 2>&1 | head -c 600)"
fi

jb_fail_reason() { k get job e2e-jobs-fail -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason}'; }
if k wait --for=condition=failed job/e2e-jobs-fail --timeout=120s >/dev/null 2>&1 &&
  [ "$(jb_fail_reason)" = BackoffLimitExceeded ] &&
  [ "$(k get job e2e-jobs-fail -o jsonpath='{.status.failed}')" = 2 ]; then
  pass jobs_failing_job_stops_at_backoff_limit
else
  fail jobs_failing_job_stops_at_backoff_limit "$(k get job e2e-jobs-fail -o jsonpath='{.status}' 2>&1 | head -c 800)"
fi

# The first run comes at the next minute: one Job named e2e-jobs-cron-<minutes>, its pod's log.
jb_cron_done() { [ -n "$(k get cronjob e2e-jobs-cron -o jsonpath='{.status.lastSuccessfulTime}')" ]; }
jb_cron_job=""
if until_ok 150 jb_cron_done; then
  jb_cron_job=$(k get jobs -o name | grep -E '^job.batch/e2e-jobs-cron-[0-9]+$' | head -n1)
fi
if [ -n "$jb_cron_job" ] &&
  [ "$(k logs -l "batch.kubernetes.io/job-name=${jb_cron_job#job.batch/}" --tail=-1 2>/dev/null)" = tick ]; then
  pass jobs_cronjob_every_minute_runs_a_job
else
  fail jobs_cronjob_every_minute_runs_a_job "job: $jb_cron_job; cronjob: $(k get cronjob e2e-jobs-cron -o jsonpath='{.status}' 2>&1 | head -c 600); events: $(k get events --field-selector involvedObject.name=e2e-jobs-cron 2>&1 | tail -n 5)"
fi

k delete cronjob e2e-jobs-cron --wait=false >/dev/null 2>&1 || true
for jb in e2e-jobs-five e2e-jobs-idx e2e-jobs-fail ${jb_cron_job#job.batch/}; do
  k delete job "$jb" --wait=false >/dev/null 2>&1 || true
  k delete pods -l "batch.kubernetes.io/job-name=$jb" --wait=false >/dev/null 2>&1 || true
done
# Later minutes may have started more runs meanwhile.
for jb in $(k get jobs -o name 2>/dev/null | grep -E '^job.batch/e2e-jobs-cron-[0-9]+$'); do
  k delete "$jb" --wait=false >/dev/null 2>&1 || true
  k delete pods -l "batch.kubernetes.io/job-name=${jb#job.batch/}" --wait=false >/dev/null 2>&1 || true
done
