//! The flow table: one entry per (vantage, src IP, dst IP, destination QPN)
//! (docs/METRICS.md, "Per flow"), with
//! each flow's counters, PSN analysis, open transmission and QP pairing.
//!
//! Capacity is fixed at start-up (`--max-flows`): entries live in two slabs allocated once,
//! by slot: the two cache lines nearly every packet touches ([`Hot`]) and the rest
//! ([`Cold`]). A new flow in a full table takes the slot of a flow idle for `--flow-expire`
//! that has handed over everything it counted, if a short sweep finds one; else its packets
//! are counted as untracked. The indexes get twice the room they hold at most, so removals
//! never make them grow: the per-packet path never allocates. A transmission that went idle
//! ends when its flow is next looked at: at its next packet, or when the interval is handed
//! over, which visits the flows that had packets in it and those whose transmission was
//! still open at the last hand-over (see [`FlowTable::end_idle`]): no scan of the table,
//! and no other flow's entry touched per packet.

use super::analyzer::Seen;
use super::bounded::{hash_map_bytes, FifoMap, Refused};
use super::counts::{FlowCounts, ShortTransmissions};
use super::evidence::{Qp, Raised, Signal, Signals};
use super::index::{FlowIndex, KeyHash};
use super::memory;
use super::psn::{Outcome, PsnTracker, Span, UNKNOWN_READ_SPAN};
use super::vantage::Vantage;
use crate::metrics::latency::{LatencyRecorder, Op, Segment, SeriesKey};
use crate::wire::bth::{opcode as op, Transport};
use crate::wire::ib_ext::{nak_code, AckKind, Tracked};
use crate::wire::icrc;
use crate::wire::RocePacket;
use std::collections::HashMap;
use std::net::IpAddr;

/// Slots looked at, from a hand sweeping the table, when a new flow finds it full.
const RECLAIM_PROBES: usize = 4;

const NONE: u32 = u32::MAX;
/// Request flows remembered per host pair for learning QP pairs from acknowledgements.
const PAIR_SLOTS: usize = 8;
/// An acknowledgement or READ response names a PSN at most this far behind the requester's
/// next PSN.
const ACK_WINDOW: u32 = 1 << 16;
/// No PSN (PSNs have 24 bits).
const NO_PSN: u32 = u32::MAX;
/// No time (see `Cold::resent_end`).
const NO_TIME: u64 = u64::MAX;

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
    foreign_ops: [u8; FOREIGN_SLOTS],
    foreign_used: u8,
    foreign: [u64; FOREIGN_SLOTS],
    /// Packets whose opcode found no slot.
    pub other: u64,
}

impl OpcodeCounts {
    pub fn new(first_opcode: u8) -> Self {
        Self {
            group: first_opcode >> 5,
            own: [0; 32],
            foreign_ops: [0; FOREIGN_SLOTS],
            foreign_used: 0,
            foreign: [0; FOREIGN_SLOTS],
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
        if let Some(at) = self.foreign_ops[..used].iter().position(|&o| o == opcode) {
            self.foreign[at] += 1;
        } else if used < FOREIGN_SLOTS {
            self.foreign_ops[used] = opcode;
            self.foreign[used] = 1;
            self.foreign_used += 1;
        } else {
            self.other += 1;
        }
    }

    /// Adds `n` packets of an opcode of the flow's own group (a flow's first opcode, see
    /// `Hot::main_op`).
    fn add_many(&mut self, opcode: u8, n: u64) {
        debug_assert!(opcode >> 5 == self.group && opcode != op::CNP);
        self.own[usize::from(opcode & 0x1F)] += n;
    }

    /// The packets counted.
    fn total(&self) -> u64 {
        let foreign: u64 = self.foreign[..usize::from(self.foreign_used)].iter().sum();
        self.own.iter().sum::<u64>() + foreign + self.other
    }

    /// (opcode, count) for every opcode with a non-zero count.
    pub fn iter(&self) -> impl Iterator<Item = (u8, u64)> + '_ {
        let base = self.group << 5;
        self.own
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(move |(i, &n)| (base | i as u8, n))
            .chain(self.foreign_ops.iter().copied().zip(self.foreign).take(usize::from(self.foreign_used)))
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
    /// Transmissions too short to be reported that ended in the interval.
    pub short: ShortTransmissions,
    /// Transmissions reported one by one ([`FlowEvent::Ended`]) that ended in the interval:
    /// counted here, so that the stats side adds them to the flow's totals once per
    /// interval, not with a lookup per transmission.
    pub reported: u64,
    pub opcodes: OpcodeCounts,
    /// The start of the flow's transmission still open at the hand-over, if any: the
    /// collective step analysis waits for it (a step cannot end before it does).
    pub open_since: Option<u64>,
}

/// What the analysis reports besides counters, as it happens. (Latency samples of
/// non-NVMe RDMA, `rdma_read` and `rc_ack`, go straight into the worker's recorder.)
#[derive(Debug, Clone)]
pub enum FlowEvent {
    /// A transmission ended.
    Ended(Transmission),
    /// An event's evidence, its packets in a record (`--evidence-dir`; events without a
    /// file go with the interval report).
    Evidence(crate::track::evidence::EvidenceRecord),
}

/// Requests awaiting their answer, per flow: message ends awaiting an ACK (rc_ack) and READ
/// Requests awaiting their last response (rdma_read). A small ring: beyond it the oldest
/// is forgotten, which a healthy RC connection (a few outstanding messages) never reaches.
const PENDING: usize = 8;
// `Hot::acks_live` has a bit per place.
const _: () = assert!(PENDING <= 8);

/// 16 bytes: the PSN (24 bits) with the top bit telling whether the request still awaits
/// its answer and the next whether its span is exact, the PSNs it covers (READ: its span,
/// the widest it may be while the path MTU is unknown; a message end: 1), and its time.
#[derive(Debug, Clone, Copy, Default)]
struct Pending {
    psn_live: u32,
    span: u32,
    ts: u64,
}

const LIVE: u32 = 1 << 31;
const EXACT: u32 = 1 << 30;

/// The widest span a READ with a wrong ICRC is given (half the PSN window a gap is judged
/// in), whatever its DMA length reads.
const CORRUPT_READ_SPAN: u32 = 1 << 21;

/// Whether a ring holds a request whose PSNs include `psn`, awaiting its answer or
/// answered (a place never used has a span of 0): a message end of that PSN, or a READ
/// whose span holds it (a requester asks again for a READ's responses from the first one
/// it missed: the rest of the same READ). A READ whose span is only its widest (the path
/// MTU unknown when it went) holds its first PSN alone: the PSNs after it may be other
/// READs'.
#[inline(never)]
fn holds(ring: &[Pending; PENDING], psn: u32) -> bool {
    ring.iter().any(|p| {
        let from = psn.wrapping_sub(p.psn()) & 0x00FF_FFFF;
        if p.psn_live & EXACT != 0 {
            from < p.span
        } else {
            p.span != 0 && from == 0
        }
    })
}

impl Pending {
    fn new(psn: u32, span: Span, ts: u64) -> Self {
        let exact = if span.min == span.max { EXACT } else { 0 };
        Self { psn_live: (psn & 0x00FF_FFFF) | LIVE | exact, span: span.max, ts }
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

/// An ended transmission (docs/METRICS.md, "Transmissions"): a burst of one flow, from its
/// first to its last packet.
#[derive(Debug, Clone)]
pub struct Transmission {
    pub key: FlowKey,
    pub transport: Transport,
    pub start_ns: u64,
    pub end_ns: u64,
    /// On RC: the time of the transmission's last packet that ended a SEND or RDMA WRITE
    /// message (sent again or not), if it had one. A flow carries the ACKs of the QP's
    /// other direction too, which can come after it: the step analysis takes a flow's
    /// finish from its messages, not from those ACKs.
    pub last_message_ns: Option<u64>,
    /// Whether the flow or its paired direction had carried NVMe/RDMA capsules by the
    /// transmission's end: a data transfer of storage traffic, even when its capsules came
    /// in transmissions too short to be reported.
    pub nvme: bool,
    /// The QPN that sends the flow's packets (its paired direction's destination), once
    /// known.
    pub peer_qpn: Option<u32>,
    pub counts: FlowCounts,
}

/// What nearly every packet of a flow reads or writes: two cache lines, `repr(C)` so that
/// the fields stay where this says. The first line holds the key (compact), the times, the
/// pairing, the latency series' slots, the PSN state and the flags; the second the four counters every
/// packet adds to, and their values when the open transmission began. Everything else is in
/// [`Acks`] (the message ends awaiting their ACK), [`Short`] and [`Cold`], which a packet
/// touches only for what it needs there (its opcode's counter, the READs awaiting their
/// response, a rare counter).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(64))]
struct Hot {
    /// An IPv4 key's source (high half) and destination addresses; 0 for any other key,
    /// whose addresses are compared in [`Cold::key`].
    addrs: u64,
    last_ts: u64,
    /// Which of [`Cold::rest`]'s counters have their value at the open transmission's start
    /// saved in [`Cold::tx_base`] (bit k: counter `HOT_COUNTS + k`): each is saved the first
    /// time the transmission changes it, which nearly none does.
    tx_mask: u16,
    /// The flow's first opcode (with [`MAIN_OP`]): its packets are not counted in
    /// [`Cold::opcodes`] but worked out when the interval is handed over (the interval's
    /// packets less those of every other opcode), so that a flow of one opcode, as nearly
    /// every RDMA flow is, touches no cold line to count its opcode.
    main_op: u8,
    /// The places of the flow's [`Acks`] that hold a request still awaiting its ACK (bit k:
    /// place k), so that an ACK looks at those only, not at the whole ring.
    acks_live: u8,
    /// Where the I/O tracker last found this flow's NVMe connection state (a slot of its
    /// table, checked against the key before use; see `IoTracker`), so that an NVMe
    /// packet's flow lookup is its only hash lookup there. `NONE` until then.
    io_hint: u32,
    /// The open transmission's first packet time.
    tx_start: u64,
    /// The destination QPN (24 bits), the vantage (bit 24) and whether the addresses are
    /// not an IPv4 pair (bit 25, see `addrs`).
    tag: u32,
    /// The QPN that sends this flow's packets (the paired direction's destination QPN).
    peer_qpn: u32,
    /// The paired direction's slot, once both are in the table (cleared when that slot is
    /// given to another flow).
    peer_slot: u32,
    /// Slots of this flow's latency series in the recorder (`rc_ack`, `rdma_read`), once
    /// known (see `LatencyRecorder::cached_slot`; `NONE` is its `SLOT_UNKNOWN`).
    series: [u32; 2],
    psn: PsnTracker,
    /// Path MTU of the QP as its base-2 logarithm (256 to 4096 bytes), 0 while unknown.
    mtu_log2: u8,
    /// The highest IP TTL of the flow's packets at the latest of them (see
    /// [`Hot::mirror_duplicate`]).
    ttl_max: u8,
    /// The transport (low three bits) and the flags below.
    bits: u8,
    /// The next slot of the `acks` ring (low half) and of the `reads` ring (high half).
    rings: u8,
    /// packets, bytes, payload bytes and messages since the flow began ([`HOT_COUNTS`]),
    /// and their values when the open transmission began.
    counts: [u64; 4],
    tx_base: [u64; 4],
}

/// The counters kept in [`Hot`], in this order (the others are in [`Cold::rest`]).
const HOT_COUNTS: usize = 4;

/// Flags in [`Hot::bits`].
/// A transmission is open.
const TX_OPEN: u8 = 1 << 3;
/// Counted something since the last interval was handed over (it is in the table's list of
/// flows to hand over).
const CHANGED: u8 = 1 << 4;
/// NVMe/RDMA capsules were counted on this flow (its RDMA latencies, and its paired
/// flow's, are then the I/O tracker's).
const CAPSULES: u8 = 1 << 5;
/// The flow is in the index of request flows per host pair (a candidate for pairing), or
/// paired (no candidate any more): either way its requests need not index it.
const IN_PAIR_INDEX: u8 = 1 << 6;
/// [`Hot::main_op`] holds the flow's first opcode, which [`Cold::opcodes`] does not count.
const MAIN_OP: u8 = 1 << 7;
const TRANSPORT_BITS: u8 = 0b111;

/// How far ahead the flows a hand-over visits are prefetched (see [`FlowTable::end_idle`]).
const VISIT_LOOKAHEAD: usize = 8;

/// Cache lines of [`Hot`].
const HOT_LINES: usize = 2;

/// Bits of [`Hot::tag`].
const QPN_MASK: u32 = 0x00FF_FFFF;
const STORAGE_TAG: u32 = 1 << 24;
const WIDE_TAG: u32 = 1 << 25;

const TRANSPORTS: [Transport; 6] =
    [Transport::Rc, Transport::Uc, Transport::Rd, Transport::Ud, Transport::Cnp, Transport::Xrc];

/// [`Transport::Cnp`]'s bits in [`Hot::bits`].
const CNP_BITS: u8 = 4;
const _: () = assert!(matches!(TRANSPORTS[CNP_BITS as usize], Transport::Cnp));

fn transport_bits(t: Transport) -> u8 {
    TRANSPORTS.iter().position(|&x| x == t).unwrap_or(0) as u8
}

/// A RoCE path MTU (a power of two, 256 to 4096 bytes) as its base-2 logarithm; 0 for
/// unknown (0).
fn mtu_log2(mtu: u32) -> u8 {
    if mtu == 0 {
        0
    } else {
        mtu.next_power_of_two().trailing_zeros().min(12) as u8
    }
}

/// The compact form of a key kept in [`Hot`]: (`addrs`, `tag`).
#[inline]
fn compact(k: &FlowKey) -> (u64, u32) {
    compact_parts(k.vantage, &k.src, &k.dst, k.dst_qpn)
}

/// [`compact`] of the key (vantage, src, dst, dst_qpn), from its parts.
#[inline]
fn compact_parts(vantage: Vantage, src: &IpAddr, dst: &IpAddr, dst_qpn: u32) -> (u64, u32) {
    let v = match vantage {
        Vantage::Compute => 0,
        Vantage::Storage => STORAGE_TAG,
    };
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) if dst_qpn <= QPN_MASK => {
            ((u64::from(u32::from(*s)) << 32) | u64::from(u32::from(*d)), dst_qpn | v)
        }
        _ => (0, (dst_qpn & QPN_MASK) | v | WIDE_TAG),
    }
}

/// A packet's flow as the burst's first pass finds it, once per packet: the key's compact
/// form (see [`Hot::addrs`], [`Hot::tag`]) and its hash in the index. The lookup compares
/// the compact form with the entry's (and, for a key that is not an IPv4 pair, the full
/// key); the vantage is read from it, not resolved again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRef {
    pub hash: KeyHash,
    addrs: u64,
    tag: u32,
}

