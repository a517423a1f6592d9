//! NVMe/RDMA I/Os (docs/METRICS.md, "I/O quality"): each command followed from its capsule through its data phase
//! to its completion and the host's acknowledgement of it, at both vantages at once, to
//! give the latency each segment adds.
//!
//! An I/O is keyed by (host, target, CID, the target's QP number): the QP tells apart the
//! I/O queues between the same two hosts, which reuse the same CIDs; a completion whose
//! queue is not known yet (its flow not paired) looks among every queue's I/Os with its
//! CID. Its data phase is
//! found by the keyed SGL: a target's RDMA READ Request whose RETH names the command's R_Key
//! and address is that write's READ phase; its READ Responses, and the ACK that covers its
//! completion, are matched on the connection by PSN. Anchors are kept per vantage: a first
//! anchor keeps its first observation, a last anchor its last, and an I/O with a packet seen
//! twice at one vantage is flagged as retransmitted.

use super::bounded::{hash_map_bytes, FifoMap};
use super::evidence::{EventKind, IoRaised, Qp, Verdict};
use super::index::hash_hosts;
use super::list::{Linked, Links, List};
use super::psn::Span;
use super::recent::RecentKeys;
use super::vantage::Vantage;
use crate::metrics::latency::{LatencyRecorder, Op, Segment, SeriesKey, SLOT_UNKNOWN};
use crate::wire::nvme::{Command, CommandSet, Sgl, Sqe};
use std::cmp::Reverse;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::hash::{BuildHasher, BuildHasherDefault, Hash, Hasher};
use std::net::IpAddr;

const NONE: u32 = u32::MAX;
/// I/Os of one queue that one CID names at once (one, unless a vantage missed the
/// completion of the CID's last use and the other vantage still awaits its copy): beyond
/// this, the oldest ends (see [`IoTracker::command`]), so that a lookup by CID stays
/// bounded whatever the traffic. Also how many I/Os with its CID a completion whose queue
/// is not known looks at (oldest first).
const MAX_SAME_CID: usize = 256;
/// Per connection: READ phases and completions awaiting their answer.
const CONN_RING: usize = 16;
// `Conn::completions_live` has a bit per place.
const _: () = assert!(CONN_RING <= 16);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Write,
    InCapsule,
    Other,
}

impl Kind {
    fn op(self) -> Op {
        match self {
            Kind::Read => Op::NvmeRead,
            Kind::Write | Kind::InCapsule => Op::NvmeWrite,
            Kind::Other => Op::NvmeOther,
        }
    }
}

/// A map keyed by a hash computed already (see [`IoTracker::cid_key`]), which it takes as
/// it is.
type Hashed<V> = HashMap<u64, V, BuildHasherDefault<PassThrough>>;

/// The hasher of [`Hashed`]: a `u64` key is its own hash.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// (host, target, target QPN): an I/O queue's connection state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ConnKey(IpAddr, IpAddr, u32);

/// (initiator, target, op): the latency series of an I/O's segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PairKey(IpAddr, IpAddr, Op);

impl Hash for PairKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_hosts(&self.0, &self.1, self.2 as u64, h);
    }
}

impl Hash for ConnKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        hash_hosts(&self.0, &self.1, u64::from(self.2), h);
    }
}

/// A slot reference that notices when the slot was reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ref {
    slot: u32,
    generation: u32,
}

const NO_REF: Ref = Ref { slot: NONE, generation: 0 };

/// The oldest and the newest live I/O with one (host, target, CID), of every queue.
#[derive(Debug, Clone, Copy)]
struct Chain {
    first: Ref,
    last: Ref,
}

/// Where a walk over the live I/Os with one CID between two hosts starts: the oldest of
/// one queue's (`queue`, followed by `queue_next`), or of every queue's (followed by
/// `cid_next`); `key` is the (host, target, CID)'s [`IoTracker::cid_key`].
#[derive(Debug, Clone, Copy)]
struct CidWalk {
    first: Ref,
    key: u64,
    queue: bool,
}

#[derive(Debug, Clone, Copy, Default)]
struct Anchor([Option<u64>; 2]);

impl Anchor {
    /// Keeps the first observation; true if this vantage had seen it already.
    fn first(&mut self, v: usize, ts: u64) -> bool {
        let seen = self.0[v].is_some();
        self.0[v].get_or_insert(ts);
        seen
    }
    /// Keeps the last observation; true if this vantage had seen it already.
    fn last(&mut self, v: usize, ts: u64) -> bool {
        let seen = self.0[v].is_some();
        self.0[v] = Some(ts);
        seen
    }
    fn at(&self, v: usize) -> Option<u64> {
        self.0[v]
    }
}

#[derive(Debug, Clone)]
struct Io {
    generation: u32,
    live: bool,
    kind: Kind,
    host: IpAddr,
    target: IpAddr,
    target_qpn: u32,
    cid: u16,
    /// The data the command moves (its SGL's length; 0 for a command without data).
    bytes: u32,
    sqe_psn: u32,
    rkey: u32,
    va: u64,
    created: u64,
    sqe_first: Anchor,
    sqe_last: Anchor,
    read_request: Anchor,
    last_read_response: Anchor,
    /// A read's data phase: the target's RDMA WRITE (First or Only) into the host's buffer.
    data_write: Anchor,
    data_psn: Option<u32>,
    cqe: Anchor,
    ack: Anchor,
    /// A write whose data the target READs in several parts: the address its next READ
    /// starts at (a key of `IoTracker::by_key` names the I/O there too).
    next_va: Option<u64>,
    /// The READs of its data phase (each seen at a vantage first), and the last responses
    /// the storage vantage saw: more last responses there than READs is a READ phase sent
    /// again.
    reads: u8,
    read_ends_at_storage: u8,
    /// The PSN of the completion, once seen (a second copy is a retransmission).
    cqe_psn: Option<u32>,
    /// Per vantage: the PSN of the completion it saw. A mirror's two copies of a packet
    /// carry one PSN: two that differ are two completions (see [`Io::completions`]).
    cqe_psn_at: [Option<u32>; 2],
    retransmitted: bool,
    /// Its completion's place in its connection's ring went to a newer completion before
    /// the host's ACK came: the ACK is no longer looked for (see `IoTracker::acks_lost`).
    ack_lost: bool,
    /// Another live I/O named the same buffer (host, R_Key and address): its data phase
    /// cannot tell which of them it serves, and so names no queue (see
    /// [`IoTracker::data_write`]).
    shared_buffer: bool,
    /// Per vantage: a data phase it saw before any copy of the command was taken for this
    /// I/O (see [`IoTracker::claim_early`]): 1 + the READ parts it added (0: none).
    claimed: [u8; 2],
    /// Vantages (bit v) that saw the CID used again before this I/O's completion, while
    /// the other vantage still awaited its copy: the completion is lost there, and the I/O
    /// waits for the other vantage's (a mirror whose copy was dropped, its clock behind).
    gave_up: u8,
    /// When a vantage gave up (the time of the command there that used the CID again, on
    /// that vantage's clock; the last to give up).
    gave_up_ts: u64,
    /// Complete at the one vantage that saw it, waiting for the other's copies.
    waiting: bool,
    /// Place in the list of live I/Os, oldest first.
    links: Links,
    /// The next live I/O, newer, with the same (host, target, CID) on the same queue (see
    /// [`IoTracker::same_cid`]); `NO_REF` for the newest.
    queue_next: Ref,
    /// The live I/O before it, older, with the same (host, target, CID) on any queue;
    /// `NO_REF` for the oldest.
    cid_prev: Ref,
    /// The live I/O after it, newer, with the same (host, target, CID) on any queue;
    /// `NO_REF` for the newest.
    cid_next: Ref,
    /// Its (initiator, target, op)'s place in `IoTracker::places`, where the slots of the
    /// latency series it records and its place in the outcome counts are kept once looked
    /// up; `NONE` if there was no room.
    pair: u32,
}

impl Io {
    /// A read seen at the compute vantage: its compute segment needs the host's ACK of its
    /// completion.
    fn needs_ack(&self) -> bool {
        self.kind == Kind::Read && self.sqe_first.at(0).is_some()
    }

    /// Vantage `v` saw its command and awaits its completion still (neither seen there, nor
    /// given up on: see `gave_up`).
    fn awaits_completion(&self, v: usize) -> bool {
        self.sqe_first.at(v).is_some() && self.cqe.at(v).is_none() && self.gave_up & (1 << v) == 0
    }

    /// The times of its completion at each vantage, for its segments. Two vantages whose
    /// completions had different PSNs saw two completions: the target sends a queue's
    /// completions in PSN order, so the later one answered a later I/O with the CID, whose
    /// command that vantage missed, before its own copy of this one's came (the other
    /// vantage's copies behind it, or this I/O's completion lost there). That vantage's
    /// completion gives no segment.
    fn completions(&self) -> [Option<u64>; 2] {
        let mut at = [self.cqe.at(0), self.cqe.at(1)];
        if let [Some(a), Some(b)] = self.cqe_psn_at {
            if a != b {
                at[usize::from(psn_after(b, a))] = None;
            }
        }
        at
    }

    /// No vantage awaits its completion (each that saw its command saw the completion, or
    /// gave up on it).
    fn awaited_nowhere(&self) -> bool {
        (0..2).all(|v| !self.awaits_completion(v))
    }

    /// Some vantage saw its completion.
    fn saw_completion(&self) -> bool {
        (0..2).any(|v| self.cqe.at(v).is_some())
    }
}

impl Linked for Io {
    fn links(&mut self) -> &mut Links {
        &mut self.links
    }
}

/// How many PSNs after a message's first the packets of a message of `len` bytes may take
/// (path MTU `mtu` if known): at most 2^16, the window within which an answer is taken for
/// a request, however long the message says it is.
fn answer_psns(len: u32, mtu: Option<u32>) -> u32 {
    Span::read(len, mtu).max.min(1 << 16)
}

#[derive(Debug, Clone, Copy, Default)]
struct RingEntry {
    psn: u32,
    io: Option<Ref>,
}

#[derive(Debug, Clone, Copy)]
struct Conn {
    /// READ phases: the READ Request's PSN (a write's data may take several READs, each
    /// in a place of its own).
    reads: [RingEntry; CONN_RING],
    /// The length of the READ in each place of `reads`: with the path MTU, how many PSNs
    /// its responses take (a last response beyond them answers another READ, one not
    /// followed, say).
    read_lens: [u32; CONN_RING],
    /// Completions awaiting the host's ACK: the CQE's PSN.
    completions: [RingEntry; CONN_RING],
    /// The places of `completions` that hold one (bit k: place k), so that an ACK looks at
    /// those only, not at the whole ring.
    completions_live: u16,
    /// Reads' data phases: the PSN of the target's RDMA WRITE First into the host's buffer,
    /// whose Middle and Last packets take the PSNs after it (for a Middle or Last sent
    /// again, which names no buffer).
    writes: [RingEntry; CONN_RING],
    next_read: u8,
    next_completion: u8,
    next_write: u8,
    /// Per vantage: the command capsule whose SEND Last is still to come.
    open_capsule: [Ref; 2],
}

impl Conn {
    /// The places of `completions` that hold a completion awaiting the ACK, in ring order
    /// (bits of `completions_live` read as they were when asked).
    fn live_completions(&self) -> impl Iterator<Item = usize> {
        let mut look = self.completions_live;
        std::iter::from_fn(move || {
            (look != 0).then(|| {
                let k = look.trailing_zeros() as usize;
                look &= look - 1;
                k
            })
        })
    }
}

impl Default for Conn {
    fn default() -> Self {
        Self {
            reads: [RingEntry::default(); CONN_RING],
            read_lens: [0; CONN_RING],
            completions: [RingEntry::default(); CONN_RING],
            completions_live: 0,
            writes: [RingEntry::default(); CONN_RING],
            next_read: 0,
            next_completion: 0,
            next_write: 0,
            open_capsule: [NO_REF; 2],
        }
    }
}

/// Size classes of the I/Os that move data: up to 512 bytes, 1 KiB, 2 KiB, ... 1 MiB, and
/// larger.
pub const SIZE_CLASSES: usize = 13;

/// The largest size (bytes) in each class but the last, which has the rest.
pub const SIZE_CLASS_BOUNDS: [u64; SIZE_CLASSES - 1] = {
    let mut b = [0u64; SIZE_CLASSES - 1];
    let mut i = 0;
    while i < b.len() {
        b[i] = 512 << i;
        i += 1;
    }
    b
};

/// The class of an I/O of `bytes`.
pub fn size_class(bytes: u64) -> usize {
    SIZE_CLASS_BOUNDS.iter().position(|&b| bytes <= b).unwrap_or(SIZE_CLASSES - 1)
}

/// I/O outcomes per (initiator, target, op).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct IoCounts {
    pub completed: u64,
    pub timed_out: u64,
    /// Completed or timed out with a packet seen twice at one vantage.
    pub retransmitted: u64,
    /// Commands not followed because the table of pending I/Os was full.
    pub overflowed: u64,
    /// Still waiting for their completion when the run ended.
    pub unfinished: u64,
    /// Completed I/Os whose network segment came out below zero (the storage vantage's
    /// part longer than the compute vantage's I/O: the mirrors' delays moved, or a clock
    /// stepped, between the I/O's packets), recorded as 0.
    #[serde(default)]
    pub network_below_zero: u64,
    /// Data moved by the completed I/Os (their commands' SGL lengths).
    pub bytes: u64,
    /// Completed I/Os that moved data, per size class (see [`SIZE_CLASS_BOUNDS`]).
    pub size_classes: [u64; SIZE_CLASSES],
    /// The `nvme_other` commands seen (every one the tracker took, whatever its outcome),
    /// by command.
    #[serde(default, skip_serializing_if = "CommandCounts::is_empty")]
    pub opcodes: CommandCounts,
}

/// How many different commands [`CommandCounts`] counts apart.
pub const COMMAND_SLOTS: usize = 8;

/// Commands counted by command (set and opcode), in a fixed room: the first
/// [`COMMAND_SLOTS`] different commands each in a place of their own, any later one in
/// `rest`. In JSON, an object from each command's name (see [`Command`]) to its count, the
/// rest under `"other"`.
#[derive(Debug, Clone, Copy)]
pub struct CommandCounts {
    /// A place is taken once its count is not zero; a place never changes command after.
    commands: [Command; COMMAND_SLOTS],
    counts: [u64; COMMAND_SLOTS],
    rest: u64,
}

const NO_COMMAND: Command = Command { set: CommandSet::Io, code: 0 };

impl Default for CommandCounts {
    fn default() -> Self {
        CommandCounts { commands: [NO_COMMAND; COMMAND_SLOTS], counts: [0; COMMAND_SLOTS], rest: 0 }
    }
}

impl CommandCounts {
    pub fn is_empty(&self) -> bool {
        self.rest == 0 && self.counts.iter().all(|&n| n == 0)
    }

    /// Counts `n` more of `c`.
    pub fn add(&mut self, c: Command, n: u64) {
        if n == 0 {
            return;
        }
        let place = (0..COMMAND_SLOTS)
            .find(|&i| self.counts[i] != 0 && self.commands[i] == c)
            .or_else(|| self.counts.iter().position(|&k| k == 0));
        match place {
            Some(i) => {
                self.commands[i] = c;
                self.counts[i] += n;
            }
            None => self.rest += n,
        }
    }

    /// Each command's count, the commands beyond the room left out (see [`Self::rest`]).
    pub fn iter(&self) -> impl Iterator<Item = (Command, u64)> + '_ {
        self.commands.iter().copied().zip(self.counts.iter().copied()).filter(|&(_, n)| n > 0)
    }

    /// The commands counted together, beyond the room for [`COMMAND_SLOTS`] different ones.
    pub fn rest(&self) -> u64 {
        self.rest
    }

    /// Every count by the name the reports give it: each command's (see [`Command`]), then
    /// `other` for the rest, if any.
    pub fn named(&self) -> impl Iterator<Item = (CommandName, u64)> + '_ {
        let rest = Some((CommandName::Other, self.rest)).filter(|&(_, n)| n > 0);
        self.iter().map(|(c, n)| (CommandName::Command(c), n)).chain(rest)
    }

    fn merge(&mut self, o: &CommandCounts) {
        for (c, n) in o.iter() {
            self.add(c, n);
        }
        self.rest += o.rest;
    }

    /// What was counted since `earlier`, an earlier copy of the same counts (whose places
    /// held the same commands: a place keeps its command once counted).
    fn since(&self, earlier: &CommandCounts) -> CommandCounts {
        let mut d = *self;
        for (a, b) in d.counts.iter_mut().zip(&earlier.counts) {
            *a -= b;
        }
        d.rest -= earlier.rest;
        d
    }
}

