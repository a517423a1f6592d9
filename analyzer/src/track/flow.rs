//! The flow table: one entry per (vantage, src IP, dst IP, destination QPN)
//! (docs/METRICS.md, "Per flow"), with
//! each flow's counters, PSN analysis, open transmission and QP pairing.
//!
//! Capacity is fixed at start-up (`--max-flows`): entries live in a slab allocated once. A
//! new flow in a full table takes the slot of a flow idle for `--flow-expire` that has
//! handed over everything it counted, if a short sweep finds one; else its packets are
//! counted as untracked. The indexes get twice the room they hold at most, so removals
//! never make them grow: the per-packet path never allocates. Flows with an open
//! transmission are kept in a list (intrusive, through the slab) in the order they were
//! queued, so ending idle transmissions looks at the list's head only: no scan of the table
//! per packet, and no move per packet either (see [`FlowTable::expire`]).

use super::analyzer::Seen;
use super::bounded::FifoMap;
use super::counts::FlowCounts;
use super::index::{FlowIndex, KeyHash};
use super::list::{Linked, Links, List};
use super::memory;
use super::psn::{Outcome, PsnTracker, Span};
use super::vantage::Vantage;
use crate::metrics::latency::{LatencyRecorder, Op, Segment, SeriesKey};
use crate::wire::bth::{opcode as op, Transport};
use crate::wire::ib_ext::{AckKind, ExtHeaders};
use crate::wire::RocePacket;
use std::collections::HashMap;
use std::net::IpAddr;

/// Slots looked at, from a hand sweeping the table, when a new flow finds it full.
const RECLAIM_PROBES: usize = 4;

const NONE: u32 = u32::MAX;
/// A latency series the recorder had no room for.
const NO_ROOM: u32 = u32::MAX - 1;
/// Request flows remembered per host pair for learning QP pairs from acknowledgements.
const PAIR_SLOTS: usize = 8;
/// An acknowledgement or READ response names a PSN at most this far behind the requester's
/// next PSN.
const ACK_WINDOW: u32 = 1 << 16;

/// One direction of one QP at one vantage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FlowKey {
    pub vantage: Vantage,
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dst_qpn: u32,
}

/// Distinct opcodes outside a flow's own transport group kept per interval; more than this
/// (only hostile traffic does that) are counted in `other`.
const FOREIGN_SLOTS: usize = 4;

/// Exact per-opcode packet counts, compact: a flow's packets share one transport (the
/// opcode's top three bits), so 32 counters indexed by the low five bits cover it; CNPs and
/// any other opcode go to a few spill slots.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpcodeCounts {
    group: u8,
    own: [u64; 32],
    foreign: [(u8, u64); FOREIGN_SLOTS],
    foreign_used: u8,
    /// Packets whose opcode found no slot.
    pub other: u64,
}

impl OpcodeCounts {
    pub fn new(first_opcode: u8) -> Self {
        Self {
            group: first_opcode >> 5,
            own: [0; 32],
            foreign: [(0, 0); FOREIGN_SLOTS],
            foreign_used: 0,
            other: 0,
        }
    }

    #[inline]
    pub fn add(&mut self, opcode: u8) {
        if opcode >> 5 == self.group && opcode != op::CNP {
            self.own[usize::from(opcode & 0x1F)] += 1;
            return;
        }
        let used = usize::from(self.foreign_used);
        if let Some(slot) = self.foreign[..used].iter_mut().find(|(o, _)| *o == opcode) {
            slot.1 += 1;
        } else if used < FOREIGN_SLOTS {
            self.foreign[used] = (opcode, 1);
            self.foreign_used += 1;
        } else {
            self.other += 1;
        }
    }

    /// (opcode, count) for every opcode with a non-zero count.
    pub fn iter(&self) -> impl Iterator<Item = (u8, u64)> + '_ {
        let base = self.group << 5;
        self.own
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(move |(i, &n)| (base | i as u8, n))
            .chain(self.foreign[..usize::from(self.foreign_used)].iter().copied())
    }

    /// A flow whose first packet was a CNP takes the transport of its first other packet.
    fn regroup(&mut self, opcode: u8) {
        if self.own.iter().all(|&n| n == 0) {
            self.group = opcode >> 5;
        }
    }

    fn clear(&mut self) {
        self.own = [0; 32];
        self.foreign_used = 0;
        self.other = 0;
    }
}

/// A flow's counters for one interval, as handed to the stats side.
#[derive(Debug, Clone)]
pub struct FlowDelta {
    pub key: FlowKey,
    pub transport: Transport,
    pub counts: FlowCounts,
    pub opcodes: OpcodeCounts,
}

/// What the flow table reports besides counters, as it happens. (Latency samples of
/// non-NVMe RDMA, `rdma_read` and `rc_ack`, go straight into the worker's recorder.)
#[derive(Debug, Clone)]
pub enum FlowEvent {
    /// A transmission ended.
    Ended(Transmission),
}

/// Requests awaiting their answer, per flow: message ends awaiting an ACK (rc_ack) and READ
/// Requests awaiting their last response (rdma_read). A small ring: beyond it the oldest
/// is forgotten, which a healthy RC connection (a few outstanding messages) never reaches.
const PENDING: usize = 8;

/// 16 bytes: the PSN (24 bits) with the top bit telling whether the request still awaits
/// its answer, the PSNs it covers (READ: its span; a message end: 1), and its time.
#[derive(Debug, Clone, Copy, Default)]
struct Pending {
    psn_live: u32,
    span: u32,
    ts: u64,
}

const LIVE: u32 = 1 << 31;