impl FlowRef {
    /// The vantage of the flow's key.
    #[inline]
    pub fn vantage(&self) -> Vantage {
        if self.tag & STORAGE_TAG != 0 {
            Vantage::Storage
        } else {
            Vantage::Compute
        }
    }
}

impl Hot {
    fn new(key: &FlowKey, transport: Transport, opcode: u8, peer_qpn: u32, mtu: u32) -> Self {
        let (addrs, tag) = compact(key);
        // A CNP's flow takes the transport of its first other packet (see
        // `OpcodeCounts::regroup`): it counts every opcode in its cold part.
        let main = if opcode == op::CNP { 0 } else { MAIN_OP };
        Self {
            addrs,
            last_ts: 0,
            tx_mask: 0,
            main_op: opcode,
            acks_live: 0,
            io_hint: NONE,
            tx_start: 0,
            tag,
            peer_qpn,
            peer_slot: NONE,
            series: [NONE; 2],
            psn: PsnTracker::default(),
            mtu_log2: mtu_log2(mtu),
            ttl_max: 0,
            bits: transport_bits(transport) | main,
            rings: 0,
            counts: [0; HOT_COUNTS],
            tx_base: [0; HOT_COUNTS],
        }
    }
    #[inline]
    fn has(&self, flag: u8) -> bool {
        self.bits & flag != 0
    }
    /// See [`FlowTable::went_idle`].
    #[inline]
    fn went_idle(&self, horizon: u64, idle_ns: u64) -> bool {
        self.has(TX_OPEN) && horizon > self.idle_at(idle_ns)
    }
    /// When the open transmission goes idle if no packet comes: the first packet time
    /// past this one ends it.
    #[inline]
    fn idle_at(&self, idle_ns: u64) -> u64 {
        self.last_ts.saturating_add(idle_ns)
    }
    /// Whether a packet of `opcode` is counted in [`Cold::opcodes`]: any but the flow's
    /// first opcode (see [`Hot::main_op`]).
    #[inline]
    fn counts_in_cold(&self, opcode: u8) -> bool {
        opcode != self.main_op || !self.has(MAIN_OP)
    }
    /// Whether a packet of this flow is the second copy of one it counted already: a
    /// mirror that takes both the copy a router received and the copy it sent on (both
    /// ports of a routed hop mirrored) delivers each packet twice, the second with a TTL
    /// one less. A packet is such a copy when its TTL is one lower than the flow's packets
    /// had just before (the last at most `--duplicate-window` earlier: a path that changed
    /// by more hops is no mirror's second copy) and, for a request, its
    /// PSN was seen already (a request whose first copy the mirror lost is counted). A
    /// retransmission, which crosses the mirrored router again, comes with the higher TTL
    /// again and counts as one. Otherwise the packet's TTL becomes the flow's, unless the
    /// packet is late (see [`FlowTable::late`]).
    #[inline]
    fn mirror_duplicate(&mut self, window: u64, p: &RocePacket<'_>, opcode: u8, ts: u64, late: bool) -> bool {
        if u16::from(p.ttl) + 1 == u16::from(self.ttl_max)
            && window > 0
            && ts.saturating_sub(self.last_ts) <= window
            && (!is_request(opcode) || self.psn.is_behind(p.bth.psn()))
        {
            return true;
        }
        self.ttl_max = if late { self.ttl_max } else { p.ttl };
        false
    }
    /// Whether a late packet may be the first copy (before the mirrored router: its TTL one
    /// higher) of one whose second copy counted already, on a flow whose packets come
    /// twice (it has had `duplicates` second copies, see [`Hot::mirror_duplicate`];
    /// `window` 0: none are looked for): its TTL one above the flow's latest packets'.
    fn may_be_first_copy(&self, window: u64, duplicates: u64, p: &RocePacket<'_>) -> bool {
        window > 0 && duplicates > 0 && u16::from(p.ttl) == u16::from(self.ttl_max) + 1
    }
    /// Packets of the open transmission so far.
    #[inline]
    fn tx_packets(&self) -> u64 {
        self.counts[0] - self.tx_base[0]
    }
    /// Whether the open transmission is short (fewer than `min_packets` packets, changing
    /// none of the counters in `keep`: see `FlowTable::keep_mask`).
    #[inline]
    fn is_short(&self, min_packets: u64, keep: u16) -> bool {
        self.tx_packets() < min_packets && self.tx_mask & keep == 0
    }
    /// Path MTU in bytes, 0 while unknown.
    #[inline]
    fn mtu(&self) -> u32 {
        if self.mtu_log2 == 0 {
            0
        } else {
            1 << self.mtu_log2
        }
    }
    #[inline]
    fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.bits |= flag;
        } else {
            self.bits &= !flag;
        }
    }
    #[inline]
    fn transport(&self) -> Transport {
        TRANSPORTS[usize::from(self.bits & TRANSPORT_BITS)]
    }
    /// Whether the flow's transport is [`Transport::Cnp`] (its first packet was a CNP):
    /// one compare of the bits, not a lookup.
    #[inline]
    fn is_cnp(&self) -> bool {
        self.bits & TRANSPORT_BITS == CNP_BITS
    }
    fn set_transport(&mut self, t: Transport) {
        self.bits = (self.bits & !TRANSPORT_BITS) | transport_bits(t);
    }
    #[inline]
    fn dst_qpn(&self) -> u32 {
        self.tag & QPN_MASK
    }
    #[inline]
    fn vantage(&self) -> Vantage {
        if self.tag & STORAGE_TAG != 0 {
            Vantage::Storage
        } else {
            Vantage::Compute
        }
    }
    /// The key, when it is an IPv4 one (else it is in [`Cold::key`]).
    #[inline]
    fn narrow_key(&self) -> Option<FlowKey> {
        (self.tag & WIDE_TAG == 0).then(|| FlowKey {
            vantage: self.vantage(),
            src: IpAddr::V4(((self.addrs >> 32) as u32).into()),
            dst: IpAddr::V4((self.addrs as u32).into()),
            dst_qpn: self.dst_qpn(),
        })
    }
    /// The slot of the `acks` (0) or `reads` (1) ring a new request goes to, moving on.
    fn next_ring_slot(&mut self, ring: usize) -> usize {
        let shift = 4 * ring;
        let at = (self.rings >> shift) & 0xF;
        let next = (at + 1) % PENDING as u8;
        self.rings = (self.rings & !(0xF << shift)) | (next << shift);
        usize::from(at)
    }
    fn peek_ring_slot(&self, ring: usize) -> usize {
        usize::from((self.rings >> (4 * ring)) & 0xF)
    }
}

/// A request in order after a READ whose span was taken with the path MTU unknown (the
/// flow expected its next PSN anywhere up to `hi`, where that READ's widest span ends): its
/// PSN is where the requester, which knows the MTU, put the READ's end. The READ awaiting
/// its response takes that span, so that a later READ's last response, past it, does not
/// answer it when its own was lost.
#[cold]
#[inline(never)]
fn fit_read_span(e: &Hot, c: &mut Cold, psn: u32, hi: u32) {
    let p = &mut c.reads[(e.peek_ring_slot(1) + PENDING - 1) % PENDING];
    let span = psn.wrapping_sub(p.psn()) & 0x00FF_FFFF;
    if p.live() && (p.psn() + p.span) & 0x00FF_FFFF == hi && (1..p.span).contains(&span) {
        // Not exact: the request after the READ may be after another one lost before the
        // mirror.
        p.span = span;
    }
}

/// The rest of a flow: what only some packets, the intervals and the transmissions read.
#[derive(Debug, Clone)]
#[repr(C, align(64))]
struct Cold {
    /// READ Requests awaiting their last response (two cache lines; the next slot is in
    /// [`Hot::rings`], as the next of the flow's [`Acks`] is).
    reads: [Pending; PENDING],
    key: FlowKey,
    opcodes: OpcodeCounts,
    /// Transmissions reported one by one since the last interval was handed over.
    ended: u32,
    /// While the flow's pair is not known: the highest PSN an ACK of it acknowledged that
    /// could not tell the pair apart (see [`FlowTable::learn_pair`]); [`NO_PSN`] if none.
    ambiguous_acked: u32,
    /// The connection CM last announced for the flow (its ConnectRequest's communication
    /// id; `NONE` if none): a reply repeated for it restarts nothing.
    cm_conn: u32,
    /// The time of the flow's latest message end sent again while its first copy was
    /// still in the ring of message ends (which keeps the first copy's time, for its
    /// latency); `NO_TIME` if none. With the ring's newest, a transmission's finish (see
    /// [`Transmission::last_message_ns`]). Asked for with `rest`'s counters of a request
    /// sent again (`FlowTable::prefetch_next`): the layout leaves it a line of its own.
    resent_end: u64,
    /// Every counter but the four in [`Hot`] (which stay 0 here), since the flow began.
    /// Placed (as `tx_base` is) so that the counters a request out of sequence changes,
    /// `retx_packets` to `out_of_window`, share one line (see the assertion below).
    rest: FlowCounts,
    /// The counters of `rest` that [`Hot::tx_mask`] names, as they were when the open
    /// transmission began.
    tx_base: FlowCounts,
    /// The totals when the last interval was handed over.
    reported: FlowCounts,
}

/// A request sent again (or after a gap) changes `retx_packets` to `out_of_window` in
/// `rest`, and the first change of a transmission saves them in `tx_base`: one line each,
/// which `FlowTable::prefetch_next` asks for (two lines each, had they straddled).
const _: () = {
    use std::mem::offset_of;
    const fn one_line(counts: usize) -> bool {
        (counts + offset_of!(FlowCounts, retx_packets)) / 64
            == (counts + offset_of!(FlowCounts, out_of_window)) / 64
    }
    assert!(one_line(offset_of!(Cold, rest)) && one_line(offset_of!(Cold, tx_base)));
};

/// Short transmissions ended since the last hand-over (see
/// [`FlowTable::with_min_transmission_packets`]): how many, their packets and their bytes.
/// Kept apart from the rest of the flow, four flows a line ([`FlowTable::short`]): where
/// each QP sends a message every few milliseconds, every packet ends its flow's short
/// transmission before it, and this line is then the only one outside the hot entry the
/// flow's packets touch. Aligned so that it never straddles two lines.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(16))]
struct Short(u32, u32, u64);

/// A flow's message ends awaiting their ACK (see [`Hot::acks_live`]), two lines.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, align(64))]
struct Acks([Pending; PENDING]);

impl Cold {
    fn new(key: FlowKey, opcode: u8) -> Self {
        Self {
            reads: [Pending::default(); PENDING],
            key,
            opcodes: OpcodeCounts::new(opcode),
            rest: FlowCounts::default(),
            tx_base: FlowCounts::default(),
            reported: FlowCounts::default(),
            ended: 0,
            ambiguous_acked: NO_PSN,
            cm_conn: NONE,
            resent_end: NO_TIME,
        }
    }
}

/// `rest` with the four hot counters put in.
fn with_hot(mut c: FlowCounts, hot: &[u64; HOT_COUNTS]) -> FlowCounts {
    c.packets = hot[0];
    c.bytes = hot[1];
    c.payload_bytes = hot[2];
    c.messages = hot[3];
    c
}

/// Request operations: their PSNs advance the requester's sequence (docs/METRICS.md, "PSN
/// analysis").
#[inline]
fn is_request(opcode: u8) -> bool {
    CLASSES[usize::from(opcode)] & REQUEST != 0
}

const REQUEST: u8 = 1;
const RESPONSE: u8 = 2;
const FULL_SIZE: u8 = 4;

/// What each opcode is ([`REQUEST`], [`RESPONSE`], [`FULL_SIZE`]), looked up in one load
/// per packet instead of decided by comparisons each time.
static CLASSES: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut op = 0;
    while op < 256 {
        let (group, low) = ((op >> 5) as u8, (op & 0x1F) as u8);
        let request = (matches!(group, 0 | 1 | 5) && matches!(low, 0x00..=0x0C | 0x13 | 0x14 | 0x16 | 0x17))
            || (group == 0 && matches!(low, op::FLUSH | op::ATOMIC_WRITE));
        let response = matches!(group, 0 | 5) && matches!(low, 0x0D..=0x12);
        let full_size = matches!(group, 0 | 1 | 5)
            && matches!(
                low,
                op::SEND_FIRST
                    | op::SEND_MIDDLE
                    | op::WRITE_FIRST
                    | op::WRITE_MIDDLE
                    | op::READ_RESPONSE_FIRST
                    | op::READ_RESPONSE_MIDDLE
            );
        t[op] = request as u8 * REQUEST + response as u8 * RESPONSE + full_size as u8 * FULL_SIZE;
        op += 1;
    }
    t
};

/// The last packet of a request message (or a single-packet request).
#[inline]
fn ends_message(low: u8) -> bool {
    matches!(low, 0x02..=0x05 | 0x08..=0x0C | 0x13 | 0x14 | 0x16 | 0x17 | op::FLUSH | op::ATOMIC_WRITE)
}

/// A packet that must be full-size (First or Middle of a multi-packet message): its payload
/// is the path MTU.
#[inline]
fn full_size(opcode: u8) -> bool {
    CLASSES[usize::from(opcode)] & FULL_SIZE != 0
}

