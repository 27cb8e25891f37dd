//! Which API server a new connection goes to: pure bookkeeping of each server's health and of
//! the server in use, tested without sockets.

/// What the last health check or connection attempt said about one API server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    /// Not checked yet.
    Unknown,
    /// `/readyz` answered 200.
    Ready,
    /// It accepts connections but is not ready (e.g. its storage is unreachable).
    NotReady,
    /// It refused the connection or did not answer in time.
    Down,
}

impl Health {
    /// Lower goes first: ready servers, then those we know nothing bad about, then the rest.
    fn rank(self) -> u8 {
        match self {
            Health::Ready => 0,
            Health::Unknown => 1,
            Health::NotReady => 2,
            Health::Down => 3,
        }
    }
}

/// The servers' health and the one in use. Connections stick to the server in use while it is
/// ready (as k3s's load balancer does), so one client's requests see one server's cache.
#[derive(Debug)]
pub struct Pool {
    health: Vec<Health>,
    current: usize,
}

impl Pool {
    /// `n` servers, none checked yet; `start` is the first one tried (a random start spreads
    /// the nodes over the servers).
    pub fn new(n: usize, start: usize) -> Pool {
        Pool {
            health: vec![Health::Unknown; n],
            current: if n == 0 { 0 } else { start % n },
        }
    }

    pub fn health(&self, i: usize) -> Option<Health> {
        self.health.get(i).copied()
    }

    /// Whether any server answered its last check ready.
    pub fn any_ready(&self) -> bool {
        self.health.contains(&Health::Ready)
    }

    /// The order a new connection tries the servers in: around the list from the one in use,
    /// ready ones first and down ones last. Down ones are still tried: a check can be stale,
    /// and a failed connect costs little.
    pub fn candidates(&self) -> Vec<usize> {
        let n = self.health.len();
        let mut order: Vec<usize> = (0..n).map(|k| (self.current + k) % n).collect();
        order.sort_by_key(|&i| self.health.get(i).map_or(u8::MAX, |h| h.rank()));
        order
    }

    /// A connection to `i` succeeded: it is the server in use from now on.
    pub fn connected(&mut self, i: usize) {
        if i < self.health.len() {
            self.current = i;
        }
    }

    /// Records what a check or a connect found out about `i`. True when `i`'s open connections
    /// should be closed so their clients reconnect elsewhere: it was ready, no longer is, and
    /// another server is ready to take them (when none is, moving would not help).
    pub fn observe(&mut self, i: usize, now: Health) -> bool {
        let Some(slot) = self.health.get_mut(i) else {
            return false;
        };
        let was = std::mem::replace(slot, now);
        let another_ready = self
            .health
            .iter()
            .enumerate()
            .any(|(j, h)| j != i && *h == Health::Ready);
        was == Health::Ready && now != Health::Ready && another_ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchecked_servers_are_tried_around_the_list_from_the_start() {
        let pool = Pool::new(3, 1);
        assert_eq!(pool.candidates(), vec![1, 2, 0]);
        assert_eq!(Pool::new(3, 7).candidates(), vec![1, 2, 0]);
        assert!(Pool::new(0, 5).candidates().is_empty());
    }

    #[test]
    fn ready_servers_come_first_and_down_ones_last() {
        let mut pool = Pool::new(3, 0);
        pool.observe(0, Health::Down);
        pool.observe(1, Health::NotReady);
        pool.observe(2, Health::Ready);
        assert_eq!(pool.candidates(), vec![2, 1, 0]);
    }

    #[test]
    fn connections_stick_to_the_server_in_use_while_it_is_ready() {
        let mut pool = Pool::new(3, 0);
        for i in 0..3 {
            pool.observe(i, Health::Ready);
        }
        pool.connected(1);
        assert_eq!(pool.candidates(), vec![1, 2, 0]);
        pool.observe(1, Health::Down);
        assert_eq!(pool.candidates(), vec![2, 0, 1]);
        pool.connected(2);
        // The old server coming back does not take the connections back.
        pool.observe(1, Health::Ready);
        assert_eq!(pool.candidates(), vec![2, 0, 1]);
    }

    #[test]
    fn connections_are_closed_only_when_a_ready_server_can_take_them() {
        let mut pool = Pool::new(2, 0);
        assert!(!pool.any_ready());
        pool.observe(0, Health::Ready);
        assert!(pool.any_ready());
        // The only ready server failing: nowhere better to go, keep what is open.
        assert!(!pool.observe(0, Health::NotReady));
        pool.observe(0, Health::Ready);
        pool.observe(1, Health::Ready);
        assert!(pool.observe(0, Health::Down));
        // Already not ready: nothing new to close.
        assert!(!pool.observe(0, Health::Down));
        assert!(!pool.observe(1, Health::Ready));
        assert!(!pool.observe(9, Health::Down));
    }
}
