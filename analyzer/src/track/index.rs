//! The flow table's index: an open-addressing hash table of 8-byte buckets (the key's
//! 32-bit hash and the flow's slot), linear probing, sized once at twice the flows it may
//! hold. A lookup is one cache line of buckets, then the flow entry itself (where the full
//! key is compared, and which the packet needs next anyway). Removal shifts the following
//! buckets back (no tombstones), so the table never degrades nor grows under churn.
//!
//! The hash ([`FlowIndex::hash`]) is a folded multiply over all of the key's words (each
//! address as one 128-bit word, the QPN and the vantage), each word mixed with a key drawn
//! at start-up, so that traffic crafted without the keys cannot aim at one chain. It is the
//! mixing step of aHash's fallback (a 64 × 64 → 128-bit product, its halves xored) applied
//! once per word: about twenty instructions fewer per packet than aHash through the `Hasher`
//! trait. A key of two IPv4 addresses (nearly every one) is hashed in its compact form of two
//! words instead, with one such multiply ([`FlowIndex::hash_narrow`]).

use super::flow::FlowKey;
use super::vantage::Vantage;
use std::hash::Hasher;
use std::net::IpAddr;

const EMPTY: u64 = u64::MAX;

/// A key's hash; its low 32 bits pick the home bucket and tag the entry.
pub type KeyHash = u32;

/// An address as one word, IPv4 apart from every IPv6 address but a few no host uses.
#[inline]
fn word(ip: &IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => (1 << 96) | u128::from(u32::from(*a)),
        IpAddr::V6(a) => u128::from(*a),
    }
}

/// Feeds two addresses and up to 64 bits more to a hasher in as few words as they take: one
/// 64-bit word for an IPv4 pair (nearly every key), two 128-bit words otherwise, then `rest`.
/// The derived `Hash` of `IpAddr` writes a discriminant, a length and the bytes of each
/// address: six writes for a pair, half of a lookup's instructions. Keys of the per-packet
/// maps that hold two hosts hash this way.
#[inline]
pub fn hash_hosts<H: Hasher>(a: &IpAddr, b: &IpAddr, rest: u64, h: &mut H) {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            h.write_u64((u64::from(u32::from(*a)) << 32) | u64::from(u32::from(*b)))
        }
        _ => {
            h.write_u128(word(a));
            h.write_u128(word(b));
        }
    }
    h.write_u64(rest);
}

pub struct FlowIndex {
    buckets: Vec<u64>,
    mask: usize,
    /// The hash's keys, drawn at start-up.
    keys: [u64; 4],
}

/// The high and low halves of the 128-bit product, xored: each output bit mixes many bits
/// of both factors (aHash's folded multiply).
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

#[inline]
fn bucket(hash: KeyHash, slot: u32) -> u64 {
    (u64::from(hash) << 32) | u64::from(slot)
}

impl FlowIndex {
    /// Room for `max` entries at most half full.
    pub fn new(max: usize) -> Self {
        let n = (2 * max.max(1)).next_power_of_two();
        let mut buckets = Vec::with_capacity(n);
        super::memory::advise_huge(&buckets);
        buckets.resize(n, EMPTY);
        // Four keys from a randomly seeded aHash (its seed comes from the OS at start-up).
        let seed = ahash::RandomState::new();
        let keys = [0u64, 1, 2, 3].map(|i| seed.hash_one(i) | 1);
        Self { buckets, mask: n - 1, keys }
    }

    /// Bytes allocated for `max` entries.
    pub const fn allocated_bytes(max: usize) -> usize {
        let m = if max == 0 { 1 } else { max };
        (2 * m).next_power_of_two() * 8
    }

    /// A key's hash.
    #[inline]
    pub fn hash(&self, k: &FlowKey) -> KeyHash {
        let v = match k.vantage {
            Vantage::Compute => 0u64,
            Vantage::Storage => 1 << 32,
        };
        let (s, d) = (word(&k.src), word(&k.dst));
        let [k0, k1, k2, k3] = self.keys;
        let a = fold((s as u64) ^ k0, ((s >> 64) as u64) ^ k1);
        let b = fold((d as u64) ^ k2, ((d >> 64) as u64) ^ k3);
        let h = fold(a ^ (v | u64::from(k.dst_qpn)), b ^ k0);
        (h ^ (h >> 32)) as u32
    }