/// The PSN through which an ACKNOWLEDGE packet acknowledges requests: its own for an ACK,
/// the one before for a NAK (which names the PSN it refuses); `None` for other packets.
pub fn acked_psn(opcode: u8, ext: &Tracked, psn: u32) -> Option<(u32, AckKind)> {
    if opcode & 0x1F != op::ACKNOWLEDGE || !acknowledged(opcode) {
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

/// The PSN through which a READ Response First, Last or Only, or an ATOMIC Acknowledge,
/// acknowledges requests when its AETH says ACK: its own. The responder executes requests
/// in PSN order, so such a response acknowledges every request before it as well: a WRITE
/// or SEND sent before a READ completes at its requester when the READ's response comes,
/// whether or not an ACKNOWLEDGE of its own follows. `None` for other packets.
#[inline]
pub fn implied_ack(opcode: u8, ext: &Tracked, psn: u32) -> Option<u32> {
    let low = opcode & 0x1F;
    let answers = matches!(
        low,
        op::READ_RESPONSE_FIRST | op::READ_RESPONSE_LAST | op::READ_RESPONSE_ONLY | op::ATOMIC_ACKNOWLEDGE
    );
    if !answers || !acknowledged(opcode) {
        return None;
    }
    matches!(ext.aeth?.kind(), AckKind::Ack { .. }).then_some(psn)
}

/// Whether a request of this opcode is answered by its responder (RC, 000xxxxx, and XRC,
/// 101xxxxx): its READs and message ends await their answer for `rdma_read` and `rc_ack`.
#[inline]
fn acknowledged(opcode: u8) -> bool {
    matches!(opcode >> 5, 0 | 5)
}

/// Whether a packet of this opcode travels the way its QP's requests do: a request, or a
/// packet that answers nothing (a CNP). Its flow's key is then the QP's request direction.
#[inline]
fn requests_side(opcode: u8) -> bool {
    is_request(opcode) || !is_response(opcode)
}

/// Responses carry the requester's PSNs: ACKs and READ / atomic responses (they answer
/// requests of the paired flow).
#[inline]
pub fn is_response(opcode: u8) -> bool {
    CLASSES[usize::from(opcode)] & RESPONSE != 0
}

/// Puts flow `i`, whose hot part is `h`, on the list of flows to hand over at the end of the
/// interval (`changed`), once.
#[inline]
fn note_change(h: &mut Hot, changed: &mut Vec<u32>, i: u32) {
    if !h.has(CHANGED) {
        h.set(CHANGED, true);
        changed.push(i);
    }
}

/// Closes the open transmission of a flow (its hot part and short counts given) if it is
/// too short to say anything of its own (see `FlowTable::with_min_transmission_packets`):
/// counted in the flow's interval, where its packets are already. Its packets and bytes come from the hot
/// part. Returns whether it was; a longer one is left open, to be reported with all its
/// counters (`FlowTable::report_transmission`), which closes it.
#[inline]
fn close_short(h: &mut Hot, s: &mut Short, min_packets: u64, keep: u16) -> bool {
    if !h.is_short(min_packets, keep) {
        return false;
    }
    let packets = h.tx_packets();
    h.set(TX_OPEN, false);
    let bytes = h.counts[1] - h.tx_base[1];
    s.0 = s.0.saturating_add(1);
    s.1 = s.1.saturating_add(packets as u32);
    s.2 += bytes;
    true
}

/// Counter `field` of a flow's cold counters ([`Cold::rest`]), to add to, its entry's two
/// parts given. While a transmission is open, its value at the transmission's start is
/// saved first, the first time the transmission changes it (see [`Hot::tx_mask`]): one
/// word written, on the line of the counter's base, where saving every counter read three
/// lines and wrote three (a retransmission storm changes a counter in every transmission).
#[inline]
fn rest_field<'c>(h: &mut Hot, c: &'c mut Cold, field: fn(&mut FlowCounts) -> &mut u64) -> &'c mut u64 {
    if h.has(TX_OPEN) {
        let bit = 1u16 << (c.rest.index_of(field) - HOT_COUNTS as u32);
        if h.tx_mask & bit == 0 {
            h.tx_mask |= bit;
            *field(&mut c.tx_base) = *field(&mut c.rest);
        }
    }
    field(&mut c.rest)
}

pub struct FlowTable {
    index: FlowIndex,
    /// The flows, by slot: what packets touch, and the rest.
    hot: Vec<Hot>,
    cold: Vec<Cold>,
    /// Each flow's short transmissions since the last hand-over, by slot (16 bytes a
    /// flow: a dense array that stays in the cache better than the cold part does).
    short: Vec<Short>,
    /// Each flow's ring of message ends awaiting their ACK, by slot (128 bytes a flow: a
    /// dense array that stays in the last-level cache, where the cold part does not).
    acks: Vec<Acks>,
    max_flows: usize,
    idle_ns: u64,
    /// `--mtu`: overrides what is learned.
    forced_mtu: Option<u32>,
    /// Request flows from one host to another, for learning QP pairs.
    pairs: HashMap<(Vantage, IpAddr, IpAddr), [u32; PAIR_SLOTS], ahash::RandomState>,
    /// QP pairs (and path MTU) announced by CM, for flows not seen yet: the peer's QPN,
    /// the MTU and the PSN the flow's requests start at (if CM said), per direction.
    announced: FifoMap<FlowKey, (u32, u32, Option<u32>, u32)>,
    /// Flows whose transmission was still open at the last hand-over (they may have had no
    /// packet since), and the spare list the next hand-over fills (each has room for every
    /// flow).
    carried: Vec<u32>,
    carried_next: Vec<u32>,
    /// The latest packet time seen (see [`FlowTable::advance`]): a transmission idle for
    /// `--flow-idle` before it has ended, whether or not it was looked at since.
    horizon: u64,
    /// Flows that counted something since the last interval was handed over.
    changed: Vec<u32>,
    /// `--flow-expire`.
    expire_ns: u64,
    /// `--min-transmission-packets`: shorter transmissions are counted, not reported.
    min_tx_packets: u64,
    /// `--check-icrc`: packets whose ICRC is wrong are trusted no further.
    check_icrc: bool,
    /// The cold counters (bits as in [`Hot::tx_mask`]) that make a transmission that
    /// changed them a row however few its packets: the NAKs, which an operator looks for
    /// and the collective step analysis takes from the answering flow's transmissions.
    keep_mask: u16,
    /// Where the sweep for an expired flow goes on from.
    hand: u32,
    /// See [`FlowTable::next_idle`] (`u64::MAX`: none).
    open_due: u64,
    /// Packets of flows that did not fit (the table was full).
    pub untracked_packets: u64,
    /// Requests pushed out of a flow's ring of 8 awaiting their answer (see
    /// [`Forgotten::rdma_requests`](crate::metrics::snapshot::Forgotten)), on flows without
    /// NVMe capsules.
    pub requests_pushed_out: u64,
    /// The flows that did not fit (see [`FlowTable::needed`]).
    untracked_flows: Refused,
    /// Flows whose slot went to a new flow after `--flow-expire` without a packet.
    pub expired_flows: u64,
    /// `--duplicate-window`: how long after a flow's packet a copy with a lower TTL can be
    /// its mirror's second copy (0: never).
    duplicate_window_ns: u64,
    /// The latencies of the requests one response answers (see [`FlowTable::answer`]).
    answered: [u64; PENDING],
    /// With `--evidence-dir`: the losses, NAKs and congestion marks seen, for the evidence.
    pub signals: Signals,
    /// The slot the last packet recorded counted in (`NONE`: none), for the evidence.
    last_recorded: u32,
    /// The last packet recorded was a request behind its flow's expected PSN, for the I/O
    /// tracker (see [`FlowTable::was_sent_again`]).
    sent_again: bool,
    /// Some flow counted an NVMe/RDMA capsule (so an ended transmission asks whether its
    /// connection carries them, see [`Transmission::nvme`]; where none did, it need not
    /// read its paired flow's entry to know).
    capsules_seen: bool,
}

/// One side of a connection CM announced: its address, its QPN, and the PSN its requests
/// start at (the starting PSN of the other side's message: a ConnectRequest or ConnectReply
/// says what its sender expects to receive; `None`: not said).
#[derive(Debug, Clone, Copy)]
pub struct QpEnd {
    pub ip: IpAddr,
    pub qpn: u32,
    pub start_psn: Option<u32>,
}

/// What [`FlowTable::record`] made of a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// Counted in the flow of this slot.
    Flow(u32),
    /// The table was full: counted as untracked.
    Untracked,
    /// A second copy of a packet the flow counted already (see
    /// [`Hot::mirror_duplicate`]): counted as such, and nothing else.
    Duplicate,
    /// A packet whose ICRC is wrong (`--check-icrc`; see [`FlowTable::with_icrc_check`]):
    /// counted in its flow, its ICRC error too, and trusted no further.
    Corrupt,
}

impl FlowTable {
    pub fn new(max_flows: usize, idle_ns: u64, forced_mtu: Option<u32>) -> Self {
        let h = || ahash::RandomState::new();
        let hot = Vec::with_capacity(max_flows);
        let cold = Vec::with_capacity(max_flows);
        let short = Vec::with_capacity(max_flows);
        let acks = Vec::with_capacity(max_flows);
        memory::advise_huge(&hot);
        memory::advise_huge(&acks);
        memory::advise_huge(&cold);
        memory::advise_huge(&short);
        Self {
            // The index sizes itself at twice the flows (see `FlowIndex::new`).
            index: FlowIndex::new(max_flows),
            hot,
            cold,
            short,
            acks,
            max_flows,
            idle_ns: idle_ns.max(1),
            forced_mtu,
            // Twice the room: entries are removed when slots are reused, and a hash map that
            // is more than half full rehashes into a larger allocation when its deleted
            // entries use up the spare room.
            pairs: HashMap::with_capacity_and_hasher(2 * max_flows, h()),
            announced: FifoMap::new(crate::defaults::MAX_ANNOUNCED_FLOWS),
            carried: Vec::with_capacity(max_flows),
            carried_next: Vec::with_capacity(max_flows),
            horizon: 0,
            changed: Vec::with_capacity(max_flows),
            expire_ns: crate::defaults::FLOW_EXPIRE_NS,
            min_tx_packets: 1,
            check_icrc: false,
            keep_mask: {
                let mut c = FlowCounts::default();
                let mut bit =
                    |f: fn(&mut FlowCounts) -> &mut u64| 1u16 << (c.index_of(f) - HOT_COUNTS as u32);
                bit(|c| &mut c.nak_seq) | bit(|c| &mut c.nak_rnr) | bit(|c| &mut c.nak_other)
            },
            hand: 0,
            open_due: u64::MAX,
            untracked_packets: 0,
            requests_pushed_out: 0,
            capsules_seen: false,
            untracked_flows: Refused::default(),
            expired_flows: 0,
            duplicate_window_ns: 0,
            answered: [0; PENDING],
            signals: Signals::default(),
            last_recorded: NONE,
            sent_again: false,
        }
    }

    /// A packet whose copy with a higher TTL the flow had within `ns` before can be that
    /// copy's second (see [`Hot::mirror_duplicate`]); 0 never.
    pub fn with_duplicate_window(mut self, ns: u64) -> Self {
        self.duplicate_window_ns = ns;
        self
    }

    /// A flow without a packet for `ns` of packet time gives its slot to a new flow when
    /// the table is full.
    pub fn with_expiry(mut self, ns: u64) -> Self {
        self.expire_ns = ns.max(1);
        self
    }

    /// Transmissions of fewer than `n` packets, unless they carried a NAK, end without a
    /// [`FlowEvent::Ended`]: the flow counts them (`short_transmissions` and their packets
    /// and bytes) in its interval instead. 1 (the table's own default) reports every
    /// transmission.
    pub fn with_min_transmission_packets(mut self, n: u64) -> Self {
        self.min_tx_packets = n;
        self
    }

    /// Checks every packet's ICRC (`--check-icrc`): one whose ICRC is wrong is counted in
    /// its flow with its ICRC error, and trusted no further (see `corrupt`):
    /// [`Recorded::Corrupt`].
    pub fn with_icrc_check(mut self, on: bool) -> Self {
        self.check_icrc = on;
        self
    }

    /// Memory [`FlowTable::with_announced`] allocates for `n` flows announced by CM.
    pub const fn announced_bytes(n: usize) -> usize {
        FifoMap::<FlowKey, (u32, u32, Option<u32>, u32)>::allocated_bytes(n)
    }

    /// Room for `n` flows announced by CM before their first packet (the oldest is
    /// forgotten beyond it).
    pub fn with_announced(mut self, n: usize) -> Self {
        self.announced = FifoMap::new(n);
        self
    }

    /// The `--max-flows` that would have tracked every flow (0: every flow was tracked).
    /// An upper bound: flows that left would have made room for some.
    pub fn needed(&self) -> u64 {
        match self.untracked_flows.estimate() {
            0 => 0,
            n => self.max_flows as u64 + n,
        }
    }

    /// Whether [`FlowTable::needed`] is a floor (see [`Refused::saturated`]).
    pub fn needed_is_floor(&self) -> bool {
        self.untracked_flows.saturated()
    }

    /// Whether [`FlowTable::announced_needed`] is a floor (see [`FifoMap::needed_is_floor`]).
    pub fn announced_needed_is_floor(&self) -> bool {
        self.announced.needed_is_floor()
    }

    /// The `--max-announced-flows` that would have kept every announced flow that came
    /// (see [`FifoMap::needed`]).
    pub fn announced_needed(&self) -> Option<u64> {
        self.announced.needed()
    }

    /// Announced flows forgotten to make room.
    pub fn announced_forgotten(&self) -> u64 {
        self.announced.forgotten
    }

    /// Memory the table allocates for `max_flows`: the slab, and the index and pairing hash
    /// maps, made with room for twice the flows.
    pub const fn allocated_bytes(max_flows: usize) -> usize {
        max_flows
            * (std::mem::size_of::<Hot>()
                + std::mem::size_of::<Cold>()
                + std::mem::size_of::<Short>()
                + std::mem::size_of::<Acks>())
            + FlowIndex::allocated_bytes(max_flows)
            + 2 * max_flows * std::mem::size_of::<u32>()
            + hash_map_bytes(
                2 * max_flows,
                std::mem::size_of::<((Vantage, IpAddr, IpAddr), [u32; PAIR_SLOTS])>(),
            )
    }

    pub fn len(&self) -> usize {
        self.hot.len()
    }

