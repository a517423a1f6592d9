//! NVMe/RDMA recognition across the two directions of a connection: a command (SQE) is
//! recognised on its own (see `wire::nvme`); a completion (CQE) only when it answers a
//! command seen going the other way between the same two hosts, at the same vantage, with
//! the same command identifier. Each I/O queue (a QP of the target) numbers its commands on
//! its own, so several commands with one CID may await their completions at once, one per
//! queue: the queues are kept, and each completion answers one (its own queue's when its
//! flow's pair is known). Pending commands live in a fixed-size table
//! (`--max-pending-commands`): when it is full, the least recently used CID's commands are
//! forgotten (counted), so memory stays bounded.

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

/// I/O queues kept by their QP per CID; commands on more queues at once are counted only.
const QUEUES: usize = 8;

/// The commands with one CID awaiting their completions.
#[derive(Debug, Clone, Copy, Default)]
struct Pending {
    /// The queues (the target's QPs) whose command awaits its completion, oldest first.
    queues: [u32; QUEUES],
    len: u8,
    /// Commands on queues beyond `queues`' room.
    more: u32,
}

impl Pending {
    fn count(&self) -> u64 {
        u64::from(self.len) + u64::from(self.more)
    }

    fn find(&self, qpn: u32) -> Option<usize> {
        self.queues[..usize::from(self.len)].iter().position(|&q| q == qpn)
    }

    fn remove(&mut self, k: usize) {
        self.queues.copy_within(k + 1..usize::from(self.len), k);
        self.len -= 1;
    }
}

pub struct NvmeRecognizer {
    /// Commands awaiting their completion, by key, least recently used first.
    pending: FifoMap<PendingKey, Pending>,
    /// Commands forgotten with the CID's others beyond the first (the map counts entries).
    forgotten_with_others: u64,
}

impl NvmeRecognizer {
    /// Memory [`NvmeRecognizer::new`] allocates for `max` pending commands.
    pub const fn allocated_bytes(max: usize) -> usize {
        FifoMap::<PendingKey, Pending>::allocated_bytes(max)
    }

    pub fn new(max: usize) -> Self {
        Self { pending: FifoMap::new(max), forgotten_with_others: 0 }
    }

    /// A command from `host` to `target`'s QP `target_qpn` (the I/O queue); `again` if its
    /// PSN was behind its flow's (a copy sent again, whose first copy counted already, or
    /// whose I/O finished: a command whose first copy was lost before this vantage is not
    /// told from one sent again after its completion, and counts neither). A queue awaits
    /// one completion a CID: a command on a queue that awaits one already is the queue using
    /// the CID again after this vantage missed its completion, and one awaits it still.
    #[inline]
    pub fn command(&mut self, key: PendingKey, target_qpn: u32, again: bool) {
        if again {
            return;
        }
        if let Some(old) = self.pending.would_forget(&key) {
            self.forgotten_with_others += old.count().saturating_sub(1);
        }
        let p = self.pending.get_or_insert_recent(key, Pending::default);
        if p.find(target_qpn).is_some() {
            return;
        }
        if usize::from(p.len) < QUEUES {
            p.queues[usize::from(p.len)] = target_qpn;
            p.len += 1;
        } else {
            p.more = p.more.saturating_add(1);
        }
    }

    /// Commands forgotten because the table was full.
    pub fn forgotten(&self) -> u64 {
        self.pending.forgotten + self.forgotten_with_others
    }

    /// Whether [`NvmeRecognizer::needed`] is a floor (see [`FifoMap::needed_is_floor`]).
    pub fn needed_is_floor(&self) -> bool {
        self.pending.needed_is_floor()
    }

    /// The bound that would have kept every forgotten command whose completion came (see
    /// [`FifoMap::needed`]).
    pub fn needed(&self) -> Option<u64> {
        self.pending.needed()
    }

