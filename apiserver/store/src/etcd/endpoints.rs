//! One etcd client per member, used in turn: a request that could not reach its member goes to
//! the next one. (One client balancing over every member kept sending requests to a member that
//! was down, each failing with "connection refused".)

use super::{describe, unavailable};
use crate::StoreError;
use etcd_client::{Client, ConnectOptions};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

pub(crate) struct Endpoints {
    first: Client,
    clients: Vec<Client>,
    /// The member requests go to (modulo their number).
    at: AtomicUsize,
    servers: String,
}

/// Whether etcd surely did not get the request (the connection was never made), so that a
/// write may be sent again elsewhere without being applied twice.
fn not_sent(why: &str) -> bool {
    why.contains("tcp connect error") || why.contains("Connection refused")
}

/// Whether the connection failed, before or during the request.
fn connection_lost(why: &str) -> bool {
    not_sent(why) || why.contains("transport error") || why.contains("broken pipe")
}

impl Endpoints {
    /// Clients connect lazily: a member down now is tried again when its turn comes.
    pub(crate) async fn connect(
        servers: &[String],
        opts: ConnectOptions,
    ) -> Result<Endpoints, StoreError> {
        let joined = servers.join(",");
        let mut clients = Vec::with_capacity(servers.len());
        for s in servers {
            let c = Client::connect([s.as_str()], Some(opts.clone()))
                .await
                .map_err(|e| unavailable(&joined, describe(&e)))?;
            clients.push(c);
        }
        let Some(first) = clients.first().cloned() else {
            return Err(StoreError::Backend("--etcd-servers names no server".into()));
        };
        Ok(Endpoints {
            first,
            clients,
            at: AtomicUsize::new(0),
            servers: joined,
        })
    }

    /// The client of the member in use.
    pub(crate) fn current(&self) -> Client {
        let n = self.clients.len().max(1);
        let i = self.at.load(Ordering::Relaxed) % n;
        self.clients.get(i).unwrap_or(&self.first).clone()
    }

    /// Moves on to the next member.
    pub(crate) fn next(&self) {
        self.at.fetch_add(1, Ordering::Relaxed);
    }

    /// One request, sent to each member in turn while the connection fails: any failure for a
    /// request that may be repeated (reads), only one never sent for the others.
    pub(crate) async fn call<T, F, Fut>(&self, repeatable: bool, f: F) -> Result<T, StoreError>
    where
        F: Fn(Client) -> Fut,
        Fut: Future<Output = Result<T, etcd_client::Error>>,
    {
        let mut why = String::new();
        for _ in 0..self.clients.len() {
            match f(self.current()).await {
                Ok(v) => return Ok(v),
                Err(e) => why = describe(&e),
            }
            let retry = match repeatable {
                true => connection_lost(&why),
                false => not_sent(&why),
            };
            if !retry {
                break;
            }
            self.next();
        }
        Err(unavailable(&self.servers, why))
    }
}