/// A count's name in the reports: a command's, or `other` for those beyond the room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandName {
    Command(Command),
    Other,
}

impl std::fmt::Display for CommandName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CommandName::Command(c) => c.fmt(f),
            CommandName::Other => f.write_str("other"),
        }
    }
}

/// The same counts of the same commands, in whichever places.
impl PartialEq for CommandCounts {
    fn eq(&self, o: &Self) -> bool {
        let sorted = |c: &Self| {
            let mut v: [(Command, u64); COMMAND_SLOTS] = [(NO_COMMAND, 0); COMMAND_SLOTS];
            for (place, item) in v.iter_mut().zip(c.iter()) {
                *place = item;
            }
            v.sort_unstable();
            v
        };
        self.rest == o.rest && sorted(self) == sorted(o)
    }
}

impl Eq for CommandCounts {}

impl serde::Serialize for CommandCounts {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let named: BTreeMap<String, u64> = self.named().map(|(c, n)| (c.to_string(), n)).collect();
        named.serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for CommandCounts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let named = BTreeMap::<String, u64>::deserialize(d)?;
        let mut counts = CommandCounts::default();
        for (name, n) in named {
            if name == "other" {
                counts.rest += n;
            } else {
                counts.add(name.parse().map_err(serde::de::Error::custom)?, n);
            }
        }
        Ok(counts)
    }
}

impl IoCounts {
    pub fn add(&mut self, o: &IoCounts) {
        self.completed += o.completed;
        self.timed_out += o.timed_out;
        self.retransmitted += o.retransmitted;
        self.overflowed += o.overflowed;
        self.unfinished += o.unfinished;
        self.network_below_zero += o.network_below_zero;
        self.bytes += o.bytes;
        for (a, b) in self.size_classes.iter_mut().zip(&o.size_classes) {
            *a += b;
        }
        self.opcodes.merge(&o.opcodes);
    }

    /// What was counted since `earlier` (an earlier copy of these counts).
    pub fn since(&self, earlier: &IoCounts) -> IoCounts {
        let mut d = IoCounts {
            completed: self.completed - earlier.completed,
            timed_out: self.timed_out - earlier.timed_out,
            retransmitted: self.retransmitted - earlier.retransmitted,
            overflowed: self.overflowed - earlier.overflowed,
            unfinished: self.unfinished - earlier.unfinished,
            network_below_zero: self.network_below_zero - earlier.network_below_zero,
            bytes: self.bytes - earlier.bytes,
            size_classes: self.size_classes,
            opcodes: self.opcodes.since(&earlier.opcodes),
        };
        for (a, b) in d.size_classes.iter_mut().zip(&earlier.size_classes) {
            *a -= b;
        }
        d
    }
}

/// One (initiator, target, op)'s I/O outcomes in an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoDelta {
    pub initiator: IpAddr,
    pub target: IpAddr,
    pub op: Op,
    pub counts: IoCounts,
}

/// What a worker hands over about I/Os each interval: the outcomes of each (initiator,
/// target, op) that changed, and the slowest I/Os completed.
#[derive(Debug, Clone, Default)]
pub struct IoBatch {
    pub pairs: Vec<IoDelta>,
    pub slowest: Vec<SlowIo>,
}

impl IoBatch {
    pub fn with_capacity(pairs: usize, slowest: usize) -> Self {
        Self { pairs: Vec::with_capacity(pairs), slowest: Vec::with_capacity(slowest) }
    }

    pub fn clear(&mut self) {
        self.pairs.clear();
        self.slowest.clear();
    }
}

/// A completed I/O, as the list of the slowest keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowIo {
    /// Its whole latency: command to completion at the compute vantage when it saw both,
    /// else at the storage vantage.
    pub io_ns: u64,
    /// When its completion was seen there.
    pub completed_ns: u64,
    pub initiator: IpAddr,
    pub target: IpAddr,
    pub op: Op,
    /// The target's QP (the I/O queue) and the command's identifier on it.
    pub qpn: u32,
    pub cid: u16,
    pub bytes: u32,
    /// Each segment, in [`Segment::ALL`]'s order, where the vantages seen give it.
    pub segments: [Option<u64>; 5],
}

/// The `k` slowest I/Os offered, in no particular order; never grows beyond `k`.
#[derive(Debug, Clone, Default)]
pub struct Slowest {
    k: usize,
    ios: Vec<SlowIo>,
    /// Once `k` are kept: the place of the one a slower I/O replaces. Most I/Os offered
    /// are faster than it and are turned away by one comparison.
    least: usize,
}

impl Slowest {
    pub fn new(k: usize) -> Self {
        Self { k, ios: Vec::with_capacity(k), least: 0 }
    }

    /// Which of two I/Os is the slower: the longer, then the earlier completed, then by
    /// hosts, QP and CID, then by what else it has (one CID used again on a queue within a
    /// coarse capture's clock tick), so that the `k` kept, and their order, never depend on
    /// the order they came in (the workers' reports come in any order).
    fn rank(s: &SlowIo) -> impl Ord {
        use std::cmp::Reverse;
        (
            s.io_ns,
            Reverse(s.completed_ns),
            Reverse((s.initiator, s.target, s.qpn, s.cid)),
            Reverse((s.op, s.bytes, s.segments)),
        )
    }

    fn find_least(&mut self) {
        self.least = (0..self.ios.len()).min_by_key(|&i| Self::rank(&self.ios[i])).unwrap_or(0);
    }

    pub fn offer(&mut self, io: SlowIo) {
        if self.ios.len() < self.k {
            self.ios.push(io);
            if self.ios.len() == self.k {
                self.find_least();
            }
            return;
        }
        let Some(least) = self.ios.get(self.least) else { return };
        // The rank's first part is the latency: a faster I/O needs no further comparison.
        if io.io_ns < least.io_ns || Self::rank(&io) <= Self::rank(least) {
            return;
        }
        self.ios[self.least] = io;
        self.find_least();
    }

    /// Moves them into `out` (which keeps its capacity), leaving this list empty.
    pub fn drain_into(&mut self, out: &mut Vec<SlowIo>) {
        out.append(&mut self.ios);
    }

    /// How many it keeps.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Slowest first (ties: the earlier completion first).
    pub fn sorted(&self) -> Vec<SlowIo> {
        let mut v = self.ios.clone();
        v.sort_by_key(|s| std::cmp::Reverse(Self::rank(s)));
        v
    }
}

type Pair = (IpAddr, IpAddr);

/// The initiator and target under which the outcomes of (initiator, target) pairs beyond
/// the bound on pairs are counted (no host has the unspecified address).
pub const OTHER_PAIRS: IpAddr = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);

/// I/O outcomes per (initiator, target, op).
pub type IoCountsByPair = BTreeMap<(IpAddr, IpAddr, Op), IoCounts>;

/// A data phase seen before any copy of its command (see `IoTracker::early`): where, when,
/// its PSN, and what it is: a READ Request of `len` bytes (a write's data), or a read's
/// data WRITE (`first`: a WRITE First, whose Middle and Last follow).
#[derive(Debug, Clone, Copy)]
struct Early {
    vantage: Vantage,
    ts: u64,
    target: IpAddr,
    psn: u32,
    len: Option<u32>,
    first: bool,
    /// Seen again at its vantage before a command took it (a data phase sent again).
    again: bool,
}

/// Where and when a packet of an I/O was seen, and between which hosts (the NVMe host, the
/// initiator, and the target), whichever way the packet went.
#[derive(Debug, Clone, Copy)]
pub struct At {
    pub vantage: Vantage,
    pub ts: u64,
    pub host: IpAddr,
    pub target: IpAddr,
}

/// How a command capsule was sent: on the target's QP, at this PSN, whole in one packet (a
/// SEND Only) or not (a SEND First), and whether the PSN is behind its flow's expected one
/// (see [`Packet`]).
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    pub target_qpn: u32,
    pub psn: u32,
    pub whole: bool,
    pub again: bool,
}

/// A completion capsule's packet: its PSN, and whether it is behind its flow's expected
/// PSN.
///
/// `again` is the flow's PSN analysis saying the packet is behind the PSN it expects: a
/// transport retransmission, or a packet this vantage had missed (lost upstream of it)
/// whose resend is the first copy it sees. A copy of a capsule that belonged to an I/O
/// which has finished (`IoTracker::recent`) is dropped by the receiving NIC, so it neither
/// begins nor ends an I/O: it is left to the flow's retransmission counters, and must not
/// complete, or start, another I/O that uses the same CID. Any other capsule, behind or
/// not, is taken as usual.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    pub psn: u32,
    pub again: bool,
}

pub struct IoTracker {
    ios: Vec<Io>,
    free: Vec<u32>,
    /// The oldest live I/O of each (host, target, CID, target QPN): the first of its
    /// queue's chain (`queue_next`), by [`IoTracker::queue_key`].
    by_queue: Hashed<Ref>,
    /// The oldest and newest live I/O of each (host, target, CID), of every queue (the
    /// chain of `cid_prev` and `cid_next`), for completions whose queue is not known, by
    /// [`IoTracker::cid_key`].
    by_cid: Hashed<Chain>,
    /// The I/O whose data phase names a buffer (host, R_Key, address), by
    /// [`IoTracker::buffer_key`].
    by_key: Hashed<Ref>,
    /// With two vantages: data phases of an NVMe connection (on a flow that found its
    /// connection) that named no live I/O's buffer, by [`IoTracker::buffer_key`]: a vantage
    /// that lost its copy of a command, and whose packets come ahead of the other's (its
    /// mirror's times ahead), sees the data phase before any copy of the command. The other
    /// vantage's command, coming within the wait for a second vantage, takes it (see
    /// [`IoTracker::claim_early`]).
    early: FifoMap<u64, Early>,
    /// The hash of the three maps' keys, of seeds drawn at start (see `recent_hash`).
    cid_hash: ahash::RandomState,
    conns: FifoMap<ConnKey, Conn>,
    /// The admin queues (host, target, the target's QPN) CM's ConnectRequest named (the
    /// NVMe/RDMA private data's QID 0): their commands are admin commands, whose opcodes
    /// mean other things than the I/O command set's (0x02 is Get Log Page, not Read).
    admin_queues: FifoMap<ConnKey, ()>,
    /// Completions whose place in their connection's ring of completions awaiting the host's
    /// ACK went to a newer one before the ACK came ([`CONN_RING`] on one QP at once).
    acks_lost: u64,
    /// Capsules seen at a vantage (compute, storage) first after their I/O had ended, with
    /// the other vantage's copies only: that vantage's copies came more than the wait for a
    /// second vantage (`--reorder-window`) after the other's, and the I/O is counted once
    /// (while its capsules are remembered in `recent`), without their segments. Taken each
    /// interval ([`IoTracker::take_copies_after_end`]).
    copies_after_end: [u64; 2],
    /// Bound on the (initiator, target, op) keys of `counts`; beyond it outcomes are
    /// counted under [`OTHER_PAIRS`].
    max_pairs: usize,
    /// Per (initiator, target, op) that did I/O, up to `max_pairs`: where a finished I/O
    /// records its samples and counts its outcome, without a lookup each.
    pairs: HashMap<PairKey, u32, ahash::RandomState>,
    places: Vec<PairPlaces>,
    /// In the order they began, for timeouts: oldest first, but for those in `behind`.
    live: List,
    /// The latest time an I/O of `live` began at, not in `behind`.
    live_newest: u64,
    timeout_ns: u64,
    /// With two vantages: how long an I/O complete at the one vantage that saw it waits for
    /// the other vantage's copies (0: it does not wait).
    wait_ns: u64,
    /// I/Os waiting so, with when they stop, in that order, but for those in `behind`.
    waiting: VecDeque<(Ref, u64)>,
    /// The latest time an I/O of `waiting` stops waiting at.
    waiting_newest: u64,
    /// Timeouts that come due before one already in `live`, and waits that end before one
    /// already in `waiting` (packet time stepped back, or frames analysed out of order
    /// with `--reorder-window 0`), by when they come due: each comes at the first time past
    /// it, as if its I/O had begun in order, so that what one tracker ends does not depend
    /// on which other I/Os it holds (one worker or several).
    timeouts_behind: Behind,
    waits_behind: Behind,
    /// When the first of either comes due (`u64::MAX` if neither holds any): one compare
    /// a packet.
    behind_first: u64,
    counts: Counts,
    /// What only intervals read, apart (it is not in the way of the per-packet state).
    report: Box<Report>,
    /// Slow and timed-out I/Os for the evidence, until the analyzer takes them (room for
    /// [`RAISED`], allocated with `with_evidence`; beyond it they are not raised).
    pub raised: Vec<IoRaised>,
    /// I/O events beyond that room, lost.
    pub raised_lost: u64,
    /// The last 2 × `--max-ios` capsules of I/Os that finished (those of at least the last
    /// `--max-ios` I/Os), by hash (see
    /// [`IoTracker::recent_key`]), each with the vantages (bit 0 compute, bit 1 storage)
    /// that saw it: a command or completion sent again after its I/O finished, or a late
    /// vantage's copy of it, is found here (see [`IoTracker::finished_lately`]).
    recent: RecentKeys,
    /// Its hash, of seeds drawn at start: which capsules the table probes past each other
    /// for cannot be chosen by the traffic (results depend only on the keys' equality).
    recent_hash: ahash::RandomState,
}

/// I/O events that can wait for the analyzer at once.
const RAISED: usize = 64;

/// Where `r`'s I/O is in `ios`, if it is still live.
fn live(ios: &[Io], r: Ref) -> Option<usize> {
    let i = r.slot as usize;
    (r.slot != NONE && i < ios.len() && ios[i].live && ios[i].generation == r.generation).then_some(i)
}

/// Whether PSN `b` comes after PSN `a` (within half the 24-bit PSN space ahead of it).
fn psn_after(b: u32, a: u32) -> bool {
    (b.wrapping_sub(a) & 0x00FF_FFFF).wrapping_sub(1) < (1 << 23) - 1
}

/// Whether `r`'s I/O is still live and waiting for its second vantage.
fn still_waiting(ios: &[Io], r: Ref) -> bool {
    live(ios, r).is_some_and(|i| ios[i].waiting)
}

/// `IoTracker::timeouts_behind` or `waits_behind`: a heap by due time. An entry whose I/O
/// ended (or stopped waiting) stays until it comes due or the heap is full, when such
/// entries are dropped at once.
struct Behind {
    heap: BinaryHeap<Reverse<(u64, u32, u32)>>,
    room: usize,
}

impl Behind {
    /// Room for an entry an I/O and one more: after the ended ones are dropped there is
    /// always room.
    fn with_room(max_ios: usize) -> Self {
        let room = max_ios + 1;
        Self { heap: BinaryHeap::with_capacity(room), room }
    }

    /// When the earliest entry comes due (`u64::MAX` if none).
    fn first(&self) -> u64 {
        self.heap.peek().map_or(u64::MAX, |e| e.0 .0)
    }

    /// The earliest entry, if it comes due before `now`.
    #[inline]
    fn due_before(&self, now: u64) -> Option<(u64, Ref)> {
        self.heap
            .peek()
            .filter(|e| e.0 .0 < now)
            .map(|&Reverse((at, slot, generation))| (at, Ref { slot, generation }))
    }

    fn entries(&self) -> impl Iterator<Item = (u64, Ref)> + '_ {
        self.heap.iter().map(|&Reverse((at, slot, generation))| (at, Ref { slot, generation }))
    }

    /// Queues `r` to come due at `at`, first dropping the entries that no longer stand if
    /// there is no room.
    #[cold]
    fn push(&mut self, at: u64, r: Ref, stands: impl Fn(Ref) -> bool) {
        if self.heap.len() >= self.room {
            self.heap.retain(|&Reverse((_, slot, generation))| stands(Ref { slot, generation }));
        }
        self.heap.push(Reverse((at, r.slot, r.generation)));
    }
}

