//! The Job and CronJob controllers against a real keelson-apiserver and the real controller
//! manager, driven by kubectl. The test plays the node agents: it reports pods Succeeded or
//! Failed through the status subresource, as an agent does when their containers exit.

use std::process::Command;
use std::time::Duration;

mod common;

use common::Cluster;
use keelson_testing::eventually;
use serde_json::Value;

impl Cluster {
    /// The job's pods that are neither finished nor being deleted.
    fn running(&self, job: &str) -> Vec<Value> {
        let sel = format!("batch.kubernetes.io/job-name={job}");
        self.live(&["pods", "-l", &sel])
            .into_iter()
            .filter(|p| !matches!(p["status"]["phase"].as_str(), Some("Succeeded" | "Failed")))
            .collect()
    }

    /// Waits up to a minute for the Job's Complete condition.
    fn wait_complete(&self, job: &str) {
        let job = format!("job/{job}");
        self.ok(&["wait", "--for=condition=complete", &job, "--timeout=60s"]);
    }

    /// What an agent reports when the pod's one container exits with `code`.
    fn finish(&self, pod: &str, code: i32) {
        let phase = if code == 0 { "Succeeded" } else { "Failed" };
        let now = chrono_now();
        let status = format!(
            r#"{{"status":{{"phase":"{phase}","containerStatuses":[{{"name":"c","image":"busybox","imageID":"","ready":false,"restartCount":0,"state":{{"terminated":{{"exitCode":{code},"finishedAt":"{now}"}}}}}}]}}}}"#
        );
        self.api.kubectl_ok(&[
            "patch",
            "pod",
            pod,
            "--subresource=status",
            "--type=merge",
            "-p",
            &status,
        ]);
    }

    fn get(&self, what: &str, path: &str) -> String {
        let path = format!("jsonpath={path}");
        self.api
            .kubectl_cmd()
            .run(&["get", what, "-o", &path])
            .unwrap_or_default()
    }

    fn wait(&self, what: &str, mut f: impl FnMut() -> Result<(), String>) {
        eventually(what, Duration::from_secs(90), || {
            f().map_err(|e| format!("{e}\ncontroller log:\n{}", self.log()))
        })
    }
}

fn chrono_now() -> String {
    let out = Command::new("date")
        .args(["-u", "+%Y-%m-%dT%H:%M:%SZ"])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn job_yaml(name: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {name}\nspec:\n{extra_spec}  template:\n    spec:\n      restartPolicy: Never\n      containers:\n      - name: c\n        image: busybox\n"
    )
}

#[test]
fn completions_five_parallelism_two_finishes_with_five_succeeded() {
    let c = Cluster::start();
    c.api
        .apply(&job_yaml("five", "  completions: 5\n  parallelism: 2\n"));
    let mut finished = 0;
    while finished < 5 {
        let mut pods = Vec::new();
        c.wait("job pods running", || {
            pods = c.running("five");
            (!pods.is_empty()).then_some(()).ok_or("no pod".into())
        });
        assert!(pods.len() <= 2, "parallelism 2, saw {}", pods.len());
        let pod = &pods[0];
        let meta = &pod["metadata"];
        assert_eq!(meta["finalizers"][0], "batch.kubernetes.io/job-tracking");
        assert_eq!(meta["ownerReferences"][0]["kind"], "Job");
        assert!(!meta["labels"]["batch.kubernetes.io/controller-uid"].is_null());
        c.finish(meta["name"].as_str().unwrap(), 0);
        finished += 1;
    }
    c.wait_complete("five");
    assert_eq!(c.get("job/five", "{.status.succeeded}"), "5");
    // What a user reads, with kubectl 1.32's columns.
    let table = c.api.kubectl_ok(&["get", "job", "five"]);
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(header, ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]);
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(&row[..3], ["five", "Complete", "5/5"]);
    assert_eq!(c.get("job/five", "{.status.failed}"), "0");
    let types = c.get("job/five", "{.status.conditions[*].type}");
    assert_eq!(types, "SuccessCriteriaMet Complete");
    // Every pod was counted, so none keeps the finalizer.
    let finalizers = c.get("pods", "{range .items[*]}{.metadata.finalizers}{end}");
    assert!(
        !finalizers.contains("job-tracking"),
        "{finalizers}\n{}",
        c.log()
    );
    // Settled: the status it wrote reads back equal, so nothing wakes it again.
    std::thread::sleep(Duration::from_secs(1));
    let before = c.reconciles();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(c.reconciles(), before, "still reconciling\n{}", c.log());
    let events = c.api.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=five",
    ]);
    assert!(
        events.contains("Completed") && events.contains("Job completed"),
        "{events}"
    );
}

