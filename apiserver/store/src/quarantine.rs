//! `keelson-apiserver quarantine list|show|delete`: the stored objects the server moved aside
//! at start because it could not decode them (see `Store::open`).

use super::{SqliteBackend, StoreError, DB_FILE};
use std::fmt::Write;
use std::path::Path;

#[derive(clap::Subcommand, Debug, Clone, PartialEq)]
pub enum QuarantineAction {
    /// Lists them: key, resourceVersion, when, and why.
    List,
    /// Prints one as it was stored.
    Show { key: String },
    /// Deletes one for good.
    Delete { key: String },
}

/// Runs one admin action on the store in `data_dir`; returns what to print.
pub fn admin(data_dir: &Path, action: &QuarantineAction) -> Result<String, StoreError> {
    let db = SqliteBackend::open_existing(&data_dir.join(DB_FILE))?;
    let rows = db.quarantined()?;
    let mut out = String::new();
    match action {
        QuarantineAction::List => {
            if rows.is_empty() {
                return Ok("No quarantined objects.\n".into());
            }
            let _ = writeln!(out, "KEY\tRESOURCEVERSION\tQUARANTINED\tREASON");
            for q in rows {
                let at = chrono::DateTime::from_timestamp(q.at, 0)
                    .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
                    .unwrap_or_default();
                let _ = writeln!(out, "{}\t{}\t{at}\t{}", q.key, q.rev, q.reason);
            }
        }
        QuarantineAction::Show { key } => {
            let q = rows
                .into_iter()
                .find(|q| &q.key == key)
                .ok_or(missing(key))?;
            out = String::from_utf8_lossy(&q.json).into_owned();
            out.push('\n');
        }
        QuarantineAction::Delete { key } => {
            if !db.delete_quarantined(key)? {
                return Err(missing(key));
            }
            let _ = writeln!(out, "deleted quarantined object {key}");
        }
    }
    Ok(out)
}

fn missing(key: &str) -> StoreError {
    StoreError::Backend(format!("no quarantined object with key {key:?}"))
}
