//! `keelson-apiserver migrate --from sqlite:DIR --to etcd:URL`: copies every stored object of a
//! stopped server's data directory into etcd, so the cluster goes on with the same objects on
//! etcd (start the server again with the same --data-dir, for its PKI, and --etcd-servers).
//!
//! Safe to run again after a failure: objects already copied unchanged are skipped. etcd
//! holding other objects under the prefix (another cluster's, or changed since) is refused
//! unless --force, which overwrites those this data directory also holds and leaves the rest.

use crate::options::MigrateArgs;
use crate::store::datadir::{self, DataDirError};
use crate::store::{
    Backend, Entry, Precondition, SqliteBackend, Store, StoreError, Write, DB_FILE,
};
use futures::StreamExt;
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// Writes in flight at once.
const PARALLEL: usize = 32;

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error("--from {0:?}: want sqlite:DIR, the data directory of a stopped keelson-apiserver")]
    From(String),
    #[error("--to {0:?}: want etcd:URL[,URL...], e.g. etcd:http://127.0.0.1:2379")]
    To(String),
    #[error(transparent)]
    DataDir(#[from] DataDirError),
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("etcd already holds {count} object(s) under {prefix} that are not this data directory's (e.g. {example}); migrate into an empty prefix, or pass --force to overwrite the ones this data directory also holds")]
    NotEmpty {
        count: usize,
        prefix: String,
        example: String,
    },
    #[error("copying {key} failed after {copied} object(s) were copied: {error}; run the same command again to go on")]
    Copy {
        key: String,
        copied: usize,
        error: StoreError,
    },
}

/// What a migration did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    pub total: usize,
    /// Written into etcd by this run.
    pub copied: usize,
    /// Already in etcd as they are here (an earlier run).
    pub unchanged: usize,
    /// Of those copied, how many replaced something else (--force).
    pub overwritten: usize,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} object(s): {} copied ({} overwritten), {} already in etcd",
            self.total, self.copied, self.overwritten, self.unchanged
        )
    }
}

/// Accepts every key: the migration copies what is stored, whatever it is.
pub(crate) fn any_key(_: &str, _: &Value) -> Result<(), String> {
    Ok(())
}

/// An object's content, without what the store sets (resourceVersion).
fn content(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
    }
    v
}

/// Runs the migration; `progress(done, total)` is called every 1000 objects and at the end.
pub async fn run(
    args: &MigrateArgs,
    progress: impl Fn(usize, usize),
) -> Result<Report, MigrateError> {
    let dir = args
        .from
        .strip_prefix("sqlite:")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| MigrateError::From(args.from.clone()))?;
    let servers: Vec<String> = args
        .to
        .strip_prefix("etcd:")
        .map(|s| {
            s.split(',')
                .filter(|u| !u.is_empty())
                .map(String::from)
                .collect()
        })
        .filter(|s: &Vec<String>| !s.is_empty())
        .ok_or_else(|| MigrateError::To(args.to.clone()))?;
    if !dir.join(DB_FILE).is_file() {
        return Err(
            StoreError::Backend(format!("no store at {}", dir.join(DB_FILE).display())).into(),
        );
    }
    // The source server must be stopped: nothing may change behind the copy.
    let _lock = datadir::lock(&dir)?;
    let source = SqliteBackend::open_existing(&dir.join(DB_FILE))?
        .load(0)?
        .objects;
    let cfg = args.etcd.config(servers, Duration::ZERO);
    let target =
        crate::store::Store::open_etcd(&cfg, Duration::from_secs(60), 1000, any_key).await?;
    let mut objects = Vec::with_capacity(source.len());
    for row in source {
        match serde_json::from_slice::<Value>(&row.json) {
            Ok(v) => objects.push((row.key, v)),
            Err(e) => tracing::warn!(key = row.key, error = %e, "not JSON; not copied"),
        }
    }
    let present: HashMap<String, Entry> = target.list_keyed("").0.into_iter().collect();
    check_target(&objects, &present, args)?;
    copy(&target, objects, &present, progress).await
}

