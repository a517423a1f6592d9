//! NVMe/RDMA recognition across the two directions of a connection: a command (SQE) is
//! recognised on its own (see `wire::nvme`); a completion (CQE) only when it answers a
//! command seen going the other way between the same two hosts, at the same vantage, with
//! the same command identifier. Each I/O queue numbers its commands on its own, so several
//! commands with one CID may await their completions at once (one per queue): they are
//! counted, and each completion answers one. Pending commands live in a fixed-size table
//! (`--max-pending-commands`): when it is full, the oldest is forgotten (counted), so
//! memory stays bounded.

use super::bounded::FifoMap;
use super::vantage::Vantage;
use std::net::IpAddr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PendingKey {
    pub vantage: Vantage,
    pub host: IpAddr,
    pub target: IpAddr,
    pub cid: u16,
}

impl std::hash::Hash for PendingKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        super::index::hash_hosts(
            &self.host,
            &self.target,
            u64::from(self.cid) | (self.vantage as u64) << 16,
            h,
        );
    }
}

pub struct NvmeRecognizer {
    /// Commands awaiting their completion, by key: how many (one per I/O queue using the CID).
    pending: FifoMap<PendingKey, u32>,
}

impl NvmeRecognizer {
    pub fn new(max: usize) -> Self {
        Self { pending: FifoMap::new(max) }
    }

    /// A command from `host` to `target`; `again` if its PSN was behind its flow's (a copy
    /// sent again, whose first copy counted already).
    #[inline]
    pub fn command(&mut self, key: PendingKey, again: bool) {
        if !again {
            let n = self.pending.get_or_insert_with(key, || 0);
            *n = n.saturating_add(1);
        }
    }

    /// Commands forgotten because the table was full.
    pub fn forgotten(&self) -> u64 {
        self.pending.forgotten
    }

    /// The bound that would have kept every forgotten command whose completion came (see
    /// [`FifoMap::needed`]).
    pub fn needed(&self) -> Option<u64> {
        self.pending.needed()
    }

    /// A completion-shaped capsule from `target` to `host`: true if it answers a pending
    /// command (which is then done). A copy sent again (`again`) answers none.
    #[inline]
    pub fn completion(&mut self, key: PendingKey, again: bool) -> bool {
        if again {
            return false;
        }
        let Some(n) = self.pending.get_mut(&key) else { return false };
        *n -= 1;
        if *n == 0 {
            self.pending.remove(&key);
        }
        true
    }

    pub fn pending(&self) -> usize {
        self.pending.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(cid: u16) -> PendingKey {
        PendingKey {
            vantage: Vantage::Compute,
            host: "10.0.0.1".parse().unwrap(),
            target: "10.0.0.2".parse().unwrap(),
            cid,
        }
    }

    #[test]
    fn completions_need_a_command_and_cids_are_reused() {
        let mut r = NvmeRecognizer::new(4);
        assert!(!r.completion(key(1), false), "no command seen");
        r.command(key(1), false);
        r.command(key(2), false);
        assert!(r.completion(key(2), false), "out of order");
        assert!(r.completion(key(1), false));
        assert!(!r.completion(key(1), false), "a completion answers once");
        r.command(key(1), false);
        assert!(r.completion(key(1), false), "the CID is reused after completion");
    }

    /// Three I/O queues with a command of CID 1 pending at once: three completions answer
    /// them, a fourth answers none; copies sent again count neither as a command nor as a
    /// completion.
    #[test]
    fn queues_may_await_one_cid_at_once() {
        let mut r = NvmeRecognizer::new(4);
        for _ in 0..3 {
            r.command(key(1), false);
        }
        r.command(key(1), true);
        assert_eq!(r.pending(), 1, "one key");
        assert!(!r.completion(key(1), true), "a copy sent again");
        for q in 0..3 {
            assert!(r.completion(key(1), false), "queue {q}");
        }
        assert!(!r.completion(key(1), false));
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn bounded_by_forgetting_the_oldest() {
        let mut r = NvmeRecognizer::new(2);
        r.command(key(1), false);
        r.command(key(2), false);
        r.command(key(3), false);
        assert_eq!((r.pending(), r.forgotten()), (2, 1));
        assert!(!r.completion(key(1), false));
        assert!(r.completion(key(3), false));
    }
}