    /// The slot of a tracked flow.
    #[inline]
    pub fn find(&self, key: &FlowKey) -> Option<u32> {
        self.find_ref(self.key_ref(key), &|| *key)
    }

    /// The slot of a tracked flow whose key (`key` makes it, if needed) is `r`: the compact
    /// key in the hot line decides, and for a key that is not an IPv4 pair the full key in
    /// the cold part.
    #[inline]
    fn find_ref(&self, r: FlowRef, key: &impl Fn() -> FlowKey) -> Option<u32> {
        self.index.find(r.hash, |i| self.holds(i, r, key))
    }

    /// Whether slot `i` is in use and holds the flow `r` (of key `key()`).
    #[inline]
    fn holds(&self, i: u32, r: FlowRef, key: &impl Fn() -> FlowKey) -> bool {
        self.hot.get(i as usize).is_some_and(|h| {
            h.addrs == r.addrs
                && h.tag == r.tag
                && (r.tag & WIDE_TAG == 0 || self.cold[i as usize].key == key())
        })
    }

    /// The key of flow `i`.
    #[inline]
    fn key(&self, i: u32) -> FlowKey {
        self.hot[i as usize].narrow_key().unwrap_or_else(|| self.cold[i as usize].key)
    }

    // --- prefetching, for a burst of packets ---------------------------------------------
    //
    // A worker handed a burst looks at all its packets before it tracks any (the l3fwd
    // pattern): it prefetches each packet's index bucket, then the hot lines of the flow
    // that bucket names and the line that counts the packet's opcode, then what the packet
    // will touch next (the slot of the ring its request goes to; for a response, the
    // paired flow and its ring), so that the burst's cache misses overlap instead of
    // following one another. Hints only: nothing here changes state.

    /// The flow of key (`vantage`, `src`, `dst`, `dst_qpn`), for its lookup.
    #[inline(always)]
    pub fn flow_ref(&self, vantage: Vantage, src: &IpAddr, dst: &IpAddr, dst_qpn: u32) -> FlowRef {
        let (addrs, tag) = compact_parts(vantage, src, dst, dst_qpn);
        let hash = if tag & WIDE_TAG == 0 {
            self.index.hash_narrow(addrs, tag)
        } else {
            self.index.hash(&FlowKey { vantage, src: *src, dst: *dst, dst_qpn })
        };
        FlowRef { hash, addrs, tag }
    }

    /// [`FlowTable::flow_ref`] of a whole key.
    #[inline]
    fn key_ref(&self, key: &FlowKey) -> FlowRef {
        self.flow_ref(key.vantage, &key.src, &key.dst, key.dst_qpn)
    }

    /// Step 1: the index bucket of a key's hash.
    #[inline]
    pub fn prefetch_index(&self, hash: KeyHash) {
        self.index.prefetch(hash);
    }

    /// Step 2: the hot lines of the entry the bucket names (after step 1 has had time).
    #[inline]
    pub fn prefetch_entry(&self, hash: KeyHash) -> Option<u32> {
        let i = self.index.peek(hash)?;
        let h = self.hot.get(i as usize)?;
        memory::prefetch(h as *const Hot, HOT_LINES);
        Some(i)
    }

