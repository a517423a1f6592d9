//! A map with a fixed capacity that forgets its oldest entry to make room, in O(1)
//! amortised time and without allocating after construction.
//!
//! Used for state that waits for an answer which may never come (NVMe commands awaiting
//! their completion, CM requests awaiting their reply, QP pairs awaiting their first
//! packet): when the table is full, the newest state is the most likely to be answered, so
//! the oldest gives way. Refusing new entries instead would leave a table that filled up
//! once (a flood, a one-way mirror) useless for the rest of the run.
//!
//! Insertion order is kept in a ring of (key, sequence) with lazy deletion: an entry
//! removed from the map stays in the ring until it reaches the front or the ring is
//! compacted, which happens when the ring holds twice the capacity (so at most every
//! `capacity` insertions, each compaction costing O(capacity)).

use std::collections::{HashMap, VecDeque};
use std::hash::Hash;

pub struct FifoMap<K, V> {
    map: HashMap<K, (V, u64), ahash::RandomState>,
    order: VecDeque<(K, u64)>,
    max: usize,
    seq: u64,
    /// Entries forgotten to make room.
    pub forgotten: u64,
}

impl<K: Copy + Eq + Hash, V> FifoMap<K, V> {
    /// Room for `max` entries (at least one), allocated now.
    pub fn new(max: usize) -> Self {
        let max = max.max(1);
        Self {
            map: HashMap::with_capacity_and_hasher(max, ahash::RandomState::new()),
            order: VecDeque::with_capacity(2 * max),
            max,
            seq: 0,
            forgotten: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.max
    }

    fn live(&self, k: &K, seq: u64) -> bool {
        self.map.get(k).is_some_and(|(_, s)| *s == seq)
    }

    /// Makes room for a new key: forgets the oldest entry if the map is full, compacts the
    /// ring if it is full of removed entries, and hands out the new entry's sequence.
    fn admit(&mut self, k: K) -> u64 {
        if self.map.len() >= self.max && !self.map.contains_key(&k) {
            while let Some((old, seq)) = self.order.pop_front() {
                if self.live(&old, seq) {
                    self.map.remove(&old);
                    self.forgotten += 1;
                    break;
                }
            }
        }
        if self.order.len() >= 2 * self.max {
            let map = &self.map;
            self.order.retain(|(k, s)| map.get(k).is_some_and(|(_, x)| x == s));
        }
        self.seq += 1;
        self.order.push_back((k, self.seq));
        self.seq
    }

    /// Inserts or replaces `k` (a replaced entry counts as new), forgetting the oldest
    /// entry if the map is full.
    pub fn insert(&mut self, k: K, v: V) {
        let seq = self.admit(k);
        self.map.insert(k, (v, seq));
    }

    /// The entry for `k`, inserted with `f` (as [`insert`](Self::insert) does) if absent.
    pub fn get_or_insert_with(&mut self, k: K, f: impl FnOnce() -> V) -> &mut V {
        let seq = if self.map.contains_key(&k) { 0 } else { self.admit(k) };
        &mut self.map.entry(k).or_insert_with(|| (f(), seq)).0
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.map.get(k).map(|(v, _)| v)
    }

    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        self.map.get_mut(k).map(|(v, _)| v)
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        self.map.remove(k).map(|(v, _)| v)
    }

    pub fn contains_key(&self, k: &K) -> bool {
        self.map.contains_key(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_gives_way_and_is_counted() {
        let mut m = FifoMap::new(3);
        for k in 1..=3 {
            m.insert(k, k * 10);
        }
        m.insert(4, 40);
        assert_eq!((m.len(), m.forgotten), (3, 1));
        assert!(!m.contains_key(&1));
        // Removed entries are skipped when making room: 2 is gone, so 3 gives way.
        assert_eq!(m.remove(&2), Some(20));
        m.insert(5, 50);
        m.insert(6, 60);
        assert_eq!((m.len(), m.forgotten), (3, 2));
        assert_eq!(
            (m.remove(&3), m.remove(&4), m.remove(&5), m.remove(&6)),
            (None, Some(40), Some(50), Some(60))
        );
    }

    #[test]
    fn replacing_an_entry_makes_it_the_newest() {
        let mut m = FifoMap::new(2);
        m.insert(1, 'a');
        m.insert(2, 'b');
        m.insert(1, 'c');
        m.insert(3, 'd');
        assert_eq!((m.remove(&2), m.remove(&1), m.forgotten), (None, Some('c'), 1));
    }

    #[test]
    fn churn_never_grows_the_ring_or_the_map() {
        let mut m = FifoMap::new(8);
        let (map_cap, ring_cap) = (m.map.capacity(), m.order.capacity());
        for k in 0..100_000u32 {
            m.insert(k, ());
            if k % 3 != 0 {
                m.remove(&k);
            }
            assert!(m.len() <= 8 && m.order.len() <= 16);
        }
        assert_eq!((m.map.capacity(), m.order.capacity()), (map_cap, ring_cap), "no reallocation");
        // Every third key stayed: all but the last eight were forgotten, none twice.
        assert_eq!(m.forgotten, 100_000 / 3 + 1 - 8);
    }
}
