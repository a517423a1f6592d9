//! A map with a fixed capacity that forgets its oldest entry to make room, in O(1) time and
//! without allocating after construction.
//!
//! Used for state that waits for an answer which may never come (NVMe commands awaiting
//! their completion, CM requests awaiting their reply, QP pairs awaiting their first
//! packet): when the table is full, the newest state is the most likely to be answered, so
//! the oldest gives way. Refusing new entries instead would leave a table that filled up
//! once (a flood, a one-way mirror) useless for the rest of the run.
//!
//! Entries live in a slab allocated once, linked in insertion order (an intrusive list), so
//! forgetting the oldest, removing any entry and inserting each cost one hash lookup and no
//! scan.

use super::list::{Linked, Links, List};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::hash::Hash;

/// What an upsert does with an entry already in the map.
#[derive(Clone, Copy)]
enum Existing {
    Keep,
    Replace,
    Refresh,
}

struct Slot<K, V> {
    key: K,
    value: V,
    links: Links,
    /// In the map (not on the free list): a hint naming this slot may take it.
    live: bool,
}

impl<K, V> Linked for Slot<K, V> {
    fn links(&mut self) -> &mut Links {
        &mut self.links
    }
}

/// What a table that forgets would have needed: the entries it forgot that were answered
/// later (a lookup for them came) tell that a larger table would have kept them. Each
/// forgotten key leaves a tag in a small direct-mapped table (a ghost); an answer that finds
/// its ghost removes it. The table would have needed its bound plus the most ghosts alive
/// at once, with an eighth to spare: an upper bound (ghosts never answered count too, up
/// to `GHOST_SLOTS`), and
/// `None` when no forgotten entry was ever answered, as a larger table would then have
/// kept nothing more. Allocated at start; touched only once something was forgotten.
struct Ghosts {
    tags: Vec<u32>,
    live: u32,
    peak: u32,
    answered: u64,
}

const GHOST_SLOTS: usize = 16384;

impl Ghosts {
    fn new() -> Self {
        Self { tags: vec![0; GHOST_SLOTS], live: 0, peak: 0, answered: 0 }
    }

    fn at(hash: u64) -> (usize, u32) {
        ((hash as usize) & (GHOST_SLOTS - 1), (hash >> 32) as u32 | 1)
    }

    fn forgot(&mut self, hash: u64) {
        let (i, tag) = Self::at(hash);
        if self.tags[i] == 0 {
            self.live += 1;
            self.peak = self.peak.max(self.live);
        }
        self.tags[i] = tag;
    }

    fn looked_up(&mut self, hash: u64) {
        let (i, tag) = Self::at(hash);
        if self.tags[i] == tag {
            self.tags[i] = 0;
            self.live -= 1;
            self.answered += 1;
        }
    }
}

/// Distinct keys a table that refuses new entries when full turned away, estimated from a
/// bitmap of their hashes (linear counting: exact while they are few, within a few per
/// cent up to several times its 65,536 bits). Allocated at start (8 KiB).
pub struct Refused {
    bits: Vec<u64>,
    set: u32,
}

/// A hasher of fixed seeds, for hashes whose collisions show in results: the same keys
/// collide the same way in every run, so a replay is deterministic.
pub fn fixed_hasher() -> ahash::RandomState {
    const SEEDS: [u64; 4] =
        [0x243f_6a88_85a3_08d3, 0x1319_8a2e_0370_7344, 0xa409_3822_299f_31d0, 0x082e_fa98_ec4e_6c89];
    ahash::RandomState::with_seeds(SEEDS[0], SEEDS[1], SEEDS[2], SEEDS[3])
}

const REFUSED_BITS: usize = 1 << 16;

impl Default for Refused {
    fn default() -> Self {
        Self { bits: vec![0; REFUSED_BITS / 64], set: 0 }
    }
}

impl Refused {
    /// A key with this hash was turned away.
    #[inline]
    pub fn note(&mut self, hash: u64) {
        let b = (hash as usize) & (REFUSED_BITS - 1);
        let (w, m) = (b / 64, 1u64 << (b % 64));
        if self.bits[w] & m == 0 {
            self.bits[w] |= m;
            self.set += 1;
        }
    }

    /// A key was turned away: noted by a hash of fixed seeds, so that the same keys give
    /// the same estimate in every run (a replay is deterministic).
    #[inline]
    pub fn note_key<K: std::hash::Hash>(&mut self, key: &K) {
        self.note(fixed_hasher().hash_one(key));
    }

