//! NVMe/RDMA recognition across the two directions of a connection: a command (SQE) is
//! recognised on its own (see `wire::nvme`); a completion (CQE) only when it answers a
//! command seen going the other way between the same two hosts, at the same vantage, with
//! the same command identifier. Pending commands live in a fixed-size table: when it is
//! full, the oldest is forgotten (counted), so memory stays bounded.

use super::vantage::Vantage;
use std::collections::HashMap;
use std::net::IpAddr;

/// Default bound on commands awaiting their completion, per worker.
pub const DEFAULT_MAX_PENDING: usize = 65_536;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PendingKey {
    pub vantage: Vantage,
    pub host: IpAddr,
    pub target: IpAddr,
    pub cid: u16,
}

pub struct NvmeRecognizer {
    pending: HashMap<PendingKey, u64, ahash::RandomState>,
    max: usize,
    /// Commands forgotten because the table was full.
    pub evicted: u64,
}

impl NvmeRecognizer {
    pub fn new(max: usize) -> Self {
        Self { pending: HashMap::with_capacity_and_hasher(max, ahash::RandomState::new()), max, evicted: 0 }
    }

    /// A command from `host` to `target` at time `ts`.
    #[inline]
    pub fn command(&mut self, key: PendingKey, ts: u64) {
        if self.pending.len() >= self.max && !self.pending.contains_key(&key) {
            // Forget the oldest. A scan, but only when the table is full, which a healthy
            // probe never sees (completions free entries).
            if let Some(oldest) = self.pending.iter().min_by_key(|(_, t)| **t).map(|(k, _)| *k) {
                self.pending.remove(&oldest);
                self.evicted += 1;
            }
        }
        self.pending.insert(key, ts);
    }

    /// A completion-shaped capsule from `target` to `host`: true if it answers a pending
    /// command (which is then done).
    #[inline]
    pub fn completion(&mut self, key: PendingKey) -> bool {
        self.pending.remove(&key).is_some()
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
        assert!(!r.completion(key(1)), "no command seen");
        r.command(key(1), 10);
        r.command(key(2), 11);
        assert!(r.completion(key(2)), "out of order");
        assert!(r.completion(key(1)));
        assert!(!r.completion(key(1)), "a completion answers once");
        r.command(key(1), 12);
        assert!(r.completion(key(1)), "the CID is reused after completion");
    }

    #[test]
    fn bounded_by_forgetting_the_oldest() {
        let mut r = NvmeRecognizer::new(2);
        r.command(key(1), 1);
        r.command(key(2), 2);
        r.command(key(3), 3);
        assert_eq!((r.pending(), r.evicted), (2, 1));
        assert!(!r.completion(key(1)));
        assert!(r.completion(key(3)));
    }
}