impl Pending {
    fn new(psn: u32, span: u32, ts: u64) -> Self {
        Self { psn_live: (psn & 0x00FF_FFFF) | LIVE, span, ts }
    }
    fn live(&self) -> bool {
        self.psn_live & LIVE != 0
    }
    fn psn(&self) -> u32 {
        self.psn_live & 0x00FF_FFFF
    }
    fn answered(&mut self) {
        self.psn_live &= !LIVE;
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct PendingRing {
    slots: [Pending; PENDING],
    next: u8,
}

impl PendingRing {
    fn push(&mut self, p: Pending) {
        self.slots[usize::from(self.next)] = p;
        self.next = (self.next + 1) % PENDING as u8;
    }
}

/// An ended transmission (docs/METRICS.md, "Transmissions"): a burst of one flow, from its
/// first to its last packet.
#[derive(Debug, Clone)]
pub struct Transmission {
    pub key: FlowKey,
    pub transport: Transport,
    pub start_ns: u64,
    pub end_ns: u64,
    pub counts: FlowCounts,
}

/// One flow. `repr(C)` keeps the fields in this order, and entries start on a cache line:
/// what nearly every packet touches comes first (about 9 cache lines: key, links, PSN
/// state, times, counters, the rings of requests awaiting an answer), so that prefetching
/// the start of an entry brings in what its packet needs; what only intervals and
/// transmissions read comes last.
#[derive(Debug)]
#[repr(C, align(64))]
struct FlowEntry {
    key: FlowKey,
    /// The QPN that sends this flow's packets (the paired direction's destination QPN).
    peer_qpn: u32,
    /// The paired direction's slot, once both are in the table (cleared when that slot is
    /// given to another flow).
    peer_slot: u32,
    /// Path MTU of the QP, 0 while unknown.
    mtu: u32,
    /// Slots of this flow's latency series in the recorder (`rc_ack`, `rdma_read`), once
    /// known.
    series: [u32; 2],
    /// Place in the list of flows with an open transmission, in the order they were queued.
    links: Links,
    transport: Transport,
    in_pair_index: bool,
    /// NVMe/RDMA capsules were counted on this flow (its RDMA latencies, and its paired
    /// flow's, are then the I/O tracker's).
    capsules: bool,
    /// The open transmission: first packet time and `totals` at its start.
    tx_open: bool,
    /// Counted something since the last interval was handed over (it is in the table's
    /// list of flows to hand over).
    changed: bool,
    psn: PsnTracker,
    tx_start: u64,
    last_ts: u64,
    /// When the flow was last put at the tail of the list of open transmissions (see
    /// [`FlowTable::expire`]).
    queued_ts: u64,
    totals: FlowCounts,
    /// Message ends awaiting an ACK, and READ Requests awaiting their last response.
    acks: PendingRing,
    reads: PendingRing,
    opcodes: OpcodeCounts,
    tx_base: FlowCounts,
    /// `totals` when the last interval was handed over.
    reported: FlowCounts,
}

impl Linked for FlowEntry {
    fn links(&mut self) -> &mut Links {
        &mut self.links
    }
}

/// Cache lines at the start of an entry that a packet touches (see [`FlowEntry`]).
const HOT_LINES: usize = 9;

/// Request operations: their PSNs advance the requester's sequence (docs/METRICS.md, "PSN
/// analysis").
#[inline]
fn is_request(opcode: u8) -> bool {
    matches!(opcode >> 5, 0 | 1 | 5) && matches!(opcode & 0x1F, 0x00..=0x0C | 0x13 | 0x14 | 0x16 | 0x17)
}

/// The last packet of a request message (or a single-packet request).
#[inline]
fn ends_message(low: u8) -> bool {
    matches!(low, 0x02..=0x05 | 0x08..=0x0C | 0x13 | 0x14 | 0x16 | 0x17)
}

/// A packet that must be full-size (First or Middle of a multi-packet message): its payload
/// is the path MTU.
#[inline]
fn full_size(opcode: u8) -> bool {
    matches!(opcode >> 5, 0 | 1 | 5)
        && matches!(
            opcode & 0x1F,
            op::SEND_FIRST
                | op::SEND_MIDDLE
                | op::WRITE_FIRST
                | op::WRITE_MIDDLE
                | op::READ_RESPONSE_FIRST
                | op::READ_RESPONSE_MIDDLE
        )
}

/// The PSN through which an ACKNOWLEDGE packet acknowledges requests: its own for an ACK,
/// the one before for a NAK (which names the PSN it refuses); `None` for other packets.
pub fn acked_psn(opcode: u8, ext: &ExtHeaders, psn: u32) -> Option<(u32, AckKind)> {
    if opcode & 0x1F != op::ACKNOWLEDGE || !matches!(opcode >> 5, 0 | 5) {
        return None;
    }
    let a = ext.aeth?;
    let kind = a.kind();
    match kind {
        AckKind::Ack { .. } => Some((psn, kind)),
        AckKind::Nak { .. } | AckKind::RnrNak { .. } => Some((psn.wrapping_sub(1) & 0x00FF_FFFF, kind)),
        AckKind::Reserved => None,
    }
}

/// Responses carry the requester's PSNs: ACKs and READ / atomic responses (they answer
/// requests of the paired flow).
#[inline]
pub fn is_response(opcode: u8) -> bool {
    matches!(opcode >> 5, 0 | 5) && matches!(opcode & 0x1F, 0x0D..=0x12)
}

pub struct FlowTable {
    index: FlowIndex,
    slab: Vec<FlowEntry>,
    max_flows: usize,
    idle_ns: u64,
    /// `--mtu`: overrides what is learned.
    forced_mtu: Option<u32>,
    /// Request flows from one host to another, for learning QP pairs.
    pairs: HashMap<(Vantage, IpAddr, IpAddr), [u32; PAIR_SLOTS], ahash::RandomState>,
    /// QP pairs (and path MTU) announced by CM, for flows not seen yet: the peer's QPN
    /// and the MTU, per direction.
    announced: FifoMap<FlowKey, (u32, u32)>,
    /// Flows with an open transmission, in the order they were queued.
    open: List,
    /// The latest time `expire` was given: a transmission idle for `--flow-idle` before it
    /// has ended, whether or not the lazy queue has reached it yet.
    horizon: u64,
    /// Flows that counted something since the last interval was handed over.
    changed: Vec<u32>,
    /// `--flow-expire`.
    expire_ns: u64,
    /// Where the sweep for an expired flow goes on from.
    hand: u32,
    /// Packets of flows that did not fit (the table was full).
    pub untracked_packets: u64,
    /// Flows whose slot went to a new flow after `--flow-expire` without a packet.
    pub expired_flows: u64,
}

impl FlowTable {
    pub fn new(max_flows: usize, idle_ns: u64, forced_mtu: Option<u32>) -> Self {
        let h = || ahash::RandomState::new();
        let slab = Vec::with_capacity(max_flows);
        memory::advise_huge(&slab);
        Self {
            // The index sizes itself at twice the flows (see `FlowIndex::new`).
            index: FlowIndex::new(max_flows),
            slab,
            max_flows,
            idle_ns: idle_ns.max(1),
            forced_mtu,
            // Twice the room: entries are removed when slots are reused, and a hash map that
            // is more than half full rehashes into a larger allocation when its deleted
            // entries use up the spare room.
            pairs: HashMap::with_capacity_and_hasher(2 * max_flows, h()),
            announced: FifoMap::new(crate::defaults::MAX_ANNOUNCED_FLOWS),
            open: List::default(),
            horizon: 0,
            changed: Vec::with_capacity(max_flows),
            expire_ns: crate::defaults::FLOW_EXPIRE_NS,
            hand: 0,
            untracked_packets: 0,
            expired_flows: 0,
        }
    }

    /// A flow without a packet for `ns` of packet time gives its slot to a new flow when
    /// the table is full.
    pub fn with_expiry(mut self, ns: u64) -> Self {
        self.expire_ns = ns.max(1);
        self
    }

    /// Room for `n` flows announced by CM before their first packet (the oldest is
    /// forgotten beyond it).
    pub fn with_announced(mut self, n: usize) -> Self {
        self.announced = FifoMap::new(n);
        self
    }

    /// Announced flows forgotten to make room.
    pub fn announced_forgotten(&self) -> u64 {
        self.announced.forgotten
    }

    /// Memory the table allocates for `max_flows`: the slab, and the index and pairing hash
    /// maps, made with room for twice the flows (a hash map rounds its buckets up to a power
    /// of two at most 7/8 full, each bucket an entry and a control byte).
    pub const fn allocated_bytes(max_flows: usize) -> usize {
        let buckets = (2 * max_flows * 8 / 7).next_power_of_two();
        max_flows * std::mem::size_of::<FlowEntry>()
            + FlowIndex::allocated_bytes(max_flows)
            + buckets * (std::mem::size_of::<((Vantage, IpAddr, IpAddr), [u32; PAIR_SLOTS])>() + 1)
    }

    pub fn len(&self) -> usize {
        self.slab.len()
    }

    /// The slot of a tracked flow.
    #[inline]
    pub fn find(&self, key: &FlowKey) -> Option<u32> {
        self.find_hashed(self.index.hash(key), key)
    }

    /// The slot of a tracked flow whose key's hash is `hash`.
    #[inline]
    fn find_hashed(&self, hash: KeyHash, key: &FlowKey) -> Option<u32> {
        self.index.find(hash, |i| self.slab[i as usize].key == *key)
    }

    // --- prefetching, for a burst of packets ---------------------------------------------
    //
    // A worker handed a burst looks at all its packets before it tracks any (the l3fwd
    // pattern): it prefetches each packet's index bucket, then the entry that bucket names,
    // then the paired flow an answer will touch, so that the cache misses of the burst
    // overlap instead of following one another. Hints only: nothing here changes state.

    /// Step 1: the index bucket of `key`.
    #[inline]
    pub fn prefetch_bucket(&self, key: &FlowKey) -> KeyHash {
        let h = self.index.hash(key);
        self.index.prefetch(h);
        h
    }

    /// Step 2: the hot lines of the entry the bucket names (after step 1 has had time),
    /// and the line that counts the packet's opcode.
    #[inline]
    pub fn prefetch_entry(&self, hash: KeyHash, opcode: u8) -> Option<u32> {
        let i = self.index.peek(hash)?;
        let e = self.slab.get(i as usize)?;
        memory::prefetch(e as *const FlowEntry, HOT_LINES);
        memory::prefetch(&e.opcodes.group as *const u8, 1);
        memory::prefetch(&e.opcodes.own[usize::from(opcode & 0x1F)] as *const u64, 1);
        Some(i)
    }

    /// Step 3, for a response: the requests of the paired flow it answers.
    #[inline]
    pub fn prefetch_peer(&self, slot: u32) {
        let Some(e) = self.slab.get(slot as usize) else { return };
        if let Some(p) = self.slab.get(e.peer_slot as usize) {
            memory::prefetch(p as *const FlowEntry, HOT_LINES);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.slab.is_empty()
    }

    // --- the list of flows with an open transmission -------------------------------------

    fn unlink(&mut self, i: u32) {
        self.open.unlink(&mut self.slab, i);
    }

    fn push_tail(&mut self, i: u32) {
        self.open.push_tail(&mut self.slab, i);
    }

    fn close_transmission(&mut self, i: u32, out: &mut impl FnMut(FlowEvent)) {
        self.unlink(i);
        let e = &mut self.slab[i as usize];
        e.tx_open = false;
        out(FlowEvent::Ended(Transmission {
            key: e.key,
            transport: e.transport,
            start_ns: e.tx_start,
            end_ns: e.last_ts,
            counts: e.totals.since(&e.tx_base),
        }));
    }

    /// Ends the transmissions of flows idle for `--flow-idle` at packet time `now`.
    ///
    /// A packet does not move its flow in the list (that would touch two other flows'
    /// entries, cache misses on a large table): the list stays in the order flows were
    /// queued, and `queued_ts <= last_ts`. So while the head was queued more than
    /// `--flow-idle` ago, it is either idle (its transmission ends) or had packets since
    /// (it goes to the tail, queued at its last packet); once the head was queued within
    /// `--flow-idle`, every flow behind it was too, and none is idle. Each flow is looked
    /// at most once per `--flow-idle` of its activity.
    #[inline]
    pub fn expire(&mut self, now: u64, out: &mut impl FnMut(FlowEvent)) {
        self.horizon = self.horizon.max(now);
        while let Some(h) = self.open.head() {
            let e = &self.slab[h as usize];
            if e.queued_ts.saturating_add(self.idle_ns) >= now {
                break;
            }
            if e.last_ts.saturating_add(self.idle_ns) >= now {
                let last = e.last_ts;
                self.unlink(h);
                self.slab[h as usize].queued_ts = last;
                self.push_tail(h);
                continue;
            }
            self.close_transmission(h, out);
        }
    }

    /// Whether flow `i`'s transmission has ended by now: it went idle for `--flow-idle`
    /// before the latest time seen, though the lazy queue may not have reached it. Flows
    /// whose state is about to be read or changed end it first (see `settle`), so that
    /// every result is what ending each transmission as soon as it went idle would give.
    #[inline]
    fn went_idle(&self, i: u32) -> bool {
        let e = &self.slab[i as usize];
        e.tx_open && self.horizon > e.last_ts.saturating_add(self.idle_ns)
    }

    /// Ends flow `i`'s transmission if it went idle (see `went_idle`).
    #[inline]
    fn settle(&mut self, i: u32, out: &mut impl FnMut(FlowEvent)) {
        if self.went_idle(i) {
            self.close_transmission(i, out);
        }
    }

    /// Ends every open transmission (end of input, shutdown).
    pub fn close_all(&mut self, out: &mut impl FnMut(FlowEvent)) {
        while let Some(h) = self.open.head() {
            self.close_transmission(h, out);
        }
    }

    // --- per packet ---------------------------------------------------------------------

    fn slot(
        &mut self,
        key: FlowKey,
        hash: Option<KeyHash>,
        transport: Transport,
        opcode: u8,
        now: u64,
        out: &mut impl FnMut(FlowEvent),
    ) -> Option<u32> {
        let hash = hash.unwrap_or_else(|| self.index.hash(&key));
        if let Some(i) = self.find_hashed(hash, &key) {
            return Some(i);
        }
        let reuse = if self.slab.len() < self.max_flows { None } else { Some(self.reclaim(now, out)?) };
        let (peer_qpn, mtu) = self.announced.remove(&key).unwrap_or((NONE, 0));
        let e = FlowEntry {
            key,
            transport,
            totals: FlowCounts::default(),
            reported: FlowCounts::default(),
            opcodes: OpcodeCounts::new(opcode),
            psn: PsnTracker::default(),
            peer_qpn,
            peer_slot: NONE,
            mtu,
            in_pair_index: false,
            capsules: false,
            series: [NONE; 2],
            tx_open: false,
            changed: false,
            tx_start: 0,
            tx_base: FlowCounts::default(),
            last_ts: 0,
            queued_ts: 0,
            links: Links::default(),
            acks: PendingRing::default(),
            reads: PendingRing::default(),
        };
        let i = match reuse {
            Some(i) => {
                self.slab[i as usize] = e;
                i
            }
            None => {
                self.slab.push(e);
                (self.slab.len() - 1) as u32
            }
        };
        self.index.insert(hash, i);
        Some(i)
    }

    /// A slot for a new flow in a full table: the first of a few, from where the last sweep
    /// stopped, whose flow has had no packet for `--flow-expire`, has no open transmission
    /// and has handed over all it counted. Its pairing and index entries are removed.
    fn reclaim(&mut self, now: u64, out: &mut impl FnMut(FlowEvent)) -> Option<u32> {
        let n = self.slab.len() as u32;
        for _ in 0..RECLAIM_PROBES.min(n as usize) {
            let i = self.hand % n;
            self.hand = (i + 1) % n;
            self.settle(i, out);
            let e = &self.slab[i as usize];
            if e.tx_open || e.last_ts.saturating_add(self.expire_ns) >= now || e.totals != e.reported {
                continue;
            }
            let (key, peer, paired) = (e.key, e.peer_slot, e.in_pair_index);
            self.index.remove(self.index.hash(&key), i);
            if peer != NONE {
                self.unpair_from(peer, i);
            }
            if paired {
                let hosts = (key.vantage, key.src, key.dst);
                if let Some(slots) = self.pairs.get_mut(&hosts) {
                    for s in slots.iter_mut().filter(|s| **s == i) {
                        *s = NONE;
                    }
                    if slots.iter().all(|s| *s == NONE) {
                        self.pairs.remove(&hosts);
                    }
                }
            }
            self.expired_flows += 1;
            return Some(i);
        }
        None
    }

    fn reverse_index(&self, i: u32) -> Option<u32> {
        let e = &self.slab[i as usize];
        if e.peer_slot != NONE {
            return Some(e.peer_slot);
        }
        if e.peer_qpn == NONE {
            return None;
        }
        let k = FlowKey { vantage: e.key.vantage, src: e.key.dst, dst: e.key.src, dst_qpn: e.peer_qpn };
        self.find(&k)
    }

    /// The path MTU for a QP's READ spans: `--mtu`, else learned on either direction.
    fn mtu_of(&self, i: u32) -> Option<u32> {
        if self.forced_mtu.is_some() {
            return self.forced_mtu;
        }
        let own = self.slab[i as usize].mtu;
        if own != 0 {
            return Some(own);
        }
        self.reverse_index(i).map(|r| self.slab[r as usize].mtu).filter(|&m| m != 0)
    }

    /// Links two slots as the two directions of a QP pair, unlinking whatever either was
    /// linked to before (a QPN reused by a new connection), so links are always two-way.
    fn link_slots(&mut self, a: u32, b: u32) {
        for (x, y) in [(a, b), (b, a)] {
            let old = self.slab[x as usize].peer_slot;
            if old != NONE && old != y {
                self.unpair_from(old, x);
            }
            self.slab[x as usize].peer_slot = y;
        }
    }

    /// `x` loses its pair `from` (which now pairs with another flow, or leaves the table):
    /// its link, and its peer QPN if that named `from`, so that it is not linked back.
    fn unpair_from(&mut self, x: u32, from: u32) {
        let q = self.slab[from as usize].key.dst_qpn;
        let e = &mut self.slab[x as usize];
        if e.peer_slot == from {
            e.peer_slot = NONE;
        }
        if e.peer_qpn == q {
            e.peer_qpn = NONE;
        }
    }

    fn set_pair(&mut self, a: u32, b: u32) {
        let (qa, qb) = (self.slab[a as usize].key.dst_qpn, self.slab[b as usize].key.dst_qpn);
        self.slab[a as usize].peer_qpn = qb;
        self.slab[b as usize].peer_qpn = qa;
        self.link_slots(a, b);
        let m = self.slab[a as usize].mtu.max(self.slab[b as usize].mtu);
        self.slab[a as usize].mtu = m;
        self.slab[b as usize].mtu = m;
    }

    /// Learns the pair of a response flow from the PSN it acknowledges: the one request
    /// flow between the same hosts (the other way) whose next PSN is just past it.
    fn learn_pair(&mut self, resp: u32, psn: u32) {
        let k = self.slab[resp as usize].key;
        let Some(slots) = self.pairs.get(&(k.vantage, k.dst, k.src)) else { return };
        let mut found = NONE;
        for &c in slots.iter().filter(|&&c| c != NONE) {
            let Some(next) = self.slab[c as usize].psn.next_expected() else { continue };
            let behind = next.wrapping_sub(psn) & 0x00FF_FFFF;
            if (1..=ACK_WINDOW).contains(&behind) {
                if found != NONE {
                    return; // ambiguous: wait for a later acknowledgement
                }
                found = c;
            }
        }
        if found != NONE {
            self.set_pair(resp, found);
        }
    }

    fn index_request_flow(&mut self, i: u32) {
        let k = self.slab[i as usize].key;
        self.slab[i as usize].in_pair_index = true;
        let slots = self.pairs.entry((k.vantage, k.src, k.dst)).or_insert([NONE; PAIR_SLOTS]);
        if let Some(s) = slots.iter_mut().find(|s| **s == NONE) {
            *s = i;
        }
    }

    /// A CNP on flow `i` throttles the paired direction.
    fn attribute_cnp(&mut self, i: u32, out: &mut impl FnMut(FlowEvent)) {
        let target = self.reverse_index(i).or_else(|| {
            // Without a known pair, the one request flow between the hosts, if there is one.
            let k = self.slab[i as usize].key;
            let slots = self.pairs.get(&(k.vantage, k.dst, k.src))?;
            let mut it = slots.iter().filter(|&&c| c != NONE);
            match (it.next(), it.next()) {
                (Some(&c), None) => Some(c),
                _ => None,
            }
        });
        match target {
            Some(t) => {
                // The throttled flow's transmission may have gone idle without being ended
                // yet (see `expire`): end it first, so the CNP does not count in it.
                if t != i {
                    self.settle(t, out);
                }
                self.slab[t as usize].totals.cnp += 1;
                self.note_change(t);
            }
            None => self.slab[i as usize].totals.cnp_unattributed += 1,
        }
    }

    /// Counts one RoCE packet of flow `key`, seen as `seen` says (its time, length, and the
    /// key's hash if computed already), first ending transmissions that went idle. Returns
    /// the flow's slot (`None` if the table is full and the flow untracked).
    #[inline]
    pub fn record(
        &mut self,
        key: FlowKey,
        p: &RocePacket<'_>,
        seen: Seen,
        rec: &mut LatencyRecorder,
        out: &mut impl FnMut(FlowEvent),
    ) -> Option<u32> {
        let Seen { wire_len, ts, hash, .. } = seen;
        self.expire(ts, out);
        let opcode = p.bth.opcode();
        let Some(i) = self.slot(key, hash, p.bth.transport(), opcode, ts, out) else {
            self.untracked_packets += 1;
            return None;
        };
        self.note_change(i);
        // The transmission may have gone idle without the lazy queue reaching it yet: it
        // ends before this packet counts (`expire(ts)` above made `ts` part of the horizon).
        self.settle(i, out);
        let e = &mut self.slab[i as usize];
        if !e.tx_open {
            e.tx_open = true;
            e.tx_start = ts;
            e.tx_base = e.totals;
            e.queued_ts = ts;
            self.push_tail(i);
        }
        if self.slab[i as usize].peer_slot == NONE && self.slab[i as usize].peer_qpn != NONE {
            // Paired by CM before both directions were in the table: link the slots now,
            // unless the other direction has since paired with another flow.
            if let Some(r) = self.reverse_index(i) {
                let other = &self.slab[r as usize];
                if other.peer_slot == NONE || other.peer_qpn == self.slab[i as usize].key.dst_qpn {
                    self.set_pair(i, r);
                }
            }
        }
        let e = &mut self.slab[i as usize];
        e.last_ts = e.last_ts.max(ts);
        if e.transport == Transport::Cnp && opcode != op::CNP {
            e.transport = p.bth.transport();
            e.opcodes.regroup(opcode);
        }
        let c = &mut e.totals;
        c.packets += 1;
        c.bytes += u64::from(wire_len);
        c.payload_bytes += u64::from(p.payload_len);
        if p.ecn == 3 {
            c.ecn_ce += 1;
        }
        e.opcodes.add(opcode);
        if full_size(opcode) && (256..=4096).contains(&p.payload_len) && p.payload_len.is_power_of_two() {
            e.mtu = p.payload_len;
        }
        if seen.late {
            e.totals.late_packets += 1;
            return Some(i);
        }

        if opcode == op::CNP {
            self.attribute_cnp(i, out);
        } else if is_request(opcode) {
            let low = opcode & 0x1F;
            let span = if low == op::READ_REQUEST {
                let len = p.exts.reth.map_or(0, |r| r.dma_len);
                Span::read(len, self.mtu_of(i))
            } else {
                Span::ONE
            };
            let e = &mut self.slab[i as usize];
            let c = &mut e.totals;
            if ends_message(low) {
                c.messages += 1;
            }
            let psn = p.bth.psn();
            // Latency of RDMA on RC: a READ to its last response, a message's last packet to
            // the ACK that covers it (NVMe/RDMA connections are left to the I/O tracker when
            // the answer comes, by which time they are known to carry capsules).
            if opcode >> 5 == 0 {
                let e = &mut self.slab[i as usize];
                if low == op::READ_REQUEST {
                    e.reads.push(Pending::new(psn, span.max, ts));
                } else if ends_message(low) && !matches!(low, op::COMPARE_SWAP | op::FETCH_ADD) {
                    e.acks.push(Pending::new(psn, 1, ts));
                }
            }
            let e = &mut self.slab[i as usize];
            let c = &mut e.totals;
            match e.psn.observe(psn, span) {
                Outcome::InOrder => {}
                Outcome::Retransmission { episode } => {
                    c.retx_packets += 1;
                    c.retx_bytes += u64::from(p.payload_len);
                    c.retx_episodes += u64::from(episode);
                }
                Outcome::Gap { skipped } => c.gap_psns += u64::from(skipped),
                Outcome::OutOfWindow => c.out_of_window += 1,
            }
            if !e.in_pair_index && e.key.dst_qpn != 1 {
                self.index_request_flow(i);
            }
        } else if is_response(opcode) {
            let ack = acked_psn(opcode, &p.exts, p.bth.psn());
            let c = &mut self.slab[i as usize].totals;
            match ack {
                Some((_, AckKind::Nak { code: 0 })) => c.nak_seq += 1,
                Some((_, AckKind::Nak { .. })) => c.nak_other += 1,
                Some((_, AckKind::RnrNak { .. })) => c.nak_rnr += 1,
                _ => {}
            }
            let acked = ack.map(|(psn, _)| psn);
            if self.slab[i as usize].peer_qpn == NONE {
                self.learn_pair(i, p.bth.psn());
            }
            let low = opcode & 0x1F;
            let read_end =
                matches!(low, op::READ_RESPONSE_LAST | op::READ_RESPONSE_ONLY).then_some(p.bth.psn());
            self.answer(i, read_end, acked, ts, rec);
        }
        Some(i)
    }

    /// Whether a flow or its paired direction carries NVMe/RDMA capsules (its RDMA
    /// latencies are then the I/O tracker's).
    fn carries_nvme(&self, i: u32) -> bool {
        let e = &self.slab[i as usize];
        e.capsules || self.reverse_index(i).is_some_and(|r| self.slab[r as usize].capsules)
    }

    /// Counts an NVMe/RDMA command (or completion) capsule on a tracked flow.
    #[inline]
    pub fn count_capsule(&mut self, slot: u32, command: bool) {
        let e = &mut self.slab[slot as usize];
        e.capsules = true;
        if command {
            e.totals.nvme_commands += 1;
        } else {
            e.totals.nvme_completions += 1;
        }
    }

    /// A response on flow `i` (responder → requester) answers pending requests of the
    /// paired flow: the last READ Response (`read_end`) its READ Request, an acknowledgement
    /// every message end up to the PSN it covers (`acked`).
    fn answer(
        &mut self,
        i: u32,
        read_end: Option<u32>,
        acked: Option<u32>,
        ts: u64,
        rec: &mut LatencyRecorder,
    ) {
        if read_end.is_none() && acked.is_none() {
            return;
        }
        let Some(r) = self.reverse_index(i) else { return };
        let nvme = self.carries_nvme(r);
        let req = &mut self.slab[r as usize];
        let key = req.key;
        let segment = match key.vantage {
            Vantage::Compute => Segment::IoCompute,
            Vantage::Storage => Segment::IoStorage,
        };
        let (ring, op_, psn, within, which) = match (read_end, acked) {
            (Some(psn), _) => (&mut req.reads, Op::RdmaRead, psn, None, 1),
            (None, Some(psn)) => (&mut req.acks, Op::RcAck, psn, Some(ACK_WINDOW), 0),
            (None, None) => return,
        };
        for p in ring.slots.iter_mut().filter(|p| p.live() && ts >= p.ts) {
            let offset = psn.wrapping_sub(p.psn()) & 0x00FF_FFFF;
            if offset < within.unwrap_or(p.span.max(1)) {
                p.answered();
                if nvme {
                    continue;
                }
                // The flow remembers its series' slot: one lookup per run, not per sample.
                // Series are never removed, so a recorder without room stays without it.
                if req.series[which] == NONE {
                    let k = SeriesKey { initiator: key.src, target: key.dst, op: op_, segment };
                    req.series[which] = rec.slot(k).unwrap_or(NO_ROOM);
                }
                match req.series[which] {
                    NO_ROOM => rec.dropped_samples += 1,
                    slot => rec.record_at(slot, ts - p.ts),
                }
            }
        }
    }

    /// The QPN that sends a tracked flow's packets, if the pairing is known.
    pub fn peer_qpn(&self, slot: u32) -> Option<u32> {
        let q = self.slab[slot as usize].peer_qpn;
        (q != NONE).then_some(q)
    }

    /// The counters of a tracked flow, for trackers that count more on it.
    #[inline]
    pub fn counts_mut(&mut self, slot: u32) -> &mut FlowCounts {
        &mut self.slab[slot as usize].totals
    }

    /// Records what CM said about a connection: `a` (at `a_ip`, QPN `a_qpn`) talks to `b`.
    pub fn announce_pair(
        &mut self,
        vantage: Vantage,
        a_ip: IpAddr,
        a_qpn: u32,
        b_ip: IpAddr,
        b_qpn: u32,
        mtu: u32,
    ) {
        let ab = FlowKey { vantage, src: a_ip, dst: b_ip, dst_qpn: b_qpn };
        let ba = FlowKey { vantage, src: b_ip, dst: a_ip, dst_qpn: a_qpn };
        let (ia, ib) = (self.find(&ab), self.find(&ba));
        for (k, i, peer) in [(ab, ia, a_qpn), (ba, ib, b_qpn)] {
            match i {
                Some(i) => {
                    // What CM says overrides what was learned: a link to another flow goes.
                    let old = self.slab[i as usize].peer_slot;
                    if old != NONE && self.slab[old as usize].key.dst_qpn != peer {
                        self.unpair_from(old, i);
                        self.slab[i as usize].peer_slot = NONE;
                    }
                    let e = &mut self.slab[i as usize];
                    e.peer_qpn = peer;
                    if mtu != 0 {
                        e.mtu = mtu;
                    }
                }
                None => self.announced.insert(k, (peer, mtu)),
            }
        }
        if let (Some(a), Some(b)) = (ia, ib) {
            self.set_pair(a, b);
        }
    }

    /// Puts a flow on the list of flows to hand over at the end of the interval.
    #[inline]
    fn note_change(&mut self, i: u32) {
        let e = &mut self.slab[i as usize];
        if !e.changed {
            e.changed = true;
            self.changed.push(i);
        }
    }

    /// Hands over every flow that changed in the interval, in slot order: only the flows on
    /// the list of changes are visited, not the whole table.
    pub fn drain_interval(&mut self, out: &mut Vec<FlowDelta>) {
        self.changed.sort_unstable();
        for &i in &self.changed {
            let e = &mut self.slab[i as usize];
            e.changed = false;
            let delta = e.totals.since(&e.reported);
            if delta == FlowCounts::default() {
                continue;
            }
            out.push(FlowDelta {
                key: e.key,
                transport: e.transport,
                counts: delta,
                opcodes: e.opcodes.clone(),
            });
            e.reported = e.totals;
            e.opcodes.clear();
        }
        self.changed.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_counts_are_exact_across_groups() {
        let mut c = OpcodeCounts::new(0x06);
        for op in [0x06, 0x07, 0x07, 0x08, 0x11, 0x81, 0x81, 0x64, 0x2A, 0xA4, 0x40, 0x41] {
            c.add(op);
        }
        let mut v: Vec<_> = c.iter().collect();
        v.sort();
        assert_eq!(
            v,
            vec![(0x06, 1), (0x07, 2), (0x08, 1), (0x11, 1), (0x2A, 1), (0x64, 1), (0x81, 2), (0xA4, 1)]
        );
        assert_eq!(c.other, 2, "0x40 and 0x41 found no free slot");
    }

    #[test]
    fn request_and_message_classes() {
        assert!(
            is_request(0x06) && is_request(0x0C) && is_request(0x14) && is_request(0xA4) && is_request(0x2A)
        );
        assert!(!is_request(0x11) && !is_request(0x64) && !is_request(0x81) && !is_request(0x0D));
        assert!(ends_message(0x04) && ends_message(0x08) && ends_message(0x0C) && !ends_message(0x06));
        assert!(full_size(0x06) && full_size(0x0D) && !full_size(0x0F) && !full_size(0x64));
    }
}

#[cfg(test)]
mod size {
    use super::*;

    /// docs/METRICS.md states the memory per flow; this keeps it true.
    #[test]
    fn bytes_per_flow_is_what_the_docs_say() {
        let entry = std::mem::size_of::<FlowEntry>();
        let hot = std::mem::offset_of!(FlowEntry, opcodes);
        let mib = FlowTable::allocated_bytes(crate::defaults::MAX_FLOWS) as f64 / (1 << 20) as f64;
        println!("entry {entry} bytes ({hot} hot), table {mib:.1} MiB at the default bound");
        assert!(hot <= HOT_LINES * 64, "the hot fields are {hot} bytes: prefetch more lines");
        assert!(
            entry <= 1216 && mib <= 94.5,
            "{entry} bytes per entry, {mib:.1} MiB: update docs/METRICS.md, RELIABILITY.md, DEPLOYMENT.md and defaults::MAX_FLOWS' note"
        );
    }
}

#[cfg(test)]
mod pairing {
    use super::*;
    use crate::wire::build::RoceFrame;
    use crate::wire::ib_ext::{Aeth, Reth};
    use crate::wire::{bth, decode_frame, Decoded};

    const A: &str = "10.0.0.1";
    const B: &str = "10.0.0.2";

    fn frame(
        src: &str,
        dst: &str,
        opcode: u8,
        qpn: u32,
        psn: u32,
        ext: ExtHeaders,
        payload: usize,
    ) -> Vec<u8> {
        let mut f = RoceFrame::new(
            src.parse().unwrap(),
            dst.parse().unwrap(),
            bth::Repr { opcode, dest_qp: qpn, psn, ..Default::default() },
        );
        f.ext = ext;
        let p = vec![0u8; payload];
        f.payload = &p;
        f.emit()
    }

    fn feed(t: &mut FlowTable, f: &[u8], ts: u64) {
        let Decoded::Roce(p) = decode_frame(f) else { panic!() };
        let key =
            FlowKey { vantage: Vantage::Compute, src: p.ip.src, dst: p.ip.dst, dst_qpn: p.bth.dest_qp() };
        let seen =
            Seen { source: 0, wire_len: f.len() as u32, ts, switch_clock: false, late: false, hash: None };
        t.record(key, &p, seen, &mut LatencyRecorder::new(16, 0), &mut |_| {});
    }

    fn counts(t: &FlowTable, src: &str, dst: &str, qpn: u32) -> FlowCounts {
        let k = FlowKey {
            vantage: Vantage::Compute,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            dst_qpn: qpn,
        };
        t.slab[t.find(&k).unwrap() as usize].totals
    }

    /// An ACK's extension headers (its PSN is in the BTH).
    fn ack() -> ExtHeaders {
        ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() }
    }

    #[test]
    fn ambiguous_acknowledgements_do_not_pair_and_cm_does() {
        let mut t = FlowTable::new(64, 1_000_000, None);
        // Two QPs from A to B (B's QPNs 10 and 20) at the same PSNs: an ACK to A's QP 1 for
        // PSN 100 could be either's.
        feed(&mut t, &frame(A, B, 0x04, 10, 100, ExtHeaders::default(), 8), 1);
        feed(&mut t, &frame(A, B, 0x04, 20, 100, ExtHeaders::default(), 8), 2);
        feed(&mut t, &frame(B, A, 0x11, 1, 100, ack(), 0), 3);
        feed(&mut t, &frame(B, A, 0x81, 1, 0, ExtHeaders::default(), 0), 4);
        assert_eq!(counts(&t, B, A, 1).cnp_unattributed, 1, "no guess");
        assert_eq!((counts(&t, A, B, 10).cnp, counts(&t, A, B, 20).cnp), (0, 0));
        // CM said: A's QP 1 talks to B's QP 20.
        t.announce_pair(Vantage::Compute, A.parse().unwrap(), 1, B.parse().unwrap(), 20, 1024);
        feed(&mut t, &frame(B, A, 0x81, 1, 0, ExtHeaders::default(), 0), 5);
        assert_eq!(counts(&t, A, B, 20).cnp, 1);
        // And the CM's path MTU sizes READ spans on that QP: 3000 bytes = 3 PSNs at 1024.
        let read =
            |len| ExtHeaders { reth: Some(Reth { va: 0, rkey: 1, dma_len: len }), ..Default::default() };
        feed(&mut t, &frame(A, B, 0x0C, 20, 101, read(3000), 0), 6);
        feed(&mut t, &frame(A, B, 0x04, 20, 104, ExtHeaders::default(), 8), 7);
        feed(&mut t, &frame(A, B, 0x04, 20, 106, ExtHeaders::default(), 8), 8);
        assert_eq!(counts(&t, A, B, 20).gap_psns, 1, "105 is missing, 102-103 were the READ's");
    }

    #[test]
    fn a_full_table_gives_the_slot_of_a_long_idle_reported_flow_to_a_new_one() {
        const MS: u64 = 1_000_000;
        let send = |src, dst, qpn, psn| frame(src, dst, 0x04, qpn, psn, ExtHeaders::default(), 8);
        let mut t = FlowTable::new(3, MS / 10, None).with_expiry(10 * MS);
        // A's QP 10 at B and its ACK flow, paired by the ACK; then a flow that stays busy.
        feed(&mut t, &send(A, B, 10, 100), 0);
        feed(&mut t, &frame(B, A, 0x11, 1, 100, ack(), 0), 1);
        assert_ne!(t.slab[0].peer_slot, NONE, "paired");
        feed(&mut t, &send(B, A, 7, 0), 2);
        // Full, and nothing handed over yet: the new flow is not tracked.
        feed(&mut t, &send(A, B, 30, 0), 20 * MS);
        assert_eq!((t.untracked_packets, t.expired_flows), (1, 0));
        let mut out = Vec::new();
        t.expire(20 * MS, &mut |_| {});
        t.drain_interval(&mut out);
        // B→A QP 7 is busy again; the next new flow takes the first idle slot (A→B QP 10),
        // whose pairing and index entries go with it.
        feed(&mut t, &send(B, A, 7, 1), 20 * MS);
        feed(&mut t, &send(A, B, 30, 1), 20 * MS + 1);
        assert_eq!((t.untracked_packets, t.expired_flows), (1, 1));
        assert_eq!(counts(&t, A, B, 30).packets, 1);
        assert!(t
            .find(&FlowKey {
                vantage: Vantage::Compute,
                src: A.parse().unwrap(),
                dst: B.parse().unwrap(),
                dst_qpn: 10
            })
            .is_none());
        assert_eq!(t.slab[1].peer_slot, NONE, "the ACK flow no longer points at the slot");
        // The pairing index has the slot once: for the new request flow, not the old one.
        assert!(t.pairs.values().all(|slots| slots.iter().filter(|&&s| s == 0).count() <= 1));
        // The old flow comes back as a new one and takes the next idle slot (the ACK flow).
        feed(&mut t, &send(A, B, 10, 101), 20 * MS + 2);
        assert_eq!((t.untracked_packets, t.expired_flows, t.len()), (1, 2, 3));
        assert_eq!(counts(&t, A, B, 10).packets, 1, "counted afresh");
    }

    #[test]
    fn pairing_links_stay_two_way_when_a_qpn_is_paired_anew() {
        let send = |src, dst, qpn| frame(src, dst, 0x04, qpn, 0, ExtHeaders::default(), 8);
        let mut t = FlowTable::new(8, 1_000_000, None);
        feed(&mut t, &send(A, B, 10), 0); // slot 0: the request flow
        feed(&mut t, &send(B, A, 1), 1); // slot 1: an old connection's other direction
        feed(&mut t, &send(B, A, 5), 2); // slot 2: a new connection's, reusing QPN 10
        t.set_pair(1, 0);
        t.set_pair(2, 0);
        assert_eq!((t.slab[0].peer_slot, t.slab[2].peer_slot), (2, 0));
        assert_eq!(t.slab[1].peer_slot, NONE, "the old direction no longer points at slot 0");
        // A late packet of the old direction does not take the pair back.
        feed(&mut t, &send(B, A, 1), 3);
        assert_eq!((t.slab[0].peer_slot, t.slab[2].peer_slot, t.slab[1].peer_slot), (2, 0, NONE));
        // CM then says A's QP 1 talks to B's QP 10: slots 0 and 1 pair, slot 2 is let go.
        t.announce_pair(Vantage::Compute, A.parse().unwrap(), 1, B.parse().unwrap(), 10, 0);
        assert_eq!((t.slab[0].peer_slot, t.slab[1].peer_slot, t.slab[2].peer_slot), (1, 0, NONE));
        assert_eq!((t.slab[0].peer_qpn, t.slab[1].peer_qpn, t.slab[2].peer_qpn), (1, 10, NONE));
    }

    #[test]
    fn an_acknowledgement_pairs_the_one_matching_qp() {
        let mut t = FlowTable::new(64, 1_000_000, None);
        feed(&mut t, &frame(A, B, 0x04, 10, 100, ExtHeaders::default(), 8), 1);
        feed(&mut t, &frame(A, B, 0x04, 20, 5000, ExtHeaders::default(), 8), 2);
        feed(&mut t, &frame(B, A, 0x11, 1, 5000, ack(), 0), 3);
        feed(&mut t, &frame(B, A, 0x81, 1, 0, ExtHeaders::default(), 0), 4);
        assert_eq!((counts(&t, A, B, 10).cnp, counts(&t, A, B, 20).cnp), (0, 1));
        // The READ responses of QP 20 reveal its MTU (a full-size READ Response First).
        feed(
            &mut t,
            &frame(
                B,
                A,
                0x0D,
                1,
                5001,
                ExtHeaders { aeth: Some(Aeth::ack(31, 2)), ..Default::default() },
                2048,
            ),
            5,
        );
        assert_eq!(
            t.mtu_of(
                t.find(&FlowKey {
                    vantage: Vantage::Compute,
                    src: A.parse().unwrap(),
                    dst: B.parse().unwrap(),
                    dst_qpn: 20
                })
                .unwrap()
            ),
            Some(2048)
        );
    }
}