    /// Whether [`Refused::estimate`] is a floor: nearly every bit is set (fewer than one in
    /// a hundred left clear, past about 300,000 keys), and many more keys would set few more.
    pub fn saturated(&self) -> bool {
        u64::from(self.set) * 100 > REFUSED_BITS as u64 * 99
    }

    /// About how many distinct keys were turned away, from above: exact while they are a
    /// few hundred (the estimate's error is a fraction of one), with a thirty-second to
    /// spare beyond (ten times its error, about 0.3 %, up to 65,536 keys).
    pub fn estimate(&self) -> u64 {
        let m = REFUSED_BITS as f64;
        let zero = (m - self.set as f64).max(1.0);
        let n = (m * (m / zero).ln()).round() as u64;
        if n < 256 {
            n
        } else {
            n + n / 32
        }
    }
}

pub struct FifoMap<K, V> {
    index: HashMap<K, u32, ahash::RandomState>,
    slots: Vec<Slot<K, V>>,
    free: Vec<u32>,
    /// Entries, oldest first.
    order: List,
    max: usize,
    /// Entries forgotten to make room.
    pub forgotten: u64,
    ghosts: Ghosts,
    /// The ghosts' hash: of fixed seeds (see [`fixed_hasher`]), so that the estimate of the
    /// bound needed is the same in every replay of a capture (the index keeps random ones).
    ghost_hash: ahash::RandomState,
    /// Keys inserted so far (wrapping): a key looked up in vain stays absent until the next
    /// insert, which a hint of its absence records (see [`FifoMap::get_mut_recent_hinted`]).
    inserted: u32,
}

/// A hint of a key's absence: this bit, with the low 30 bits of [`FifoMap::inserted`] at the
/// time, mixed with the key's hash. Slots are below `1 << 30`, and the hint nobody set
/// (`NONE`) has both high bits. The epoch repeats after 2^30 inserts: a hint of absence left
/// that long unused (its flow sent nothing while a billion new keys came) would hide a key
/// inserted meanwhile once; and a hint of another key's absence hides a key whose hash
/// agrees with that key's in those 30 bits (odds of one in 2^30 for a pair of keys).
const ABSENT: u32 = 1 << 31;
const EPOCH: u32 = (1 << 30) - 1;

/// Bytes a `HashMap` made with room for `capacity` entries of `entry` bytes allocates:
/// buckets a power of two at most 7/8 full, each an entry and a control byte.
pub const fn hash_map_bytes(capacity: usize, entry: usize) -> usize {
    let buckets = if capacity < 8 { 8 } else { (capacity * 8 / 7).next_power_of_two() };
    buckets * (entry + 1)
}

impl<K: Copy + Eq + Hash, V: Copy> FifoMap<K, V> {
    /// Memory [`FifoMap::new`] allocates for `max` entries.
    pub const fn allocated_bytes(max: usize) -> usize {
        let max = if max == 0 { 1 } else { max };
        hash_map_bytes(2 * max, std::mem::size_of::<(K, u32)>())
            + max * (std::mem::size_of::<Slot<K, V>>() + std::mem::size_of::<u32>())
            + GHOST_SLOTS * std::mem::size_of::<u32>()
    }

    /// Room for `max` entries (at least one), allocated now.
    pub fn new(max: usize) -> Self {
        let max = max.clamp(1, EPOCH as usize);
        Self {
            // Twice the room it holds at most: a hash map more than half full rehashes into a
            // larger allocation once its removed entries use up the spare room; under half
            // full it cleans them up in place.
            index: HashMap::with_capacity_and_hasher(2 * max, ahash::RandomState::new()),
            slots: Vec::with_capacity(max),
            free: Vec::with_capacity(max),
            order: List::default(),
            max,
            forgotten: 0,
            ghosts: Ghosts::new(),
            ghost_hash: fixed_hasher(),
            inserted: 0,
        }
    }

    /// Whether [`FifoMap::needed`] is a floor: the ghosts filled most of their room at
    /// once (more than half its places), so that ghosts took each other's places and were
    /// not counted.
    pub fn needed_is_floor(&self) -> bool {
        self.forgotten > 0 && self.ghosts.answered > 0 && self.ghosts.peak as usize > GHOST_SLOTS / 2
    }

