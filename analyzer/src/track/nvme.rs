//! NVMe/RDMA recognition across the two directions of a connection: a command (SQE) is
//! recognised on its own (see `wire::nvme`); a completion (CQE) only when it answers a
//! command seen going the other way between the same two hosts, at the same vantage, on the
//! same I/O queue (the target's QP), with the same command identifier. Pending commands live in a fixed-size table
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
    /// The target's QP: the I/O queue, each of which numbers its commands on its own.
    pub target_qpn: u32,
    pub cid: u16,
}

impl std::hash::Hash for PendingKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        super::index::hash_hosts(
            &self.host,
            &self.target,
            u64::from(self.cid) | (self.vantage as u64) << 16 | u64::from(self.target_qpn) << 24,
            h,
        );
    }
}

pub struct NvmeRecognizer {
    pending: FifoMap<PendingKey, ()>,
}

impl NvmeRecognizer {
    pub fn new(max: usize) -> Self {
        Self { pending: FifoMap::new(max) }
    }

    /// A command from `host` to `target`.
    #[inline]
    pub fn command(&mut self, key: PendingKey) {
        self.pending.insert(key, ());
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
            target_qpn: 9,
            cid,
        }
    }

    #[test]
    fn completions_need_a_command_and_cids_are_reused() {
        let mut r = NvmeRecognizer::new(4);
        assert!(!r.completion(key(1)), "no command seen");
        r.command(key(1));
        r.command(key(2));
        assert!(r.completion(key(2)), "out of order");
        assert!(r.completion(key(1)));
        assert!(!r.completion(key(1)), "a completion answers once");
        r.command(key(1));
        assert!(r.completion(key(1)), "the CID is reused after completion");
    }

    #[test]
    fn bounded_by_forgetting_the_oldest() {
        let mut r = NvmeRecognizer::new(2);
        r.command(key(1));
        r.command(key(2));
        r.command(key(3));
        assert_eq!((r.pending(), r.forgotten()), (2, 1));
        assert!(!r.completion(key(1)));
        assert!(r.completion(key(3)));
    }
}
