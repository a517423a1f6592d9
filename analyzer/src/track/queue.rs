//! The flow table's queue of open transmissions: (slot, time queued) pairs in a ring
//! allocated once, oldest first.
//!
//! It replaces a doubly linked list through the flow entries. Taking the oldest entry off
//! a list touched two flows' entries (the oldest, and the one after it, whose link
//! changes): on a large table, two cache misses per ended transmission, one after the other.
//! Here the queue is read in order, so the entries whose flows will be looked at next are
//! known in advance and their flows can be prefetched ([`Queue::ahead`]).
//!
//! An entry is not removed when its flow's transmission ends another way (a packet of the
//! flow finds it idle, see `FlowTable::settle`): it goes stale, and the table skips it when
//! it reaches the front (a stale entry no longer matches its flow's open transmission and
//! time queued). When the ring is full, the stale entries are dropped at once
//! ([`Queue::compact`]): the ring has room for twice the flows the table holds, so that is
//! rare, and it never grows.

/// A flow queued at a time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Queued {
    pub slot: u32,
    pub ts: u64,
}

pub struct Queue {
    ring: Vec<Queued>,
    mask: usize,
    head: usize,
    len: usize,
}

impl Queue {
    /// Room for twice `max_flows` entries.
    pub fn new(max_flows: usize) -> Self {
        let n = (2 * max_flows.max(1)).next_power_of_two();
        Self { ring: vec![Queued::default(); n], mask: n - 1, head: 0, len: 0 }
    }

    /// Bytes allocated for a table of `max_flows`.
    pub const fn allocated_bytes(max_flows: usize) -> usize {
        let m = if max_flows == 0 { 1 } else { max_flows };
        (2 * m).next_power_of_two() * std::mem::size_of::<Queued>()
    }

    /// The oldest entry.
    #[inline]
    pub fn front(&self) -> Option<Queued> {
        (self.len > 0).then(|| self.ring[self.head])
    }

    /// The entry `k` places behind the oldest, if there is one (for prefetching its flow).
    #[inline]
    pub fn ahead(&self, k: usize) -> Option<Queued> {
        (k < self.len).then(|| self.ring[(self.head + k) & self.mask])
    }

    /// Takes the oldest entry off.
    #[inline]
    pub fn pop(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) & self.mask;
            self.len -= 1;
        }
    }

    /// Whether every slot is taken.
    #[inline]
    pub fn is_full(&self) -> bool {
        self.len == self.ring.len()
    }

    /// Appends an entry as the newest. The caller makes room first when the ring is full
    /// ([`Queue::compact`]); an entry that still finds no room is not queued.
    #[inline]
    pub fn push(&mut self, q: Queued) -> bool {
        if self.is_full() {
            return false;
        }
        self.ring[(self.head + self.len) & self.mask] = q;
        self.len += 1;
        true
    }

    /// Keeps only the entries for which `live` holds, in their order.
    pub fn compact(&mut self, mut live: impl FnMut(Queued) -> bool) {
        let mut kept = 0;
        for k in 0..self.len {
            let q = self.ring[(self.head + k) & self.mask];
            if live(q) {
                self.ring[(self.head + kept) & self.mask] = q;
                kept += 1;
            }
        }
        self.len = kept;
    }

    /// Takes every entry off, oldest first.
    pub fn drain(&mut self) -> impl Iterator<Item = Queued> + '_ {
        let (head, len, mask) = (self.head, self.len, self.mask);
        self.head = 0;
        self.len = 0;
        (0..len).map(move |k| self.ring[(head + k) & mask])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_first_across_the_wrap_and_compaction_keeps_order() {
        let mut q = Queue::new(2); // 4 entries
        for t in 0..3 {
            assert!(q.push(Queued { slot: t, ts: u64::from(t) }));
        }
        q.pop();
        q.pop();
        for t in 3..6 {
            assert!(q.push(Queued { slot: t, ts: u64::from(t) }));
        }
        assert!(q.is_full());
        assert!(!q.push(Queued { slot: 9, ts: 9 }));
        assert_eq!(q.ahead(1), Some(Queued { slot: 3, ts: 3 }));
        q.compact(|e| e.slot % 2 == 1);
        let left: Vec<u32> = q.drain().map(|e| e.slot).collect();
        assert_eq!(left, [3, 5]);
        assert_eq!(q.front(), None);
    }
}