/// Refuses a target holding objects that are not the source's, unless --force.
fn check_target(
    objects: &[(String, Value)],
    present: &HashMap<String, Entry>,
    args: &MigrateArgs,
) -> Result<(), MigrateError> {
    let ours: HashMap<&str, &Value> = objects.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut foreign: Vec<&String> = present
        .iter()
        .filter(|(k, e)| {
            ours.get(k.as_str())
                .is_none_or(|v| content(v) != content(&e.obj))
        })
        .map(|(k, _)| k)
        .collect();
    foreign.sort();
    match foreign.first() {
        Some(first) if !args.force => Err(MigrateError::NotEmpty {
            count: foreign.len(),
            prefix: args.etcd.etcd_prefix.clone(),
            example: first.to_string(),
        }),
        _ => Ok(()),
    }
}

/// Writes every object etcd does not hold as it is here, PARALLEL at a time.
pub(crate) async fn copy(
    target: &Store,
    objects: Vec<(String, Value)>,
    present: &HashMap<String, Entry>,
    progress: impl Fn(usize, usize),
) -> Result<Report, MigrateError> {
    let mut report = Report {
        total: objects.len(),
        ..Report::default()
    };
    let mut writes = Vec::new();
    for (key, obj) in objects {
        let precondition = match present.get(&key) {
            Some(e) if content(&e.obj) == content(&obj) => {
                report.unchanged += 1;
                continue;
            }
            Some(e) => {
                report.overwritten += 1;
                Precondition::Rev(e.rev)
            }
            None => Precondition::MustNotExist,
        };
        writes.push(Write {
            key,
            value: Some(obj),
            precondition,
        });
    }
    let mut results = futures::stream::iter(writes)
        .map(|w| async move {
            let key = w.key.clone();
            (key, target.write(w).await)
        })
        .buffer_unordered(PARALLEL);
    let mut done = report.unchanged;
    while let Some((key, result)) = results.next().await {
        if let Err(error) = result {
            return Err(MigrateError::Copy {
                key,
                copied: report.copied,
                error,
            });
        }
        report.copied += 1;
        done += 1;
        if done.is_multiple_of(1000) {
            progress(done, report.total);
        }
    }
    progress(done, report.total);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::EtcdClientFlags;
    use serde_json::json;

    fn args(force: bool) -> MigrateArgs {
        MigrateArgs {
            from: "sqlite:/x".into(),
            to: "etcd:http://127.0.0.1:2379".into(),
            etcd: EtcdClientFlags {
                etcd_cafile: None,
                etcd_certfile: None,
                etcd_keyfile: None,
                etcd_prefix: "/registry".into(),
            },
            force,
        }
    }

    fn obj(name: &str, rv: &str, data: &str) -> Value {
        json!({ "metadata": { "name": name, "resourceVersion": rv }, "data": { "k": data } })
    }

    #[test]
    fn a_target_holding_the_same_objects_is_a_retry_and_others_are_refused_without_force() {
        let ours = vec![("/core/configmaps/d/a".to_string(), obj("a", "5", "1"))];
        // The same object at another resourceVersion: copied by an earlier run.
        let mut present = HashMap::new();
        present.insert(ours[0].0.clone(), Entry::new(90, obj("a", "90", "1")));
        assert!(check_target(&ours, &present, &args(false)).is_ok());
        // Changed since, and one that is not ours at all.
        present.insert(ours[0].0.clone(), Entry::new(91, obj("a", "91", "2")));
        present.insert(
            "/core/configmaps/d/z".into(),
            Entry::new(92, obj("z", "92", "1")),
        );
        let err = check_target(&ours, &present, &args(false))
            .unwrap_err()
            .to_string();
        assert!(err.contains("2 object(s) under /registry"), "{err}");
        assert!(err.contains("/core/configmaps/d/a"), "{err}");
        assert!(check_target(&ours, &present, &args(true)).is_ok());
    }

    #[tokio::test]
    async fn bad_from_and_to_are_named() {
        let mut a = args(false);
        a.from = "/var/lib/keelson".into();
        let err = run(&a, |_, _| {}).await.unwrap_err().to_string();
        assert!(
            err.starts_with("--from \"/var/lib/keelson\": want sqlite:DIR"),
            "{err}"
        );
        let mut a = args(false);
        a.to = "http://127.0.0.1:2379".into();
        let err = run(&a, |_, _| {}).await.unwrap_err().to_string();
        assert!(
            err.starts_with("--to \"http://127.0.0.1:2379\": want etcd:URL"),
            "{err}"
        );
        let mut a = args(false);
        a.from = "sqlite:/nonexistent-keelson-dir".into();
        let err = run(&a, |_, _| {}).await.unwrap_err().to_string();
        assert!(
            err.contains("no store at /nonexistent-keelson-dir/store.db"),
            "{err}"
        );
    }
}
