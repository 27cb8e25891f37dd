//! The floor the server's writes are set beside: what its store does bare, in the same run on the
//! same disk. SQLite: durable commits (WAL, synchronous=FULL) of one row, and of 64 rows at once.
//! etcd: transactions as the backend writes them (create-if-absent of one 400-byte value), from
//! one writer and from 64 concurrent writers over one client. Rounds of the floor alternate with
//! rounds of the server (`main.rs`), so both see the same moments of a shared machine's disk.

use std::time::{Duration, Instant};

enum Bare {
    Sqlite(rusqlite::Connection),
    Etcd(Box<etcd_client::Client>),
}

pub struct Floor {
    bare: Bare,
    /// Keys written so far (every write is a new key, as the server's creates are).
    written: u64,
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

impl Floor {
    pub fn sqlite(dir: &std::path::Path) -> Floor {
        let path = dir.join("floor.db");
        let _ = std::fs::remove_file(&path);
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB);").unwrap();
        let mut floor = Floor {
            bare: Bare::Sqlite(conn),
            written: 0,
            single_name: "SQLite single-row commits",
            many_name: "SQLite 64-row commits",
            one_name: "one durable SQLite commit",
            one_ms: (0.0, 0.0),
        };
        floor.one_ms = p50_p99(floor.sqlite_commits(1, Duration::from_secs(2)));
        floor
    }

    pub async fn etcd(endpoint: &str) -> Floor {
        let client = etcd_client::Client::connect([endpoint], None)
            .await
            .unwrap();
        let one = etcd_writer(
            client.kv_client(),
            "/floor/one".into(),
            Duration::from_secs(2),
        );
        Floor {
            one_ms: p50_p99(one.await),
            bare: Bare::Etcd(Box::new(client)),
            written: 0,
            single_name: "raw etcd transactions, 1 writer",
            many_name: "raw etcd transactions, 64 writers",
            one_name: "one raw etcd transaction",
        }
    }

    /// Durable writes per second over `run`: one writer, or 64 (SQLite: 64-row commits).
    pub async fn writes(&mut self, writers: usize, run: Duration) -> f64 {
        let start = Instant::now();
        let n = match &self.bare {
            Bare::Sqlite(_) => None,
            Bare::Etcd(client) => {
                let round = self.written;
                let tasks: Vec<_> = (0..writers)
                    .map(|w| {
                        let prefix = format!("/floor/{round}/{w}");
                        tokio::spawn(etcd_writer(client.kv_client(), prefix, run))
                    })
                    .collect();
                let mut total = 0;
                for t in tasks {
                    total += t.await.unwrap().len();
                }
                self.written += total as u64;
                Some(total)
            }
        };
        let n = n.unwrap_or_else(|| self.sqlite_commits(writers, run).len() * writers);
        n as f64 / start.elapsed().as_secs_f64()
    }

    /// Commits of `rows` rows each for `run`; each commit's latency (ms).
    fn sqlite_commits(&mut self, rows: usize, run: Duration) -> Vec<f64> {
        let Bare::Sqlite(conn) = &mut self.bare else {
            unreachable!()
        };
        let blob = vec![b'x'; VALUE];
        let (start, mut ms) = (Instant::now(), Vec::new());
        while start.elapsed() < run {
            let t = Instant::now();
            let tx = conn.transaction().unwrap();
            for _ in 0..rows {
                tx.execute(
                    "INSERT INTO t VALUES (?1, ?2)",
                    rusqlite::params![format!("k{}", self.written), blob],
                )
                .unwrap();
                self.written += 1;
            }
            tx.commit().unwrap();
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        ms
    }
}

/// One writer's create-if-absent transactions under `prefix` for `run`; each one's latency (ms).
async fn etcd_writer(mut kv: etcd_client::KvClient, prefix: String, run: Duration) -> Vec<f64> {
    use etcd_client::{Compare, CompareOp, Txn, TxnOp};
    let value = vec![b'x'; VALUE];
    let (mut n, start, mut ms) = (0u64, Instant::now(), Vec::new());
    while start.elapsed() < run {
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