    /// Step 3 (after step 2 has had time): for a response, the paired flow's hot line and
    /// the ring it answers; for an RC request that ends a message or reads, the ring slot it
    /// goes to (the whole ring if the request is out of sequence, whose first copy is looked
    /// for there); for a request out of sequence, the counters it will change; for a packet
    /// not of the flow's first opcode, the line counting it.
    #[inline(always)]
    pub fn prefetch_next(&self, slot: u32, opcode: u8, psn: u32) {
        let Some(h) = self.hot.get(slot as usize) else { return };
        let low = opcode & 0x1F;
        if h.counts_in_cold(opcode) {
            // Not the flow's first opcode: its counter in the cold part.
            let c = &self.cold[slot as usize];
            memory::prefetch(&c.opcodes.group as *const u8, 1);
            memory::prefetch(&c.opcodes.own[usize::from(low)] as *const u64, 1);
        }
        if self.went_idle(slot) {
            // Its transmission went idle: the packet ends it first, in the flow's short
            // counts, or, if long enough to be reported and it changed them, with the cold
            // counters and their base.
            if h.is_short(self.min_tx_packets, self.keep_mask) {
                memory::prefetch_all(&self.short[slot as usize]);
            } else if h.tx_mask != 0 {
                let c = &self.cold[slot as usize];
                memory::prefetch_all(&c.rest);
                memory::prefetch_all(&c.tx_base);
            }
        }
        let out_of_sequence = is_request(opcode) && !h.psn.expects(psn);
        if out_of_sequence {
            // A retransmission or a gap: the counters it changes (from `retx_packets` to
            // `out_of_window`, one line), and the transmission's base of them that the
            // first change saves (one line).
            let c = &self.cold[slot as usize];
            for counts in [&c.rest, &c.tx_base] {
                memory::prefetch(&counts.retx_packets as *const u64, 1);
            }
        }
        if is_response(opcode) {
            if let Some(p) = self.hot.get(h.peer_slot as usize) {
                memory::prefetch(p as *const Hot, 1);
                // An ACK or atomic acknowledgement reads the message ends awaiting an ACK, a
                // READ response the READs awaiting it and (its AETH) those message ends too.
                let acks = &self.acks[h.peer_slot as usize].0;
                if matches!(low, op::ACKNOWLEDGE | op::ATOMIC_ACKNOWLEDGE) {
                    memory::prefetch(acks.as_ptr(), 2);
                } else {
                    memory::prefetch(self.cold[h.peer_slot as usize].reads.as_ptr(), 2);
                    if low != op::READ_RESPONSE_MIDDLE {
                        memory::prefetch(acks.as_ptr(), 2);
                    }
                }
            }
        } else if acknowledged(opcode) && ends_message(low) {
            let (ring, which) = if low == op::READ_REQUEST {
                (&self.cold[slot as usize].reads, 1)
            } else {
                (&self.acks[slot as usize].0, 0)
            };
            if out_of_sequence {
                // Most likely sent again: the whole ring (two lines) is searched for its
                // first copy (`holds`), not only the slot it may go to; a message end found
                // there takes its time in the cold part.
                memory::prefetch(ring.as_ptr(), 2);
                if which == 0 {
                    memory::prefetch(&self.cold[slot as usize].resent_end as *const u64, 1);
                }
            } else {
                memory::prefetch(&ring[h.peek_ring_slot(which)] as *const Pending, 1);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.hot.is_empty()
    }

    // --- ending transmissions ----------------------------------------------------------

    /// The counters of flow `i` since it began.
    fn totals(&self, i: u32) -> FlowCounts {
        with_hot(self.cold[i as usize].rest, &self.hot[i as usize].counts)
    }

    /// The counters of `i`'s open transmission.
    fn tx_counts(&self, i: u32) -> FlowCounts {
        let h = &self.hot[i as usize];
        let mut hot = [0; HOT_COUNTS];
        for (d, (now, base)) in hot.iter_mut().zip(h.counts.iter().zip(&h.tx_base)) {
            *d = now - base;
        }
        let rest = if h.tx_mask != 0 {
            let c = &self.cold[i as usize];
            c.rest.since_masked(&c.tx_base, u32::from(h.tx_mask) << HOT_COUNTS)
        } else {
            FlowCounts::default()
        };
        with_hot(rest, &hot)
    }

    /// Counter `field` of flow `i`'s cold counters, to add to (see [`rest_field`]).
    #[inline]
    fn rest_field(&mut self, i: u32, field: fn(&mut FlowCounts) -> &mut u64) -> &mut u64 {
        rest_field(&mut self.hot[i as usize], &mut self.cold[i as usize], field)
    }

    /// Ends flow `i`'s open transmission: a short one counted in the flow's interval
    /// ([`close_short`]), a longer one reported with all its counters.
    #[inline]
    fn close_transmission(&mut self, i: u32, out: &mut impl FnMut(FlowEvent)) {
        if !close_short(
            &mut self.hot[i as usize],
            &mut self.short[i as usize],
            self.min_tx_packets,
            self.keep_mask,
        ) {
            self.report_transmission(i, out);
            return;
        }
        self.note_change(i);
    }

    /// Ends a transmission long enough to be reported: with all its counters, to `out`.
    #[inline(never)]
    fn report_transmission(&mut self, i: u32, out: &mut impl FnMut(FlowEvent)) {
        let counts = self.tx_counts(i);
        let h = &mut self.hot[i as usize];
        h.set(TX_OPEN, false);
        let (transport, start_ns, end_ns) = (h.transport(), h.tx_start, h.last_ts);
        // The message end the request ring took last, or one sent again after it whose
        // first copy the ring held, if this transmission's.
        let last = self.acks[i as usize].0[(h.peek_ring_slot(0) + PENDING - 1) % PENDING];
        let c = &mut self.cold[i as usize];
        let last_message_ns = [(last.span != 0).then_some(last.ts), Some(c.resent_end)]
            .into_iter()
            .flatten()
            .filter(|t| (start_ns..=end_ns).contains(t))
            .max();
        c.ended = c.ended.saturating_add(1);
        self.note_change(i);
        let nvme = self.capsules_seen && self.carries_nvme(i);
        let (key, peer_qpn) = (self.key(i), self.peer_qpn(i));
        out(FlowEvent::Ended(Transmission {
            key,
            transport,
            start_ns,
            end_ns,
            last_message_ns,
            nvme,
            peer_qpn,
            counts,
        }));
    }

    /// Packet time moved on to `now`: a transmission idle for `--flow-idle` before it has
    /// ended. It is closed when its flow is next looked at (see [`FlowTable::settle`]) or
    /// at the next hand-over ([`FlowTable::end_idle`]), whichever comes first, with the same
    /// result as ending it as soon as it went idle.
    #[inline]
    pub fn advance(&mut self, now: u64) {
        self.horizon = self.horizon.max(now);
    }

    /// Before an interval is handed over: ends the transmissions that went idle by the
    /// latest time seen, among the flows that may have one open (those with packets since
    /// the last hand-over, and those whose transmission was open then), so that each ends
    /// in the interval in which it went idle. The flows whose transmission is still open are
    /// kept for the next call. Work in proportion to the flows active, never a scan of the
    /// table; the flows are prefetched [`VISIT_LOOKAHEAD`] ahead.
    pub fn end_idle(&mut self, out: &mut impl FnMut(FlowEvent)) {
        self.visit_open(false, out);
    }

    /// Ends every open transmission (end of input, shutdown): those carried over from the
    /// last hand-over, then those of the flows with packets since.
    pub fn close_all(&mut self, out: &mut impl FnMut(FlowEvent)) {
        self.visit_open(true, out);
    }

    /// Visits the flows that may have a transmission open (carried over from the last
    /// hand-over, then those with packets since) and ends theirs if it went idle, or
    /// with `all` whatever it is; keeps those still open for the next visit.
    fn visit_open(&mut self, all: bool, out: &mut impl FnMut(FlowEvent)) {
        let mut next = std::mem::take(&mut self.carried_next);
        next.clear();
        let mut due = u64::MAX;
        // Carried flows with packets since are in `changed`, and are looked at there.
        for k in 0..self.carried.len() {
            if let Some(&a) = self.carried.get(k + VISIT_LOOKAHEAD) {
                memory::prefetch(&self.hot[a as usize] as *const Hot, HOT_LINES);
            }
            let i = self.carried[k];
            let h = &self.hot[i as usize];
            if !h.has(TX_OPEN) || h.has(CHANGED) {
                continue;
            }
            if all || self.went_idle(i) {
                // A short one puts the flow in `changed`, where its count is handed over.
                self.close_transmission(i, out);
            } else {
                due = due.min(self.hot[i as usize].idle_at(self.idle_ns));
                next.push(i);
            }
        }
        for k in 0..self.changed.len() {
            if let Some(&a) = self.changed.get(k + VISIT_LOOKAHEAD) {
                memory::prefetch(&self.hot[a as usize] as *const Hot, HOT_LINES);
            }
            let i = self.changed[k];
            if all && self.hot[i as usize].has(TX_OPEN) {
                self.close_transmission(i, out);
            } else {
                self.settle(i, out);
            }
            if self.hot[i as usize].has(TX_OPEN) {
                due = due.min(self.hot[i as usize].idle_at(self.idle_ns));
                next.push(i);
            }
        }
        self.carried_next = std::mem::replace(&mut self.carried, next);
        self.open_due = due;
    }

    /// When the first transmission left open by the last [`FlowTable::end_idle`] goes idle
    /// if none of the flows has a packet before (`None`: none was left open). Exact right
    /// after that call; a packet since makes it later, but for one that opens a transmission
    /// before the last packet of its flow (a late copy, a clock that stepped back), which
    /// the next hand-over ends.
    pub fn next_idle(&self) -> Option<u64> {
        (self.open_due != u64::MAX).then_some(self.open_due)
    }

    /// Whether flow `i`'s transmission has ended by now: it went idle for `--flow-idle`
    /// before the latest time seen, though it was not closed yet. Flows whose state is
    /// about to be read or changed end it first (see `settle`), and every flow that may
    /// have one open is looked at before each hand-over (`end_idle`), so that every result
    /// is what ending each transmission as soon as it went idle would give.
    #[inline]
    fn went_idle(&self, i: u32) -> bool {
        self.hot[i as usize].went_idle(self.horizon, self.idle_ns)
    }

    /// Ends flow `i`'s transmission if it went idle (see `went_idle`).
    #[inline]
    fn settle(&mut self, i: u32, out: &mut impl FnMut(FlowEvent)) {
        if self.went_idle(i) {
            self.close_transmission(i, out);
        }
    }

    // --- per packet ---------------------------------------------------------------------

    fn slot(
        &mut self,
        key: impl Fn() -> FlowKey,
        seen: &Seen,
        transport: Transport,
        opcode: u8,
        now: u64,
        out: &mut impl FnMut(FlowEvent),
    ) -> Option<u32> {
        let r = seen.flow.unwrap_or_else(|| self.key_ref(&key()));
        // The slot the burst's prefetch found under the hash, if it still holds this key (a
        // slot holds one flow, and a key is in one slot at most): the index is not probed
        // twice.
        if let Some(i) = seen.hint.filter(|&i| self.holds(i, r, &key)) {
            return Some(i);
        }
        if let Some(i) = self.find_ref(r, &key) {
            return Some(i);
        }
        self.new_flow(key(), r.hash, transport, opcode, now, out)
    }

    /// A new flow's slot (a free one, or one reclaimed from an expired flow), or `None` if
    /// the table is full.
    #[inline(never)]
    fn new_flow(
        &mut self,
        key: FlowKey,
        hash: KeyHash,
        transport: Transport,
        opcode: u8,
        now: u64,
        out: &mut impl FnMut(FlowEvent),
    ) -> Option<u32> {
        let reuse = if self.hot.len() < self.max_flows {
            None
        } else {
            match self.reclaim(now, out) {
                Some(i) => Some(i),
                None => {
                    self.untracked_flows.note_key(&key);
                    return None;
                }
            }
        };
        let (peer_qpn, mtu, start, conn) = self.announced.remove(&key).unwrap_or((NONE, 0, None, NONE));
        let (mut hot, mut cold) = (Hot::new(&key, transport, opcode, peer_qpn, mtu), Cold::new(key, opcode));
        cold.cm_conn = conn;
        // Its requests start where CM said: a first request lost upstream is a gap.
        if let Some(psn) = start {
            hot.psn.restart_at(psn);
        }
        let i = match reuse {
            Some(i) => {
                self.hot[i as usize] = hot;
                self.cold[i as usize] = cold;
                self.short[i as usize] = Short::default();
                self.acks[i as usize] = Acks::default();
                i
            }
            None => {
                self.hot.push(hot);
                self.cold.push(cold);
                self.short.push(Short::default());
                self.acks.push(Acks::default());
                (self.hot.len() - 1) as u32
            }
        };
        self.index.insert(hash, i);
        Some(i)
    }

    /// A slot for a new flow in a full table: the first of a few, from where the last sweep
    /// stopped, whose flow has had no packet for `--flow-expire`, has no open transmission
    /// and has handed over all it counted. Its pairing and index entries are removed.
    fn reclaim(&mut self, now: u64, out: &mut impl FnMut(FlowEvent)) -> Option<u32> {
        let n = self.hot.len() as u32;
        for _ in 0..RECLAIM_PROBES.min(n as usize) {
            let i = self.hand % n;
            self.hand = (i + 1) % n;
            self.settle(i, out);
            let e = &self.hot[i as usize];
            if e.has(TX_OPEN)
                || e.last_ts.saturating_add(self.expire_ns) >= now
                || self.totals(i) != self.cold[i as usize].reported
                || self.short[i as usize].0 > 0
                || self.cold[i as usize].ended > 0
            {
                continue;
            }
            let (key, peer, paired) = (self.key(i), e.peer_slot, e.has(IN_PAIR_INDEX));
            self.index.remove(self.key_ref(&key).hash, i);
            if peer != NONE {
                self.unpair_from(peer, i);
            }
            if paired {
                self.unindex_request_flow(i);
            }
            self.expired_flows += 1;
            return Some(i);
        }
        None
    }

    #[inline]
    fn reverse_index(&self, i: u32) -> Option<u32> {
        let e = &self.hot[i as usize];
        if e.peer_slot != NONE {
            return Some(e.peer_slot);
        }
        if e.peer_qpn == NONE {
            return None;
        }
        self.find_reverse(i)
    }

    /// The paired direction of a flow whose slots are not linked yet, by its key.
    #[inline(never)]
    fn find_reverse(&self, i: u32) -> Option<u32> {
        let e = &self.hot[i as usize];
        let k = self.key(i);
        self.find(&FlowKey { vantage: k.vantage, src: k.dst, dst: k.src, dst_qpn: e.peer_qpn })
    }

    /// The path MTU for a QP's READ spans: `--mtu`, else learned on either direction.
    pub fn path_mtu(&self, i: u32) -> Option<u32> {
        if self.forced_mtu.is_some() {
            return self.forced_mtu;
        }
        let own = self.hot[i as usize].mtu();
        if own != 0 {
            return Some(own);
        }
        self.reverse_index(i).map(|r| self.hot[r as usize].mtu()).filter(|&m| m != 0)
    }

    /// Links two slots as the two directions of a QP pair, unlinking whatever either was
    /// linked to before (a QPN reused by a new connection), so links are always two-way.
    fn link_slots(&mut self, a: u32, b: u32) {
        for (x, y) in [(a, b), (b, a)] {
            let old = self.hot[x as usize].peer_slot;
            if old != NONE && old != y {
                self.unpair_from(old, x);
            }
            self.hot[x as usize].peer_slot = y;
        }
    }

    /// `x` loses its pair `from` (which now pairs with another flow, or leaves the table):
    /// its link, and its peer QPN if that named `from`, so that it is not linked back.
    fn unpair_from(&mut self, x: u32, from: u32) {
        let q = self.hot[from as usize].dst_qpn();
        let e = &mut self.hot[x as usize];
        if e.peer_slot == from {
            e.peer_slot = NONE;
            // Unpaired again: a candidate for pairing at its next request.
            e.set(IN_PAIR_INDEX, false);
        }
        if e.peer_qpn == q {
            e.peer_qpn = NONE;
        }
    }

    fn set_pair(&mut self, a: u32, b: u32) {
        // Paired, neither flow is a candidate for another's pairing any more: out of the
        // index of request flows, so that its room goes to flows still unpaired.
        for x in [a, b] {
            if self.hot[x as usize].has(IN_PAIR_INDEX) {
                self.unindex_request_flow(x);
            }
            self.hot[x as usize].set(IN_PAIR_INDEX, true);
        }
        let (qa, qb) = (self.hot[a as usize].dst_qpn(), self.hot[b as usize].dst_qpn());
        self.hot[a as usize].peer_qpn = qb;
        self.hot[b as usize].peer_qpn = qa;
        self.link_slots(a, b);
        let m = self.hot[a as usize].mtu_log2.max(self.hot[b as usize].mtu_log2);
        self.hot[a as usize].mtu_log2 = m;
        self.hot[b as usize].mtu_log2 = m;
    }

    /// Learns the pair of a response flow from the PSN it acknowledges: the one request
    /// flow between the same hosts (the other way) whose next PSN is just past it.
    /// `acked`: the PSN up to which the response acknowledges messages. A response that
    /// cannot tell the pair apart is remembered by it: once the pair is known, the message
    /// ends it covered give no `rc_ack` sample (their first ACK may have been it, or one
    /// before it), and those after it are answered as usual.
    fn learn_pair(&mut self, resp: u32, psn: u32, acked: Option<u32>) {
        let k = self.key(resp);
        let Some(slots) = self.pairs.get(&(k.vantage, k.dst, k.src)) else { return };
        let mut found = NONE;
        for &c in slots.iter().filter(|&&c| c != NONE) {
            let Some(behind) = self.hot[c as usize].psn.before_next(psn) else { continue };
            if (1..=ACK_WINDOW).contains(&behind) {
                if found != NONE {
                    // Ambiguous: wait for a later acknowledgement.
                    if let Some(a) = acked {
                        self.cold[resp as usize].ambiguous_acked = a;
                    }
                    return;
                }
                found = c;
            }
        }
        if found != NONE {
            self.forget_ambiguous_acked(resp, found);
            self.set_pair(resp, found);
        }
    }

    /// Response flow `resp` pairs with request flow `req`: what an acknowledgement of `resp`
    /// that could not tell the pair apart covered (see `Cold::ambiguous_acked`) gives no
    /// sample.
    fn forget_ambiguous_acked(&mut self, resp: u32, req: u32) {
        let ambiguous = std::mem::replace(&mut self.cold[resp as usize].ambiguous_acked, NO_PSN);
        if ambiguous != NO_PSN {
            self.drop_acked_before_pairing(req, ambiguous);
        }
    }

    /// The message ends of request flow `r` awaiting an ACK that an acknowledgement up to
    /// `acked` covered before the flow's pair was known: answered, without a sample.
    #[cold]
    fn drop_acked_before_pairing(&mut self, r: u32, acked: u32) {
        let (ring, live) = (&mut self.acks[r as usize].0, &mut self.hot[r as usize].acks_live);
        let mut look = *live;
        while look != 0 {
            let k = look.trailing_zeros() as usize;
            look &= look - 1;
            let p = &mut ring[k % PENDING];
            if p.live() && acked.wrapping_sub(p.psn()) & 0x00FF_FFFF < ACK_WINDOW {
                p.answered();
                *live &= !(1 << k);
            }
        }
    }

    /// Puts an unpaired request flow in the index of request flows between its hosts, the
    /// candidates for pairing. The index holds [`PAIR_SLOTS`] unpaired flows per host pair
    /// (a flow leaves it once paired); a flow that finds no room tries again later (see
    /// [`Self::request`]).
    #[inline(never)]
    fn index_request_flow(&mut self, i: u32) {
        let k = self.key(i);
        let slots = self.pairs.entry((k.vantage, k.src, k.dst)).or_insert([NONE; PAIR_SLOTS]);
        if let Some(s) = slots.iter_mut().find(|s| **s == NONE) {
            *s = i;
            self.hot[i as usize].set(IN_PAIR_INDEX, true);
        }
    }

    /// Takes flow `i` out of the index of request flows (see [`Self::index_request_flow`]).
    fn unindex_request_flow(&mut self, i: u32) {
        let k = self.key(i);
        let hosts = (k.vantage, k.src, k.dst);
        if let Some(slots) = self.pairs.get_mut(&hosts) {
            for s in slots.iter_mut().filter(|s| **s == i) {
                *s = NONE;
            }
            if slots.iter().all(|s| *s == NONE) {
                self.pairs.remove(&hosts);
            }
        }
    }

    /// A CNP on flow `i` throttles the paired direction.
    fn attribute_cnp(&mut self, i: u32, ts: u64, out: &mut impl FnMut(FlowEvent)) {
        let target = self.reverse_index(i).or_else(|| {
            // Without a known pair, the one request flow between the hosts, if there is one.
            // A pair known (by CM) whose other direction is not in the table is the flow the
            // CNP throttles all the same: no other QP's flow is taken for it.
            if self.hot[i as usize].peer_qpn != NONE {
                return None;
            }
            let k = self.key(i);
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
                *self.rest_field(t, |c| &mut c.cnp) += 1;
                self.note_change(t);
                // Raised on the CNP's own flow (the packet that raises the event is `i`'s,
                // which `t` need not be paired with: a UC QP's, or a pair guessed) for
                // `t`'s QP, so that the event's flows are both.
                if self.signals.on {
                    self.raise_on(i, self.qp_of(t, true), Signal::Cnp, ts);
                }
            }
            None => {
                *self.rest_field(i, |c| &mut c.cnp_unattributed) += 1;
                self.signal(i, false, Signal::Cnp, ts);
            }
        }
    }

    /// Counts one RoCE packet of the flow whose key `key` makes (called only for a new flow,
    /// a key that is not an IPv4 pair, or a `seen` without the flow), seen as `seen` says (its time, length, and the
    /// flow's compact key and hash if found already), first ending transmissions that went
    /// idle. Returns the flow's slot, or why there is none.
    #[inline]
    pub fn record(
        &mut self,
        key: impl Fn() -> FlowKey,
        p: &RocePacket<'_>,
        seen: &Seen,
        rec: &mut LatencyRecorder,
        out: &mut impl FnMut(FlowEvent),
    ) -> Recorded {
        let Seen { wire_len, ts, .. } = *seen;
        self.advance(ts);
        let opcode = p.bth.opcode();
        let Some(i) = self.slot(key, seen, p.bth.transport(), opcode, ts, out) else {
            self.untracked_packets += 1;
            self.last_recorded = NONE;
            return Recorded::Untracked;
        };
        self.last_recorded = i;
        self.sent_again = false;
        // The entry's two parts are borrowed once, beside the table's other fields, for
        // what every packet does; the rare steps go through the table's methods.
        let (mut e, mut c) = (&mut self.hot[i as usize], &mut self.cold[i as usize]);
        note_change(e, &mut self.changed, i);
        if e.mirror_duplicate(self.duplicate_window_ns, p, opcode, ts, seen.late) {
            *rest_field(e, c, |c| &mut c.mirror_duplicates) += 1;
            return Recorded::Duplicate;
        }
        // Paired by CM before both directions were in the table (rare): linked below.
        let link = e.peer_slot == NONE && e.peer_qpn != NONE;
        // The transmission may have gone idle since its last packet: it ends before this
        // packet counts (`advance(ts)` above made `ts` part of the horizon). `settle`
        // written out on the entry borrowed already, the flow noted as changed above. A
        // packet more than `--flow-idle` before the transmission's last one (a clock that
        // stepped back; not a late copy, which the reorder window let through as such)
        // ends it too: the flow goes by the new clock from this packet on.
        let stepped_back =
            |e: &Hot| e.has(TX_OPEN) && !seen.late && e.last_ts.saturating_sub(ts) > self.idle_ns;
        if (e.went_idle(self.horizon, self.idle_ns) || stepped_back(e))
            && !close_short(e, &mut self.short[i as usize], self.min_tx_packets, self.keep_mask)
        {
            self.report_transmission(i, out);
            (e, c) = (&mut self.hot[i as usize], &mut self.cold[i as usize]);
        }
        if link {
            self.link_announced(i);
            (e, c) = (&mut self.hot[i as usize], &mut self.cold[i as usize]);
        }
        if !e.has(TX_OPEN) {
            e.set(TX_OPEN, true);
            e.tx_mask = 0;
            e.tx_start = ts;
            e.tx_base = e.counts;
            // Its first packet's time, not the last one's of the transmission before (a
            // late copy, a clock that stepped back).
            e.last_ts = ts;
        }
        e.last_ts = e.last_ts.max(ts);
        if e.is_cnp() && opcode != op::CNP {
            e.set_transport(p.bth.transport());
            c.opcodes.regroup(opcode);
        }
        e.counts[0] += 1;
        e.counts[1] += u64::from(wire_len);
        e.counts[2] += u64::from(p.payload_len);
        if full_size(opcode) && (256..=4096).contains(&p.payload_len) && p.payload_len.is_power_of_two() {
            e.mtu_log2 = mtu_log2(p.payload_len);
        }
        if e.counts_in_cold(opcode) {
            c.opcodes.add(opcode);
        }
        if p.ecn == 3 {
            *rest_field(e, c, |c| &mut c.ecn_ce) += 1;
            self.signal(i, requests_side(opcode), Signal::Ce, ts);
        }
        let corrupt = self.check_icrc && icrc::check(&p.icrc) == Some(false);
        if seen.late {
            self.late(i, p, opcode, corrupt, ts, out);
            return Recorded::Flow(i);
        }
        if corrupt {
            self.corrupt(i, p, opcode, ts);
            return Recorded::Corrupt;
        }

        if opcode == op::CNP {
            self.attribute_cnp(i, ts, out);
        } else if is_request(opcode) {
            self.request(i, p, opcode, ts, self.span(i, p, opcode & 0x1F));
        } else if is_response(opcode) {
            let ack = acked_psn(opcode, &p.exts, p.bth.psn());
            let acked = ack.map(|(psn, _)| psn).or_else(|| implied_ack(opcode, &p.exts, p.bth.psn()));
            // Paired first: a NAK that is the responder's first packet names its QP.
            if self.hot[i as usize].peer_qpn == NONE {
                self.learn_pair(i, p.bth.psn(), acked);
            }
            if let Some((_, kind @ (AckKind::Nak { .. } | AckKind::RnrNak { .. }))) = ack {
                self.count_nak(i, p.bth.psn(), kind, ts);
            }
            let low = opcode & 0x1F;
            let read_end =
                matches!(low, op::READ_RESPONSE_LAST | op::READ_RESPONSE_ONLY).then_some(p.bth.psn());
            self.answer(i, read_end, acked, ts, rec);
        }
        Recorded::Flow(i)
    }

    /// A response of flow `i` (its PSN `psn`, its AETH's kind `kind`, see [`acked_psn`]):
    /// its NAK, if it is one, counted: by kind, and by code in the flow's counters only (see
    /// `FlowCounts`). Rare: out of line.
    #[cold]
    #[inline(never)]
    fn count_nak(&mut self, i: u32, psn: u32, kind: AckKind, ts: u64) {
        match kind {
            AckKind::Nak { code: 0 } => {
                *self.rest_field(i, |c| &mut c.nak_seq) += 1;
                self.signal(i, false, Signal::NakSeq { psn }, ts);
            }
            AckKind::Nak { code } => {
                *self.rest_field(i, |c| &mut c.nak_other) += 1;
                let c = &mut self.cold[i as usize].rest;
                match code {
                    nak_code::INVALID_REQUEST => c.nak_invalid_request += 1,
                    nak_code::REMOTE_ACCESS_ERROR => c.nak_remote_access_error += 1,
                    nak_code::REMOTE_OPERATIONAL_ERROR => c.nak_remote_operational_error += 1,
                    nak_code::INVALID_RD_REQUEST => c.nak_invalid_rd_request += 1,
                    _ => {}
                }
            }
            AckKind::RnrNak { .. } => {
                *self.rest_field(i, |c| &mut c.nak_rnr) += 1;
                self.signal(i, false, Signal::RnrNak { psn }, ts);
            }
            _ => {}
        }
    }

    /// Flow `i` (from an NVMe target to its host) carried the data phase of an I/O whose
    /// command came on the target's QP `queue` (the I/O tracker found it by its R_Key and
    /// address): the flow of that QP the other way is its pair, if neither is paired yet.
    /// What CM would have said, learned from the data: an ACK need not tell the pair
    /// first, which, with more unpaired queues between two hosts than the index of request
    /// flows holds, can come only after their first completions.
    #[inline]
    pub fn pair_with_queue(&mut self, i: u32, queue: Option<u32>) {
        if let Some(q) = queue {
            let e = &self.hot[i as usize];
            if e.peer_slot == NONE && e.peer_qpn == NONE {
                self.pair_by_queue(i, q);
            }
        }
    }

    #[cold]
    #[inline(never)]
    fn pair_by_queue(&mut self, i: u32, queue: u32) {
        let k = self.key(i);
        let Some(r) = self.find(&FlowKey { vantage: k.vantage, src: k.dst, dst: k.src, dst_qpn: queue })
        else {
            return;
        };
        let other = &self.hot[r as usize];
        if r == i || other.peer_slot != NONE || other.peer_qpn != NONE {
            return;
        }
        // As `learn_pair` does, either way round (each flow may have had such ACKs).
        self.forget_ambiguous_acked(i, r);
        self.forget_ambiguous_acked(r, i);
        self.set_pair(i, r);
    }

    /// Paired by CM before both directions were in the table: links the slots now, unless
    /// the other direction has since paired with another flow.
    #[inline(never)]
    fn link_announced(&mut self, i: u32) {
        if let Some(r) = self.reverse_index(i) {
            let other = &self.hot[r as usize];
            if other.peer_slot == NONE || other.peer_qpn == self.hot[i as usize].dst_qpn() {
                self.set_pair(i, r);
            }
        }
    }

    /// The PSNs a request packet of flow `i` occupies.
    #[inline(always)]
    fn span(&self, i: u32, p: &RocePacket<'_>, low: u8) -> Span {
        if low == op::READ_REQUEST {
            match p.exts.reth {
                Some(r) => Span::read(r.dma_len, self.path_mtu(i)),
                None => Span::UNKNOWN_READ,
            }
        } else {
            Span::ONE
        }
    }

    /// A late packet (see [`Seen::late`]) of flow `i`, counted in it already: what does not
    /// depend on the order it came in is counted as for any packet (its ICRC error, a NAK,
    /// a CNP for the flow it throttles, a request in sequence); it answers nothing. A NAK
    /// or CNP that may be the first copy of one whose second copy counted already (see
    /// [`Hot::may_be_first_copy`]) is not counted again.
    #[cold]
    #[inline(never)]
    fn late(
        &mut self,
        i: u32,
        p: &RocePacket<'_>,
        opcode: u8,
        corrupt: bool,
        ts: u64,
        out: &mut impl FnMut(FlowEvent),
    ) {
        *self.rest_field(i, |c| &mut c.late_packets) += 1;
        let duplicates = self.cold[i as usize].rest.mirror_duplicates;
        let copy = self.hot[i as usize].may_be_first_copy(self.duplicate_window_ns, duplicates, p);
        if corrupt {
            self.count_icrc_error(i, opcode, ts);
        } else if copy && (opcode == op::CNP || is_response(opcode)) {
            // Its NAK or CNP counted with its second copy.
        } else if opcode == op::CNP {
            self.attribute_cnp(i, ts, out);
        } else if is_request(opcode) {
            self.late_request(i, p, opcode);
        } else if is_response(opcode) {
            if let Some((_, kind)) = acked_psn(opcode, &p.exts, p.bth.psn()) {
                self.count_nak(i, p.bth.psn(), kind, ts);
            }
        }
    }

    /// A late request (see [`Seen::late`]) of flow `i`: if its PSN is the one the flow
    /// expects next, nothing it could be judged against came before it in the flow, so its
    /// PSN and its message count as in sequence (else the request after it would read as
    /// a gap: a capture written from several queues puts a frame a microsecond out of
    /// order now and then). It awaits no answer: its answer, a packet of another flow, may
    /// have been analysed before it. Any other late request is left out of the PSN
    /// analysis: behind, it may be a late copy of one counted; ahead, the PSNs between may
    /// be late too.
    #[cold]
    #[inline(never)]
    fn late_request(&mut self, i: u32, p: &RocePacket<'_>, opcode: u8) {
        let psn = p.bth.psn();
        if !self.hot[i as usize].psn.expects(psn) {
            return;
        }
        let low = opcode & 0x1F;
        let span = self.span(i, p, low);
        let e = &mut self.hot[i as usize];
        if ends_message(low) {
            e.counts[3] += 1;
        }
        let outcome = e.psn.observe(psn, span);
        debug_assert_eq!(outcome, Outcome::InOrder);
    }

    /// A request packet of flow `i` of `span` (see [`FlowTable::span`]): its message, its
    /// PSN, and what it awaits an answer to. Inlined in the packet's path (the corrupt
    /// packets' cold path calls it too).
    #[inline(always)]
    fn request(&mut self, i: u32, p: &RocePacket<'_>, opcode: u8, ts: u64, span: Span) {
        let low = opcode & 0x1F;
        let psn = p.bth.psn();
        let (e, c) = (&mut self.hot[i as usize], &mut self.cold[i as usize]);
        if ends_message(low) {
            e.counts[3] += 1;
        }
        let widest = e.psn.widest_expected();
        let outcome = e.psn.observe(psn, span);
        if let (Some(hi), Outcome::InOrder) = (widest, outcome) {
            fit_read_span(e, c, psn, hi);
        }
        // Latency of RDMA on RC and XRC (the transports that acknowledge): a READ to its
        // last response, a message's last packet to the ACK that covers it (NVMe/RDMA
        // connections are left to the I/O tracker when the answer comes, by which time they
        // are known to carry capsules).
        if acknowledged(opcode) {
            // The oldest request still awaiting its answer gives way: counted where its
            // answer could have come (the flow's responses seen: it is paired), unless this
            // request is sent again (the one pushed out is likely its first copy, answered
            // with it); an NVMe connection's are the I/O tracker's. A request sent again
            // whose first copy the ring still holds (awaiting its answer or answered) is
            // that request: its latency runs from the first copy, once.
            let behind = matches!(outcome, Outcome::Retransmission { .. });
            let counted = |e: &Hot| e.peer_slot != NONE && !e.has(CAPSULES) && !behind;
            if low == op::READ_REQUEST {
                if !(behind && holds(&c.reads, psn)) {
                    let at = e.next_ring_slot(1);
                    if c.reads[at].live() && counted(e) {
                        self.requests_pushed_out += 1;
                    }
                    c.reads[at] = Pending::new(psn, span, ts);
                }
            } else if ends_message(low) && !matches!(low, op::COMPARE_SWAP | op::FETCH_ADD) {
                if behind && holds(&self.acks[i as usize].0, psn) {
                    // Its first copy keeps its place (and time); the transmission's finish
                    // is this copy's.
                    c.resent_end = ts;
                } else {
                    let at = e.next_ring_slot(0);
                    if e.acks_live & (1 << at) != 0 && counted(e) {
                        self.requests_pushed_out += 1;
                    }
                    self.acks[i as usize].0[at] = Pending::new(psn, Span::ONE, ts);
                    e.acks_live |= 1 << at;
                }
            }
        }
        match outcome {
            Outcome::InOrder => {}
            Outcome::Retransmission { episode } => {
                self.sent_again = true;
                *rest_field(e, c, |c| &mut c.retx_packets) += 1;
                *rest_field(e, c, |c| &mut c.retx_bytes) += u64::from(p.payload_len);
                if episode {
                    *rest_field(e, c, |c| &mut c.retx_episodes) += 1;
                    self.signal(i, true, Signal::Retransmission { psn }, ts);
                }
            }
            Outcome::Gap { skipped } => {
                *rest_field(e, c, |c| &mut c.gap_psns) += u64::from(skipped);
                // Tested here rather than in `signal`: the first PSN skipped is computed only
                // with evidence on (measured: 6 instructions a packet less on many_qps).
                if self.signals.on {
                    let first = psn.wrapping_sub(skipped) & 0x00FF_FFFF;
                    self.raise(i, true, Signal::Gap { psn: first, skipped }, ts);
                }
            }
            Outcome::OutOfWindow => *rest_field(e, c, |c| &mut c.out_of_window) += 1,
        }
        // A flow that found no room in the index tries again at its 2nd, 4th, 8th, ...
        // packet: a host pair whose room stays taken (flows that never pair) costs its other
        // flows a lookup now and then, not one a request.
        let e = &self.hot[i as usize];
        if !e.has(IN_PAIR_INDEX) && e.dst_qpn() != 1 && e.counts[0].is_power_of_two() {
            self.index_request_flow(i);
        }
    }

    /// A packet of flow `i` whose ICRC is wrong (`--check-icrc`), counted in its flow: its
    /// ICRC error, and as much analysis as can trust it. A request whose PSN reads as
    /// expected, or a little behind (a copy sent again: within the window an ACK may cover),
    /// is a request as it reads (its PSN, its message, its place awaiting an answer); one
    /// whose PSN jumps ahead or far behind most likely had its PSN hit: counted as the
    /// packet it reads as (a message's end among them), its PSN taken as the one expected.
    /// An answer is not analysed (it would answer what it cannot vouch for).
    #[cold]
    #[inline(never)]
    fn corrupt(&mut self, i: u32, p: &RocePacket<'_>, opcode: u8, ts: u64) {
        self.count_icrc_error(i, opcode, ts);
        if !is_request(opcode) {
            return;
        }
        let psn = p.bth.psn();
        // Nor a READ's DMA length: the request after it is in order anywhere from one PSN
        // on to the span its length gives (at least `UNKNOWN_READ_SPAN`, as for a READ
        // whose RETH was not captured, at most 2^21), so that a length hit neither moves
        // the sequence on (every later request a retransmission) nor makes a gap.
        let span = match self.span(i, p, opcode & 0x1F) {
            s if opcode & 0x1F == op::READ_REQUEST => {
                Span { min: 1, max: s.max.clamp(UNKNOWN_READ_SPAN, CORRUPT_READ_SPAN) }
            }
            s => s,
        };
        let e = &mut self.hot[i as usize];
        let near_behind = e.psn.is_behind(psn) && e.psn.before_next(psn).is_some_and(|b| b <= ACK_WINDOW);
        if e.psn.expects(psn) || near_behind {
            self.request(i, p, opcode, ts, span);
        } else {
            if ends_message(opcode & 0x1F) {
                e.counts[3] += 1;
            }
            e.psn.skip(span);
        }
    }

    /// Whether a flow or its paired direction carries NVMe/RDMA capsules (its RDMA
    /// latencies are then the I/O tracker's).
    fn carries_nvme(&self, i: u32) -> bool {
        self.hot[i as usize].has(CAPSULES)
            || self.reverse_index(i).is_some_and(|r| self.hot[r as usize].has(CAPSULES))
    }

    /// Counts an NVMe/RDMA command (or completion) capsule on a tracked flow.
    #[inline]
    pub fn count_capsule(&mut self, slot: u32, command: bool) {
        self.hot[slot as usize].set(CAPSULES, true);
        self.capsules_seen = true;
        if command {
            *self.rest_field(slot, |c| &mut c.nvme_commands) += 1;
        } else {
            *self.rest_field(slot, |c| &mut c.nvme_completions) += 1;
        }
    }

    /// Counts a packet of a tracked flow whose ICRC was wrong.
    #[inline]
    fn count_icrc_error(&mut self, slot: u32, opcode: u8, ts: u64) {
        *self.rest_field(slot, |c| &mut c.icrc_errors) += 1;
        self.signal(slot, requests_side(opcode), Signal::Icrc, ts);
    }

    /// The slot and vantage of the flow the last packet recorded counted in (a mirror's
    /// second copy included), once.
    pub fn take_last_recorded(&mut self) -> Option<(u32, Vantage)> {
        let i = std::mem::replace(&mut self.last_recorded, NONE);
        (i != NONE).then(|| (i, self.hot[i as usize].vantage()))
    }

    /// The QP a flow's packets belong to, by its request direction: the flow's own key
    /// (`request`), or the other way round with the QPN the paired direction is sent to.
    pub fn qp_of(&self, i: u32, request: bool) -> Qp {
        let k = self.key(i);
        if request {
            Qp::of(&k)
        } else {
            Qp { src: k.dst, dst: k.src, dst_qpn: self.hot[i as usize].peer_qpn }
        }
    }

    /// With `--evidence-dir`, raises `signal` on flow `i` (see [`FlowTable::qp_of`] for
    /// `request`); nothing otherwise.
    #[inline]
    fn signal(&mut self, i: u32, request: bool, signal: Signal, ts: u64) {
        if self.signals.on {
            self.raise(i, request, signal, ts);
        }
    }

    #[cold]
    #[inline(never)]
    fn raise(&mut self, i: u32, request: bool, signal: Signal, ts: u64) {
        self.raise_on(i, self.qp_of(i, request), signal, ts);
    }

    /// Raises `signal` on flow `i`'s packet, for the QP `qp`.
    #[cold]
    fn raise_on(&mut self, i: u32, qp: Qp, signal: Signal, ts: u64) {
        let vantage = self.hot[i as usize].vantage();
        self.signals.raise(Raised { slot: i, vantage, qp, signal, ts });
    }

    /// The flows of a QP (both directions, at both vantages) into `out`, after `first`
    /// (a flow of it already known); returns how many `out` holds.
    pub fn qp_slots(&self, qp: &Qp, first: Option<u32>, out: &mut [u32; 8]) -> usize {
        let mut n = 0;
        let mut add = |s: u32, n: &mut usize| {
            if !out[..*n].contains(&s) && *n < out.len() {
                out[*n] = s;
                *n += 1;
            }
        };
        if let Some(s) = first {
            add(s, &mut n);
            if let Some(r) = self.reverse_index(s) {
                add(r, &mut n);
            }
        }
        for vantage in [Vantage::Compute, Vantage::Storage] {
            if let Some(s) = self.find(&FlowKey { vantage, src: qp.src, dst: qp.dst, dst_qpn: qp.dst_qpn }) {
                add(s, &mut n);
                if let Some(r) = self.reverse_index(s) {
                    add(r, &mut n);
                }
            }
        }
        n
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
        // A READ's last response answers the READ, and (its AETH) the messages before it.
        if let Some(psn) = read_end {
            self.answer_ring(r, 1, psn, nvme, ts, rec);
        }
        if let Some(psn) = acked {
            self.answer_ring(r, 0, psn, nvme, ts, rec);
        }
    }

    /// Answers the requests of flow `r` that a response covering `psn` answers, in its READ
    /// ring (`which` 1: the READs whose span holds `psn`) or its ACK ring (0: the message
    /// ends up to `psn`), recording their latencies unless the flow carries NVMe (`nvme`).
    #[inline(always)]
    fn answer_ring(
        &mut self,
        r: u32,
        which: usize,
        psn: u32,
        nvme: bool,
        ts: u64,
        rec: &mut LatencyRecorder,
    ) {
        let (ring, op_, within) = if which == 1 {
            (&mut self.cold[r as usize].reads, Op::RdmaRead, None)
        } else {
            (&mut self.acks[r as usize].0, Op::RcAck, Some(ACK_WINDOW))
        };
        // An answer more than `--flow-expire` after its request is no latency of it (the
        // flow's state could have been forgotten meanwhile): the request is answered,
        // without a sample. A transport retries long before that; a vantage that missed
        // the request's ACKs sees the PSNs used again much later (a new connection on the
        // QPs, a capture replayed) and would take that for the answer.
        let max_age = self.expire_ns;
        // The requests answered, and their latencies, in ring order (kept in the table's
        // own array, not one zeroed on the stack for every response).
        let samples = &mut self.answered;
        let mut n = 0;
        // The places to look at, in place order as before: for ACKs those the flow knows await
        // one (usually one or two of the eight), for READ responses all.
        let acks_live = &mut self.hot[r as usize].acks_live;
        let mut look = if which == 0 { *acks_live } else { u8::MAX };
        while look != 0 {
            let k = look.trailing_zeros() as usize;
            look &= look - 1;
            let p = &mut ring[k % PENDING];
            if !p.live() || ts < p.ts {
                continue;
            }
            let offset = psn.wrapping_sub(p.psn()) & 0x00FF_FFFF;
            if offset < within.unwrap_or(p.span.max(1)) {
                p.answered();
                if which == 0 {
                    *acks_live &= !(1 << k);
                }
                // The ring has PENDING entries, so n < PENDING here: the modulo (a mask)
                // only spares the bounds check.
                if ts - p.ts <= max_age {
                    samples[n % PENDING] = ts - p.ts;
                    n += 1;
                }
            }
        }
        if n == 0 || nvme {
            return;
        }
        // The flow remembers its series' slot: one lookup per run, not per sample.
        let mut cache = self.hot[r as usize].series[which];
        let slot = rec.cached_slot(&mut cache, || {
            let key = self.key(r);
            let segment = match key.vantage {
                Vantage::Compute => Segment::IoCompute,
                Vantage::Storage => Segment::IoStorage,
            };
            SeriesKey { initiator: key.src, target: key.dst, op: op_, segment }
        });
        self.hot[r as usize].series[which] = cache;
        for &v in &self.answered[..n] {
            rec.record_in(slot, v);
        }
    }

    /// Whether the last packet recorded was a request behind its flow's expected PSN: sent
    /// again by the transport, or missed at this vantage before (lost upstream of it) and
    /// resent. The I/O tracker tells the two apart by the capsules of the I/Os that
    /// finished (see `io::Packet`).
    #[inline]
    pub fn was_sent_again(&self) -> bool {
        self.sent_again
    }

    /// Where the I/O tracker last found this flow's connection state (see [`Hot::io_hint`]).
    #[inline]
    pub fn io_hint(&mut self, slot: u32) -> &mut u32 {
        &mut self.hot[slot as usize].io_hint
    }

    /// [`FlowTable::peer_qpn`] and [`FlowTable::io_hint`] together.
    #[inline]
    pub fn sender_and_hint(&mut self, slot: u32) -> (Option<u32>, &mut u32) {
        let h = &mut self.hot[slot as usize];
        ((h.peer_qpn != NONE).then_some(h.peer_qpn), &mut h.io_hint)
    }

    /// The QPN that sends a tracked flow's packets, if the pairing is known.
    pub fn peer_qpn(&self, slot: u32) -> Option<u32> {
        let q = self.hot[slot as usize].peer_qpn;
        (q != NONE).then_some(q)
    }

    /// Records what CM said about a connection: `a` (at `a_ip`, QPN `a_qpn`) talks to `b`.
    pub fn announce_pair(&mut self, vantage: Vantage, a: QpEnd, b: QpEnd, mtu: u32, conn: u32) {
        let ab = FlowKey { vantage, src: a.ip, dst: b.ip, dst_qpn: b.qpn };
        let ba = FlowKey { vantage, src: b.ip, dst: a.ip, dst_qpn: a.qpn };
        let (ia, ib) = (self.find(&ab), self.find(&ba));
        for (k, i, peer, start) in [(ab, ia, a.qpn, a.start_psn), (ba, ib, b.qpn, b.start_psn)] {
            match i {
                Some(i) => {
                    // A new connection on a QP pair the table tracks (a QPN reused): its
                    // requests start at the PSN CM announced, neither loss nor
                    // retransmission, and what the old connection awaited is answered no
                    // more.
                    // The connection announced already (a reply repeated), running:
                    // nothing starts again.
                    let same = self.cold[i as usize].cm_conn == conn && self.hot[i as usize].peer_qpn == peer;
                    if let Some(psn) = start.filter(|_| !same) {
                        self.restart_at(i, psn);
                    }
                    self.cold[i as usize].cm_conn = conn;
                    // What CM says overrides what was learned: a link to another flow goes.
                    let old = self.hot[i as usize].peer_slot;
                    if old != NONE && self.hot[old as usize].dst_qpn() != peer {
                        self.unpair_from(old, i);
                        self.hot[i as usize].peer_slot = NONE;
                    }
                    let e = &mut self.hot[i as usize];
                    e.peer_qpn = peer;
                    if mtu != 0 {
                        e.mtu_log2 = mtu_log2(mtu);
                    }
                }
                None => self.announced.insert(k, (peer, mtu, start, conn)),
            }
        }
        if let (Some(a), Some(b)) = (ia, ib) {
            self.set_pair(a, b);
        }
    }

    /// Flow `i`'s requests start again at `psn` (see [`FlowTable::announce_pair`]).
    fn restart_at(&mut self, i: u32, psn: u32) {
        let e = &mut self.hot[i as usize];
        e.psn.restart_at(psn);
        e.acks_live = 0;
        self.cold[i as usize].reads = [Pending::default(); PENDING];
    }

    /// Puts a flow on the list of flows to hand over at the end of the interval.
    #[inline]
    fn note_change(&mut self, i: u32) {
        note_change(&mut self.hot[i as usize], &mut self.changed, i);
    }

    /// Hands over every flow that changed in the interval, in slot order: only the flows on
    /// the list of changes are visited, not the whole table.
    pub fn drain_interval(&mut self, out: &mut Vec<FlowDelta>) {
        self.changed.sort_unstable();
        for k in 0..self.changed.len() {
            let i = self.changed[k];
            self.hot[i as usize].set(CHANGED, false);
            let totals = self.totals(i);
            let delta = totals.since(&self.cold[i as usize].reported);
            let Short(n, packets, bytes) = std::mem::take(&mut self.short[i as usize]);
            let short = ShortTransmissions { count: n.into(), packets: packets.into(), bytes };
            let reported = u64::from(std::mem::take(&mut self.cold[i as usize].ended));
            if delta == FlowCounts::default() && n == 0 && reported == 0 {
                continue;
            }
            let (key, transport) = (self.key(i), self.hot[i as usize].transport());
            let h = &self.hot[i as usize];
            let c = &mut self.cold[i as usize];
            if h.has(MAIN_OP) {
                // Every packet counted in the interval is of the flow's first opcode or
                // counted in `opcodes`.
                c.opcodes.add_many(h.main_op, delta.packets.saturating_sub(c.opcodes.total()));
            }
            out.push(FlowDelta {
                key,
                transport,
                counts: delta,
                short,
                reported,
                opcodes: c.opcodes.clone(),
                open_since: h.has(TX_OPEN).then_some(h.tx_start),
            });
            c.reported = totals;
            c.opcodes.clear();
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
        // The IBA's opcode table: ACKNOWLEDGE (RC 0x11, XRC 0xB1) and the READ and atomic
        // responses (0x0D-0x12) answer requests; UC has no responses (0x31), nor does UD.
        assert!(is_response(0x11) && is_response(0xB1) && is_response(0x0D) && is_response(0x12));
        assert!(!is_response(0x31) && !is_response(0x13) && !is_response(0x64) && !is_response(0x0C));
        // UC WRITE Middle (0x27) and SEND Middle (0x01) are full-size; SEND Only (0x04) is
        // not, nor is any UD opcode (0x6D).
        assert!(full_size(0x27) && full_size(0x01) && !full_size(0x04) && !full_size(0x6D));
    }
}

#[cfg(test)]
mod size {
    use super::*;

    /// docs/METRICS.md states the memory per flow; this keeps it true.
    #[test]
    fn bytes_per_flow_is_what_the_docs_say() {
        let (hot, cold, short, acks) = (
            std::mem::size_of::<Hot>(),
            std::mem::size_of::<Cold>(),
            std::mem::size_of::<Short>(),
            std::mem::size_of::<Acks>(),
        );
        let entry = hot + cold + short + acks;
        let mib = FlowTable::allocated_bytes(crate::defaults::MAX_FLOWS) as f64 / (1 << 20) as f64;
        println!(
            "entry {entry} bytes ({hot} hot, {cold} cold, {short} short, {acks} acks), table {mib:.1} MiB at the default bound"
        );
        assert_eq!(short, 16, "four flows' short counts to a line");
        assert_eq!(acks, 2 * 64, "the ring of message ends awaiting an ACK is two lines");
        assert_eq!(hot, HOT_LINES * 64, "the hot part is {hot} bytes: prefetch what it is");
        assert_eq!(std::mem::offset_of!(Hot, counts), 64, "the first line is full");
        assert!(
            entry <= 1360 && mib <= 104.0,
            "{entry} bytes per entry, {mib:.1} MiB: update docs/METRICS.md, RELIABILITY.md, DEPLOYMENT.md and defaults::MAX_FLOWS' note"
        );
    }
}

#[cfg(test)]
mod pairing {
    use super::*;
    use crate::metrics::latency::LatencyBatch;
    use crate::wire::build::RoceFrame;
    use crate::wire::ib_ext::{Aeth, ExtHeaders, Reth};
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
        feed_recording(t, f, ts, &mut LatencyRecorder::new(16, 0));
    }

    /// [`feed`], the latency samples going to `rec`.
    fn feed_recording(t: &mut FlowTable, f: &[u8], ts: u64, rec: &mut LatencyRecorder) {
        let Decoded::Roce(p) = decode_frame(f) else { panic!() };
        let key =
            FlowKey { vantage: Vantage::Compute, src: p.ip.src, dst: p.ip.dst, dst_qpn: p.bth.dest_qp() };
        let seen = Seen {
            source: 0,
            wire_len: f.len() as u32,
            ts,
            switch_clock: false,
            late: false,
            flow: None,
            hint: None,
        };
        t.record(|| key, &p, &seen, rec, &mut |_| {});
    }

    fn counts(t: &FlowTable, src: &str, dst: &str, qpn: u32) -> FlowCounts {
        let k = FlowKey {
            vantage: Vantage::Compute,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            dst_qpn: qpn,
        };
        t.totals(t.find(&k).unwrap())
    }

    /// A side of a connection CM announced.
    fn end(ip: &str, qpn: u32, start_psn: Option<u32>) -> QpEnd {
        QpEnd { ip: ip.parse().unwrap(), qpn, start_psn }
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
        t.announce_pair(Vantage::Compute, end(A, 1, None), end(B, 20, None), 1024, 1);
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

    /// A QP pair used again by a new connection: CM's ConnectRequest and ConnectReply say
    /// where each side's requests start, so the new connection's PSNs are neither
    /// retransmissions (2,000,000 behind the old ones) nor a gap; its first two requests
    /// lost upstream are a gap of 2 from the announced start. Without CM the same packets
    /// are ten retransmissions (what the table did before it read the starting PSN).
    #[test]
    fn a_connection_cm_announces_on_a_reused_qp_starts_at_its_starting_psn() {
        for announced in [true, false] {
            let mut t = FlowTable::new(64, 1_000_000, None);
            let write = |psn| frame(A, B, 0x0A, 20, psn, ExtHeaders::default(), 8);
            for k in 0..10 {
                feed(&mut t, &write(3_000_000 + k), 1 + u64::from(k));
            }
            feed(&mut t, &frame(B, A, 0x11, 1, 3_000_009, ack(), 0), 20);
            if announced {
                t.announce_pair(Vantage::Compute, end(A, 1, Some(1_000_000)), end(B, 20, Some(7)), 0, 1);
            }
            for k in 2..12 {
                feed(&mut t, &write(1_000_000 + k), 2_000_000_000 + u64::from(k));
            }
            let c = counts(&t, A, B, 20);
            let expected = if announced { (0, 2, 0) } else { (10, 0, 0) };
            assert_eq!((c.retx_packets, c.gap_psns, c.out_of_window), expected, "announced: {announced}");
        }
    }

    /// On a paired flow (its first message answered), sixteen messages outstanding, then
    /// one ACK covering them all: the flow's ring keeps the last 8 awaiting their ACK, and
    /// the 8 before them, pushed out unanswered, are counted (they give no sample).
    /// Answered ones give way uncounted; so do those of a flow whose answers are never seen
    /// (one direction mirrored) and those a go-back-N resend pushes out (the resend awaits
    /// the answer in their place).
    #[test]
    fn requests_pushed_out_of_the_ring_unanswered_are_counted() {
        let mut t = FlowTable::new(64, 1_000_000, None);
        feed(&mut t, &frame(A, B, 0x04, 20, 99, ExtHeaders::default(), 8), 1);
        feed(&mut t, &frame(B, A, 0x11, 1, 99, ack(), 0), 2);
        for k in 0..16 {
            feed(&mut t, &frame(A, B, 0x04, 20, 100 + k, ExtHeaders::default(), 8), 3 + u64::from(k));
        }
        feed(&mut t, &frame(B, A, 0x11, 1, 115, ack(), 0), 20);
        assert_eq!(t.requests_pushed_out, 8);
        for k in 16..32 {
            feed(&mut t, &frame(A, B, 0x04, 20, 100 + k, ExtHeaders::default(), 8), 20 + u64::from(k));
            feed(&mut t, &frame(B, A, 0x11, 1, 100 + k, ack(), 0), 21 + u64::from(k));
        }
        assert_eq!(t.requests_pushed_out, 8, "each answered before its place came round again");
        // Eight outstanding, a NAK for the fourth (answering the three before it), and
        // the five from it resent: never more than eight await an answer.
        for k in 132..140 {
            feed(&mut t, &frame(A, B, 0x04, 20, k, ExtHeaders::default(), 8), 100 + u64::from(k));
        }
        let nak = ExtHeaders { aeth: Some(Aeth::nak(nak_code::PSN_SEQUENCE_ERROR, 1)), ..Default::default() };
        feed(&mut t, &frame(B, A, 0x11, 1, 135, nak, 0), 300);
        for k in 135..140 {
            feed(&mut t, &frame(A, B, 0x04, 20, k, ExtHeaders::default(), 8), 200 + u64::from(k));
        }
        assert_eq!(t.requests_pushed_out, 8, "a resend takes its first copy's place");
        // One direction only: nothing could answer, nothing is counted.
        for k in 0..100 {
            feed(&mut t, &frame(A, B, 0x0A, 30, k, ExtHeaders::default(), 8), 1_000 + u64::from(k));
        }
        assert_eq!(t.requests_pushed_out, 8, "a flow never answered");
    }

    /// A message end whose ACK this vantage never saw, and an ACK covering its PSN 100 s
    /// later (the PSNs used again, or the capture replayed): no sample of 100 s. An answer
    /// within `--flow-expire` (60 s by default) is one: 30 s.
    #[test]
    fn an_answer_later_than_the_flow_expiry_gives_no_sample() {
        let mut t = FlowTable::new(64, 1_000_000, None);
        let mut rec = LatencyRecorder::new(16, 0);
        let s = 1_000_000_000;
        let mut at = |t: &mut FlowTable, f: Vec<u8>, ts: u64| feed_recording(t, &f, ts, &mut rec);
        at(&mut t, frame(A, B, 0x0A, 20, 99, ExtHeaders::default(), 8), 1);
        at(&mut t, frame(B, A, 0x11, 1, 99, ack(), 0), 2);
        at(&mut t, frame(A, B, 0x0A, 20, 100, ExtHeaders::default(), 8), 3);
        at(&mut t, frame(B, A, 0x11, 1, 100, ack(), 0), 3 + 100 * s);
        at(&mut t, frame(A, B, 0x0A, 20, 101, ExtHeaders::default(), 8), 4 + 100 * s);
        at(&mut t, frame(B, A, 0x11, 1, 101, ack(), 0), 4 + 130 * s);
        let mut batch = LatencyBatch::default();
        rec.drain(&mut batch);
        let samples: Vec<(u64, u64)> = batch.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        let n: u64 = samples.iter().map(|&(_, c)| c).sum();
        let longest = samples.iter().map(|&(v, _)| v).max().unwrap();
        assert_eq!(n, 2, "the first message's 1 ns and the third's 30 s: {samples:?}");
        assert!(longest >= 29 * s && longest <= 31 * s, "{longest}");
    }

    /// NAKs by code, as the AETH carries them (syndrome 011, the code in the low five bits):
    /// 1 invalid request, 2 remote access error, 3 remote operational error, 4 invalid RD
    /// request each under its name and in `nak_other`; a reserved code (5) in `nak_other`
    /// alone; a sequence error (0) in `nak_seq`.
    #[test]
    fn other_naks_are_counted_by_their_code() {
        let mut t = FlowTable::new(64, 1_000_000, None);
        for (k, code) in [1u8, 2, 3, 4, 5, 0, 3].into_iter().enumerate() {
            let nak = ExtHeaders { aeth: Some(Aeth::nak(code, 1)), ..Default::default() };
            feed(&mut t, &frame(B, A, 0x11, 1, 100 + k as u32, nak, 0), 1 + k as u64);
        }
        let c = counts(&t, B, A, 1);
        let got = [
            c.nak_invalid_request,
            c.nak_remote_access_error,
            c.nak_remote_operational_error,
            c.nak_invalid_rd_request,
            c.nak_other,
            c.nak_seq,
        ];
        assert_eq!(got, [1, 1, 2, 1, 6, 1]);
    }

    /// CM paired A's QP 1 with B's QP 20, which the table has not seen (not mirrored yet,
    /// or no room): a CNP to A's QP 1 throttles QP 20, not QP 30, the one other request
    /// flow from A to B, which the guess for flows without a known pair would take.
    #[test]
    fn a_cnp_of_a_known_pair_is_not_counted_on_another_qp() {
        let mut t = FlowTable::new(64, 1_000_000, None);
        t.announce_pair(Vantage::Compute, end(A, 1, None), end(B, 20, None), 1024, 1);
        feed(&mut t, &frame(A, B, 0x04, 30, 100, ExtHeaders::default(), 8), 1);
        feed(&mut t, &frame(B, A, 0x81, 1, 0, ExtHeaders::default(), 0), 2);
        assert_eq!((counts(&t, A, B, 30).cnp, counts(&t, B, A, 1).cnp_unattributed), (0, 1));
        // Once QP 20 is seen, the next CNP counts on it.
        feed(&mut t, &frame(A, B, 0x04, 20, 500, ExtHeaders::default(), 8), 3);
        feed(&mut t, &frame(B, A, 0x81, 1, 0, ExtHeaders::default(), 0), 4);
        assert_eq!((counts(&t, A, B, 20).cnp, counts(&t, A, B, 30).cnp), (1, 0));
    }

    #[test]
    fn a_short_transmission_with_a_nak_is_reported_all_the_same() {
        // Two ACKs within --flow-idle are a short transmission under a minimum of four
        // packets; a NAK and an ACK are reported: the NAK is what the answering flow says.
        const MS: u64 = 1_000_000;
        let nak = ExtHeaders { aeth: Some(Aeth::nak(0, 1)), ..Default::default() };
        let rnr = ExtHeaders { aeth: Some(Aeth::rnr_nak(1, 1)), ..Default::default() };
        let mut t = FlowTable::new(8, MS, None).with_min_transmission_packets(4);
        let mut ended = 0;
        for (first, at) in [(ack(), 0), (nak, 10 * MS), (rnr, 20 * MS)] {
            feed(&mut t, &frame(B, A, 0x11, 1, 100, first, 0), at);
            feed(&mut t, &frame(B, A, 0x11, 1, 101, ack(), 0), at + 1_000);
            t.advance(at + 5 * MS);
            t.end_idle(&mut |e| ended += usize::from(matches!(e, FlowEvent::Ended(_))));
        }
        let mut out = Vec::new();
        t.drain_interval(&mut out);
        assert_eq!((ended, out[0].short.count, out[0].short.packets), (2, 1, 2));
    }

    #[test]
    fn a_transmission_reported_in_a_later_interval_is_counted_in_that_one() {
        const MS: u64 = 1_000_000;
        let send = |psn| frame(A, B, 0x04, 10, psn, ExtHeaders::default(), 8);
        let mut t = FlowTable::new(8, MS, None).with_min_transmission_packets(2);
        for (psn, ts) in [(0, 0), (1, 1_000), (2, 2_000)] {
            feed(&mut t, &send(psn), ts);
        }
        // The interval ends while the transmission is open: its packets go, it does not.
        let (mut ended, mut out) = (0, Vec::new());
        t.end_idle(&mut |_| ended += 1);
        t.drain_interval(&mut out);
        assert_eq!((ended, out.len(), out[0].counts.packets, out[0].reported), (0, 1, 3, 0));
        // The next interval has no packet of the flow; the transmission went idle in it.
        out.clear();
        t.advance(5 * MS);
        t.end_idle(&mut |e| ended += usize::from(matches!(e, FlowEvent::Ended(_))));
        t.drain_interval(&mut out);
        assert_eq!(ended, 1);
        assert_eq!(out.len(), 1, "the flow is handed over for the transmission alone");
        assert_eq!((out[0].counts, out[0].short.count, out[0].reported), (FlowCounts::default(), 0, 1));
        // Nothing more after that.
        out.clear();
        t.drain_interval(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn a_full_table_gives_the_slot_of_a_long_idle_reported_flow_to_a_new_one() {
        const MS: u64 = 1_000_000;
        let send = |src, dst, qpn, psn| frame(src, dst, 0x04, qpn, psn, ExtHeaders::default(), 8);
        let mut t = FlowTable::new(3, MS / 10, None).with_expiry(10 * MS);
        // A's QP 10 at B and its ACK flow, paired by the ACK; then a flow that stays busy.
        feed(&mut t, &send(A, B, 10, 100), 0);
        feed(&mut t, &frame(B, A, 0x11, 1, 100, ack(), 0), 1);
        assert_ne!(t.hot[0].peer_slot, NONE, "paired");
        feed(&mut t, &send(B, A, 7, 0), 2);
        // Full, and nothing handed over yet: the new flow is not tracked.
        feed(&mut t, &send(A, B, 30, 0), 20 * MS);
        assert_eq!((t.untracked_packets, t.expired_flows), (1, 0));
        let mut out = Vec::new();
        t.advance(20 * MS);
        t.end_idle(&mut |_| {});
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
        assert_eq!(t.hot[1].peer_slot, NONE, "the ACK flow no longer points at the slot");
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
        assert_eq!((t.hot[0].peer_slot, t.hot[2].peer_slot), (2, 0));
        assert_eq!(t.hot[1].peer_slot, NONE, "the old direction no longer points at slot 0");
        // A late packet of the old direction does not take the pair back.
        feed(&mut t, &send(B, A, 1), 3);
        assert_eq!((t.hot[0].peer_slot, t.hot[2].peer_slot, t.hot[1].peer_slot), (2, 0, NONE));
        // CM then says A's QP 1 talks to B's QP 10: slots 0 and 1 pair, slot 2 is let go.
        t.announce_pair(Vantage::Compute, end(A, 1, None), end(B, 10, None), 0, 1);
        assert_eq!((t.hot[0].peer_slot, t.hot[1].peer_slot, t.hot[2].peer_slot), (1, 0, NONE));
        assert_eq!((t.hot[0].peer_qpn, t.hot[1].peer_qpn, t.hot[2].peer_qpn), (1, 10, NONE));
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
            t.path_mtu(
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