/// Where a finished I/O of one (initiator, target, op) records and counts (see
/// `IoTracker::pairs`).
#[derive(Debug, Clone, Copy)]
struct PairPlaces {
    /// The recorder's slots of its five segments' series (see
    /// `LatencyRecorder::cached_slot`).
    series: [u32; 5],
    /// Its place in `IoTracker::counts` once it counted an outcome, `NONE` before.
    counts: u32,
    /// The storage vantage's clock less the compute vantage's, as the last I/O that both
    /// saw whole gave it (see [`IoTracker::finish`]).
    offset: Option<i64>,
}

/// I/O outcomes per (initiator, target, op), in the order each first counted one: at most
/// `max_pairs` keys, then [`OTHER_PAIRS`]'s per op. A key's place never changes.
#[derive(Default)]
struct Counts {
    keys: Vec<(IpAddr, IpAddr, Op)>,
    values: Vec<IoCounts>,
    places: HashMap<PairKey, u32, ahash::RandomState>,
    /// The places counted in since the last hand-over (`dirty`: whether a place is in
    /// `changed`), so that an interval visits those, not every place.
    changed: Vec<u32>,
    dirty: Vec<bool>,
}

/// The I/O tracker's hand-over state.
struct Report {
    /// `counts`' values as last handed over, by place (see [`IoTracker::drain_interval`]).
    reported: Vec<IoCounts>,
    /// The slowest I/Os completed since the last hand-over.
    slowest: Slowest,
    /// With `--evidence-dir`: I/Os slower than this (`--evidence-slow-io`) and timeouts are
    /// raised (`IoTracker::raised`) for the evidence.
    evidence_slow_ns: Option<u64>,
    overflows: Overflows,
}

/// Commands not followed for want of room, counted by `--io-timeout`-long stretches of
/// packet time: an I/O lasts at most that long, so those pending at once were all refused
/// within the stretch of the time and the one before it, and the largest sum of two
/// neighbouring stretches bounds how many more I/Os would have needed room at once.
#[derive(Debug, Default)]
struct Overflows {
    stretch: u64,
    now: u64,
    before: u64,
    peak: u64,
}

impl Overflows {
    fn refused(&mut self, ts: u64, timeout_ns: u64) {
        let stretch = ts / timeout_ns;
        if stretch != self.stretch {
            self.before = if stretch == self.stretch.wrapping_add(1) { self.now } else { 0 };
            (self.now, self.stretch) = (0, stretch);
        }
        self.now += 1;
        self.peak = self.peak.max(self.now + self.before);
    }
}

fn vi(v: Vantage) -> usize {
    match v {
        Vantage::Compute => 0,
        Vantage::Storage => 1,
    }
}

fn series(io: &Io, segment: Segment) -> SeriesKey {
    SeriesKey { initiator: io.host, target: io.target, op: io.kind.op(), segment }
}

impl IoTracker {
    /// Memory [`IoTracker::new`] allocates for `max_ios` I/Os, with room for `max_pairs`
    /// (initiator, target, op) ([`IoTracker::with_max_pairs`]).
    pub const fn allocated_bytes(max_ios: usize, max_pairs: usize) -> usize {
        use std::mem::size_of;
        let few = if max_ios / 4 > 64 { max_ios / 4 } else { 64 };
        max_ios * (size_of::<Io>() + size_of::<u32>())
            + hash_map_bytes(2 * max_ios, size_of::<(u64, Ref)>())
            + hash_map_bytes(2 * max_ios, size_of::<(u64, Chain)>())
            + hash_map_bytes(2 * max_ios, size_of::<(u64, Ref)>())
            + FifoMap::<u64, Early>::allocated_bytes(few)
            + FifoMap::<ConnKey, Conn>::allocated_bytes(few)
            + FifoMap::<ConnKey, ()>::allocated_bytes(few)
            + hash_map_bytes(max_pairs, size_of::<(PairKey, u32)>())
            + max_pairs * size_of::<PairPlaces>()
            + (max_ios + 1) * size_of::<Reverse<(u64, u32, u32)>>()
            + RecentKeys::allocated_bytes(3 * max_ios)
    }

    pub fn new(max_ios: usize, timeout_ns: u64) -> Self {
        let h = || ahash::RandomState::new();
        Self {
            ios: Vec::with_capacity(max_ios),
            free: Vec::with_capacity(max_ios),
            // Twice the room (see FifoMap::new): I/Os come and go all the time.
            by_queue: Hashed::with_capacity_and_hasher(2 * max_ios, Default::default()),
            by_cid: Hashed::with_capacity_and_hasher(2 * max_ios, Default::default()),
            by_key: Hashed::with_capacity_and_hasher(2 * max_ios, Default::default()),
            early: FifoMap::new((max_ios / 4).max(64)),
            cid_hash: h(),
            conns: FifoMap::new((max_ios / 4).max(64)),
            admin_queues: FifoMap::new((max_ios / 4).max(64)),
            acks_lost: 0,
            copies_after_end: [0; 2],
            max_pairs: crate::defaults::MAX_LATENCY_SERIES,
            pairs: HashMap::with_capacity_and_hasher(crate::defaults::MAX_LATENCY_SERIES, h()),
            places: Vec::with_capacity(crate::defaults::MAX_LATENCY_SERIES),
            live: List::default(),
            live_newest: 0,
            timeout_ns: timeout_ns.max(1),
            wait_ns: 0,
            waiting: VecDeque::new(),
            waiting_newest: 0,
            timeouts_behind: Behind::with_room(max_ios),
            waits_behind: Behind::with_room(0),
            behind_first: u64::MAX,
            counts: Counts::default(),
            report: Box::new(Report {
                reported: Vec::new(),
                slowest: Slowest::new(crate::defaults::SLOW_IOS),
                evidence_slow_ns: None,
                overflows: Overflows::default(),
            }),
            raised: Vec::new(),
            raised_lost: 0,
            // Two capsules an I/O, the completion under two keys (with its queue and
            // without).
            recent: RecentKeys::new(3 * max_ios),
            recent_hash: ahash::RandomState::new(),
        }
    }

    /// CM connected a queue of `host` to `target`'s QP `target_qpn`: the admin queue
    /// (`admin`; see `admin_queues`), whose commands count as `nvme_other`, or any other
    /// connection, which ends an earlier admin queue's mark on the QP (a QPN used again).
    pub fn nvme_queue(&mut self, host: IpAddr, target: IpAddr, target_qpn: u32, admin: bool) {
        let k = ConnKey(host, target, target_qpn);
        if admin {
            self.admin_queues.insert(k, ());
        } else if !self.admin_queues.is_empty() {
            self.admin_queues.remove(&k);
        }
    }

    /// What (host, target, CID) is found by in `by_cid`: a 64-bit hash of it, of seeds
    /// drawn at start, taken for the key itself (as `recent` takes its capsules'): no
    /// traffic can choose two keys that hash alike, and a new key meets one of the at most
    /// 2 × `--max-ios` held by chance with odds of 2 × `--max-ios` in 2^64 (1 in 7·10^13 at
    /// the default), which would join its I/Os to that key's (a wrong match, never a
    /// broken chain).
    fn cid_key(&self, host: IpAddr, target: IpAddr, cid: u16) -> u64 {
        let mut h = self.cid_hash.build_hasher();
        hash_hosts(&host, &target, u64::from(cid), &mut h);
        h.finish()
    }

    /// What (host, R_Key, address) is found by in `by_key`: a hash of it, as
    /// [`IoTracker::cid_key`] (the address stands in for a second host: it is as unlikely
    /// to be an IPv4 one).
    fn buffer_key(&self, host: IpAddr, rkey: u32, va: u64) -> u64 {
        let mut h = self.cid_hash.build_hasher();
        hash_hosts(&host, &IpAddr::V4(rkey.into()), va, &mut h);
        h.finish()
    }

    /// What (host, target, CID, the target's QPN) is found by in `by_queue`, from its
    /// (host, target, CID)'s [`IoTracker::cid_key`]: a different key for each QPN.
    fn queue_key(cid_key: u64, qpn: u32) -> u64 {
        (cid_key ^ u64::from(qpn)).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
    }

    /// What a capsule is remembered by in [`IoTracker::recent`]: a hash of the host, the
    /// target, the queue (the target's QPN), the CID, the PSN and whether it is the command
    /// or the completion. Two queues between one host and target number their PSNs apart,
    /// and may meet on a CID and PSN: a capsule of one is no copy of the other's.
    fn recent_key(
        &self,
        host: IpAddr,
        target: IpAddr,
        qpn: u32,
        cid: u16,
        psn: u32,
        completion: bool,
    ) -> u64 {
        // The hosts as one word where both are IPv4 (see `hash_hosts`), the rest as another
        // (the QPN folded into the CID's and PSN's word: 24 bits, above them).
        let mut h = self.recent_hash.build_hasher();
        let rest = (u64::from(cid) << 32) | (u64::from(psn) << 1) | u64::from(completion);
        hash_hosts(&host, &target, rest ^ (u64::from(qpn) << 40).rotate_left(17), &mut h);
        h.finish()
    }

    /// Raises I/Os slower than `slow_ns`, and timeouts, for the evidence.
    pub fn with_evidence(mut self, slow_ns: u64) -> Self {
        self.report.evidence_slow_ns = Some(slow_ns);
        self.raised = Vec::with_capacity(RAISED);
        self
    }

    /// Keeps the `k` slowest I/Os of each interval (`--slow-ios`).
    pub fn with_slow_ios(mut self, k: usize) -> Self {
        self.report.slowest = Slowest::new(k);
        self
    }

    /// Hands over what changed since the last call: the outcomes of each (initiator, target,
    /// op) that counted something, and the slowest I/Os completed meanwhile.
    pub fn drain_interval(&mut self, pairs: &mut Vec<IoDelta>, slowest: &mut Vec<SlowIo>) {
        let reported = &mut self.report.reported;
        let counts = &mut self.counts;
        reported.resize(counts.values.len(), IoCounts::default());
        // The places counted in since the last hand-over, in place order (as a walk of
        // every place would find them).
        counts.changed.sort_unstable();
        for &place in &counts.changed {
            let p = place as usize;
            counts.dirty[p] = false;
            let (k, c, before) = (counts.keys[p], &counts.values[p], &mut reported[p]);
            if c != before {
                pairs.push(IoDelta { initiator: k.0, target: k.1, op: k.2, counts: c.since(before) });
                *before = *c;
            }
        }
        counts.changed.clear();
        self.report.slowest.drain_into(slowest);
    }

    /// Two vantages: an I/O complete at the one vantage that saw it so far waits `ns` of
    /// packet time for the other vantage's copies before it finishes. Their clocks need not
    /// agree: an ERSPAN III session anchored to its first packet's arrival is as late as
    /// that packet's mirror path, so the other vantage's command may come after this one's
    /// completion.
    pub fn with_vantage_wait(mut self, ns: u64) -> Self {
        self.wait_ns = ns;
        if ns > 0 {
            self.waiting = VecDeque::with_capacity(self.ios.capacity());
            self.waits_behind = Behind::with_room(self.ios.capacity());
        }
        self
    }

    /// Room for `n` (initiator, target, op) keys of I/O outcomes.
    pub fn with_max_pairs(mut self, n: usize) -> Self {
        self.max_pairs = n;
        self.pairs = HashMap::with_capacity_and_hasher(n, ahash::RandomState::new());
        self.places = Vec::with_capacity(n);
        self
    }

    /// The place of (initiator, target, op) in `places`, made when first needed while
    /// there is room; `NONE` after.
    fn pair(&mut self, host: IpAddr, target: IpAddr, op: Op) -> u32 {
        let k = PairKey(host, target, op);
        if let Some(&p) = self.pairs.get(&k) {
            return p;
        }
        if self.places.len() >= self.max_pairs {
            return NONE;
        }
        let p = self.places.len() as u32;
        self.places.push(PairPlaces { series: [SLOT_UNKNOWN; 5], counts: NONE, offset: None });
        self.pairs.insert(k, p);
        p
    }

    /// I/O outcomes per (initiator, target, op) so far.
    pub fn counts(&self) -> IoCountsByPair {
        self.counts.keys.iter().copied().zip(self.counts.values.iter().copied()).collect()
    }

    /// Either heap of entries behind changed (see `behind_first`).
    fn behind_moved(&mut self) {
        self.behind_first = self.timeouts_behind.first().min(self.waits_behind.first());
    }

