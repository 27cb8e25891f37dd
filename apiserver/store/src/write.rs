//! A write on etcd: one transaction whose compare is the write's precondition. When the compare
//! fails, the key's current state (read in the same transaction) says which error, exactly as
//! the local backend's: AlreadyExists, NotFound or Conflict with the current resourceVersion.

use super::etcd::Remote;
use super::{set_resource_version, Entry, Precondition, Rev, StoreError, Write};
use etcd_client::{Compare, CompareOp, DeleteOptions, Txn, TxnOp, TxnOpResponse, TxnResponse};
use serde_json::Value;

impl Remote {
    /// Commits one write; returns the stored entry (for a delete, the deleted object at the
    /// deletion's revision) once memory has it, so this server reads its own writes.
    pub async fn write(&self, w: Write) -> Result<Entry, StoreError> {
        let key = self.key(&w.key);
        let mut value = w.value;
        let txn = transaction(key, self.etcd_precondition(w.precondition), value.as_mut())?;
        let send = |c: etcd_client::Client| {
            let txn = txn.clone();
            async move { c.kv_client().txn(txn).await }
        };
        let resp = self.endpoints.call(false, send).await?;
        let rev = self.rev(resp.header().map(|h| h.revision()).unwrap_or(0));
        let entry = match (resp.succeeded(), value) {
            (false, _) => return Err(self.refusal(w.precondition, &resp)),
            (true, Some(mut obj)) => {
                set_resource_version(&mut obj, rev);
                Entry::new(rev, obj)
            }
            (true, None) => deleted(&resp, rev)?,
        };
        self.hand_over(&w.key, &entry);
        let applied = self.wait_applied(rev).await;
        self.take_pending(rev);
        applied.map(|()| entry)
    }

    /// The compare on etcd's revisions (a resourceVersion less the offset).
    fn etcd_precondition(&self, p: Precondition) -> EtcdPrecondition {
        match p {
            Precondition::MustNotExist => EtcdPrecondition::MustNotExist,
            Precondition::MustExist => EtcdPrecondition::MustExist,
            // At or below the offset: a resourceVersion no key of this etcd has, not even a
            // missing one (mod_revision 0).
            Precondition::Rev(rv) => EtcdPrecondition::ModRevision(match self.etcd_rev(rv) {
                r if r <= 0 => -1,
                r => r,
            }),
        }
    }

    /// Why the compare failed, from the key's current state.
    fn refusal(&self, precondition: Precondition, resp: &TxnResponse) -> StoreError {
        let current = match resp.op_responses().first() {
            Some(TxnOpResponse::Get(g)) => g.kvs().first().map(|kv| self.rev(kv.mod_revision())),
            _ => None,
        };
        match (precondition, current) {
            (Precondition::MustNotExist, _) => StoreError::AlreadyExists,
            (_, None) => StoreError::NotFound,
            (_, Some(current)) => StoreError::Conflict { current },
        }
    }

    /// Leaves the stored bytes for the feed, unless it has applied the revision already.
    fn hand_over(&self, key: &str, entry: &Entry) {
        if *self.applied.borrow() < entry.rev {
            let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
            pending.insert(entry.rev, (key.to_string(), entry.json.clone()));
        }
    }

    /// The bytes this server stored at `rev`, if it wrote it and still waits for it.
    pub(super) fn take_pending(&self, rev: Rev) -> Option<(String, bytes::Bytes)> {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        pending.remove(&rev)
    }
}

/// A precondition in etcd's revisions.
#[derive(Debug, Clone, Copy)]
enum EtcdPrecondition {
    MustNotExist,
    MustExist,
    /// Negative for a resourceVersion from before a restore: no key has it.
    ModRevision(i64),
}

/// The transaction: compare the precondition, then put (the object without resourceVersion,
/// which is the revision etcd gives it) or delete; else read the key.
fn transaction(
    key: String,
    precondition: EtcdPrecondition,
    value: Option<&mut Value>,
) -> Result<Txn, StoreError> {
    let cmp = match precondition {
        EtcdPrecondition::MustNotExist => {
            Compare::create_revision(key.clone(), CompareOp::Equal, 0)
        }
        EtcdPrecondition::MustExist => Compare::create_revision(key.clone(), CompareOp::Greater, 0),
        EtcdPrecondition::ModRevision(rv) => {
            Compare::mod_revision(key.clone(), CompareOp::Equal, rv)
        }
    };
    let op = match value {
        Some(obj) => {
            if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
                meta.remove("resourceVersion");
            }
            let bytes = serde_json::to_vec(obj).map_err(|e| StoreError::Backend(e.to_string()))?;
            TxnOp::put(key.clone(), bytes, None)
        }
        None => TxnOp::delete(key.clone(), Some(DeleteOptions::new().with_prev_key())),
    };
    Ok(Txn::new()
        .when([cmp])
        .and_then([op])
        .or_else([TxnOp::get(key, None)]))
}

/// The deleted object (etcd's previous value) at the deletion's revision.
fn deleted(resp: &TxnResponse, rev: Rev) -> Result<Entry, StoreError> {
    let prev = match resp.op_responses().into_iter().next() {
        Some(TxnOpResponse::Delete(d)) => d.prev_kvs().first().map(|kv| kv.value().to_vec()),
        _ => None,
    };
    let prev = prev.ok_or(StoreError::NotFound)?;
    let mut obj: Value = serde_json::from_slice(&prev).unwrap_or(Value::Null);
    set_resource_version(&mut obj, rev);
    Ok(Entry::new(rev, obj))
}