    /// The hash of a key held in its compact form (an IPv4 pair as one word, and the QPN
    /// and vantage as another; see the flow table's `FlowRef`): one folded multiply instead
    /// of the three a key of two 128-bit address words takes. Such keys are never hashed by
    /// [`FlowIndex::hash`], so the two functions need not agree.
    #[inline]
    pub fn hash_narrow(&self, addrs: u64, tag: u32) -> KeyHash {
        let h = fold(addrs ^ self.keys[0], u64::from(tag) ^ self.keys[1]);
        (h ^ (h >> 32)) as u32
    }

    #[inline]
    fn home(&self, hash: KeyHash) -> usize {
        hash as usize & self.mask
    }

    /// Brings the key's home bucket into the cache ahead of [`FlowIndex::find`].
    #[inline]
    pub fn prefetch(&self, hash: KeyHash) {
        super::memory::prefetch(self.buckets.as_ptr().wrapping_add(self.home(hash)), 1);
    }

    /// The slot of the first entry under this hash, without comparing keys: a hint of the
    /// entry a lookup will land on (for prefetching it), nothing more.
    #[inline]
    pub fn peek(&self, hash: KeyHash) -> Option<u32> {
        let mut i = self.home(hash);
        loop {
            let b = self.buckets[i];
            if b == EMPTY {
                return None;
            }
            if (b >> 32) as u32 == hash {
                return Some(b as u32);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The slot of the entry with this hash for which `is` holds.
    #[inline]
    pub fn find(&self, hash: KeyHash, mut is: impl FnMut(u32) -> bool) -> Option<u32> {
        let mut i = self.home(hash);
        loop {
            let b = self.buckets[i];
            if b == EMPTY {
                return None;
            }
            if (b >> 32) as u32 == hash && is(b as u32) {
                return Some(b as u32);
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Adds an entry (the caller keeps at most half the buckets in use).
    pub fn insert(&mut self, hash: KeyHash, slot: u32) {
        let mut i = self.home(hash);
        while self.buckets[i] != EMPTY {
            i = (i + 1) & self.mask;
        }
        self.buckets[i] = bucket(hash, slot);
    }

    /// Removes the entry of `slot` under `hash`, if present.
    pub fn remove(&mut self, hash: KeyHash, slot: u32) {
        let mut i = self.home(hash);
        loop {
            let b = self.buckets[i];
            if b == EMPTY {
                return;
            }
            if b == bucket(hash, slot) {
                break;
            }
            i = (i + 1) & self.mask;
        }
        // Shift back the entries after it that would not be found past the hole.
        let mut j = i;
        loop {
            j = (j + 1) & self.mask;
            let b = self.buckets[j];
            if b == EMPTY {
                break;
            }
            let k = self.home((b >> 32) as u32);
            let stays = if i <= j { i < k && k <= j } else { i < k || k <= j };
            if !stays {
                self.buckets[i] = b;
                i = j;
            }
        }
        self.buckets[i] = EMPTY;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_what_was_inserted_and_nothing_removed_under_churn() {
        // A small table with crafted collisions: every key's hash lands in 4 home buckets.
        let mut ix = FlowIndex::new(32);
        let mut live: Vec<(u32, u32)> = Vec::new();
        let mut x = 0x1234_5678u64;
        for step in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let hash = ((x >> 20) as u32 & !0x3F) | (x as u32 & 3);
            if live.len() < 32 && !(x >> 40).is_multiple_of(3) {
                ix.insert(hash, step);
                live.push((hash, step));
            } else if !live.is_empty() {
                let (h, s) = live.swap_remove((x >> 8) as usize % live.len());
                ix.remove(h, s);
                assert_eq!(ix.find(h, |c| c == s), None);
            }
            for &(h, s) in &live {
                assert_eq!(ix.find(h, |c| c == s), Some(s), "step {step}");
            }
        }
        assert_eq!(ix.buckets.len(), 64, "never grew");
    }

    #[test]
    fn the_hash_tells_keys_apart() {
        let k = |src: &str, dst: &str, q| FlowKey {
            vantage: Vantage::Compute,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            dst_qpn: q,
        };
        let ix = FlowIndex::new(4);
        let a = ix.hash(&k("10.0.0.1", "10.0.0.2", 5));
        assert_ne!(a, ix.hash(&k("10.0.0.2", "10.0.0.1", 5)));
        assert_ne!(a, ix.hash(&k("10.0.0.1", "10.0.0.2", 6)));
        assert_ne!(a, ix.hash(&FlowKey { vantage: Vantage::Storage, ..k("10.0.0.1", "10.0.0.2", 5) }));
        assert_ne!(a, ix.hash(&k("::ffff:10.0.0.1", "10.0.0.2", 5)));
        assert_eq!(a, ix.hash(&k("10.0.0.1", "10.0.0.2", 5)));
    }
}