    /// The bound that would have kept every forgotten entry that was answered later:
    /// 0 when nothing was forgotten, `None` when no forgotten entry was answered.
    pub fn needed(&self) -> Option<u64> {
        match (self.forgotten, self.ghosts.answered) {
            (0, _) => Some(0),
            (_, 0) => None,
            // An eighth more: a ghost that lands on another's slot takes its place, so
            // the count of ghosts alive at once can come out a little low.
            _ => Some(self.max as u64 + u64::from(self.ghosts.peak) * 9 / 8 + 1),
        }
    }

    /// A key not in the map was looked up or inserted: the answer to a forgotten one, if
    /// its ghost is there.
    #[inline]
    fn missed(&mut self, k: &K) {
        if self.forgotten > 0 {
            let h = self.ghost_hash.hash_one(k);
            self.ghosts.looked_up(h);
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    fn unlink(&mut self, i: u32) {
        self.order.unlink(&mut self.slots, i);
    }

    fn link_tail(&mut self, i: u32) {
        self.order.push_tail(&mut self.slots, i);
    }

    /// The slot of the entry that inserting `k` would forget: the oldest, if the map is
    /// full and `k` is not in it.
    fn to_forget(&self, k: &K) -> Option<u32> {
        if self.index.len() < self.max || self.index.contains_key(k) {
            return None;
        }
        self.order.head()
    }

    /// The entry that inserting `k` would forget (see [`FifoMap::to_forget`]).
    pub fn would_forget(&self, k: &K) -> Option<&V> {
        self.to_forget(k).map(|i| &self.slots[i as usize].value)
    }

    /// Makes room for a key not in the map: forgets the oldest entry if the map is full.
    fn make_room(&mut self, k: &K) {
        if let Some(oldest) = self.to_forget(k) {
            self.unlink(oldest);
            let key = self.slots[oldest as usize].key;
            self.slots[oldest as usize].live = false;
            self.index.remove(&key);
            self.free.push(oldest);
            self.forgotten += 1;
            self.ghosts.forgot(self.ghost_hash.hash_one(key));
        }
    }

    /// The entry for `k`, inserted with `f` if absent (forgetting the oldest entry if the
    /// map is full); an entry already there is replaced with `f` or kept as it is, and made
    /// the newest or left where it is, as `existing` says. A new entry is the newest.
    fn upsert(&mut self, k: K, f: impl FnOnce() -> V, existing: Existing) -> &mut V {
        let i = self.upsert_slot(k, f, existing);
        &mut self.slots[i as usize].value
    }

    /// [`upsert`](Self::upsert), giving the entry's slot.
    fn upsert_slot(&mut self, k: K, f: impl FnOnce() -> V, existing: Existing) -> u32 {
        self.make_room(&k);
        let mut new = false;
        let i = match self.index.entry(k) {
            Entry::Occupied(o) => {
                let i = *o.get();
                match existing {
                    Existing::Keep => return i,
                    Existing::Replace => self.slots[i as usize].value = f(),
                    Existing::Refresh => {}
                }
                self.unlink(i);
                i
            }
            Entry::Vacant(e) => {
                new = true;
                let slot = Slot { key: k, value: f(), links: Links::default(), live: true };
                let i = match self.free.pop() {
                    Some(i) => {
                        self.slots[i as usize] = slot;
                        i
                    }
                    None => {
                        self.slots.push(slot);
                        (self.slots.len() - 1) as u32
                    }
                };
                e.insert(i);
                self.inserted = self.inserted.wrapping_add(1);
                i
            }
        };
        self.link_tail(i);
        if new {
            // A new key may be the answer to a forgotten one (see `Ghosts`).
            self.missed(&k);
        }
        i
    }

    /// Inserts or replaces `k` (a replaced entry counts as new), forgetting the oldest
    /// entry if the map is full.
    pub fn insert(&mut self, k: K, v: V) {
        self.upsert(k, || v, Existing::Replace);
    }

    /// The entry for `k`, inserted with `f` (as [`insert`](Self::insert) does) if absent.
    pub fn get_or_insert_with(&mut self, k: K, f: impl FnOnce() -> V) -> &mut V {
        self.upsert(k, f, Existing::Keep)
    }

    /// As [`get_or_insert_with`](Self::get_or_insert_with), but an entry already there
    /// becomes the newest: used this way, the map forgets the least recently used entry.
    pub fn get_or_insert_recent(&mut self, k: K, f: impl FnOnce() -> V) -> &mut V {
        self.upsert(k, f, Existing::Refresh)
    }

    /// The entry for `k`, made the newest (see [`get_or_insert_recent`](Self::get_or_insert_recent)).
    pub fn get_mut_recent(&mut self, k: &K) -> Option<&mut V> {
        let Some(&i) = self.index.get(k) else {
            self.missed(k);
            return None;
        };
        self.unlink(i);
        self.link_tail(i);
        Some(&mut self.slots[i as usize].value)
    }

    pub fn get(&self, k: &K) -> Option<&V> {
        self.index.get(k).map(|&i| &self.slots[i as usize].value)
    }

    pub fn get_mut(&mut self, k: &K) -> Option<&mut V> {
        let Some(&i) = self.index.get(k) else {
            self.missed(k);
            return None;
        };
        Some(&mut self.slots[i as usize].value)
    }

    pub fn remove(&mut self, k: &K) -> Option<V> {
        let Some(i) = self.index.remove(k) else {
            self.missed(k);
            return None;
        };
        self.unlink(i);
        self.free.push(i);
        self.slots[i as usize].live = false;
        Some(self.slots[i as usize].value)
    }

    /// What `hint` tells of `k` without a lookup: its slot (`Some(Some(i))`) if the slot
    /// it names holds `k`; that `k` is still absent (`Some(None)`) if it recorded `k`'s
    /// absence and nothing was inserted since; else nothing (`None`). A caller remembers
    /// where its key was (a flow remembers its connection's state) and finds it again, or
    /// not, in a few instructions.
    #[inline]
    fn at_hint(&self, k: &K, hint: u32) -> Option<Option<u32>> {
        if hint & !EPOCH == ABSENT {
            return (hint == self.absent(k)).then_some(None);
        }
        let s = self.slots.get(hint as usize)?;
        (s.live && s.key == *k).then_some(Some(hint))
    }

    /// The hint that `k` was looked up in vain now: the inserts so far, told apart by `k`'s
    /// hash (of fixed seeds, so that a replay gives the same), so that one hint that records
    /// another key's absence says nothing of `k` (a flow's hint serves the keys of both its
    /// connection's ends: an ACK looks its sender up as the host, whichever end it is).
    #[inline]
    fn absent(&self, k: &K) -> u32 {
        ABSENT | ((self.inserted ^ self.ghost_hash.hash_one(k) as u32) & EPOCH)
    }

    /// Makes slot `i` the newest.
    #[inline]
    fn refresh(&mut self, i: u32) {
        if self.order.tail() != Some(i) {
            self.unlink(i);
            self.link_tail(i);
        }
    }

    /// As [`get_mut_recent`](Self::get_mut_recent), trying the slot `hint` names first;
    /// `hint` is set to the entry's slot when one is found.
    #[inline]
    pub fn get_mut_recent_hinted(&mut self, k: &K, hint: &mut u32) -> Option<&mut V> {
        let i = match self.at_hint(k, *hint) {
            Some(Some(i)) => i,
            Some(None) => {
                self.missed(k);
                return None;
            }
            None => {
                let Some(&i) = self.index.get(k) else {
                    self.missed(k);
                    *hint = self.absent(k);
                    return None;
                };
                *hint = i;
                i
            }
        };
        self.refresh(i);
        Some(&mut self.slots[i as usize].value)
    }

    /// As [`get`](Self::get), trying the slot `hint` names first; `hint` is set to the
    /// entry's slot when one is found.
    #[inline]
    pub fn get_hinted(&self, k: &K, hint: &mut u32) -> Option<&V> {
        let i = match self.at_hint(k, *hint) {
            Some(Some(i)) => i,
            Some(None) => return None,
            None => {
                let Some(&i) = self.index.get(k) else {
                    *hint = self.absent(k);
                    return None;
                };
                *hint = i;
                i
            }
        };
        Some(&self.slots[i as usize].value)
    }

    /// As [`get_or_insert_recent`](Self::get_or_insert_recent), trying the slot `hint`
    /// names first; `hint` is set to the entry's slot.
    #[inline]
    pub fn get_or_insert_recent_hinted(&mut self, k: K, f: impl FnOnce() -> V, hint: &mut u32) -> &mut V {
        let i = match self.at_hint(&k, *hint) {
            Some(Some(i)) => {
                self.refresh(i);
                i
            }
            _ => {
                let i = self.upsert_slot(k, f, Existing::Refresh);
                *hint = i;
                i
            }
        };
        &mut self.slots[i as usize].value
    }

    pub fn contains_key(&self, k: &K) -> bool {
        self.index.contains_key(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::list::NONE;

    #[test]
    fn a_hint_is_taken_only_where_it_holds_the_key() {
        let mut m = FifoMap::new(2);
        m.insert(1, 10);
        m.insert(2, 20);
        let mut hint = NONE;
        assert_eq!(m.get_hinted(&2, &mut hint), Some(&20));
        let two = hint;
        // A hint to another key's slot, or out of the slab, is a miss: the index answers.
        let mut wrong = two;
        assert_eq!(m.get_mut_recent_hinted(&1, &mut wrong).copied(), Some(10));
        assert_ne!(wrong, two);
        let mut outside = 99;
        assert_eq!(m.get_hinted(&2, &mut outside), Some(&20));
        assert_eq!(outside, two);
        // 1 was made the newest above: the map forgets 2 for 3, which may take 2's slot.
        m.insert(3, 30);
        let mut stale = two;
        assert_eq!(m.get_hinted(&2, &mut stale), None);
        assert_eq!(m.get_mut_recent_hinted(&2, &mut stale), None);
        let mut h3 = two;
        assert_eq!(*m.get_or_insert_recent_hinted(3, || 0, &mut h3), 30, "found, not inserted again");
        // A removed key's slot is free: its hint finds nothing, and an insert through it
        // makes a new entry.
        m.remove(&3);
        assert_eq!(m.get_hinted(&3, &mut h3), None);
        assert_eq!(*m.get_or_insert_recent_hinted(3, || 33, &mut h3), 33);
        assert_eq!((m.len(), m.get(&1), m.get(&3)), (2, Some(&10), Some(&33)));
        // A key looked up in vain: its hint records that, until an insert.
        let mut h4 = NONE;
        assert_eq!(m.get_hinted(&4, &mut h4), None);
        assert_eq!(h4 & !EPOCH, ABSENT);
        assert_eq!(m.get_mut_recent_hinted(&4, &mut h4), None);
        m.insert(4, 40);
        assert_eq!(m.get_hinted(&4, &mut h4), Some(&40), "inserted since: the index answers");
        let mut h5 = NONE;
        assert_eq!(m.get_mut_recent_hinted(&5, &mut h5), None);
        assert_eq!(*m.get_or_insert_recent_hinted(5, || 50, &mut h5), 50, "absent, then inserted");
        assert_eq!(m.get_hinted(&5, &mut h5), Some(&50));
        // One hint for two keys (a flow's, looked up as either end of its connection): the
        // absence of one says nothing of the other, present before it was looked up.
        let mut both = NONE;
        assert_eq!(m.get_hinted(&6, &mut both), None);
        assert_eq!(m.get_hinted(&5, &mut both), Some(&50), "another key's absence");
        assert_eq!(m.get_hinted(&6, &mut both), None);
        assert_eq!(m.get_mut_recent_hinted(&5, &mut both).copied(), Some(50));
    }

    #[test]
    fn what_a_forgetting_table_would_have_needed() {
        let mut m = FifoMap::new(2);
        assert_eq!(m.needed(), Some(0));
        for k in 1..=5 {
            m.insert(k, ());
        }
        // 1, 2 and 3 forgotten, none answered yet: a larger table would have kept nothing.
        assert_eq!((m.forgotten, m.needed()), (3, None));
        // Their answers come: five at once would have kept them all.
        for k in 1..=5 {
            m.remove(&k);
        }
        // Two plus the three alive at once, and an eighth to spare (rounded up).
        assert_eq!(m.needed(), Some(6));
        // An answer to something never seen is not one.
        assert_eq!(m.remove(&9), None);
        assert_eq!(m.needed(), Some(6));
    }

    /// A table of 2 forgets 100,000 keys, then the answers to every one come: its ghosts
    /// (16,384 places) filled, so what it would have needed is a floor. A table that forgot
    /// 1,000 gives an estimate from above, as before.
    #[test]
    fn a_forgetting_tables_estimate_is_a_floor_once_its_ghosts_fill() {
        for (keys, floor) in [(1_000u32, false), (100_000, true)] {
            let mut m = FifoMap::new(2);
            for k in 0..keys {
                m.insert(k, ());
            }
            assert!(!m.needed_is_floor(), "no answer yet: nothing would have helped");
            for k in 0..keys {
                m.remove(&k);
            }
            assert_eq!(m.needed_is_floor(), floor, "{keys} keys");
            let n = m.needed().unwrap();
            if floor {
                assert!(n < u64::from(keys), "{n}: a floor below the 100,000 needed");
            } else {
                assert!(n > u64::from(keys), "{n}: above the 1,000 needed");
            }
        }
    }

    /// 1,000,000 keys refused: every bit of the estimate set, so the estimate (below a
    /// million) is a floor; 100,000 (about four bits in five set) is an estimate.
    #[test]
    fn a_refused_count_is_a_floor_once_its_bits_fill() {
        let h = ahash::RandomState::with_seeds(1, 2, 3, 4);
        for (keys, floor) in [(100_000u32, false), (1_000_000, true)] {
            let mut r = Refused::default();
            for k in 0..keys {
                r.note(h.hash_one(k));
            }
            assert_eq!(r.saturated(), floor, "{keys} keys: estimate {}", r.estimate());
            if floor {
                assert!(r.estimate() < u64::from(keys));
            }
        }
    }

    #[test]
    fn refused_keys_are_counted_once_each() {
        let mut r = Refused::default();
        let h = ahash::RandomState::with_seeds(1, 2, 3, 4);
        for round in 0..3 {
            for k in 0..1000u32 {
                r.note(h.hash_one(k));
            }
            let e = r.estimate();
            assert!((1000..=1060).contains(&e), "round {round}: {e}");
        }
        assert_eq!(Refused::default().estimate(), 0);
        let mut few = Refused::default();
        for k in 0..20u32 {
            few.note(h.hash_one(k));
        }
        assert_eq!(few.estimate(), 20);
    }

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
    fn get_or_insert_keeps_an_entry_and_inserts_a_missing_one() {
        let mut m = FifoMap::new(2);
        *m.get_or_insert_with(1, || 10) += 1;
        *m.get_or_insert_with(1, || 99) += 1;
        assert_eq!(m.get(&1), Some(&12));
        *m.get_mut(&1).unwrap() = 5;
        m.get_or_insert_with(2, || 20);
        m.get_or_insert_with(3, || 30); // full: 1, the oldest, goes
        assert_eq!((m.get(&1), m.get(&2), m.get(&3), m.forgotten), (None, Some(&20), Some(&30), 1));
        assert_eq!((m.remove(&2), m.remove(&3), m.len()), (Some(20), Some(30), 0));
        m.insert(4, 40);
        assert_eq!((m.get(&4), m.len()), (Some(&40), 1), "usable again once emptied");
    }

    #[test]
    fn used_recently_the_map_forgets_the_least_recently_used() {
        let mut m = FifoMap::new(3);
        for k in 1..=3 {
            m.get_or_insert_recent(k, || k);
        }
        *m.get_mut_recent(&1).unwrap() += 10; // 1 is now the newest
        m.get_or_insert_recent(2, || 0); // and then 2
        m.get_or_insert_recent(4, || 4); // full: 3, used least recently, goes
        assert_eq!((m.get(&1), m.get(&2), m.get(&3), m.get(&4)), (Some(&11), Some(&2), None, Some(&4)));
    }

    #[test]
    fn a_large_full_map_under_churn_never_reallocates() {
        // Removed entries leave markers in a hash map; a map kept near its capacity would
        // grow into a new allocation when they pile up.
        let mut m = FifoMap::new(4096);
        let caps = |m: &FifoMap<u64, u64>| (m.index.capacity(), m.slots.capacity(), m.free.capacity());
        for k in 0..4096 {
            m.insert(k, k);
        }
        let before = caps(&m);
        for k in 4096..1_000_000u64 {
            m.insert(k, k);
            if k % 2 == 0 {
                m.remove(&(k - 1));
            }
            // `capacity` shrinks as removal markers pile up and comes back when the map
            // cleans them up in place; it would double if the map grew into a new allocation.
            assert!(m.index.capacity() <= before.0, "the index grew at {k}");
        }
        assert_eq!((m.slots.capacity(), m.free.capacity()), (before.1, before.2));
        assert_eq!(m.len(), 4096);
    }

    #[test]
    fn churn_never_grows_the_ring_or_the_map() {
        let mut m = FifoMap::new(8);
        let caps = |m: &FifoMap<u32, ()>| (m.index.capacity(), m.slots.capacity(), m.free.capacity());
        let before = caps(&m);
        for k in 0..100_000u32 {
            m.insert(k, ());
            if k % 3 != 0 {
                m.remove(&k);
            }
            assert!(m.len() <= 8 && m.slots.len() <= 8);
        }
        assert_eq!(caps(&m), before, "no reallocation");
        // Every third key stayed: all but the last eight were forgotten, none twice.
        assert_eq!(m.forgotten, 100_000 / 3 + 1 - 8);
    }
}