    /// A completion-shaped capsule from `target` to `host`, on the I/O queue `target_qpn`
    /// if its flow's pair is known: true if it answers a pending command (which is then
    /// done): its queue's, else (the queue unknown) the oldest. A copy sent again
    /// (`again`) answers none (its queue may await the next command with that CID).
    #[inline]
    pub fn completion(&mut self, key: PendingKey, target_qpn: Option<u32>, again: bool) -> bool {
        if again {
            return false;
        }
        let Some(p) = self.pending.get_mut(&key) else { return false };
        match target_qpn.and_then(|q| p.find(q)) {
            Some(k) => p.remove(k),
            None if p.more > 0 => p.more -= 1,
            None if p.len > 0 => p.remove(0),
            None => return false,
        }
        if p.count() == 0 {
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
        assert!(!r.completion(key(1), Some(9), false), "no command seen");
        r.command(key(1), 9, false);
        r.command(key(2), 9, false);
        assert!(r.completion(key(2), Some(9), false), "out of order");
        assert!(r.completion(key(1), None, false), "its queue unknown");
        assert!(!r.completion(key(1), Some(9), false), "a completion answers once");
        r.command(key(1), 9, false);
        assert!(r.completion(key(1), Some(9), false), "the CID is reused after completion");
    }

    /// Three I/O queues with a command of CID 1 pending at once: three completions answer
    /// them, a fourth answers none; copies sent again count neither as a command nor as a
    /// completion.
    #[test]
    fn queues_may_await_one_cid_at_once() {
        let mut r = NvmeRecognizer::new(4);
        for q in 10..13 {
            r.command(key(1), q, false);
        }
        r.command(key(1), 10, true);
        r.command(key(1), 13, true);
        assert_eq!(r.pending(), 1, "one key");
        assert!(!r.completion(key(1), None, true), "a copy sent again");
        assert!(!r.completion(key(1), Some(11), true), "queue 11's, sent again");
        assert!(r.completion(key(1), Some(11), false), "queue 11");
        for q in [10, 12] {
            assert!(r.completion(key(1), None, false), "queue {q}");
        }
        assert!(!r.completion(key(1), None, false));
        assert_eq!(r.pending(), 0);
    }

    /// More queues than are kept by their QP: those beyond are counted, and answered.
    #[test]
    fn queues_beyond_those_kept_are_counted() {
        let mut r = NvmeRecognizer::new(4);
        let queues = 100..100 + QUEUES as u32 + 3;
        for q in queues.clone() {
            r.command(key(1), q, false);
        }
        r.command(key(1), 100 + QUEUES as u32 + 1, true);
        for q in queues.rev() {
            assert!(r.completion(key(1), Some(q), false), "queue {q}");
        }
        assert!(!r.completion(key(1), None, false));
        assert_eq!(r.pending(), 0);
    }

    /// A queue's completion of CID 1 never reached this vantage, and the queue uses CID 1
    /// again: one command awaits its completion, not two (a count left behind would take
    /// a completion of no command seen, and keep the key forever).
    #[test]
    fn a_queue_using_a_cid_again_awaits_one_completion() {
        let mut r = NvmeRecognizer::new(4);
        r.command(key(1), 9, false);
        r.command(key(1), 9, false);
        assert!(r.completion(key(1), Some(9), false));
        assert!(!r.completion(key(1), None, false), "no command awaits it");
        assert_eq!(r.pending(), 0);
    }

    #[test]
    fn bounded_by_forgetting_the_least_recently_used() {
        let mut r = NvmeRecognizer::new(2);
        r.command(key(1), 9, false);
        r.command(key(2), 9, false);
        r.command(key(3), 9, false);
        assert_eq!((r.pending(), r.forgotten()), (2, 1));
        assert!(!r.completion(key(1), Some(9), false));
        assert!(r.completion(key(3), Some(9), false));
        // CID 2 awaits a completion on three queues; CID 4's command is newer, then a
        // fourth queue uses CID 2 (most recently used now): CID 5's forgets CID 4's, then
        // CID 6's the three commands of CID 2, counted each.
        r.command(key(2), 10, false);
        r.command(key(2), 11, false);
        r.command(key(4), 9, false);
        r.command(key(2), 12, false);
        r.command(key(5), 9, false);
        assert!(!r.completion(key(4), Some(9), false));
        assert_eq!(r.forgotten(), 2);
        r.command(key(6), 9, false);
        assert_eq!(r.forgotten(), 2 + 4);
    }
}
