//! The forwarded answers' cache, as CoreDNS's cache plugin keeps it: a success for its
//! smallest TTL, a denial (NXDOMAIN, or no records of that type) for its SOA's negative TTL
//! (RFC 2308: the smaller of the SOA record's TTL and its minimum), both capped at `max_ttl`;
//! answers are served with their TTLs counted down. Failures, truncated answers and denials
//! without an SOA are not kept. Pure: the time is given.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, ResponseCode};
use hickory_proto::rr::{RData, Record};

/// What a cached answer was, for the hit counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Success,
    Denial,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Success => "success",
            Kind::Denial => "denial",
        }
    }
}

/// The question an answer is kept for (the name without case: DNS names compare that way;
/// DNSSEC-OK asked or not, as the answers differ).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key {
    name: String,
    qtype: u16,
    qclass: u16,
    dnssec_ok: bool,
}

impl Key {
    /// None for a request that is not one question.
    pub fn of(request: &Message) -> Option<Key> {
        let [q] = request.queries() else { return None };
        Some(Key {
            name: q.name().to_ascii().to_ascii_lowercase(),
            qtype: u16::from(q.query_type()),
            qclass: u16::from(q.query_class()),
            dnssec_ok: request
                .extensions()
                .as_ref()
                .is_some_and(|e| e.flags().dnssec_ok),
        })
    }
}

struct Entry {
    answer: Message,
    stored: Instant,
    ttl: Duration,
    kind: Kind,
}

pub struct Cache {
    entries: HashMap<Key, Entry>,
    /// Keys in the order they were stored: the oldest go first when the cache is full.
    order: VecDeque<Key>,
    capacity: usize,
    max_ttl: u32,
}