    /// Whether no I/O is live: then a data phase, a READ request or response is matched to
    /// nothing and changes nothing, and need not be looked up.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.live.head().is_none()
    }

    /// Whether no connection has state: then a SEND Middle / Last or an ACK changes
    /// nothing either (with state, it makes its connection the most recently used).
    #[inline]
    pub fn has_no_connections(&self) -> bool {
        self.conns.is_empty()
    }

    /// Connection state forgotten to make room.
    pub fn connections_forgotten(&self) -> u64 {
        self.conns.forgotten
    }

    /// Completions whose ACK was no longer looked for (see [`IoTracker::completion`]).
    pub fn acks_lost(&self) -> u64 {
        self.acks_lost
    }

    /// The capsules each vantage saw first after their I/O had ended, since the last call.
    pub fn take_copies_after_end(&mut self) -> [u64; 2] {
        std::mem::take(&mut self.copies_after_end)
    }

    /// The `--max-ios` that would have followed every command (an estimate from above, see
    /// [`Overflows`]); 0 while none was refused.
    pub fn commands_needed(&self) -> u64 {
        match self.report.overflows.peak {
            0 => 0,
            n => self.ios.capacity() as u64 + n,
        }
    }

    /// The `--max-ios` that would have kept every connection's state that was needed again
    /// (connections get a quarter of it; see [`FifoMap::needed`]).
    pub fn connections_needed(&self) -> Option<u64> {
        self.conns.needed().map(|n| 4 * n)
    }

    /// Whether [`IoTracker::connections_needed`] is a floor (see [`FifoMap::needed_is_floor`]).
    pub fn connections_needed_is_floor(&self) -> bool {
        self.conns.needed_is_floor()
    }

    /// The outcomes of (`pair`, `op`); `at` is the pair's place in `places` (`NONE` if it
    /// has none), where the place in `counts` is kept once found.
    fn count(&mut self, at: u32, pair: Pair, op: Op) -> &mut IoCounts {
        let place = match self.places.get(at as usize) {
            Some(p) if p.counts != NONE => p.counts,
            _ => {
                let c = self.count_place(pair, op);
                if let Some(p) = self.places.get_mut(at as usize) {
                    p.counts = c;
                }
                c
            }
        };
        let c = &mut self.counts;
        if !c.dirty[place as usize] {
            c.dirty[place as usize] = true;
            c.changed.push(place);
        }
        &mut c.values[place as usize]
    }

    /// Where (`pair`, `op`) is counted. One entry per (host pair, op): allocated once, when
    /// the pair first counts an outcome, up to the bound; the pairs beyond it share one
    /// entry per op.
    fn count_place(&mut self, pair: Pair, op: Op) -> u32 {
        let c = &mut self.counts;
        let mut k = PairKey(pair.0, pair.1, op);
        if c.keys.len() >= self.max_pairs && !c.places.contains_key(&k) {
            k = PairKey(OTHER_PAIRS, OTHER_PAIRS, op);
        }
        *c.places.entry(k).or_insert_with(|| {
            c.keys.push((k.0, k.1, k.2));
            c.values.push(IoCounts::default());
            c.dirty.push(false);
            // Room for every place: marking one never allocates.
            c.changed.reserve(c.keys.len() - c.changed.len());
            (c.keys.len() - 1) as u32
        })
    }

    fn get(&self, r: Ref) -> Option<usize> {
        live(&self.ios, r)
    }

    /// A connection's state, made when first needed; when the table is full, the state of
    /// the connection used least recently is forgotten. `hint` is where the packet's flow
    /// found it last (see [`FifoMap::get_mut_recent_hinted`]).
    fn conn(&mut self, host: IpAddr, target: IpAddr, target_qpn: u32, hint: &mut u32) -> &mut Conn {
        self.conns.get_or_insert_recent_hinted(ConnKey(host, target, target_qpn), Conn::default, hint)
    }

    // --- the FIFO of live I/Os ----------------------------------------------------------

    fn link_tail(&mut self, i: u32) {
        self.live.push_tail(&mut self.ios, i);
        let io = &self.ios[i as usize];
        if io.created < self.live_newest {
            let (at, me) =
                (io.created.saturating_add(self.timeout_ns), Ref { slot: i, generation: io.generation });
            let ios = &self.ios;
            self.timeouts_behind.push(at, me, |r| live(ios, r).is_some());
            self.behind_moved();
        } else {
            self.live_newest = io.created;
        }
    }

    fn unlink(&mut self, i: u32) {
        self.live.unlink(&mut self.ios, i);
    }

    fn release(&mut self, i: usize) {
        let io = &mut self.ios[i];
        io.live = false;
        let (host, target, qpn, cid, rkey, va) = (io.host, io.target, io.target_qpn, io.cid, io.rkey, io.va);
        let me = Ref { slot: i as u32, generation: io.generation };
        // Its capsules, for copies of them sent again (see [`Packet`]).
        let seen = |v: [bool; 2]| u8::from(v[0]) | u8::from(v[1]) << 1;
        let capsules = [
            (Some(io.sqe_psn), false, seen([0, 1].map(|v| io.sqe_first.at(v).is_some()))),
            (io.cqe_psn, true, seen([0, 1].map(|v| io.cqe.at(v).is_some()))),
        ];
        for (psn, completion, seen) in capsules {
            if let Some(psn) = psn {
                let key = self.recent_key(host, target, qpn, cid, psn, completion);
                self.recent.remember(key, seen);
                // A completion on a flow not paired yet is looked up without its queue.
                if completion {
                    let key = self.recent_key(host, target, NONE, cid, psn, completion);
                    self.recent.remember(key, seen);
                }
            }
        }
        // One lookup each: the entry found is the one removed. Out of its queue's chain.
        let next = self.ios[i].queue_next;
        let cid_key = self.cid_key(host, target, cid);
        let first = match self.by_queue.entry(Self::queue_key(cid_key, qpn)) {
            Entry::Occupied(o) if *o.get() == me && next == NO_REF => {
                o.remove();
                None
            }
            Entry::Occupied(mut o) if *o.get() == me => {
                *o.get_mut() = next;
                None
            }
            Entry::Occupied(o) => Some(*o.get()),
            Entry::Vacant(_) => None,
        };
        if let Some(first) = first {
            self.relink(first, me, next);
        }
        // Out of every queue's chain: its neighbours name each other; the ends in the map.
        let (prev, next) = (self.ios[i].cid_prev, self.ios[i].cid_next);
        if let Some(p) = self.get(prev) {
            self.ios[p].cid_next = next;
        }
        if let Some(n) = self.get(next) {
            self.ios[n].cid_prev = prev;
        }
        if prev == NO_REF || next == NO_REF {
            if let Entry::Occupied(mut o) = self.by_cid.entry(cid_key) {
                let c = o.get_mut();
                if c.first == me {
                    c.first = next;
                }
                if c.last == me {
                    c.last = prev;
                }
                if c.first == NO_REF {
                    o.remove();
                }
            }
        }
        self.forget_key(self.buffer_key(host, rkey, va), me);
        if let Some(next) = self.ios[i].next_va {
            self.forget_key(self.buffer_key(host, rkey, next), me);
        }
        self.unlink(i as u32);
        self.free.push(i as u32);
    }

    /// Records the segments an I/O can give and frees it.
    fn finish(&mut self, i: usize, rec: &mut LatencyRecorder, completed: bool) {
        let io = &self.ios[i];
        let (c, s) = (0, 1);
        // Each a difference of two times at one vantage: one below zero (a completion
        // before its command there) pairs packets of two I/Os, and gives no segment.
        let d = |a: Option<u64>, b: Option<u64>| a.zip(b).and_then(|(a, b)| a.checked_sub(b));
        let cqe = io.completions();
        let io_c = d(cqe[c], io.sqe_first.at(c));
        let io_s = d(cqe[s], io.sqe_last.at(s));
        // Seen whole at both vantages: the command's way from compute to storage less the
        // completion's back is twice the storage clock's lead on compute's (the two ways
        // alike), kept for its host pair (see [`IoTracker::before_reuse`]).
        if let (Some(cs), Some(ss), Some(cc), Some(sc)) =
            (io.sqe_first.at(c), io.sqe_first.at(s), cqe[c], cqe[s])
        {
            let there = i128::from(ss) - i128::from(cs);
            let back = i128::from(cc) - i128::from(sc);
            if let Some(p) = self.places.get_mut(io.pair as usize) {
                p.offset = i64::try_from((there - back) / 2).ok();
            }
        }
        let io = &self.ios[i];
        let mut samples: [Option<(Segment, u64)>; 5] = [None; 5];
        // The network segment is the compute vantage's time less the rest: below zero it
        // is recorded as 0, and counted.
        let mut below_zero = false;
        let mut network = |a: u64, rest: u64| {
            below_zero = a < rest;
            (Segment::Network, a.saturating_sub(rest))
        };
        samples[0] = io_c.map(|v| (Segment::IoCompute, v));
        samples[1] = io_s.map(|v| (Segment::IoStorage, v));
        match io.kind {
            Kind::Read => {
                samples[2] = d(io.ack.at(c), cqe[c]).map(|v| (Segment::Compute, v));
                samples[3] = io_s.map(|v| (Segment::Storage, v));
                samples[4] = io_c.zip(io_s).map(|(a, b)| network(a, b));
            }
            Kind::InCapsule => {
                samples[2] = io_c.map(|_| (Segment::Compute, 0));
                samples[3] = io_s.map(|v| (Segment::Storage, v));
                samples[4] = io_c.zip(io_s).map(|(a, b)| network(a, b));
            }
            Kind::Write => {
                let compute = d(io.last_read_response.at(c), io.read_request.at(c));
                let storage = match (
                    d(io.read_request.at(s), io.sqe_last.at(s)),
                    d(cqe[s], io.last_read_response.at(s)),
                ) {
                    // Differences of packet times: their sum can pass 2^64 only on a hostile
                    // capture's times, and then saturates instead of wrapping.
                    (Some(a), Some(b)) => Some(a.saturating_add(b)),
                    _ => None,
                };
                samples[2] = compute.map(|v| (Segment::Compute, v));
                samples[3] = storage.map(|v| (Segment::Storage, v));
                samples[4] = match (io_c, compute, storage) {
                    (Some(a), Some(b), Some(c)) => Some(network(a, b.saturating_add(c))),
                    _ => None,
                };
            }
            Kind::Other => {}
        }
        if completed {
            let mut none = [SLOT_UNKNOWN; 5];
            let slots = match io.pair {
                NONE => &mut none,
                p => &mut self.places[p as usize].series,
            };
            for (segment, v) in samples.into_iter().flatten() {
                let slot = rec.cached_slot(&mut slots[segment.index()], || series(io, segment));
                rec.record_in(slot, v);
            }
            let whole = match (io_c, io_s) {
                (Some(v), _) => cqe[c].map(|at| (v, at)),
                (None, Some(v)) => cqe[s].map(|at| (v, at)),
                (None, None) => None,
            };
            if let Some((io_ns, completed_ns)) = whole {
                if self.report.evidence_slow_ns.is_some_and(|t| io_ns > t) {
                    let vantage = if io_c.is_some() { Vantage::Compute } else { Vantage::Storage };
                    self.raise(i, EventKind::SlowIo, vantage, completed_ns, io_ns);
                }
                let io = &self.ios[i];
                let mut segments = [None; 5];
                for (segment, v) in samples.into_iter().flatten() {
                    segments[segment.index()] = Some(v);
                }
                let slow = SlowIo {
                    io_ns,
                    completed_ns,
                    initiator: io.host,
                    target: io.target,
                    op: io.kind.op(),
                    qpn: io.target_qpn,
                    cid: io.cid,
                    bytes: io.bytes,
                    segments,
                };
                self.report.slowest.offer(slow);
            }
        }
        if !completed && self.report.evidence_slow_ns.is_some() {
            let io = &self.ios[i];
            let vantage = if io.sqe_first.at(0).is_some() { Vantage::Compute } else { Vantage::Storage };
            let end = io.created.saturating_add(self.timeout_ns);
            self.raise(i, EventKind::IoTimeout, vantage, end, self.timeout_ns);
        }
        let io = &self.ios[i];
        let (at, pair, op, retx, bytes) =
            (io.pair, (io.host, io.target), io.kind.op(), io.retransmitted, io.bytes);
        let n = self.count(at, pair, op);
        if completed {
            n.completed += 1;
            n.network_below_zero += u64::from(below_zero);
            n.bytes += u64::from(bytes);
            if bytes > 0 {
                n.size_classes[size_class(u64::from(bytes))] += 1;
            }
        } else {
            n.timed_out += 1;
        }
        n.retransmitted += u64::from(retx);
        self.release(i);
    }

    /// Raises I/O `i` for the evidence: slow (`ns` its latency, `end` its completion) or
    /// timed out (`ns` the timeout).
    #[cold]
    #[inline(never)]
    fn raise(&mut self, i: usize, kind: EventKind, vantage: Vantage, end: u64, ns: u64) {
        if self.raised.len() == RAISED {
            self.raised_lost += 1;
            return;
        }
        let io = &self.ios[i];
        let (op, cid) = (io.kind.op(), io.cid);
        let (start_ns, verdict) = match kind {
            EventKind::SlowIo => (
                io.sqe_first.at(0).or(io.sqe_first.at(1)).unwrap_or(io.created),
                Verdict::SlowIo { op, cid, io_ns: ns, bytes: io.bytes },
            ),
            _ => (io.created, Verdict::IoTimeout { op, cid, waited_ns: ns }),
        };
        self.raised.push(IoRaised {
            kind,
            qp: Qp { src: io.host, dst: io.target, dst_qpn: io.target_qpn },
            vantage,
            start_ns,
            end_ns: end,
            verdict,
        });
    }

    /// Whether no vantage that saw the command awaits its completion still (each has seen
    /// it, or gave up on it), and the host's ACK of it came where the compute segment needs
    /// it.
    fn complete(&self, i: usize) -> bool {
        let io = &self.ios[i];
        io.awaited_nowhere() && (!io.needs_ack() || io.ack.at(0).is_some() || io.ack_lost)
    }

    fn maybe_finish(&mut self, i: usize, ts: u64, rec: &mut LatencyRecorder) {
        if !self.complete(i) {
            return;
        }
        let io = &self.ios[i];
        let both = (0..2).all(|v| io.sqe_first.at(v).is_some());
        if both || self.wait_ns == 0 {
            self.finish(i, rec, true);
        } else if !io.waiting {
            self.wait(i, ts, rec);
        }
    }

    /// I/O `i` waits, from packet time `ts`, `--reorder-window` for the other vantage's
    /// copies.
    fn wait(&mut self, i: usize, ts: u64, rec: &mut LatencyRecorder) {
        if self.waiting.len() == self.waiting.capacity() {
            // No room to wait: the I/O that has waited longest finishes now.
            if let Some((r, _)) = self.waiting.pop_front() {
                self.stop_waiting(r, rec);
            }
        }
        let me = Ref { slot: i as u32, generation: self.ios[i].generation };
        self.ios[i].waiting = true;
        let until = ts.saturating_add(self.wait_ns);
        if until < self.waiting_newest {
            let ios = &self.ios;
            self.waits_behind.push(until, me, |r| still_waiting(ios, r));
            self.behind_moved();
        } else {
            self.waiting_newest = until;
            self.waiting.push_back((me, until));
        }
    }

    /// An I/O's wait for the other vantage is over: it finishes with what was seen (timed
    /// out if no vantage saw its completion, see [`IoTracker::end_stale`]), unless that
    /// vantage's command came meanwhile (then its completion finishes it).
    fn stop_waiting(&mut self, r: Ref, rec: &mut LatencyRecorder) {
        if let Some(i) = self.get(r) {
            self.ios[i].waiting = false;
            // One that no vantage saw complete needs no ACK of a completion either.
            let io = &self.ios[i];
            let unanswered = !io.saw_completion() && io.awaited_nowhere();
            if unanswered || self.complete(i) {
                self.finish(i, rec, self.ios[i].saw_completion());
            }
        }
    }

    /// Ends I/Os older than `--io-timeout` at packet time `now`: without a completion they
    /// time out; with one (an ACK or the other vantage's copy never came) they complete
    /// with what was seen. Called for every packet: with nothing due, a few loads, inlined.
    #[inline]
    pub fn expire(&mut self, now: u64, rec: &mut LatencyRecorder) {
        // Nothing is due: no I/O waits past `now`, and the oldest live I/O is younger than
        // the timeout (the lists are in the order their times come due).
        // (`next_due` says the same as an Option; written out here, the per-packet test
        // takes fewer instructions.)
        let waits = self.waiting.front().is_some_and(|&(_, until)| until < now);
        let times_out = self
            .live
            .head()
            .and_then(|i| self.ios.get(i as usize))
            .is_some_and(|io| io.created.saturating_add(self.timeout_ns) < now);
        if waits || times_out || self.behind_first < now {
            self.expire_live(now, rec);
        }
    }

    /// The first time at which [`IoTracker::expire`] would act (an I/O times out, or stops
    /// waiting for its second vantage) if nothing else came: past it, it does.
    pub fn next_due(&self) -> Option<u64> {
        let waits = self.waiting.front().map(|&(_, until)| until);
        let times_out = self
            .live
            .head()
            .and_then(|i| self.ios.get(i as usize))
            .map(|io| io.created.saturating_add(self.timeout_ns));
        // The entries behind that still stand (this is not called for every packet).
        let waits_behind = self.waits_behind.entries().filter(|&(_, r)| still_waiting(&self.ios, r));
        let timeouts_behind = self.timeouts_behind.entries().filter(|&(_, r)| self.get(r).is_some());
        let behind = waits_behind.chain(timeouts_behind).map(|(at, _)| at).min();
        waits.into_iter().chain(times_out).chain(behind).min()
    }

    /// Waits end before timeouts, each in the order they come due (see `expire`).
    fn expire_live(&mut self, now: u64, rec: &mut LatencyRecorder) {
        loop {
            let queued = self.waiting.front().filter(|&&(_, until)| until < now).copied();
            let r = match (queued, self.waits_behind.due_before(now)) {
                (Some((r, until)), b) if b.is_none_or(|(at, _)| until <= at) => {
                    self.waiting.pop_front();
                    r
                }
                (_, Some((_, r))) => {
                    self.waits_behind.heap.pop();
                    self.behind_moved();
                    r
                }
                _ => break,
            };
            self.stop_waiting(r, rec);
        }
        loop {
            let queued = self
                .live
                .head()
                .map(|i| i as usize)
                .filter(|&i| self.ios[i].created.saturating_add(self.timeout_ns) < now);
            let i = match (queued, self.timeouts_behind.due_before(now)) {
                (Some(i), _) => i,
                (None, Some((_, r))) => {
                    self.timeouts_behind.heap.pop();
                    self.behind_moved();
                    match self.get(r) {
                        Some(i) => i,
                        None => continue,
                    }
                }
                (None, None) => break,
            };
            self.finish(i, rec, self.ios[i].saw_completion());
        }
    }

    /// End of the run: I/Os with a completion finish with what was seen; the others are
    /// counted as unfinished.
    pub fn finish_all(&mut self, rec: &mut LatencyRecorder) {
        while let Some(i) = self.live.head() {
            let i = i as usize;
            let io = &self.ios[i];
            if io.saw_completion() {
                self.finish(i, rec, true);
            } else if io.waiting && io.awaited_nowhere() {
                // Its completion lost where its command was seen, waiting for the other
                // vantage's copies (see `end_stale`): none come now, as at its wait's end.
                self.finish(i, rec, false);
            } else {
                let io = &self.ios[i];
                let (at, pair, op) = (io.pair, (io.host, io.target), io.kind.op());
                self.count(at, pair, op).unfinished += 1;
                self.release(i);
            }
        }
    }

    /// Where the live I/Os with this CID between the two hosts start (one lookup): those
    /// of the target's QP `target_qpn` when known, else those of every queue (see
    /// [`IoTracker::same_cid`]).
    fn cid_first(&self, host: IpAddr, target: IpAddr, cid: u16, target_qpn: Option<u32>) -> CidWalk {
        self.walk(self.cid_key(host, target, cid), target_qpn)
    }

    /// [`IoTracker::cid_first`] by the (host, target, CID)'s [`IoTracker::cid_key`].
    fn walk(&self, key: u64, target_qpn: Option<u32>) -> CidWalk {
        let first = match target_qpn {
            Some(q) => self.by_queue.get(&Self::queue_key(key, q)).copied(),
            None => self.by_cid.get(&key).map(|c| c.first),
        };
        CidWalk { first: first.unwrap_or(NO_REF), key, queue: target_qpn.is_some() }
    }

    /// In the queue's CID chain from `first`, the link that names `from` names `to`
    /// instead: the newest's `NO_REF` when an I/O joins at the end, an I/O when it leaves.
    fn relink(&mut self, first: Ref, from: Ref, to: Ref) {
        let mut at = first;
        for _ in 0..MAX_SAME_CID {
            let Some(p) = self.ios.get_mut(at.slot as usize) else { return };
            if p.queue_next == from {
                p.queue_next = to;
                return;
            }
            at = p.queue_next;
        }
    }

    /// The live I/Os with the CID from `walk` ([`IoTracker::cid_first`]) between the two
    /// hosts, oldest first: on one queue (most often one I/O), or one for each queue that
    /// uses the CID now (at most [`MAX_SAME_CID`] of them).
    fn same_cid(&self, walk: CidWalk) -> impl Iterator<Item = usize> + '_ {
        self.chain(walk).take(MAX_SAME_CID)
    }

    /// The whole chain [`IoTracker::same_cid`] walks the first [`MAX_SAME_CID`] of.
    fn chain(&self, walk: CidWalk) -> impl Iterator<Item = usize> + '_ {
        let mut at = walk.first;
        std::iter::from_fn(move || {
            let i = self.get(at)?;
            at = if walk.queue { self.ios[i].queue_next } else { self.ios[i].cid_next };
            Some(i)
        })
    }

    /// Whether a completion at vantage `v` at `ts` may be I/O `io`'s, when the other
    /// vantage gave up on its own copy of it, having seen the host use the CID again: the
    /// host sent that command after it had this I/O's completion, so the completion passed
    /// `v` before the command passed the other vantage, on one clock. With the two clocks'
    /// offset known (this host pair's last I/O seen whole at both), a completion at `v`
    /// later than that answers a later I/O; without it, any may. Always, when the other
    /// vantage did not give up.
    fn before_reuse(&self, io: &Io, v: usize, ts: u64) -> bool {
        let u = 1 - v;
        if io.gave_up & (1 << u) == 0 {
            return true;
        }
        // Kept per (host, target, op): failing the I/O's own op's, another's of the pair.
        let offset = |p: u32| self.places.get(p as usize).and_then(|p| p.offset);
        let other_op = |op| self.pairs.get(&PairKey(io.host, io.target, op)).and_then(|&p| offset(p));
        let Some(off) = offset(io.pair)
            .or_else(|| [Op::NvmeRead, Op::NvmeWrite, Op::NvmeOther].into_iter().find_map(other_op))
        else {
            return true;
        };
        // The other vantage's time on `v`'s clock (storage's less compute's is `off`).
        let reuse = if v == 1 {
            io.gave_up_ts as i128 + i128::from(off)
        } else {
            io.gave_up_ts as i128 - i128::from(off)
        };
        i128::from(ts) <= reuse
    }

    /// The I/O a completion at vantage `v` answers: the oldest with this CID that saw its
    /// command at `v` and no completion there yet. Mirrors with different delays can show
    /// the next command reusing a CID before the previous completion, so both may be live.
    /// Without the target's QP, the candidates must all be on one QP, and all among the
    /// [`MAX_SAME_CID`] I/Os looked at: with more I/Os using the CID, one beyond them may
    /// be on another queue.
    fn for_completion(&self, v: usize, walk: CidWalk, target_qpn: Option<u32>, ts: u64) -> Option<usize> {
        // One walk: the first MAX_SAME_CID I/Os, and whether there are more. Failing an
        // I/O that awaits its completion here, the oldest whose command this vantage missed
        // (its mirror dropped the copy) and whose completion the other vantage has not
        // seen: the completion is its (the command's copy here is the only one missing;
        // a newer one's command here may be due yet, and its completion comes after the
        // older one's).
        let (mut best, mut unseen, mut queue) = (None, None, None);
        let older =
            |x: Option<usize>, i: usize| x.is_none_or(|b: usize| self.ios[i].created < self.ios[b].created);
        for (n, i) in self.chain(walk).enumerate() {
            if n == MAX_SAME_CID {
                return if target_qpn.is_none() { None } else { best.or(unseen) };
            }
            let io = &self.ios[i];
            // Not one the other vantage knows ended before this completion came.
            let awaits = io.awaits_completion(v) && self.before_reuse(io, v, ts);
            // The other vantage saw the command and no completion: it awaits one, or gave
            // up on its own copy (it saw the CID used again), which says nothing of this
            // vantage's.
            let missed_command = io.sqe_first.at(v).is_none()
                && io.cqe.at(v).is_none()
                && io.gave_up & (1 << v) == 0
                && io.sqe_first.at(1 - v).is_some()
                && io.cqe.at(1 - v).is_none()
                && self.before_reuse(io, v, ts);
            if !awaits && !missed_command {
                continue;
            }
            let q = io.target_qpn;
            if target_qpn.is_none() && *queue.get_or_insert(q) != q {
                return None; // two queues use this CID: ambiguous without the QP
            }
            if awaits && older(best, i) {
                best = Some(i);
            } else if !awaits && older(unseen, i) {
                unseen = Some(i);
            }
        }
        best.or(unseen)
    }

    /// Vantage `v` sees a command use the CID of the queue's chain at `first` (the
    /// command's I/O `except`, if made already): an earlier I/O with it whose command `v`
    /// saw but whose completion `v` never saw lost that completion at `v`, and ends now
    /// with what it has (so that the new I/O's completion is not taken for its own).
    fn end_stale(
        &mut self,
        first: CidWalk,
        v: usize,
        except: Option<usize>,
        ts: u64,
        rec: &mut LatencyRecorder,
    ) {
        let stale = self.same_cid(first).find(|&o| Some(o) != except && self.ios[o].awaits_completion(v));
        let Some(old) = stale else { return };
        // The other vantage saw its command and awaits its completion still: its copy may
        // be due yet (this vantage's clock behind the other's, by more than the host's
        // turnaround). The I/O waits for it (or for `--io-timeout`) without this vantage's
        // completion, and takes none of this vantage's completions from now on.
        let io = &self.ios[old];
        let other = 1 - v;
        if io.awaits_completion(other) {
            self.ios[old].gave_up |= 1 << v;
            self.ios[old].gave_up_ts = ts;
            return;
        }
        // Or, with two vantages, it saw nothing of it yet: its copies may all be due yet
        // (its clock behind by more than the I/O took, or its copy of the command lost and
        // of the completion not). The I/O waits `--reorder-window` for them, as a complete
        // one does, and ends without them (timed out, if none comes).
        let unseen_there = io.sqe_first.at(other).is_none() && io.cqe.at(other).is_none();
        if unseen_there && self.wait_ns > 0 && !io.waiting {
            self.ios[old].gave_up |= 1 << v;
            self.ios[old].gave_up_ts = ts;
            self.wait(old, ts, rec);
            return;
        }
        self.finish(old, rec, self.ios[old].saw_completion());
    }

    /// The I/O a completion at vantage `v`, at `psn`, with the CID of the queue's chain at
    /// `first`, answers (no I/O's completion had that PSN): [`IoTracker::for_completion`]'s,
    /// unless that one's completion the other vantage saw at an earlier PSN. A mirror's
    /// two copies of a packet carry one PSN, and the target sends its completions on a
    /// queue in PSN order: that I/O lost its completion at `v`, and ends now with what it
    /// has (as when `v` sees its CID used again, see [`IoTracker::end_stale`], which `v`
    /// may have missed too); the completion goes to the I/O it answers.
    fn answered_here(
        &mut self,
        (v, ts): (usize, u64),
        first: CidWalk,
        psn: u32,
        target_qpn: Option<u32>,
        rec: &mut LatencyRecorder,
    ) -> Option<usize> {
        let earlier = |p: u32| psn_after(psn, p);
        let mut first = first;
        loop {
            let i = self.for_completion(v, first, target_qpn, ts)?;
            if !self.ios[i].cqe_psn.is_some_and(earlier) {
                return Some(i);
            }
            self.finish(i, rec, true);
            // The chain may have lost its head.
            first = self.walk(first.key, target_qpn);
        }
    }

    /// A command capsule (the first packet of its SEND) from `host` to `target`'s QP.
    pub fn command(&mut self, at: At, sent: Sent, sqe: &Sqe, hint: &mut u32, rec: &mut LatencyRecorder) {
        let At { vantage: v, ts, host, target } = at;
        let Sent { target_qpn, psn, whole, again } = sent;
        let v = vi(v);
        let first = self.cid_first(host, target, sqe.cid, Some(target_qpn));
        let same = self.same_cid(first).find(|&i| self.ios[i].sqe_psn == psn);
        let finished = if same.is_none() {
            // Whether a capsule with this PSN belonged to an I/O that finished lately: if
            // so, the vantages that saw it (bit 0 compute, bit 1 storage).
            self.recent.get(self.recent_key(host, target, target_qpn, sqe.cid, psn, false))
        } else {
            None
        };
        let i = match same {
            // The same command at the other vantage, or again at this one.
            Some(i) => {
                if self.ios[i].claimed[v] != 0 {
                    self.unclaim(i, v);
                }
                if self.ios[i].sqe_first.first(v, ts) {
                    self.ios[i].retransmitted = true;
                } else {
                    // This vantage sees the CID used again (the other saw it first, and
                    // made the I/O): an earlier command with it that this vantage saw but
                    // never saw complete lost its completion here, as below.
                    self.end_stale(first, v, Some(i), ts, rec);
                }
                i
            }
            // Sent again after its I/O finished (see [`Packet`]), or, the first time this
            // vantage sees it, a copy that came after the other vantage's had ended its I/O:
            // no I/O again. The latter is still this vantage seeing the CID used again: an
            // earlier command with it that this vantage saw but never saw complete (one
            // whose finished I/O was forgotten, which began an I/O of its own) lost its
            // completion here, and must not take a later I/O's.
            None if finished.is_some_and(|seen| again || seen & (1 << v) == 0) => {
                if !again {
                    self.copies_after_end[v] += 1;
                    self.end_stale(first, v, None, ts, rec);
                }
                return;
            }
            None => {
                // The CID is used again. An earlier command with it that this vantage saw
                // but never saw complete lost its completion here: it ends now.
                self.end_stale(first, v, None, ts, rec);
                // As many I/Os with this CID live on the queue as the bound allows: the
                // oldest ends, as when its CID is used again.
                let first = self.walk(first.key, Some(target_qpn));
                if self.same_cid(first).count() >= MAX_SAME_CID {
                    if let Some(old) = self.get(first.first) {
                        self.finish(old, rec, self.ios[old].saw_completion());
                    }
                }
                match self.create(ts, (host, target, first.key), target_qpn, psn, sqe) {
                    Some(i) => {
                        if !self.early.is_empty() {
                            self.claim_early(i, v);
                        }
                        i
                    }
                    None => return,
                }
            }
        };
        self.ios[i].sqe_first.first(v, ts);
        // A copy this vantage sees after its completion is not the one the target served:
        // the command's anchors stay.
        if self.ios[i].cqe.at(v).is_some() {
            return;
        }
        let me = Ref { slot: i as u32, generation: self.ios[i].generation };
        if whole {
            self.ios[i].sqe_last.last(v, ts);
        } else {
            self.conn(host, target, target_qpn, hint).open_capsule[v] = me;
        }
    }

    /// A new I/O for command `sqe` from `host` to `target` (whose (host, target, CID) has
    /// the [`IoTracker::cid_key`] `cid_key`).
    fn create(
        &mut self,
        ts: u64,
        (host, target, cid_key): (IpAddr, IpAddr, u64),
        target_qpn: u32,
        psn: u32,
        sqe: &Sqe,
    ) -> Option<usize> {
        let admin = !self.admin_queues.is_empty()
            && self.admin_queues.contains_key(&ConnKey(host, target, target_qpn));
        let kind = match (sqe.opcode, sqe.sgl) {
            _ if admin => Kind::Other,
            (_, Sgl::InCapsule { .. }) if sqe.opcode == crate::wire::nvme::opcode::WRITE => Kind::InCapsule,
            (crate::wire::nvme::opcode::READ, Sgl::Keyed { .. }) => Kind::Read,
            (crate::wire::nvme::opcode::WRITE, Sgl::Keyed { .. }) => Kind::Write,
            _ => Kind::Other,
        };
        if kind == Kind::Other {
            self.count(NONE, (host, target), Op::NvmeOther).opcodes.add(Command::of(sqe, admin), 1);
        }
        let Some(slot) = self
            .free
            .pop()
            .or_else(|| (self.ios.len() < self.ios.capacity()).then_some(self.ios.len() as u32))
        else {
            self.count(NONE, (host, target), kind.op()).overflowed += 1;
            self.report.overflows.refused(ts, self.timeout_ns);
            return None;
        };
        let (rkey, va) = match sqe.sgl {
            Sgl::Keyed { address, key, .. } => (key, address),
            _ => (0, 0),
        };
        let pair = self.pair(host, target, kind.op());
        let generation = self.ios.get(slot as usize).map_or(0, |io| io.generation.wrapping_add(1));
        let io = Io {
            generation,
            live: true,
            kind,
            host,
            target,
            target_qpn,
            cid: sqe.cid,
            bytes: match sqe.sgl {
                Sgl::Keyed { length, .. } | Sgl::InCapsule { length, .. } => length,
                Sgl::Other { .. } => 0,
            },
            sqe_psn: psn,
            rkey,
            va,
            created: ts,
            sqe_first: Anchor::default(),
            sqe_last: Anchor::default(),
            read_request: Anchor::default(),
            last_read_response: Anchor::default(),
            data_write: Anchor::default(),
            data_psn: None,
            cqe: Anchor::default(),
            ack: Anchor::default(),
            next_va: None,
            reads: 0,
            read_ends_at_storage: 0,
            cqe_psn: None,
            cqe_psn_at: [None; 2],
            gave_up_ts: 0,
            retransmitted: false,
            ack_lost: false,
            shared_buffer: false,
            claimed: [0; 2],
            gave_up: 0,
            waiting: false,
            links: Links::default(),
            queue_next: NO_REF,
            cid_prev: NO_REF,
            cid_next: NO_REF,
            pair,
        };
        if (slot as usize) < self.ios.len() {
            self.ios[slot as usize] = io;
        } else {
            self.ios.push(io);
        }
        let me = Ref { slot, generation };
        // Last in its CID's chains, its queue's and every queue's (which hold live I/Os
        // only: each leaves them as it ends).
        let first = match self.by_queue.entry(Self::queue_key(cid_key, target_qpn)) {
            Entry::Vacant(e) => {
                e.insert(me);
                None
            }
            Entry::Occupied(e) => Some(*e.get()),
        };
        if let Some(first) = first {
            self.relink(first, NO_REF, me);
        }
        match self.by_cid.entry(cid_key) {
            Entry::Vacant(e) => {
                e.insert(Chain { first: me, last: me });
            }
            Entry::Occupied(mut e) => {
                let before = std::mem::replace(&mut e.get_mut().last, me);
                self.ios[slot as usize].cid_prev = before;
                if let Some(b) = self.get(before) {
                    self.ios[b].cid_next = me;
                }
            }
        }
        if kind == Kind::Read || kind == Kind::Write {
            if let Some(o) = self.by_key.insert(self.buffer_key(host, rkey, va), me).and_then(|r| self.get(r))
            {
                self.ios[o].shared_buffer = true;
                self.ios[slot as usize].shared_buffer = true;
            }
        }
        self.link_tail(slot);
        Some(slot as usize)
    }

    /// A SEND Middle or Last on `host` → `target`'s QP: the rest of a command capsule.
    pub fn capsule_packet(&mut self, at: At, target_qpn: u32, last: bool, hint: &mut u32) {
        let At { vantage: v, ts, host, target } = at;
        let v = vi(v);
        let Some(c) = self.conns.get_mut_recent_hinted(&ConnKey(host, target, target_qpn), hint) else {
            return;
        };
        let r = c.open_capsule[v];
        if last {
            c.open_capsule[v] = NO_REF;
        }
        if let (true, Some(i)) = (last, self.get(r)) {
            if self.ios[i].sqe_last.last(v, ts) {
                self.ios[i].retransmitted = true;
            }
        }
    }

    /// A READ Request from `target` to `host`: the data phase of a write if its RETH names
    /// a pending command's key and address (the READ is `len` bytes from `psn`). Returns
    /// the queue (the target's QPN) of the write's command if it was, and no other live
    /// I/O names the buffer.
    pub fn read_request(
        &mut self,
        at: At,
        psn: u32,
        len: u32,
        (rkey, va): (u32, u64),
        (sender, hint): (Option<u32>, &mut u32),
    ) -> Option<u32> {
        let At { vantage: v, ts, host, target } = at;
        let Some(i) = self.buffer_io(host, rkey, va) else {
            self.remember_early(
                (host, rkey, va),
                (sender, hint),
                Early { vantage: v, ts, target, psn, len: Some(len), first: false, again: false },
            );
            return None;
        };
        let v = vi(v);
        let me = Ref { slot: i as u32, generation: self.ios[i].generation };
        let io = &mut self.ios[i];
        // A later part of the data (the target READs it in several parts, each where the
        // last ended), or the first part: seen again at this vantage, a READ phase resent.
        let later_part = va != io.va;
        if io.read_request.first(v, ts) && !later_part {
            io.retransmitted = true;
        }
        let end = va.saturating_add(u64::from(len));
        let data_end = io.va.saturating_add(u64::from(io.bytes));
        if end > va && end < data_end && io.next_va.is_none_or(|n| n < end) {
            // The next part's READ starts where this one ends.
            if let Some(old) = io.next_va.replace(end) {
                self.forget_key(self.buffer_key(host, rkey, old), me);
            }
            self.by_key.insert(self.buffer_key(host, rkey, end), me);
        }
        let q = self.ios[i].target_qpn;
        let c = self.conn(host, target, q, hint);
        if !c.reads.iter().any(|e| e.io == Some(me) && e.psn == psn) {
            let n = usize::from(c.next_read);
            c.reads[n] = RingEntry { psn, io: Some(me) };
            c.read_lens[n] = len;
            c.next_read = ((n + 1) % CONN_RING) as u8;
            self.ios[i].reads = self.ios[i].reads.saturating_add(1);
        }
        self.queue_named(i)
    }

    /// Removes `key` from the I/Os' buffer keys if it names `me`.
    fn forget_key(&mut self, key: u64, me: Ref) {
        if let Entry::Occupied(o) = self.by_key.entry(key) {
            if *o.get() == me {
                o.remove();
            }
        }
    }

    /// An RDMA WRITE (First or Only) from `target` into `host`'s memory: a read's data phase
    /// if its RETH names a pending read's key and address. The same packet seen again at a
    /// vantage marks the I/O retransmitted. A WRITE First (`first`: where its flow found
    /// its connection) is remembered in its connection, for its Middle and Last packets
    /// sent again ([`IoTracker::data_write_again`]). Returns the queue (the target's QPN)
    /// of the read's command if it was a data phase, and no other live I/O names the
    /// buffer.
    pub fn data_write(
        &mut self,
        at: At,
        psn: u32,
        (rkey, va): (u32, u64),
        (sender, hint): (Option<u32>, &mut u32),
        first: bool,
    ) -> Option<u32> {
        let At { vantage: v, ts, host, target } = at;
        let Some(i) = self.buffer_io(host, rkey, va) else {
            self.remember_early(
                (host, rkey, va),
                (sender, hint),
                Early { vantage: v, ts, target, psn, len: None, first, again: false },
            );
            return None;
        };
        let v = vi(v);
        if self.ios[i].kind != Kind::Read {
            return None;
        }
        let again = self.ios[i].data_psn == Some(psn) && self.ios[i].data_write.at(v).is_some();
        self.ios[i].data_write.first(v, ts);
        self.ios[i].data_psn = Some(psn);
        if again {
            self.ios[i].retransmitted = true;
        }
        if !first {
            return self.queue_named(i);
        }
        let me = Ref { slot: i as u32, generation: self.ios[i].generation };
        let c = self.conn(host, target, self.ios[i].target_qpn, hint);
        if !c.writes.iter().any(|e| e.io == Some(me) && e.psn == psn) {
            let n = usize::from(c.next_write);
            c.writes[n] = RingEntry { psn, io: Some(me) };
            c.next_write = ((n + 1) % CONN_RING) as u8;
        }
        self.queue_named(i)
    }

    /// A data phase that named no live I/O's buffer: remembered (see `early`) with two
    /// vantages, when its sender's QP (`sender`, the target's) is an NVMe connection's that
    /// has state here (`hint`: where its flow found it last). Whether it is depends on this
    /// host pair's packets alone, not on what else the tracker holds (which, with several
    /// workers, is not what one worker's holds).
    #[inline]
    fn remember_early(
        &mut self,
        buffer: (IpAddr, u32, u64),
        (sender, hint): (Option<u32>, &mut u32),
        e: Early,
    ) {
        if self.wait_ns > 0 {
            let key = sender.map(|q| ConnKey(buffer.0, e.target, q));
            if key.is_some_and(|k| self.conns.get_hinted(&k, hint).is_some()) {
                self.remember_early_now(buffer, e);
            }
        }
    }

    /// Whether data phases that name no live I/O's buffer are remembered (two vantages).
    pub fn remembers_early(&self) -> bool {
        self.wait_ns > 0
    }

    #[cold]
    #[inline(never)]
    fn remember_early_now(&mut self, (host, rkey, va): (IpAddr, u32, u64), e: Early) {
        let key = self.buffer_key(host, rkey, va);
        // The first copy of a data phase keeps its time; one sent again marks it so.
        match self.early.get_mut(&key) {
            Some(first) if first.vantage == e.vantage && first.psn == e.psn => first.again = true,
            Some(_) => {}
            None => self.early.insert(key, e),
        }
    }

    /// I/O `i`, just begun by vantage `v`'s copy of its command: a data phase of its buffer
    /// the other vantage saw earlier (within the wait for a second vantage), which found
    /// no I/O then, is taken now as it would have been after the command (a write's data
    /// READ in parts, each part where the one before ended).
    #[cold]
    #[inline(never)]
    fn claim_early(&mut self, i: usize, v: usize) {
        let Io { host, target, rkey, va, created, .. } = self.ios[i];
        let mut key = self.buffer_key(host, rkey, va);
        let mut part_va = va;
        for _ in 0..CONN_RING {
            let Some(e) = self.early.get(&key).copied() else { return };
            if vi(e.vantage) == v || e.target != target || e.ts > created || created - e.ts > self.wait_ns {
                return;
            }
            self.early.remove(&key);
            if e.again {
                self.ios[i].retransmitted = true;
            }
            let at = At { vantage: e.vantage, ts: e.ts, host, target };
            let mut hint = NONE;
            let c = &mut self.ios[i].claimed[vi(e.vantage)];
            *c = (*c).max(1);
            match e.len {
                Some(len) => {
                    self.read_request(at, e.psn, len, (rkey, part_va), (None, &mut hint));
                    let c = &mut self.ios[i].claimed[vi(e.vantage)];
                    *c = c.saturating_add(1);
                }
                None => {
                    self.data_write(at, e.psn, (rkey, part_va), (None, &mut hint), e.first);
                    return;
                }
            }
            // A write's data READ in parts: the next one where this one ended.
            match self.ios[i].next_va {
                Some(next) if next != part_va => part_va = next,
                _ => return,
            }
            key = self.buffer_key(host, rkey, part_va);
        }
    }

    /// Vantage `v` sees its own copy of I/O `i`'s command after a data phase of its was
    /// taken for the I/O (see [`IoTracker::claim_early`]): that phase came before the
    /// command on `v`'s own clock, so it was another I/O's (one whose command both vantages
    /// missed, with the same buffer): taken back. Rare: out of line.
    #[cold]
    #[inline(never)]
    fn unclaim(&mut self, i: usize, v: usize) {
        let io = &mut self.ios[i];
        let parts = std::mem::take(&mut io.claimed[v]).saturating_sub(1);
        io.reads = io.reads.saturating_sub(parts);
        for a in [&mut io.read_request, &mut io.last_read_response, &mut io.data_write] {
            a.0[v] = None;
        }
        if io.data_write.at(1 - v).is_none() {
            io.data_psn = None;
        }
    }

    /// The live I/O whose command named the buffer (host, R_Key, address), if any.
    fn buffer_io(&self, host: IpAddr, rkey: u32, va: u64) -> Option<usize> {
        self.by_key.get(&self.buffer_key(host, rkey, va)).copied().and_then(|r| self.get(r))
    }

    /// The queue (the target's QPN) a data phase of I/O `i` names: none when another live
    /// I/O names its buffer too (see `Io::shared_buffer`).
    fn queue_named(&self, i: usize) -> Option<u32> {
        (!self.ios[i].shared_buffer).then_some(self.ios[i].target_qpn)
    }

    /// An RDMA WRITE Middle or Last from `target` into `host`'s memory that its flow had
    /// sent already (its PSN behind the one expected), on the QP pair whose target end is
    /// `target_qpn` (path MTU `mtu` if known): if it is one of the PSNs of a read's data
    /// WRITE this vantage saw begin (after its WRITE First, within the PSNs the read's
    /// length takes), the read is retransmitted. Rare: out of line.
    #[cold]
    #[inline(never)]
    pub fn data_write_again(&mut self, at: At, target_qpn: u32, psn: u32, mtu: Option<u32>, hint: &mut u32) {
        let At { vantage: v, host, target, .. } = at;
        let v = vi(v);
        let Some(c) = self.conns.get_hinted(&ConnKey(host, target, target_qpn), hint) else { return };
        // The newest WRITE First whose PSNs it is one of (the WRITE it belongs to: the ring
        // holds them as they came, in PSN order; nearly always the newest).
        let newest = usize::from(c.next_write) + CONN_RING - 1;
        let hit = (0..CONN_RING).map(|back| c.writes[(newest - back) % CONN_RING]).find_map(|e| {
            let i = self.get(e.io?)?;
            let offset = psn.wrapping_sub(e.psn) & 0x00FF_FFFF;
            (offset > 0 && offset < answer_psns(self.ios[i].bytes, mtu)).then_some(i)
        });
        if let Some(i) = hit {
            if self.ios[i].data_write.at(v).is_some() {
                self.ios[i].retransmitted = true;
            }
        }
    }

    /// The last READ Response (Last or Only) from `host` to `target`'s QP, whose path MTU is
    /// `mtu` if known.
    pub fn read_response_end(&mut self, at: At, target_qpn: u32, psn: u32, mtu: Option<u32>, hint: &mut u32) {
        let At { vantage: v, ts, host, target } = at;
        let v = vi(v);
        let Some(c) = self.conns.get_hinted(&ConnKey(host, target, target_qpn), hint) else { return };
        // Responses of a QP come in order: the READ is the one that started closest below,
        // if the response is one of its PSNs (else it answers a READ not followed).
        let within = |n: u32| answer_psns(n, mtu);
        let hit = c
            .reads
            .iter()
            .zip(&c.read_lens)
            .filter_map(|(e, &n)| e.io.map(|r| (psn.wrapping_sub(e.psn) & 0x00FF_FFFF, r, n)))
            .filter(|&(offset, r, n)| offset < within(n) && self.get(r).is_some())
            .min_by_key(|&(offset, _, _)| offset);
        if let Some(i) = hit.and_then(|(_, r, _)| self.get(r)) {
            let io = &mut self.ios[i];
            io.last_read_response.last(v, ts);
            if v == 1 {
                io.read_ends_at_storage = io.read_ends_at_storage.saturating_add(1);
                // More last responses at storage than READs: a resent READ phase.
                if io.read_ends_at_storage > io.reads {
                    io.retransmitted = true;
                }
            }
        }
    }

    /// A completion capsule from `target` to `host` (the target's QP when the pairing is
    /// known). Returns whether it answers a command this vantage saw (not a copy of one
    /// that finished).
    pub fn completion(
        &mut self,
        at: At,
        target_qpn: Option<u32>,
        cid: u16,
        packet: Packet,
        hint: &mut u32,
        rec: &mut LatencyRecorder,
    ) -> bool {
        let At { vantage: v, ts, host, target } = at;
        let Packet { psn, again } = packet;
        let vx = vi(v);
        // The same completion again (the target sent it twice), or the one it answers; a
        // copy sent again after its I/O finished answers none (see [`Packet`]).
        let first = self.cid_first(host, target, cid, target_qpn);
        let same = self.same_cid(first).find(|&i| self.ios[i].cqe_psn == Some(psn));
        // Or, not seen here before, the copy of one whose I/O the other vantage's copies
        // ended already (see [`IoTracker::copies_after_end`]).
        // By the queue when the completion's flow is paired; until then by the host, target,
        // CID and PSN alone (any queue's).
        let finished =
            self.recent.get(self.recent_key(host, target, target_qpn.unwrap_or(NONE), cid, psn, true));
        let after_end = !again && finished.is_some_and(|seen| seen & (1 << vx) == 0);
        let stale = (again && finished.is_some()) || after_end;
        if after_end && same.is_none() {
            self.copies_after_end[vx] += 1;
        }
        let answers = match same {
            Some(i) => Some(i),
            None if stale => None,
            None => self.answered_here((vx, ts), first, psn, target_qpn, rec),
        };
        let Some(i) = answers else {
            return false;
        };
        let saw_command = self.ios[i].sqe_first.at(vx).is_some();
        self.ios[i].cqe_psn = Some(psn);
        self.ios[i].cqe_psn_at[vx] = Some(psn);
        if self.ios[i].cqe.last(vx, ts) {
            self.ios[i].retransmitted = true;
        }
        let me = Ref { slot: i as u32, generation: self.ios[i].generation };
        if vx == 0 {
            let q = self.ios[i].target_qpn;
            let c = self.conn(host, target, q, hint);
            // The same completion sent again while its first copy still awaits the ACK keeps
            // its place: one place an I/O, so that a resent completion neither pushes
            // another I/O out early nor has its own I/O's ACK given up while one of its
            // places could still match.
            let held = c.live_completions().any(|k| c.completions[k].io == Some(me));
            let mut displaced = None;
            if !held {
                let n = usize::from(c.next_completion);
                let waiting = c.completions_live & (1 << n) != 0;
                displaced = c.completions[n].io.filter(|&r| waiting && r != me);
                c.completions[n] = RingEntry { psn, io: Some(me) };
                c.completions_live |= 1 << n;
                c.next_completion = ((n + 1) % CONN_RING) as u8;
            }
            // Every place holds a completion still awaiting the host's ACK: the oldest's ACK
            // can no longer be matched. A read that needs it for its compute segment
            // finishes now without it (rather than at `--io-timeout`), and the loss is
            // counted (once); any other I/O there did not need the ACK, or had it already (a
            // completion sent again after the ACK).
            let lost = |&o: &usize| {
                let io = &self.ios[o];
                io.needs_ack() && io.ack.at(0).is_none() && !io.ack_lost
            };
            if let Some(old) = displaced.and_then(|r| self.get(r)).filter(lost) {
                self.acks_lost += 1;
                self.ios[old].ack_lost = true;
                self.maybe_finish(old, ts, rec);
            }
        }
        // Finishing the displaced I/O can finish this one too (one that waited for the other
        // vantage gives way when the waiting list is full): only if it is still live.
        if let Some(i) = self.get(me) {
            self.maybe_finish(i, ts, rec);
        }
        saw_command
    }

    /// An acknowledgement from `host` to `target`'s QP covering PSNs up to `acked`: at the
    /// compute vantage it answers the completions it covers.
    pub fn ack(&mut self, at: At, target_qpn: u32, acked: u32, hint: &mut u32, rec: &mut LatencyRecorder) {
        let At { vantage: v, ts, host, target } = at;
        if vi(v) != 0 {
            return;
        }
        let Some(c) = self.conns.get_mut_recent_hinted(&ConnKey(host, target, target_qpn), hint) else {
            return;
        };
        // The completions it covers, in ring order.
        let mut covered = [NO_REF; CONN_RING];
        let mut n = 0;
        for k in c.live_completions() {
            let e = &mut c.completions[k % CONN_RING];
            if let Some(r) = e.io {
                if (acked.wrapping_sub(e.psn) & 0x00FF_FFFF) < (1 << 16) {
                    // At most CONN_RING places are live: the modulo only spares the check.
                    covered[n % CONN_RING] = r;
                    n += 1;
                    e.io = None;
                    c.completions_live &= !(1 << k);
                }
            }
        }
        for &r in &covered[..n] {
            if let Some(i) = self.get(r) {
                self.ios[i].ack.first(0, ts);
                self.maybe_finish(i, ts, rec);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::latency::LatencyRecorder;

    #[test]
    fn commands_beyond_the_room_are_counted_together_and_deltas_keep_their_places() {
        let io = |code| Command { set: CommandSet::Io, code };
        let mut c = CommandCounts::default();
        c.add(io(0), 2);
        let earlier = c;
        for code in 1..=9 {
            c.add(io(code), 1);
        }
        c.add(io(0), 1);
        // Eight places: flush (3) and seven more; the last two different commands together.
        assert_eq!(c.iter().count(), COMMAND_SLOTS);
        assert_eq!(c.iter().find(|(k, _)| *k == io(0)), Some((io(0), 3)));
        assert_eq!(c.rest(), 2);
        let d = c.since(&earlier);
        assert_eq!(d.iter().find(|(k, _)| *k == io(0)), Some((io(0), 1)));
        assert_eq!(d.iter().map(|(_, n)| n).sum::<u64>() + d.rest(), 10);
        // Merged into counts that hold other commands first.
        let mut total = CommandCounts::default();
        total.add(Command { set: CommandSet::Admin, code: 0x18 }, 4);
        total.merge(&d);
        assert_eq!(total.iter().map(|(_, n)| n).sum::<u64>() + total.rest(), 14);
        assert_eq!(total.rest(), 3, "the admin command took a place");
        let json = serde_json::to_value(total).unwrap();
        assert_eq!(json["admin.keep_alive"], 4);
        assert_eq!(json["other"], 3);
        assert_eq!(serde_json::from_value::<CommandCounts>(json).unwrap(), total);
    }

    /// A command capsule sent whole on QP 9 at `psn`, for the first time.
    fn sent(psn: u32) -> Sent {
        Sent { target_qpn: 9, psn, whole: true, again: false }
    }

    fn at(v: Vantage, ts: u64) -> At {
        At { vantage: v, ts, host: "10.0.0.1".parse().unwrap(), target: "10.0.0.2".parse().unwrap() }
    }

    fn read(cid: u16) -> Sqe {
        Sqe {
            opcode: crate::wire::nvme::opcode::READ,
            flags: crate::wire::nvme::FLAGS_SGL,
            cid,
            nsid: 1,
            sgl: Sgl::Keyed { address: 0x1000 * u64::from(cid + 1), length: 4096, key: 7, invalidate: false },
            slba: 0,
            nlb: 7,
        }
    }

    #[test]
    fn a_resent_data_write_marks_the_read_retransmitted() {
        let mut t = IoTracker::new(16, 1_000_000_000);
        let mut rec = LatencyRecorder::new(16, 4);
        // Where the packets' flow found its connection (one flow here).
        let mut h = NONE;
        let c = Vantage::Compute;
        t.command(at(c, 0), sent(100), &read(3), &mut h, &mut rec);
        assert!(t.data_write(at(c, 10), 500, (7, 0x4000), (None, &mut h), true).is_some());
        assert!(
            t.data_write(at(c, 11), 501, (7, 0x9999), (None, &mut h), true).is_none(),
            "another buffer is no read's data"
        );
        assert!(
            t.data_write(at(c, 20), 500, (7, 0x4000), (None, &mut h), true).is_some(),
            "the same WRITE again"
        );
        assert!(t.completion(at(c, 30), Some(9), 3, Packet { psn: 600, again: false }, &mut h, &mut rec));
        t.ack(at(c, 40), 9, 600, &mut h, &mut rec);
        let n = *t.counts().values().next().unwrap();
        assert_eq!((n.completed, n.retransmitted), (1, 1));
    }

    #[test]
    fn a_write_whose_times_are_far_apart_saturates_its_segments() {
        // A hostile capture's times: the storage vantage sees the command at 0, the READ
        // of its data at 2^63 ns, the last READ Response at 0 and the completion at
        // 2^63 + 1. Its storage segment (READ - command, plus completion - last response)
        // passes 2^64 ns: it saturates instead of overflowing.
        let mut t = IoTracker::new(4, 1_000_000_000);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let (c, s) = (Vantage::Compute, Vantage::Storage);
        let write = Sqe { opcode: crate::wire::nvme::opcode::WRITE, ..read(3) };
        let sent = sent(100);
        let half = 1u64 << 63;
        t.command(at(s, 0), sent, &write, &mut h, &mut rec);
        t.command(at(c, 0), sent, &write, &mut h, &mut rec);
        assert!(
            t.read_request(at(s, half), 500, 4096, (7, 0x4000), (None, &mut h)).is_some(),
            "the write's data phase"
        );
        t.read_response_end(at(s, 0), 9, 500, None, &mut h);
        let cqe = Packet { psn: 600, again: false };
        assert!(t.completion(at(s, half + 1), Some(9), 3, cqe, &mut h, &mut rec));
        assert!(t.completion(at(c, half + 2), Some(9), 3, cqe, &mut h, &mut rec));
        t.finish_all(&mut rec);
        let n = *t.counts().values().next().unwrap();
        assert_eq!(n.completed, 1);
    }

    /// Eight I/O queues between one host and one target use CID 3 at once (an initiator
    /// numbers each queue's commands from 0, so every busy queue uses the low CIDs): each
    /// completion finds its own queue's I/O and every I/O completes. With room for four
    /// I/Os a CID, the fifth queue's command pushed the first one's out, whose completion
    /// then found nothing and which timed out later.
    #[test]
    fn every_io_queue_may_use_a_cid_at_once() {
        let mut t = IoTracker::new(64, 1_000_000);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let c = Vantage::Compute;
        let queues = 10u32..18;
        for (k, q) in queues.clone().enumerate() {
            let buffer = 0x10_0000 * (k as u64 + 1);
            let sqe = Sqe {
                sgl: Sgl::Keyed { address: buffer, length: 4096, key: 7, invalidate: false },
                ..read(3)
            };
            let sent = Sent { target_qpn: q, psn: 100, whole: true, again: false };
            t.command(at(c, 1_000 + k as u64), sent, &sqe, &mut h, &mut rec);
        }
        // The completions in the reverse order, each on its queue, each ACKed by the host.
        for (k, q) in queues.clone().enumerate().rev() {
            let ts = 5_000 + 10 * k as u64;
            let cqe = Packet { psn: 600, again: false };
            assert!(t.completion(at(c, ts), Some(q), 3, cqe, &mut h, &mut rec), "queue {q}");
            t.ack(at(c, ts + 1), q, 600, &mut h, &mut rec);
        }
        t.expire(10_000_000, &mut rec);
        t.finish_all(&mut rec);
        let n = *t.counts().values().next().unwrap();
        assert_eq!((n.completed, n.timed_out, n.unfinished), (8, 0, 0));
    }

    /// A host with 1,024 I/O queues to one target uses CID 3 on every one at once (as
    /// Linux numbers each queue's commands from 0): each completion, on its queue, answers
    /// its own I/O, in whatever order they come, and a completion on a queue not paired
    /// yet answers none (every queue awaits one with that CID).
    #[test]
    fn a_cid_used_on_a_thousand_queues_at_once_follows_every_io() {
        let queues = 1024u32;
        let mut t = IoTracker::new(2 * queues as usize, 1_000_000_000);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let c = Vantage::Compute;
        for q in 0..queues {
            let sent = Sent { target_qpn: 1000 + q, psn: 100 + q, whole: true, again: false };
            t.command(at(c, u64::from(q)), sent, &read(3), &mut h, &mut rec);
        }
        let (host, target) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let every = t.cid_first(host, target, 3, None);
        assert_eq!(t.same_cid(every).count(), MAX_SAME_CID, "a walk over every queue is bounded");
        let unpaired = Packet { psn: 600, again: false };
        assert!(!t.completion(at(c, 5_000), None, 3, unpaired, &mut h, &mut rec));
        // The completions in an order of their own: odd queues newest first, then even.
        let order = (0..queues).rev().filter(|q| q % 2 == 1).chain((0..queues).filter(|q| q % 2 == 0));
        for (k, q) in order.enumerate() {
            let cqe = Packet { psn: 5_000 + q, again: false };
            let ts = 10_000 + k as u64;
            assert!(t.completion(at(c, ts), Some(1000 + q), 3, cqe, &mut h, &mut rec), "queue {q}");
            t.ack(at(c, ts), 1000 + q, 5_000 + q, &mut h, &mut rec);
        }
        assert_eq!(t.same_cid(t.cid_first(host, target, 3, None)).count(), 0);
        t.finish_all(&mut rec);
        let n = *t.counts().values().next().unwrap();
        assert_eq!((n.completed, n.timed_out, n.unfinished), (1024, 0, 0));
    }

    /// 255 reads with CID 3 on as many queues saw their completions and await the host's
    /// ACK; then two more queues' commands with CID 3 await their completions. A completion
    /// on a queue not paired yet could be either's: it answers neither, though the first
    /// of the two is the only one among the 256 oldest I/Os with the CID that awaits one.
    #[test]
    fn a_completion_of_an_unknown_queue_beyond_the_walk_answers_none() {
        let mut t = IoTracker::new(1024, 1_000_000_000);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let c = Vantage::Compute;
        for q in 0..257u32 {
            let sent = Sent { target_qpn: 1000 + q, psn: 100, whole: true, again: false };
            t.command(at(c, u64::from(q)), sent, &read(3), &mut h, &mut rec);
            if q < 255 {
                let cqe = Packet { psn: 600, again: false };
                assert!(t.completion(at(c, 1_000 + u64::from(q)), Some(1000 + q), 3, cqe, &mut h, &mut rec));
            }
        }
        let cqe = Packet { psn: 700, again: false };
        assert!(!t.completion(at(c, 5_000), None, 3, cqe, &mut h, &mut rec), "ambiguous");
        assert!(t.completion(at(c, 5_001), Some(1256), 3, cqe, &mut h, &mut rec), "its own queue's");
    }

    /// More I/Os with one CID on one queue than the bound: each seen at the storage
    /// vantage only, command and completion, waits for the compute vantage's copies; the
    /// queue uses its CID again meanwhile. As the 257th begins, the oldest ends (with what
    /// was seen: completed), so that a lookup by CID stays bounded.
    #[test]
    fn a_cid_used_again_on_a_queue_more_often_than_the_bound_ends_the_oldest() {
        let mut t = IoTracker::new(2 * MAX_SAME_CID, 1_000_000_000).with_vantage_wait(1_000_000_000);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let s = Vantage::Storage;
        for k in 0..=MAX_SAME_CID as u32 {
            let sent = Sent { target_qpn: 1000, psn: 100 + k, whole: true, again: false };
            t.command(at(s, 10 * u64::from(k)), sent, &read(3), &mut h, &mut rec);
            let cqe = Packet { psn: 600 + k, again: false };
            assert!(t.completion(at(s, 10 * u64::from(k) + 5), Some(1000), 3, cqe, &mut h, &mut rec));
        }
        let n = *t.counts().values().next().unwrap();
        assert_eq!((n.completed, n.timed_out), (1, 0));
        let first = t.cid_first("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), 3, Some(1000));
        let live: Vec<u32> = t.same_cid(first).map(|i| t.ios[i].sqe_psn).collect();
        assert_eq!(live.len(), MAX_SAME_CID);
        assert_eq!((live[0], live[MAX_SAME_CID - 1]), (101, 100 + MAX_SAME_CID as u32), "oldest first");
    }

    /// Seventeen reads on one QP see their completions before the host ACKs any: the ring
    /// of completions awaiting the ACK holds sixteen, so the first read's ACK can no longer
    /// be matched. It finishes at once, without its compute segment, and is counted (it
    /// waited for `--io-timeout` before); the ACK covering the rest finishes them.
    #[test]
    fn a_completion_pushed_out_of_the_ring_finishes_its_read_at_once() {
        let mut t = IoTracker::new(64, 1_000_000_000);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let c = Vantage::Compute;
        let n = CONN_RING as u16 + 1;
        for cid in 0..n {
            t.command(at(c, u64::from(cid)), sent(100 + u32::from(cid)), &read(cid), &mut h, &mut rec);
        }
        for cid in 0..n {
            let cqe = Packet { psn: 600 + u32::from(cid), again: false };
            assert!(t.completion(at(c, 1_000 + u64::from(cid)), Some(9), cid, cqe, &mut h, &mut rec));
        }
        let done = |t: &IoTracker| t.counts().values().next().unwrap().completed;
        assert_eq!((done(&t), t.acks_lost()), (1, 1));
        t.ack(at(c, 2_000), 9, 600 + u32::from(n) - 1, &mut h, &mut rec);
        assert_eq!((done(&t), t.counts().values().next().unwrap().timed_out), (u64::from(n), 0));
    }

    /// A read seen at both vantages: the target sends its completion twice before the host
    /// ACKs, then fifteen more reads on the QP complete, and one ACK covers them all. The
    /// read holds one place in the ring of sixteen, not two: no ACK is given up as lost
    /// (the second copy took a place, so the fifteenth completion pushed the first copy's
    /// out and counted the read's ACK lost while its ACK was still to come).
    #[test]
    fn a_completion_sent_twice_holds_one_place_awaiting_the_ack() {
        let mut t = IoTracker::new(64, 1_000_000_000);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let (c, s) = (Vantage::Compute, Vantage::Storage);
        t.command(at(s, 0), sent(100), &read(0), &mut h, &mut rec);
        t.command(at(c, 1), sent(100), &read(0), &mut h, &mut rec);
        let cqe = Packet { psn: 600, again: false };
        assert!(t.completion(at(c, 1_000), Some(9), 0, cqe, &mut h, &mut rec));
        assert!(t.completion(at(c, 1_010), Some(9), 0, Packet { again: true, ..cqe }, &mut h, &mut rec));
        let more = CONN_RING as u16 - 1;
        for cid in 1..=more {
            t.command(
                at(c, 2_000 + u64::from(cid)),
                sent(100 + u32::from(cid)),
                &read(cid),
                &mut h,
                &mut rec,
            );
            let cqe = Packet { psn: 600 + u32::from(cid), again: false };
            assert!(t.completion(at(c, 3_000 + u64::from(cid)), Some(9), cid, cqe, &mut h, &mut rec));
        }
        assert_eq!(t.acks_lost(), 0);
        t.ack(at(c, 4_000), 9, 600 + u32::from(more), &mut h, &mut rec);
        // The storage vantage's completion of the first read: it finishes with every segment.
        assert!(t.completion(at(s, 4_010), Some(9), 0, cqe, &mut h, &mut rec));
        let n = *t.counts().values().next().unwrap();
        assert_eq!((n.completed, n.timed_out, t.acks_lost()), (u64::from(more) + 1, 0, 0));
    }

    /// The storage mirror's copies come after their I/Os ended at the compute vantage,
    /// with room for the capsules of two finished I/Os. CID 0's first read lost its
    /// completion at both vantages; the host used CID 0 again. At storage the first read's
    /// command, forgotten by then, begins an I/O of its own; the second read's command, still
    /// remembered, is a copy after its I/O's end, and tells storage that CID 0 was used
    /// again: the stray I/O ends there, timed out. Its completion, forgotten by the time it
    /// comes, answers nothing. Before, the stray I/O stayed open and took that completion:
    /// a read completed from one read's command to the next one's completion.
    #[test]
    fn a_late_copy_of_a_reused_cid_ends_the_forgotten_command_it_follows() {
        let mut t = IoTracker::new(2, 1_000_000_000).with_vantage_wait(10);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let (c, s) = (Vantage::Compute, Vantage::Storage);
        let cqe = Packet { psn: 600, again: false };
        // Compute: CID 0's first read (no completion), then its second, which ends the
        // first; the second completes and is ACKed, and finishes after its wait.
        t.command(at(c, 0), sent(100), &read(0), &mut h, &mut rec);
        t.command(at(c, 10), sent(101), &read(0), &mut h, &mut rec);
        assert!(t.completion(at(c, 20), Some(9), 0, cqe, &mut h, &mut rec));
        t.ack(at(c, 30), 9, 600, &mut h, &mut rec);
        t.expire(100, &mut rec);
        // CID 1's read, finished the same way: the first read's command is forgotten.
        t.command(at(c, 200), sent(102), &read(1), &mut h, &mut rec);
        assert!(t.completion(at(c, 210), Some(9), 1, Packet { psn: 601, again: false }, &mut h, &mut rec));
        t.ack(at(c, 220), 9, 601, &mut h, &mut rec);
        t.expire(300, &mut rec);
        // Storage, late: the first read's command, then the second's.
        t.command(at(s, 1_000), sent(100), &read(0), &mut h, &mut rec);
        t.command(at(s, 1_010), sent(101), &read(0), &mut h, &mut rec);
        assert_eq!(t.take_copies_after_end(), [0, 1]);
        // CID 2's read at compute, finished: the second read's capsules are forgotten too.
        t.command(at(c, 1_100), sent(103), &read(2), &mut h, &mut rec);
        assert!(t.completion(at(c, 1_110), Some(9), 2, Packet { psn: 602, again: false }, &mut h, &mut rec));
        t.ack(at(c, 1_120), 9, 602, &mut h, &mut rec);
        t.expire(1_200, &mut rec);
        // Storage's copy of the second read's completion answers nothing.
        assert!(!t.completion(at(s, 1_300), Some(9), 0, cqe, &mut h, &mut rec));
        t.finish_all(&mut rec);
        let n = *t.counts().values().next().unwrap();
        assert_eq!((n.completed, n.timed_out, n.unfinished), (3, 2, 0));
    }

    /// The storage mirror drops its copy of a completion, and its clock runs behind the
    /// compute mirror's: storage sees the host use the CID again (t = 10) before compute's
    /// copy of the completion (t = 14). The I/O waits for that copy and completes; the next
    /// I/O's completion at storage is the next I/O's. (It was ended at the reuse, without a
    /// completion: counted as timed out.)
    #[test]
    fn a_vantage_behind_that_lost_a_completion_lets_the_other_complete_it() {
        let mut t = IoTracker::new(16, 1_000_000_000);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let (c, s) = (Vantage::Compute, Vantage::Storage);
        let flush = Sqe { opcode: 0x00, ..read(3) };
        t.command(at(s, 0), sent(100), &flush, &mut h, &mut rec);
        t.command(at(c, 2), sent(100), &flush, &mut h, &mut rec);
        // Storage's copy of the completion (psn 600) never comes.
        t.command(at(s, 10), sent(101), &flush, &mut h, &mut rec);
        let cqe = |psn| Packet { psn, again: false };
        assert!(t.completion(at(c, 14), Some(9), 3, cqe(600), &mut h, &mut rec));
        t.command(at(c, 16), sent(101), &flush, &mut h, &mut rec);
        assert!(t.completion(at(s, 30), Some(9), 3, cqe(601), &mut h, &mut rec));
        assert!(t.completion(at(c, 32), Some(9), 3, cqe(601), &mut h, &mut rec));
        t.finish_all(&mut rec);
        let n = *t.counts().values().next().unwrap();
        assert_eq!((n.completed, n.timed_out, n.unfinished), (2, 0, 0));
    }

    /// An I/O's segments, in [`Segment::ALL`]'s order.
    type Segments = [Option<u64>; 5];

    /// The segments of the I/Os finished since the last hand-over, by CID and completion
    /// time (at the vantage that gave the whole latency), and the outcomes counted so far
    /// (completed, timed out).
    fn finished(t: &mut IoTracker) -> (Vec<(u16, Segments)>, (u64, u64)) {
        let (mut pairs, mut slowest) = (Vec::new(), Vec::new());
        t.drain_interval(&mut pairs, &mut slowest);
        slowest.sort_by_key(|s| s.completed_ns);
        let n = t.counts().values().fold((0, 0), |(d, o), n| (d + n.completed, o + n.timed_out));
        (slowest.iter().map(|s| (s.cid, s.segments)).collect(), n)
    }

    /// The storage vantage's clock 10 behind the compute vantage's, the network 2 each way.
    /// CID 3's first read: compute's copy of its command lost, storage's of its completion
    /// lost; storage sees the host use CID 3 again (1,047, its clock) before compute's
    /// copy of that completion (1,052). The completion is the first read's (the older; the
    /// second read's command has yet to come at compute), which gets its compute segment
    /// (its ACK 1 later) and no other; the second read has all five. Before, the first read
    /// ended at the reuse, timed out, and compute's completion went to the second read,
    /// whose command came at compute after it: a compute time of 0.
    #[test]
    fn a_completion_before_a_reused_cid_s_command_is_the_older_io_s() {
        let mut t = IoTracker::new(16, 1_000_000_000).with_vantage_wait(100);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let (c, s) = (Vantage::Compute, Vantage::Storage);
        let cqe = |psn| Packet { psn, again: false };
        // CID 1, seen whole at both vantages: compute sees this pair's commands.
        t.command(at(s, 892), sent(99), &read(1), &mut h, &mut rec);
        t.command(at(c, 900), sent(99), &read(1), &mut h, &mut rec);
        assert!(t.completion(at(s, 930), Some(9), 1, cqe(599), &mut h, &mut rec));
        assert!(t.completion(at(c, 942), Some(9), 1, cqe(599), &mut h, &mut rec));
        t.ack(at(c, 943), 9, 599, &mut h, &mut rec);
        // CID 3's first read (sent at 1,000): storage's copy alone.
        t.command(at(s, 992), sent(100), &read(3), &mut h, &mut rec);
        // Its second (sent at 1,055) at storage, then the first's completion at compute.
        t.command(at(s, 1_047), sent(101), &read(3), &mut h, &mut rec);
        assert!(!t.completion(at(c, 1_052), Some(9), 3, cqe(600), &mut h, &mut rec));
        t.ack(at(c, 1_053), 9, 600, &mut h, &mut rec);
        t.command(at(c, 1_055), sent(101), &read(3), &mut h, &mut rec);
        assert!(t.completion(at(s, 1_090), Some(9), 3, cqe(601), &mut h, &mut rec));
        assert!(t.completion(at(c, 1_102), Some(9), 3, cqe(601), &mut h, &mut rec));
        t.ack(at(c, 1_103), 9, 601, &mut h, &mut rec);
        t.expire(2_000, &mut rec);
        let (ios, counts) = finished(&mut t);
        // io@compute, io@storage, compute, network, storage.
        assert_eq!(
            ios,
            [
                (1, [Some(42), Some(38), Some(1), Some(4), Some(38)]),
                (3, [Some(47), Some(43), Some(1), Some(4), Some(43)])
            ]
        );
        assert_eq!(counts, (3, 0));
    }

    /// The storage vantage's clock 50 ahead of the compute vantage's, the network 2 each
    /// way. Compute loses its copies of CID 3's first completion (PSN 600) and of the next
    /// command with CID 3: its next completion (PSN 601, at 1,082) is taken for the first
    /// read's, whose storage copy (PSN 600, at 1,090) has not come yet. Two PSNs are two
    /// completions: the later one is not the first read's, which gets storage's segments
    /// alone; the second read, seen only at storage, likewise. Before, the first read got
    /// a compute time of 82 (from its command to the second read's completion) and a
    /// network time of 44.
    #[test]
    fn two_vantages_completions_with_different_psns_give_no_joined_segment() {
        let mut t = IoTracker::new(16, 1_000_000_000).with_vantage_wait(100);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let (c, s) = (Vantage::Compute, Vantage::Storage);
        let cqe = |psn| Packet { psn, again: false };
        t.command(at(c, 1_000), sent(100), &read(3), &mut h, &mut rec);
        t.command(at(s, 1_052), sent(100), &read(3), &mut h, &mut rec);
        assert!(t.completion(at(c, 1_082), Some(9), 3, cqe(601), &mut h, &mut rec));
        t.ack(at(c, 1_083), 9, 601, &mut h, &mut rec);
        assert!(t.completion(at(s, 1_090), Some(9), 3, cqe(600), &mut h, &mut rec));
        t.command(at(s, 1_097), sent(101), &read(3), &mut h, &mut rec);
        assert!(t.completion(at(s, 1_130), Some(9), 3, cqe(601), &mut h, &mut rec));
        t.expire(2_000, &mut rec);
        let (ios, counts) = finished(&mut t);
        assert_eq!(
            ios,
            [(3, [None, Some(38), None, None, Some(38)]), (3, [None, Some(33), None, None, Some(33)])]
        );
        assert_eq!(counts, (2, 0));
    }

    /// Compute loses a read's completion and sees the host use its CID again; storage has
    /// seen nothing of the read: it waits `--reorder-window` for storage's copies. The
    /// input ends during the wait: timed out, as at the wait's end, not unfinished.
    #[test]
    fn an_io_waiting_for_the_other_vantage_after_its_lost_completion_times_out_at_the_end() {
        let mut t = IoTracker::new(16, 1_000_000_000).with_vantage_wait(1_000);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let c = Vantage::Compute;
        t.command(at(c, 0), sent(100), &read(3), &mut h, &mut rec);
        t.command(at(c, 100), sent(101), &read(3), &mut h, &mut rec);
        t.finish_all(&mut rec);
        let n = *t.counts().values().next().unwrap();
        assert_eq!((n.completed, n.timed_out, n.unfinished), (0, 1, 1));
    }

    #[test]
    fn timeouts_free_the_io_and_overflow_is_counted() {
        let mut t = IoTracker::new(2, 1_000);
        let mut rec = LatencyRecorder::new(16, 4);
        // Where the packets' flow found its connection (one flow here).
        let mut h = NONE;
        let c = Vantage::Compute;
        t.command(at(c, 0), sent(100), &read(1), &mut h, &mut rec);
        t.command(at(c, 1), sent(101), &read(2), &mut h, &mut rec);
        t.command(at(c, 2), sent(102), &read(3), &mut h, &mut rec); // table full
        t.expire(5_000, &mut rec);
        t.command(at(c, 5_001), sent(103), &read(4), &mut h, &mut rec); // room again
        t.finish_all(&mut rec);
        let n = *t.counts().values().next().unwrap();
        assert_eq!((n.timed_out, n.overflowed, n.unfinished, n.completed), (2, 1, 1, 0));
        assert_eq!(rec.dropped_samples, 0);
    }

    /// Packet time stepped back: I/Os begun since then begin before those awaited from
    /// before it. Each times out (or ends its wait for the other vantage) at the first time
    /// past its own, not behind the ones begun earlier in the list.
    #[test]
    fn ios_begun_after_a_step_back_end_by_their_own_times() {
        let mut t = IoTracker::new(16, 1_000).with_vantage_wait(10);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let c = Vantage::Compute;
        let count =
            |t: &IoTracker| t.counts().values().fold((0, 0), |(d, o), n| (d + n.completed, o + n.timed_out));
        // Before the step: CID 1 (no completion) and CID 2, complete at compute at 10,020
        // and waiting for storage until 10,030.
        t.command(at(c, 10_000), sent(100), &read(1), &mut h, &mut rec);
        t.command(at(c, 10_010), sent(101), &read(2), &mut h, &mut rec);
        assert!(t.completion(at(c, 10_020), Some(9), 2, Packet { psn: 600, again: false }, &mut h, &mut rec));
        t.ack(at(c, 10_020), 9, 600, &mut h, &mut rec);
        // After it: CID 3 (no completion) and CID 4, complete at 120, waiting until 130.
        t.command(at(c, 100), sent(102), &read(3), &mut h, &mut rec);
        t.command(at(c, 110), sent(103), &read(4), &mut h, &mut rec);
        assert!(t.completion(at(c, 120), Some(9), 4, Packet { psn: 601, again: false }, &mut h, &mut rec));
        t.ack(at(c, 120), 9, 601, &mut h, &mut rec);
        assert_eq!(t.next_due(), Some(130));
        t.expire(131, &mut rec);
        assert_eq!(count(&t), (1, 0));
        assert_eq!(t.next_due(), Some(1_100));
        t.expire(1_101, &mut rec);
        assert_eq!(count(&t), (1, 1));
        // Then the clock comes back past those from before the step.
        assert_eq!(t.next_due(), Some(10_030));
        t.expire(11_001, &mut rec);
        assert_eq!(count(&t), (2, 2));
        assert_eq!(t.next_due(), None);
    }

    #[test]
    fn a_capsule_behind_its_flow_is_dropped_only_if_its_io_finished() {
        let mut t = IoTracker::new(16, 1_000_000_000);
        let mut rec = LatencyRecorder::new(16, 4);
        let mut h = NONE;
        let c = Vantage::Compute;
        let cqe = |psn, again| Packet { psn, again };
        // CID 3: a read, its completion at PSN 600 and the host's ACK of it: finished.
        t.command(at(c, 0), sent(100), &read(3), &mut h, &mut rec);
        assert!(t.completion(at(c, 30), Some(9), 3, cqe(600, false), &mut h, &mut rec));
        t.ack(at(c, 40), 9, 600, &mut h, &mut rec);
        // The next read reuses CID 3.
        t.command(at(c, 50), sent(101), &read(3), &mut h, &mut rec);
        // The first completion and the first command sent again: they belong to the I/O
        // that finished, so the first answers nothing and the second begins nothing (nor
        // ends the live I/O as one that lost its completion).
        assert!(!t.completion(at(c, 60), Some(9), 3, cqe(600, true), &mut h, &mut rec));
        t.command(at(c, 70), Sent { again: true, ..sent(100) }, &read(3), &mut h, &mut rec);
        // A completion behind its flow's PSN that no finished I/O had (lost upstream of
        // this vantage, then resent): it completes the live I/O.
        assert!(t.completion(at(c, 80), Some(9), 3, cqe(601, true), &mut h, &mut rec));
        t.ack(at(c, 90), 9, 601, &mut h, &mut rec);
        t.finish_all(&mut rec);
        let n = *t.counts().values().next().unwrap();
        assert_eq!((n.completed, n.timed_out, n.unfinished, n.retransmitted), (2, 0, 0, 0));
    }

    #[test]
    fn the_slowest_kept_do_not_depend_on_the_order_offered() {
        // (latency, completed at, CID). The three slowest, by hand: the three 9 µs I/Os, the
        // earliest completed first (the rank's tie-break); the 7 µs one is left out.
        let offered = [(5, 50, 1), (9, 90, 2), (1, 10, 3), (9, 30, 4), (7, 70, 5), (3, 20, 6), (9, 95, 7)];
        let io = |&(io_ns, completed_ns, cid): &(u64, u64, u16)| SlowIo {
            io_ns,
            completed_ns,
            initiator: "10.0.0.1".parse().unwrap(),
            target: "10.0.0.2".parse().unwrap(),
            op: Op::NvmeRead,
            qpn: 9,
            cid,
            bytes: 4096,
            segments: [None; 5],
        };
        let mut orders = vec![offered.to_vec(), offered.iter().rev().copied().collect()];
        let mut rotated = offered.to_vec();
        rotated.rotate_left(3);
        orders.push(rotated);
        for order in orders {
            let mut s = Slowest::new(3);
            order.iter().for_each(|o| s.offer(io(o)));
            let kept: Vec<u16> = s.sorted().iter().map(|i| i.cid).collect();
            assert_eq!(kept, [4, 2, 7], "offered as {order:?}");
            let mut out = Vec::new();
            s.drain_into(&mut out);
            order.iter().take(2).for_each(|o| s.offer(io(o)));
            assert_eq!(s.sorted().len(), 2, "after a hand-over the list fills again");
        }
        // One CID used twice on a queue within a clock tick: equal but for their sizes, the
        // same one is kept whichever comes first.
        let (a, b) = (SlowIo { bytes: 1536, ..io(&(9, 90, 3)) }, SlowIo { bytes: 8704, ..io(&(9, 90, 3)) });
        for pair in [[a, b], [b, a]] {
            let mut s = Slowest::new(1);
            pair.into_iter().for_each(|o| s.offer(o));
            assert_eq!(s.sorted()[0].bytes, 1536);
        }
    }
}
