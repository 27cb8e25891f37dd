//! The floor the server's writes are set beside: what its store does bare, in the same run on the
//! same disk. SQLite: durable commits (WAL, synchronous=FULL) of one row, and of 64 rows at once.
//! etcd: transactions as the backend writes them (create-if-absent of one 400-byte value), from
//! one writer and from 64 concurrent writers over one client.

use std::time::{Duration, Instant};

pub struct Floor {
    /// Sequential writes per second, one at a time.
    pub single: f64,
    /// Writes per second with many at once (SQLite: rows in 64-row commits).
    pub many: f64,
    pub single_name: &'static str,
    pub many_name: &'static str,
    /// What one sequential write is called (the create latency's baseline).
    pub one_name: &'static str,
    /// Latency of one sequential write, p50 and p99, ms.
    pub one_ms: (f64, f64),
}

/// p50 and p99 of latencies in ms.
fn p50_p99(mut ms: Vec<f64>) -> (f64, f64) {
    ms.sort_by(f64::total_cmp);
    let at = |p: f64| ms[((ms.len() as f64 - 1.0) * p).round() as usize];
    (at(0.5), at(0.99))
}

const VALUE: usize = 400;
const RUN: Duration = Duration::from_secs(2);

pub fn sqlite(dir: &std::path::Path) -> Floor {
    let path = dir.join("floor.db");
    let _ = std::fs::remove_file(&path);
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB);").unwrap();
    let blob = vec![b'x'; VALUE];
    let (mut n, start, mut ms) = (0u64, Instant::now(), Vec::new());
    while start.elapsed() < RUN {
        let t = Instant::now();
        conn.execute(
            "INSERT INTO t VALUES (?1, ?2)",
            rusqlite::params![format!("a{n}"), blob],
        )
        .unwrap();
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        n += 1;
    }
    let single = n as f64 / start.elapsed().as_secs_f64();
    let (mut rows, start) = (0u64, Instant::now());
    while start.elapsed() < RUN {
        let tx = conn.transaction().unwrap();
        for _ in 0..64 {
            tx.execute(
                "INSERT INTO t VALUES (?1, ?2)",
                rusqlite::params![format!("b{rows}"), blob],
            )
            .unwrap();
            rows += 1;
        }
        tx.commit().unwrap();
    }
    Floor {
        single,
        many: rows as f64 / start.elapsed().as_secs_f64(),
        single_name: "SQLite single-row commits",
        many_name: "SQLite 64-row commits",
        one_name: "one durable SQLite commit",
        one_ms: p50_p99(ms),
    }
}

/// One writer's create-if-absent transactions under `prefix` for RUN; each one's latency (ms).
async fn etcd_writer(mut kv: etcd_client::KvClient, prefix: String) -> Vec<f64> {
    use etcd_client::{Compare, CompareOp, Txn, TxnOp};
    let value = vec![b'x'; VALUE];
    let (mut n, start, mut ms) = (0u64, Instant::now(), Vec::new());
    while start.elapsed() < RUN {
        let t = Instant::now();
        let key = format!("{prefix}/{n}");
        let txn = Txn::new()
            .when([Compare::create_revision(key.clone(), CompareOp::Equal, 0)])
            .and_then([TxnOp::put(key, value.clone(), None)]);
        let done = kv.txn(txn).await.unwrap();
        assert!(done.succeeded());
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        n += 1;
    }
    ms
}

pub async fn etcd(endpoint: &str) -> Floor {
    let client = etcd_client::Client::connect([endpoint], None)
        .await
        .unwrap();
    let start = Instant::now();
    let one = etcd_writer(client.kv_client(), "/floor/one".into()).await;
    let single = one.len() as f64 / start.elapsed().as_secs_f64();
    let start = Instant::now();
    let writers: Vec<_> = (0..64)
        .map(|w| tokio::spawn(etcd_writer(client.kv_client(), format!("/floor/many/{w}"))))
        .collect();
    let mut total = 0;
    for w in writers {
        total += w.await.unwrap().len();
    }
    Floor {
        single,
        many: total as f64 / start.elapsed().as_secs_f64(),
        single_name: "raw etcd transactions, 1 writer",
        many_name: "raw etcd transactions, 64 writers",
        one_name: "one raw etcd transaction",
        one_ms: p50_p99(one),
    }
}