#[test]
fn a_failing_job_stops_at_its_backoff_limit() {
    let c = Cluster::start();
    c.api.apply(&job_yaml("fails", "  backoffLimit: 1\n"));
    for _ in 0..2 {
        let mut pods = Vec::new();
        // The second pod comes after upstream's 10 s back-off.
        c.wait("a pod of the failing job", || {
            pods = c.running("fails");
            (pods.len() == 1)
                .then_some(())
                .ok_or(format!("{} pods", pods.len()))
        });
        c.finish(pods[0]["metadata"]["name"].as_str().unwrap(), 1);
    }
    c.api.kubectl_ok(&[
        "wait",
        "--for=condition=failed",
        "job/fails",
        "--timeout=60s",
    ]);
    let reason = c.get(
        "job/fails",
        "{.status.conditions[?(@.type==\"Failed\")].reason}",
    );
    assert_eq!(reason, "BackoffLimitExceeded");
    assert_eq!(c.get("job/fails", "{.status.failed}"), "2");
    std::thread::sleep(Duration::from_secs(2));
    assert!(c.running("fails").is_empty(), "no new pod after the limit");
}

#[test]
fn an_indexed_job_gives_each_pod_its_index() {
    let c = Cluster::start();
    c.api.apply(&job_yaml(
        "idx",
        "  completions: 3\n  parallelism: 3\n  completionMode: Indexed\n",
    ));
    let mut pods = Vec::new();
    c.wait("three indexed pods", || {
        pods = c.running("idx");
        (pods.len() == 3)
            .then_some(())
            .ok_or(format!("{} pods", pods.len()))
    });
    let mut indexes: Vec<String> = Vec::new();
    for p in &pods {
        let meta = &p["metadata"];
        let index = meta["annotations"]["batch.kubernetes.io/job-completion-index"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            meta["labels"]["batch.kubernetes.io/job-completion-index"],
            index
        );
        assert_eq!(p["spec"]["hostname"], format!("idx-{index}"));
        let env = &p["spec"]["containers"][0]["env"][0];
        assert_eq!(env["name"], "JOB_COMPLETION_INDEX");
        assert_eq!(
            env["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.annotations['batch.kubernetes.io/job-completion-index']"
        );
        indexes.push(index);
        c.finish(meta["name"].as_str().unwrap(), 0);
    }
    indexes.sort();
    assert_eq!(indexes, ["0", "1", "2"]);
    c.wait_complete("idx");
    assert_eq!(c.get("job/idx", "{.status.completedIndexes}"), "0-2");
}

#[test]
fn a_cronjob_starts_only_the_most_recent_missed_run_and_records_its_success() {
    let c = Cluster::start();
    c.api.apply(
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: tick\nspec:\n  schedule: '*/1 * * * *'\n  timeZone: Etc/UTC\n  successfulJobsHistoryLimit: 1\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: c\n            image: busybox\n",
    );
    let bad = c.api.kubectl_stdin(
        &["apply", "-f", "-"],
        "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: bad\nspec:\n  schedule: '* * *'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          restartPolicy: Never\n          containers:\n          - name: c\n            image: busybox\n",
    );
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("spec.schedule: Invalid value: \"* * *\": expected exactly 5 fields"),
        "{err}"
    );
    // As if the controller had been down for three hours: one Job, for the latest minute.
    let three_hours_ago = {
        let out = Command::new("date")
            .args(["-u", "-d", "3 hours ago", "+%Y-%m-%dT%H:%M:00Z"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let patch = format!(r#"{{"status":{{"lastScheduleTime":"{three_hours_ago}"}}}}"#);
    c.api.kubectl_ok(&[
        "patch",
        "cronjob",
        "tick",
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
    ]);
    let mut first = String::new();
    c.wait("the CronJob's Job", || {
        first = c.get("jobs", "{.items[*].metadata.name}");
        (!first.is_empty()).then_some(()).ok_or("no job".into())
    });
    assert!(
        !first.contains(' '),
        "only the most recent missed run starts: {first}"
    );
    let minutes: i64 = first.strip_prefix("tick-").unwrap().parse().unwrap();
    let now_minutes = chrono_minutes();
    assert!(
        (now_minutes - minutes).abs() <= 1,
        "{first} is not the latest minute"
    );
    let events = c.api.kubectl_ok(&[
        "get",
        "events",
        "--field-selector",
        "involvedObject.name=tick",
    ]);
    assert!(events.contains("TooManyMissedTimes"), "{events}");
    assert!(events.contains(&format!("Created job {first}")), "{events}");
    let table = c.api.kubectl_ok(&["get", "cronjobs"]);
    let header: Vec<&str> = table.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST", "SCHEDULE", "AGE"]
    );
    assert!(
        table.contains("*/1 * * * *") && table.contains("Etc/UTC"),
        "{table}"
    );
    let active = c.get("cronjob/tick", "{.status.active[*].name}");
    assert_eq!(active, first);
    assert_eq!(
        c.get(
            &format!("job/{first}"),
            "{.metadata.annotations.batch\\.kubernetes\\.io/cronjob-scheduled-timestamp}"
        )
        .len(),
        "2026-01-01T00:00:00+00:00".len()
    );
    // The Job's pod succeeds: the CronJob records it and active empties.
    let mut pods = Vec::new();
    c.wait("the Job's pod", || {
        pods = c.running(&first);
        (pods.len() == 1).then_some(()).ok_or("no pod".into())
    });
    c.finish(pods[0]["metadata"]["name"].as_str().unwrap(), 0);
    // (A later minute may have started the next Job meanwhile: the schedule is every minute.)
    c.wait(
        "lastSuccessfulTime, and the finished Job no longer active",
        || {
            let status = c.get(
                "cronjob/tick",
                "{.status.lastSuccessfulTime}|{.status.active[*].name}",
            );
            let (done, active) = status.split_once('|').unwrap_or_default();
            (!done.is_empty() && !active.split(' ').any(|a| a == first))
                .then_some(())
                .ok_or(status)
        },
    );
}

fn chrono_minutes() -> i64 {
    let out = Command::new("date").arg("+%s").output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse::<i64>()
        .unwrap()
        / 60
}

#[test]
fn the_pods_of_a_deleted_job_are_not_held_by_its_finalizer() {
    let c = Cluster::start();
    c.api.apply(&job_yaml("gone", ""));
    let mut pods = Vec::new();
    c.wait("the job's pod", || {
        pods = c.running("gone");
        (pods.len() == 1).then_some(()).ok_or("no pod".into())
    });
    let pod = pods[0]["metadata"]["name"].as_str().unwrap().to_string();
    // Background deletion: the Job is gone at once, its running pod still holds the finalizer.
    c.api
        .kubectl_ok(&["delete", "job", "gone", "--cascade=background"]);
    c.api.kubectl_ok(&["delete", "pod", &pod, "--wait=false"]);
    c.wait("the pod gone", || {
        let out = c.api.kubectl(&["get", "pod", &pod, "-o", "name"]);
        let err = String::from_utf8_lossy(&out.stderr);
        err.contains("NotFound").then_some(()).ok_or(format!(
            "still there: {}",
            String::from_utf8_lossy(&out.stdout)
        ))
    });
}

#[test]
fn a_suspended_job_runs_nothing_until_resumed() {
    let c = Cluster::start();
    c.api.apply(&job_yaml("later", "  suspend: true\n"));
    c.wait("the Suspended condition", || {
        let row = c.api.kubectl_ok(&["get", "job", "later", "--no-headers"]);
        row.contains("Suspended").then_some(()).ok_or(row)
    });
    assert!(c.running("later").is_empty());
    let resume = r#"{"spec":{"suspend":false}}"#;
    c.api.patch_merge("job", "later", resume).unwrap();
    c.wait("a pod after the resume", || {
        let n = c.running("later").len();
        (n == 1).then_some(()).ok_or(format!("{n} pods"))
    });
    let resumed = c.get(
        "job/later",
        "{.status.conditions[?(@.type==\"Suspended\")].reason}",
    );
    assert_eq!(resumed, "JobResumed");
}