impl Cache {
    /// `max_ttl` 0 keeps nothing.
    pub fn new(capacity: usize, max_ttl: u32) -> Cache {
        Cache {
            entries: HashMap::new(),
            order: VecDeque::new(),
            capacity,
            max_ttl,
        }
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The kept answer for `key`, its TTLs less the time it was kept (its id is the stored
    /// one: the caller sets the request's).
    pub fn get(&mut self, key: &Key, now: Instant) -> Option<(Message, Kind)> {
        let entry = self.entries.get(key)?;
        let age = now.saturating_duration_since(entry.stored);
        if age >= entry.ttl {
            self.entries.remove(key);
            return None;
        }
        let mut answer = entry.answer.clone();
        let elapsed = u32::try_from(age.as_secs()).unwrap_or(u32::MAX);
        let kind = entry.kind;
        for_each_record(&mut answer, |r| {
            let ttl = r.ttl().saturating_sub(elapsed);
            r.set_ttl(ttl);
        });
        Some((answer, kind))
    }

    /// Keeps `answer` when it may be kept, its TTLs cut to how long it is kept (the client
    /// is given the same, as CoreDNS does: no TTL that jumps down on the next answer);
    /// returns for how long.
    pub fn insert(&mut self, key: Key, answer: &mut Message, now: Instant) -> Option<Duration> {
        let (ttl, kind) = lifetime(answer)?;
        let ttl = ttl.min(self.max_ttl);
        if ttl == 0 || self.capacity == 0 {
            return None;
        }
        for_each_record(answer, |r| {
            let cut = r.ttl().min(ttl);
            r.set_ttl(cut);
        });
        while self.entries.len() >= self.capacity {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            self.entries.remove(&oldest);
        }
        let ttl = Duration::from_secs(u64::from(ttl));
        let entry = Entry {
            answer: answer.clone(),
            stored: now,
            ttl,
            kind,
        };
        if self.entries.insert(key.clone(), entry).is_none() {
            self.order.push_back(key);
        }
        // Keys replaced or expired leave stale places in `order`; drop them now and then.
        if self.order.len() > 2 * self.capacity.max(self.entries.len()) {
            let entries = &self.entries;
            self.order.retain(|k| entries.contains_key(k));
        }
        Some(ttl)
    }
}

/// How long an answer may be kept, uncapped, and what it is.
fn lifetime(answer: &Message) -> Option<(u32, Kind)> {
    if answer.truncated() {
        return None;
    }
    let code = answer.response_code();
    let denial = code == ResponseCode::NXDomain
        || (code == ResponseCode::NoError && answer.answers().is_empty());
    if denial {
        let ttl = answer.name_servers().iter().find_map(|r| match r.data() {
            RData::SOA(soa) => Some(r.ttl().min(soa.minimum())),
            _ => None,
        })?;
        return Some((ttl, Kind::Denial));
    }
    if code != ResponseCode::NoError {
        return None;
    }
    let records = answer
        .answers()
        .iter()
        .chain(answer.name_servers())
        .chain(answer.additionals());
    records.map(Record::ttl).min().map(|t| (t, Kind::Success))
}

fn for_each_record(m: &mut Message, mut f: impl FnMut(&mut Record)) {
    m.answers_mut().iter_mut().for_each(&mut f);
    m.name_servers_mut().iter_mut().for_each(&mut f);
    m.additionals_mut().iter_mut().for_each(&mut f);
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{MessageType, Query};
    use hickory_proto::rr::rdata::{A, SOA};
    use hickory_proto::rr::{Name, RecordType};

    fn question(name: &str) -> Message {
        let mut m = Message::new();
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
        m
    }

    fn answer(name: &str, code: ResponseCode, ttls: &[u32], soa: Option<(u32, u32)>) -> Message {
        let mut m = question(name);
        m.set_message_type(MessageType::Response)
            .set_response_code(code);
        let owner = Name::from_ascii(name).unwrap();
        for &ttl in ttls {
            m.add_answer(Record::from_rdata(
                owner.clone(),
                ttl,
                RData::A(A::new(192, 0, 2, 7)),
            ));
        }
        if let Some((ttl, minimum)) = soa {
            let apex = Name::from_ascii("test.").unwrap();
            let soa = SOA::new(apex.clone(), apex.clone(), 1, 7200, 1800, 86400, minimum);
            m.add_name_server(Record::from_rdata(apex, ttl, RData::SOA(soa)));
        }
        m
    }

    fn key(name: &str) -> Key {
        Key::of(&question(name)).unwrap()
    }

    #[test]
    fn a_success_is_kept_for_its_smallest_ttl_and_counted_down() {
        let mut cache = Cache::new(10, 3600);
        let t0 = Instant::now();
        let mut a = answer("a.test.", ResponseCode::NoError, &[300, 60], None);
        assert_eq!(
            cache.insert(key("a.test."), &mut a, t0),
            Some(Duration::from_secs(60))
        );
        let ttls = |m: &Message| m.answers().iter().map(Record::ttl).collect::<Vec<u32>>();
        assert_eq!(ttls(&a), vec![60, 60], "cut to how long it is kept");
        let (got, kind) = cache
            .get(&key("A.Test."), t0 + Duration::from_secs(25))
            .unwrap();
        assert_eq!(kind, Kind::Success);
        assert_eq!(ttls(&got), vec![35, 35]);
        assert!(cache
            .get(&key("a.test."), t0 + Duration::from_secs(60))
            .is_none());
        assert!(cache.is_empty());
    }

    #[test]
    fn denials_follow_the_soa_and_failures_are_not_kept() {
        let mut cache = Cache::new(10, 3600);
        let t0 = Instant::now();
        let mut nx = answer("gone.test.", ResponseCode::NXDomain, &[], Some((900, 20)));
        assert_eq!(
            cache.insert(key("gone.test."), &mut nx, t0),
            Some(Duration::from_secs(20))
        );
        assert_eq!(
            cache.get(&key("gone.test."), t0).map(|(_, k)| k),
            Some(Kind::Denial)
        );
        let mut nodata = answer("empty.test.", ResponseCode::NoError, &[], Some((10, 300)));
        let kept = cache.insert(key("empty.test."), &mut nodata, t0);
        assert_eq!(kept, Some(Duration::from_secs(10)));
        let mut bare = answer("bare.test.", ResponseCode::NXDomain, &[], None);
        assert_eq!(cache.insert(key("bare.test."), &mut bare, t0), None);
        let mut fail = answer("x.test.", ResponseCode::ServFail, &[], None);
        assert_eq!(cache.insert(key("x.test."), &mut fail, t0), None);
        let mut cut = answer("big.test.", ResponseCode::NoError, &[60], None);
        cut.set_truncated(true);
        assert_eq!(cache.insert(key("big.test."), &mut cut, t0), None);
    }

    #[test]
    fn the_cap_and_the_capacity_hold() {
        let mut cache = Cache::new(2, 30);
        let t0 = Instant::now();
        for name in ["a.test.", "b.test.", "c.test."] {
            let mut a = answer(name, ResponseCode::NoError, &[3600], None);
            let kept = cache.insert(key(name), &mut a, t0);
            assert_eq!(kept, Some(Duration::from_secs(30)));
        }
        assert_eq!(cache.len(), 2);
        assert!(
            cache.get(&key("a.test."), t0).is_none(),
            "the oldest went first"
        );
        assert!(cache.get(&key("c.test."), t0).is_some());
        let mut off = Cache::new(10, 0);
        let mut a = answer("a.test.", ResponseCode::NoError, &[60], None);
        assert_eq!(off.insert(key("a.test."), &mut a, t0), None);
    }
}
