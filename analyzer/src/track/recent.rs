//! A memory of the last keys seen, oldest forgotten first: the I/O tracker's record of the
//! capsules of the I/Os that finished lately (see `IoTracker::finished_lately`).

/// The last `capacity` keys remembered, each with two bits of its own, forgotten in the
/// order they were remembered: a key stays until `capacity` more have been remembered after
/// it, whichever they are. Keys are 64-bit hashes (of seeds the traffic cannot know: the
/// probing's runs are as short as the table's load makes them); two keys equal in their
/// high 61 bits are one key. Allocated at start (16 bytes a key: 8 in the ring, 4 in an
/// index at least twice its size), never grows.
pub struct RecentKeys {
    /// The keys in the order they were remembered, each with its bits (see [`entry`]), 0
    /// in a place not used yet; `next` is the place the next key takes.
    ring: Vec<u64>,
    next: usize,
    /// Open addressing with linear probing, at most half full: a bucket holds the place in
    /// `ring` of a key whose home bucket (see [`RecentKeys::home`]) is it or one before it
    /// with no empty bucket between, `EMPTY` if none. A key remembered again moves to its
    /// new place; its old place in the ring then names no bucket.
    table: Vec<u32>,
}

const EMPTY: u32 = u32::MAX;
/// The bits of an entry that are not the key's: its own two bits, and bit 0, set in every
/// entry so that no entry is 0.
const LOW: u64 = 0b111;

/// A ring entry: `key`'s high bits, `bits` (two) and bit 0.
fn entry(key: u64, bits: u8) -> u64 {
    (key & !LOW) | (u64::from(bits & 0b11) << 1) | 1
}

fn same_key(e: u64, key: u64) -> bool {
    e & !LOW == key & !LOW
}

impl RecentKeys {
    /// Memory [`RecentKeys::new`] allocates for `capacity` keys.
    pub const fn allocated_bytes(capacity: usize) -> usize {
        let capacity = if capacity == 0 { 1 } else { capacity };
        capacity * std::mem::size_of::<u64>()
            + (2 * capacity).next_power_of_two() * std::mem::size_of::<u32>()
    }

    /// Room for the last `capacity` keys (at least one, below 2^31).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, (EMPTY / 2) as usize);
        Self { ring: vec![0; capacity], next: 0, table: vec![EMPTY; (2 * capacity).next_power_of_two()] }
    }

    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    /// A key's first bucket: bits of the key above those an entry keeps for itself.
    fn home(&self, key: u64) -> usize {
        (key >> 3) as usize & self.mask()
    }

    /// The bucket naming a key like `key`'s, or the empty one where probing for it ends.
    fn find(&self, key: u64) -> (usize, Option<usize>) {
        let mut i = self.home(key);
        loop {
            let at = self.table[i];
            if at == EMPTY {
                return (i, None);
            }
            if same_key(self.ring[at as usize], key) {
                return (i, Some(at as usize));
            }
            i = (i + 1) & self.mask();
        }
    }

    /// The bits remembered with `key`, if it is one of the last keys remembered.
    pub fn get(&self, key: u64) -> Option<u8> {
        let (_, at) = self.find(key);
        at.map(|at| ((self.ring[at] & LOW) >> 1) as u8)
    }

    /// Remembers `key` with `bits` (the low two), as the newest key: forgets the oldest if
    /// every place is taken. A key already remembered takes the new bits and place.
    pub fn remember(&mut self, key: u64, bits: u8) {
        let p = self.next;
        self.next = if p + 1 == self.ring.len() { 0 } else { p + 1 };
        let old = self.ring[p];
        if old != 0 {
            self.forget(old, p);
        }
        self.ring[p] = entry(key, bits);
        let (i, _) = self.find(key);
        self.table[i] = p as u32;
    }

    /// Forgets the key at place `p` of the ring (`e` there), if a bucket names that place:
    /// its bucket emptied, and the buckets after it in the same run moved back so that
    /// every key is found again from its home (no tombstones, so the table never needs a
    /// rebuild).
    fn forget(&mut self, e: u64, p: usize) {
        let mask = self.mask();
        let (mut hole, Some(at)) = self.find(e) else { return };
        if at != p {
            // Remembered again since: its newer place stays.
            return;
        }
        let mut j = (hole + 1) & mask;
        loop {
            let at = self.table[j];
            if at == EMPTY {
                break;
            }
            // A key whose home is cyclically after the hole, up to `j`, cannot move back.
            let home = self.home(self.ring[at as usize]);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(hole) & mask) {
                self.table[hole] = at;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.table[hole] = EMPTY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// Key `n`: low bits the entry's own, home bucket `n` (wrapped at the table's size): a
    /// small range of them makes long runs of buckets, and wraps the table's end.
    fn key(n: u64) -> u64 {
        (n << 3) | 0b101
    }

    #[test]
    fn remembers_the_last_capacity_keys_and_their_bits() {
        let mut r = RecentKeys::new(3);
        for n in 1..=5 {
            r.remember(key(n), (n % 4) as u8);
        }
        assert_eq!([1, 2, 3, 4, 5].map(|n| r.get(key(n))), [None, None, Some(3), Some(0), Some(1)]);
        // Remembered again: newest, with its new bits; the oldest other key goes first.
        r.remember(key(3), 2);
        assert_eq!([3, 4, 5].map(|n| r.get(key(n))), [Some(2), Some(0), Some(1)]);
        r.remember(key(6), 0);
        r.remember(key(7), 0);
        assert_eq!([3, 4, 5, 6, 7].map(|n| r.get(key(n))), [Some(2), None, None, Some(0), Some(0)]);
    }

    #[test]
    fn agrees_with_a_plain_list_of_the_last_keys() {
        // Keys from a small range (so that runs of buckets form, wrap the table's end and
        // are cut by forgetting) against a list of the last `capacity` keys remembered:
        // after each step, every key of the range is found exactly when the list has it,
        // with the bits it was last remembered with.
        for capacity in [1, 2, 5, 16, 33] {
            let mut r = RecentKeys::new(capacity);
            let mut model: VecDeque<(u64, u8)> = VecDeque::new();
            let mut x = 0x9E37_79B9_7F4A_7C15_u64;
            for step in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = key(x % (3 * capacity as u64 + 7));
                let bits = (step % 4) as u8;
                r.remember(k, bits);
                model.push_back((k, bits));
                if model.len() > capacity {
                    model.pop_front();
                }
                for n in 0..(3 * capacity as u64 + 7) {
                    let want = model.iter().rev().find(|&&(m, _)| m == key(n)).map(|&(_, b)| b);
                    assert_eq!(r.get(key(n)), want, "capacity {capacity}, step {step}, key {n}");
                }
            }
        }
    }
}
