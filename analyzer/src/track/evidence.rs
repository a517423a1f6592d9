//! Evidence on demand (docs/EVIDENCE.md), the worker's half: with `--evidence-dir`, every
//! tracked packet's first `--evidence-snaplen` bytes go into a ring of the worker's most
//! recent packets; the trackers raise signals (a PSN gap, a NAK, a retransmission, a CNP,
//! an I/O slower than `--evidence-slow-io`, ...), signals of one episode are joined into one
//! event, and each event's packets (the flows of its QP, both directions, both vantages:
//! `--evidence-before` from the ring, then `--evidence-after` as they come) are copied into
//! a record allocated at start-up. A finished record goes to the stats side, which writes
//! the pcapng file (`report::evidence`) and hands the record back. Nothing here allocates.

use super::flow::FlowKey;
use super::Vantage;
use crate::metrics::latency::Op;
use crossbeam_channel::{Receiver, Sender};
use std::net::IpAddr;

/// The worker's ring of recent packets (each up to the snap length): 1 MiB at the default
/// snap length, so that writing it every packet stays in the core's L2 cache instead of
/// evicting flow state (measured: a ring of 16,384 cost three times as much per packet on
/// cache-cold traffic, and one written with non-temporal stores more still).
pub const RING_PACKETS: usize = 4_096;
/// Events collecting their packets at once, per worker; beyond it an event gets no file.
pub const MAX_OPEN: usize = 16;
/// Events without a file collecting the signals of their verdict at once, per worker
/// (see [`Collecting::Verdict`]); beyond it an event's verdict is its first signal's.
const MAX_VERDICT_ONLY: usize = 16;
/// Packets one file holds at most (before, the event's own window, after).
pub const FILE_PACKETS: usize = 1024;
/// Episodes remembered for joining later signals to them: the latest of each QP and kind
/// of episode, in a table of this many places by their hash (a new episode takes its
/// place's; a flood of signals costs one lookup each).
const EPISODES: usize = 1024;
/// A loss or RNR episode is joined by signals naming its PSN for this long after its last.
const EPISODE_MEMORY_NS: u64 = 1_000_000_000;
/// Records allocated at start-up: the open events' and those on their way to the stats
/// side and back.
const SPARE_RECORDS: usize = MAX_OPEN + 4;
const NS_PER_MINUTE: u64 = 60_000_000_000;

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventKind {
    /// The start of a loss episode on a QP: a PSN gap, a NAK sequence error or a
    /// retransmission, joined by the PSN where the loss began.
    Loss,
    /// An RNR NAK (and the retransmission that follows it).
    RnrNak,
    /// A burst of CNPs and ECN-CE marks on a QP (ended by `--flow-idle` without one).
    Congestion,
    /// An NVMe I/O slower than `--evidence-slow-io`.
    SlowIo,
    /// An NVMe I/O without its completion after `--io-timeout`.
    IoTimeout,
    /// Packets whose ICRC was wrong (with `--check-icrc`), a burst on a QP.
    IcrcError,
}

impl EventKind {
    pub const ALL: [EventKind; 6] =
        [Self::Loss, Self::RnrNak, Self::Congestion, Self::SlowIo, Self::IoTimeout, Self::IcrcError];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Loss => "loss",
            Self::RnrNak => "rnr_nak",
            Self::Congestion => "congestion",
            Self::SlowIo => "slow_io",
            Self::IoTimeout => "io_timeout",
            Self::IcrcError => "icrc_error",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

/// How long an event keeps collecting packets after it (`--evidence-after`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// This many more packets of its flows.
    Packets(u32),
    /// Packets of its flows until this long (packet time) after it.
    Time(u64),
}

/// `--evidence-*`, as the worker needs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvidenceConfig {
    pub before: u32,
    pub after: After,
    pub snaplen: u32,
    /// An I/O slower than this is an event.
    pub slow_io_ns: u64,
    /// Files per event kind and minute of packet time (the stats side holds the run's
    /// count; each worker stops copying for a kind once it alone reached it).
    pub max_per_minute: u32,
    /// A congestion or ICRC burst ends after this long without a mark (`--flow-idle`).
    pub burst_gap_ns: u64,
    /// When every record is on its way to the stats side, wait for one to come back (a
    /// replay, which loses nothing) rather than leave the event without a file (live).
    pub wait_for_records: bool,
}

/// The QP an event belongs to, by its request direction: the requester, the responder and
/// the responder's QPN (a packet's flow key without the vantage).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Qp {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dst_qpn: u32,
}

impl Qp {
    pub fn of(k: &FlowKey) -> Self {
        Self { src: k.src, dst: k.dst, dst_qpn: k.dst_qpn }
    }
}

/// What the wire showed of an event (its verdict), counted as its signals came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// `gap_psns`, `naks`: the PSNs each vantage (compute, storage) saw skipped and the
    /// NAKs it saw; one packet lost upstream of both vantages is missing at each, one NAK
    /// is seen at each.
    Loss {
        psn: u32,
        gap_psns: [u64; 2],
        naks: [u32; 2],
        retransmitted: bool,
    },
    RnrNak {
        psn: u32,
        naks: [u32; 2],
        retransmitted: bool,
    },
    /// Per vantage, as `naks`: one CNP or marked packet is seen at each.
    Congestion {
        cnps: [u32; 2],
        ce: [u32; 2],
    },
    SlowIo {
        op: Op,
        cid: u16,
        io_ns: u64,
        bytes: u32,
    },
    IoTimeout {
        op: Op,
        cid: u16,
        waited_ns: u64,
    },
    IcrcError {
        packets: [u32; 2],
    },
}

/// One event: its kind, time (of its first signal), QP, the vantage that saw it first and
/// its verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub ts: u64,
    pub qp: Qp,
    pub vantage: Vantage,
    pub verdict: Verdict,
}

/// Why an event got no file on the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Its packets are in the record.
    Kept,
    /// Its kind had its `--evidence-max-per-minute` files in that minute already.
    CappedPerMinute,
    /// Every record was busy with other events (or on its way to the stats side).
    NoRoom,
}

/// An event that got no file, and why: listed with the worker's next interval report (one
/// message for all of them, however many a flood brings).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFile {
    pub event: Event,
    pub status: Status,
}

/// Events without a file an interval can list per worker (more are counted as dropped).
pub const NO_FILE: usize = 4096;

/// A kept packet: where its bytes are in a buffer, and what the file says of it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Kept {
    pub ts: u64,
    /// The frame's length on the wire (of the whole captured frame, ERSPAN included).
    pub wire_len: u32,
    /// Bytes kept (at most the snap length).
    pub len: u32,
    pub vantage: Vantage,
    /// Its flow's slot (in the ring; not meaningful in a record).
    pub slot: u32,
}

/// An event and its packets, as the worker hands it to the stats side (which writes the
/// file and hands the emptied record back).
#[derive(Debug, Clone)]
pub struct EvidenceRecord {
    pub event: Event,
    pub status: Status,
    pub packets: Vec<Kept>,
    /// The packets' bytes, one after the other.
    pub bytes: Vec<u8>,
    /// The packet that raised the event, if the record holds it (an I/O timeout has none:
    /// time raised it).
    pub trigger: Option<usize>,
    /// An I/O event's command (its first copy), if the record holds it.
    pub command: Option<usize>,
    /// Packets of the event's flows that did not fit in the record.
    pub truncated: u32,
    /// The worker's pool the record goes back to once its file is written
    /// ([`EvidenceRecord::send_home`]); `None` for an event without a record.
    pub home: Option<Sender<EvidenceRecord>>,
}

impl EvidenceRecord {
    /// Hands the record back to the worker it came from, emptied (the stats side, once its
    /// file is written).
    pub fn send_home(mut self) {
        if let Some(home) = self.home.clone() {
            self.clear();
            // The pool has room for every record it owns: this never waits.
            let _ = home.try_send(self);
        }
    }

    fn with_capacity(snaplen: u32, home: Sender<EvidenceRecord>) -> Self {
        Self {
            event: Event {
                kind: EventKind::Loss,
                ts: 0,
                qp: Qp { src: IpAddr::from([0u8; 4]), dst: IpAddr::from([0u8; 4]), dst_qpn: 0 },
                vantage: Vantage::Compute,
                verdict: Verdict::IcrcError { packets: [0; 2] },
            },
            status: Status::Kept,
            packets: Vec::with_capacity(FILE_PACKETS),
            bytes: Vec::with_capacity(FILE_PACKETS * snaplen as usize),
            trigger: None,
            command: None,
            truncated: 0,
            home: Some(home),
        }
    }

    fn push(&mut self, k: Kept, data: &[u8]) -> bool {
        if self.packets.len() == self.packets.capacity()
            || self.bytes.len() + data.len() > self.bytes.capacity()
        {
            self.truncated += 1;
            return false;
        }
        self.packets.push(k);
        self.bytes.extend_from_slice(data);
        true
    }

    /// The bytes of packet `i`.
    pub fn data(&self, i: usize) -> &[u8] {
        let start: usize = self.packets[..i].iter().map(|k| k.len as usize).sum();
        &self.bytes[start..start + self.packets[i].len as usize]
    }

    /// Empties it for another event (keeps its buffers).
    pub fn clear(&mut self) {
        self.packets.clear();
        self.bytes.clear();
        self.trigger = None;
        self.command = None;
        self.truncated = 0;
    }
}

/// What a tracker saw that may start or join an event. `psn` is where a loss began: the
/// first PSN a gap skipped, the PSN a NAK refuses, the first PSN a retransmission sends
/// again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Gap { psn: u32, skipped: u32 },
    NakSeq { psn: u32 },
    RnrNak { psn: u32 },
    Retransmission { psn: u32 },
    Cnp,
    Ce,
    Icrc,
}

/// A signal raised on a flow, with the QP it belongs to (see [`Qp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raised {
    pub slot: u32,
    pub vantage: Vantage,
    pub qp: Qp,
    pub signal: Signal,
    pub ts: u64,
}

/// An I/O event raised by the I/O tracker: the QP of its command, its time window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IoRaised {
    pub kind: EventKind,
    pub qp: Qp,
    pub vantage: Vantage,
    /// Its command (first seen) and its completion or timeout.
    pub start_ns: u64,
    pub end_ns: u64,
    pub verdict: Verdict,
}

/// Signals raised while a packet was tracked, for [`Evidence`] to take (a small buffer
/// allocated at start-up; beyond it signals are counted as lost).
#[derive(Debug, Default)]
pub struct Signals {
    pub on: bool,
    pub flows: Vec<Raised>,
    pub lost: u64,
}

const SIGNALS: usize = 64;

impl Signals {
    pub fn enabled() -> Self {
        Self { on: true, flows: Vec::with_capacity(SIGNALS), lost: 0 }
    }

    #[inline]
    pub fn raise(&mut self, r: Raised) {
        if self.flows.len() < self.flows.capacity() {
            self.flows.push(r);
        } else {
            self.lost += 1;
        }
    }

    #[inline]
    pub fn any(&self) -> bool {
        !self.flows.is_empty()
    }
}

/// An episode remembered for joining: its kind, QP, PSN (loss and RNR) and last signal.
#[derive(Debug, Clone, Copy)]
struct Episode {
    kind: EventKind,
    qp: Qp,
    psn: u32,
    last_ts: u64,
    /// Its place in `open` while it collects packets (matched by `id`).
    id: u64,
}

/// An event collecting its packets.
#[derive(Debug)]
struct Open {
    id: u64,
    slots: [u32; 8],
    n: usize,
    after: u32,
    deadline: u64,
    what: Collecting,
}

/// What an open event collects until its `--evidence-after` bound: its packets, in a
/// record; or, an event that gets no file (capped per minute, or no record free), only
/// the signals its verdict counts, so that its verdict is the one a file would have had
/// (and the same whichever worker capped it: each worker caps its own events too).
#[derive(Debug)]
enum Collecting {
    Record(EvidenceRecord),
    Verdict(NoFile),
}

impl Collecting {
    fn verdict(&mut self) -> &mut Verdict {
        match self {
            Self::Record(r) => &mut r.event.verdict,
            Self::Verdict(n) => &mut n.event.verdict,
        }
    }
}

impl Open {
    fn watches(&self, slot: u32) -> bool {
        self.slots[..self.n].contains(&slot)
    }

    fn watch(&mut self, slot: u32) {
        if !self.watches(slot) && self.n < self.slots.len() {
            self.slots[self.n] = slot;
            self.n += 1;
        }
    }
}

/// The worker's evidence: its ring of recent packets, the events collecting theirs, the
/// episodes remembered, and the records at hand.
pub struct Evidence {
    cfg: EvidenceConfig,
    /// `RING_PACKETS` places of `stride` bytes (the snap length).
    ring: Vec<u8>,
    stride: usize,
    meta: Vec<Kept>,
    /// Packets kept so far (the next one's place is `seq % RING_PACKETS`).
    seq: u64,
    open: Vec<Open>,
    episodes: Vec<Option<Episode>>,
    hasher: ahash::RandomState,
    next_id: u64,
    /// Per kind: the minute (of packet time) and the files started in it.
    minute: [(u64, u32); 6],
    spare: Vec<EvidenceRecord>,
    /// Where the stats side sends records back.
    back: Receiver<EvidenceRecord>,
    /// Events without a file since the last interval report, and those beyond its room.
    no_file: Vec<NoFile>,
    pub no_file_lost: u64,
}

impl Evidence {
    pub fn new(cfg: EvidenceConfig) -> Self {
        let stride = cfg.snaplen as usize;
        let ring = vec![0u8; RING_PACKETS * stride];
        let (home, back) = crossbeam_channel::bounded(SPARE_RECORDS);
        Self {
            cfg,
            back,
            ring,
            stride,
            meta: vec![Kept::default(); RING_PACKETS],
            seq: 0,
            open: Vec::with_capacity(MAX_OPEN + MAX_VERDICT_ONLY),
            episodes: vec![None; EPISODES],
            hasher: ahash::RandomState::with_seeds(1, 2, 3, 4),
            next_id: 1,
            minute: [(u64::MAX, 0); 6],
            spare: (0..SPARE_RECORDS)
                .map(|_| EvidenceRecord::with_capacity(cfg.snaplen, home.clone()))
                .collect(),
            no_file: Vec::with_capacity(NO_FILE),
            no_file_lost: 0,
        }
    }

    /// Hands the events without a file over in `into` (an emptied buffer that comes back
    /// from the stats side; the one taken in its place keeps room for [`NO_FILE`]).
    pub fn drain_no_file(&mut self, into: &mut Vec<NoFile>) {
        into.clear();
        std::mem::swap(&mut self.no_file, into);
        self.no_file.reserve(NO_FILE);
    }

    /// A record to fill: one at hand, or one the stats side sent back (waiting for it
    /// with `wait_for_records`, unless the stats side is gone).
    fn record(&mut self) -> Option<EvidenceRecord> {
        while let Ok(r) = self.back.try_recv() {
            self.spare.push(r);
        }
        if let Some(r) = self.spare.pop() {
            return Some(r);
        }
        if self.cfg.wait_for_records {
            return self.back.recv_timeout(std::time::Duration::from_secs(10)).ok();
        }
        None
    }

    fn ring_at(&self, seq: u64) -> (&Kept, &[u8]) {
        let at = (seq % RING_PACKETS as u64) as usize;
        let k = &self.meta[at];
        let from = at * self.stride;
        (k, &self.ring[from..from + k.len as usize])
    }

    /// Keeps one tracked packet (of the flow in `slot`) in the ring and in every event
    /// collecting its flow's packets. The records it completes are closed by the next
    /// [`Evidence::observe`]: the analyzer joins the signals the packet raised first, so
    /// that a record's verdict counts those of its last packet.
    pub fn hold(&mut self, slot: u32, frame: &[u8], wire_len: u32, ts: u64, vantage: Vantage) {
        let snap = self.cfg.snaplen as usize;
        let at = (self.seq % RING_PACKETS as u64) as usize;
        let len = frame.len().min(snap);
        let from = at * self.stride;
        self.ring[from..from + len].copy_from_slice(&frame[..len]);
        let k = Kept { ts, wire_len, len: len as u32, vantage, slot };
        self.meta[at] = k;
        self.seq += 1;
        if self.open.is_empty() {
            return;
        }
        for o in self.open.iter_mut() {
            if o.watches(slot) {
                if let Collecting::Record(rec) = &mut o.what {
                    rec.push(k, &frame[..len]);
                }
                o.after += 1;
            }
        }
    }

    /// Time moved on to `now`: the records complete by then go to `out` (after
    /// `--evidence-after N` packets, or with `--evidence-after DUR` by time).
    pub fn observe(&mut self, now: u64, out: &mut impl FnMut(EvidenceRecord)) {
        if !self.open.is_empty() {
            self.close_due(now, out);
        }
    }

    fn close_due(&mut self, now: u64, out: &mut impl FnMut(EvidenceRecord)) {
        let after = self.cfg.after;
        let due = |o: &Open| match after {
            After::Packets(n) => o.after >= n,
            After::Time(_) => now >= o.deadline,
        };
        if !self.open.iter().any(due) {
            return;
        }
        let mut i = 0;
        while i < self.open.len() {
            if due(&self.open[i]) {
                let o = self.open.swap_remove(i);
                self.close(o, out);
            } else {
                i += 1;
            }
        }
    }

    /// An event done with: its record to `out`, or, without one, on the list of events
    /// without a file.
    fn close(&mut self, o: Open, out: &mut impl FnMut(EvidenceRecord)) {
        match o.what {
            Collecting::Record(rec) => out(rec),
            Collecting::Verdict(n) => self.no_file(n),
        }
    }

    fn no_file(&mut self, n: NoFile) {
        if self.no_file.len() < self.no_file.capacity() {
            self.no_file.push(n);
        } else {
            self.no_file_lost += 1;
        }
    }

    /// The end: every open event goes out with what it has.
    pub fn finish(&mut self, out: &mut impl FnMut(EvidenceRecord)) {
        // In the order they began.
        let mut open = std::mem::take(&mut self.open);
        for o in open.drain(..) {
            self.close(o, out);
        }
        self.open = open;
    }

    /// The place of a QP's episodes of a kind: loss and RNR share theirs (the retransmission
    /// after an RNR NAK joins it).
    fn place(&self, qp: &Qp, kind: EventKind) -> usize {
        let class = match kind {
            EventKind::Loss | EventKind::RnrNak => 0u8,
            k => k as u8,
        };
        self.hasher.hash_one((qp, class)) as usize & (EPISODES - 1)
    }

    /// A signal raised on a flow (`slots` gives its QP's flows, at every vantage, when they
    /// are needed): it joins the episode it belongs to, or starts an event.
    pub fn signal(
        &mut self,
        r: Raised,
        slots: impl FnOnce(&mut [u32; 8]) -> usize,
        out: &mut impl FnMut(EvidenceRecord),
    ) {
        let gap = self.cfg.burst_gap_ns;
        let (kind, psn) = match r.signal {
            Signal::Gap { psn, .. } | Signal::NakSeq { psn } | Signal::Retransmission { psn } => {
                (EventKind::Loss, psn)
            }
            Signal::RnrNak { psn } => (EventKind::RnrNak, psn),
            Signal::Cnp | Signal::Ce => (EventKind::Congestion, 0),
            Signal::Icrc => (EventKind::IcrcError, 0),
        };
        let ts = r.ts;
        let place = self.place(&r.qp, kind);
        let joined = self.episodes[place].as_mut().filter(|e| {
            e.qp == r.qp
                && match kind {
                    // A loss's signals, and the retransmission after an RNR NAK, name the
                    // PSN the episode began at.
                    EventKind::Loss => {
                        matches!(e.kind, EventKind::Loss | EventKind::RnrNak)
                            && e.psn == psn
                            && ts.saturating_sub(e.last_ts) <= EPISODE_MEMORY_NS
                    }
                    EventKind::RnrNak => {
                        e.kind == kind && e.psn == psn && ts.saturating_sub(e.last_ts) <= EPISODE_MEMORY_NS
                    }
                    _ => e.kind == kind && ts.saturating_sub(e.last_ts) <= gap,
                }
        });
        if let Some(e) = joined {
            e.last_ts = e.last_ts.max(ts);
            let id = e.id;
            // The packet that raised the signal, kept (`hold`) before the analyzer took its
            // signals: the ring's newest, if it is of the signal's flow.
            let newest = self.seq.checked_sub(1).map(|s| (s % RING_PACKETS as u64) as usize);
            if let Some(o) = self.open.iter_mut().find(|o| o.id == id) {
                let had = o.watches(r.slot);
                let mut s = [0; 8];
                let n = slots(&mut s);
                for &s in &s[..n] {
                    o.watch(s);
                }
                // A flow that joins the event with this signal: its packet went by `hold`
                // unwatched; the file takes it, so that the verdict counts no signal whose
                // packet comes after the file's last (docs/EVIDENCE.md).
                if !had && o.watches(r.slot) {
                    if let Some(at) =
                        newest.filter(|&at| self.meta[at].slot == r.slot && self.meta[at].ts == ts)
                    {
                        if let Collecting::Record(rec) = &mut o.what {
                            let k = self.meta[at];
                            let from = at * self.stride;
                            rec.push(k, &self.ring[from..from + k.len as usize]);
                        }
                        o.after += 1;
                    }
                }
                add_signal(o.what.verdict(), r.signal, r.vantage);
            }
            return;
        }
        let mut verdict = match kind {
            EventKind::Loss => Verdict::Loss { psn, gap_psns: [0; 2], naks: [0; 2], retransmitted: false },
            EventKind::RnrNak => Verdict::RnrNak { psn, naks: [0; 2], retransmitted: false },
            EventKind::Congestion => Verdict::Congestion { cnps: [0; 2], ce: [0; 2] },
            _ => Verdict::IcrcError { packets: [0; 2] },
        };
        add_signal(&mut verdict, r.signal, r.vantage);
        let event = Event { kind, ts, qp: r.qp, vantage: r.vantage, verdict };
        let id = self.next_id;
        self.episodes[place] = Some(Episode { kind, qp: r.qp, psn, last_ts: ts, id });
        self.start(id, event, slots, None, out);
    }

    /// An I/O event (`slots` gives its QP's flows): the packets of its flows from its
    /// command on, with `--evidence-before` more before.
    pub fn io_event(
        &mut self,
        r: IoRaised,
        slots: impl FnOnce(&mut [u32; 8]) -> usize,
        out: &mut impl FnMut(EvidenceRecord),
    ) {
        let event = Event { kind: r.kind, ts: r.end_ns, qp: r.qp, vantage: r.vantage, verdict: r.verdict };
        self.start(self.next_id, event, slots, Some(r.start_ns), out);
    }

    fn start(
        &mut self,
        id: u64,
        event: Event,
        slots: impl FnOnce(&mut [u32; 8]) -> usize,
        from_ns: Option<u64>,
        out: &mut impl FnMut(EvidenceRecord),
    ) {
        self.next_id += 1;
        let minute = event.ts / NS_PER_MINUTE;
        let m = &mut self.minute[event.kind.index()];
        if m.0 != minute {
            *m = (minute, 0);
        }
        let capped = m.1 >= self.cfg.max_per_minute;
        let recording = self.open.iter().filter(|o| matches!(o.what, Collecting::Record(_))).count();
        let rec = match capped || recording == MAX_OPEN {
            true => None,
            false => self.record(),
        };
        let deadline = match self.cfg.after {
            After::Time(d) => event.ts.saturating_add(d),
            After::Packets(_) => u64::MAX,
        };
        let Some(mut rec) = rec else {
            let status = if capped { Status::CappedPerMinute } else { Status::NoRoom };
            let n = NoFile { event, status };
            if self.open.len() - recording == MAX_VERDICT_ONLY {
                return self.no_file(n);
            }
            let mut o = Open { id, slots: [0; 8], n: 0, after: 0, deadline, what: Collecting::Verdict(n) };
            o.n = slots(&mut o.slots);
            self.open.push(o);
            return self.close_due(event.ts, out);
        };
        self.minute[event.kind.index()].1 += 1;
        rec.clear();
        rec.event = event;
        rec.status = Status::Kept;
        let mut watched = [0; 8];
        let flows = slots(&mut watched);
        // From the ring, back from the newest packet: the event's window (an I/O's, from
        // its command on; a signal's, the packet that raised it, the newest of its flows)
        // and `--evidence-before` packets of each of its flows before that.
        let oldest = self.seq.saturating_sub(RING_PACKETS as u64);
        let io = from_ns.is_some();
        let mut left = [self.cfg.before; 8];
        // Per flow: the oldest of its packets taken, and whether it has all it takes.
        let mut first = [self.seq; 8];
        let mut full = [false; 8];
        let mut done = 0usize;
        let mut window = 0usize;
        let (mut trigger, mut command) = (None, None);
        let mut seq = self.seq;
        while seq > oldest && window < FILE_PACKETS && done < flows {
            seq -= 1;
            let (k, _) = self.ring_at(seq);
            let Some(j) = watched[..flows].iter().position(|&s| s == k.slot) else { continue };
            if full[j] {
                continue;
            }
            let inside = match from_ns {
                Some(from) => k.ts >= from,
                None => trigger.is_none(),
            };
            if inside {
                if !io {
                    trigger = Some(seq);
                } else {
                    // An I/O's completion raised a slow I/O (a timeout, time did); its
                    // command is the first packet at its start.
                    if k.ts == event.ts && event.kind == EventKind::SlowIo && trigger.is_none() {
                        trigger = Some(seq);
                    }
                    if Some(k.ts) == from_ns {
                        command = Some(seq);
                    }
                }
            } else if left[j] == 0 {
                full[j] = true;
                done += 1;
                continue;
            } else {
                left[j] -= 1;
            }
            first[j] = seq;
            window += 1;
        }
        for seq in seq..self.seq {
            let (k, data) = self.ring_at(seq);
            let Some(j) = watched[..flows].iter().position(|&s| s == k.slot) else { continue };
            if seq < first[j] {
                continue;
            }
            if trigger == Some(seq) {
                rec.trigger = Some(rec.packets.len());
            }
            if command == Some(seq) {
                rec.command = Some(rec.packets.len());
            }
            let k = *k;
            rec.push(k, data);
        }
        let what = Collecting::Record(rec);
        self.open.push(Open { id, slots: watched, n: flows, after: 0, deadline, what });
        let now = event.ts;
        self.close_due(now, out);
    }
}

/// Counts a joining signal, seen at `vantage`, in an event's verdict.
fn add_signal(v: &mut Verdict, s: Signal, vantage: Vantage) {
    match (v, s) {
        (Verdict::Loss { gap_psns, .. }, Signal::Gap { skipped, .. }) => {
            gap_psns[vantage as usize] += u64::from(skipped)
        }
        (Verdict::Loss { naks, .. }, Signal::NakSeq { .. }) => naks[vantage as usize] += 1,
        (
            Verdict::Loss { retransmitted, .. } | Verdict::RnrNak { retransmitted, .. },
            Signal::Retransmission { .. },
        ) => *retransmitted = true,
        (Verdict::RnrNak { naks, .. }, Signal::RnrNak { .. }) => naks[vantage as usize] += 1,
        (Verdict::Congestion { cnps, .. }, Signal::Cnp) => cnps[vantage as usize] += 1,
        (Verdict::Congestion { ce, .. }, Signal::Ce) => ce[vantage as usize] += 1,
        (Verdict::IcrcError { packets }, Signal::Icrc) => packets[vantage as usize] += 1,
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Evidence {
        /// A packet kept, then the records it completed closed, as the analyzer does for
        /// a packet that raised no signal.
        fn keep(
            &mut self,
            slot: u32,
            frame: &[u8],
            wire_len: u32,
            ts: u64,
            vantage: Vantage,
            out: &mut impl FnMut(EvidenceRecord),
        ) {
            self.hold(slot, frame, wire_len, ts, vantage);
            self.observe(ts, out);
        }
    }

    fn cfg(before: u32, after: After) -> EvidenceConfig {
        EvidenceConfig {
            before,
            after,
            snaplen: 64,
            slow_io_ns: 1_000_000,
            max_per_minute: 2,
            burst_gap_ns: 1_000_000,
            wait_for_records: false,
        }
    }

    /// The flows of an event, as the analyzer gives them.
    fn sl(v: &[u32]) -> impl FnOnce(&mut [u32; 8]) -> usize + '_ {
        |out| {
            out[..v.len()].copy_from_slice(v);
            v.len()
        }
    }

    fn qp(n: u32) -> Qp {
        Qp { src: IpAddr::from([10, 0, 0, 1]), dst: IpAddr::from([10, 0, 0, 2]), dst_qpn: n }
    }

    fn raised(slot: u32, q: Qp, signal: Signal, ts: u64) -> Raised {
        Raised { slot, vantage: Vantage::Compute, qp: q, signal, ts }
    }

    /// Frames whose first byte names their flow's slot and second their number.
    fn frame(slot: u32, n: u8) -> [u8; 80] {
        let mut f = [0u8; 80];
        f[0] = slot as u8;
        f[1] = n;
        f
    }

    /// The (slot, number) of each packet a record holds (see [`frame`]).
    fn slots_and_numbers(r: &EvidenceRecord) -> Vec<(u8, u8)> {
        (0..r.packets.len()).map(|i| (r.data(i)[0], r.data(i)[1])).collect()
    }

    #[test]
    fn an_event_holds_its_flows_packets_before_and_after_and_no_others() {
        let mut e = Evidence::new(cfg(2, After::Packets(2)));
        let got = std::cell::RefCell::new(Vec::new());
        let mut out = |r: EvidenceRecord| got.borrow_mut().push(r);
        for n in 0..5u8 {
            e.keep(1, &frame(1, n), 80, u64::from(n), Vantage::Compute, &mut out);
            e.keep(2, &frame(2, n), 80, u64::from(n), Vantage::Compute, &mut out);
        }
        // Packet 5 of flow 1 raises a loss; flow 3 is the QP's other direction.
        e.keep(1, &frame(1, 5), 80, 5, Vantage::Compute, &mut out);
        e.signal(raised(1, qp(7), Signal::Gap { psn: 100, skipped: 1 }, 5), sl(&[1, 3]), &mut out);
        assert!(got.borrow().is_empty());
        e.keep(2, &frame(2, 6), 80, 6, Vantage::Compute, &mut out);
        e.keep(3, &frame(3, 6), 80, 6, Vantage::Storage, &mut out);
        // The NAK, naming the same PSN from the other side, joins it.
        e.signal(raised(3, qp(7), Signal::NakSeq { psn: 100 }, 6), sl(&[1, 3]), &mut out);
        e.keep(1, &frame(1, 7), 80, 7, Vantage::Compute, &mut out);
        let got = got.borrow();
        assert_eq!(got.len(), 1);
        let r = &got[0];
        assert_eq!(r.status, Status::Kept);
        let seen = slots_and_numbers(r);
        assert_eq!(seen, [(1, 3), (1, 4), (1, 5), (3, 6), (1, 7)]);
        assert_eq!(r.trigger, Some(2));
        assert_eq!(r.packets[0].len, 64, "cut to the snap length");
        assert_eq!(r.packets[0].wire_len, 80);
        assert_eq!(
            r.event.verdict,
            Verdict::Loss { psn: 100, gap_psns: [1, 0], naks: [1, 0], retransmitted: false }
        );
    }

    #[test]
    fn packets_before_an_event_are_counted_per_flow() {
        let mut e = Evidence::new(cfg(3, After::Packets(1)));
        let got = std::cell::RefCell::new(Vec::new());
        let mut out = |r: EvidenceRecord| got.borrow_mut().push(r);
        // Flow 1 busy, flow 2 (its QP's other direction) sparse, flow 9 another QP's.
        for n in 0..20u8 {
            e.keep(1, &frame(1, n), 80, u64::from(n), Vantage::Compute, &mut out);
            e.keep(9, &frame(9, n), 80, u64::from(n), Vantage::Compute, &mut out);
            if n % 5 == 0 {
                e.keep(2, &frame(2, n), 80, u64::from(n), Vantage::Compute, &mut out);
            }
        }
        e.keep(1, &frame(1, 20), 80, 20, Vantage::Compute, &mut out);
        e.signal(raised(1, qp(7), Signal::Gap { psn: 1, skipped: 1 }, 20), sl(&[1, 2]), &mut out);
        e.keep(2, &frame(2, 21), 80, 21, Vantage::Compute, &mut out);
        let got = got.borrow();
        let r = &got[0];
        let seen = slots_and_numbers(r);
        // Three of each flow before the one that raised it, then one after.
        assert_eq!(seen, [(2, 5), (2, 10), (2, 15), (1, 17), (1, 18), (1, 19), (1, 20), (2, 21)]);
        assert_eq!(r.trigger, Some(6));
    }

    #[test]
    fn episodes_join_by_psn_and_bursts_by_time_and_caps_count() {
        let mut e = Evidence::new(cfg(0, After::Packets(1)));
        let mut got = Vec::new();
        let mut out = |r: EvidenceRecord| got.push((r.event.kind, r.status));
        let mut no_file = Vec::new();
        let s = |sig, ts| raised(1, qp(7), sig, ts);
        e.signal(s(Signal::RnrNak { psn: 5 }, 10), sl(&[1]), &mut out);
        // The retransmission after it belongs to it; a loss at another PSN does not.
        e.signal(s(Signal::Retransmission { psn: 5 }, 20), sl(&[1]), &mut out);
        e.signal(s(Signal::Retransmission { psn: 9 }, 30), sl(&[1]), &mut out);
        e.signal(s(Signal::Cnp, 40), sl(&[1]), &mut out);
        e.signal(s(Signal::Ce, 40 + 900_000), sl(&[1]), &mut out);
        e.signal(s(Signal::Ce, 40 + 2_000_000), sl(&[1]), &mut out);
        // A third congestion burst in the same minute: capped.
        e.signal(s(Signal::Cnp, 40 + 4_000_000), sl(&[1]), &mut out);
        // A minute later, room again.
        e.signal(s(Signal::Cnp, 61_000_000_000), sl(&[1]), &mut out);
        e.finish(&mut out);
        e.drain_no_file(&mut no_file);
        got.extend(no_file.iter().map(|n| (n.event.kind, n.status)));
        got.sort_by_key(|g| format!("{g:?}"));
        assert_eq!(
            got,
            [
                (EventKind::Congestion, Status::CappedPerMinute),
                (EventKind::Congestion, Status::Kept),
                (EventKind::Congestion, Status::Kept),
                (EventKind::Congestion, Status::Kept),
                (EventKind::Loss, Status::Kept),
                (EventKind::RnrNak, Status::Kept),
            ]
        );
    }

    #[test]
    fn more_events_than_records_are_told_not_copied() {
        let mut e = Evidence::new(EvidenceConfig { max_per_minute: 1000, ..cfg(0, After::Packets(100)) });
        let got = std::cell::RefCell::new(Vec::new());
        let mut out = |r: EvidenceRecord| got.borrow_mut().push(r.status);
        for n in 0..MAX_OPEN as u32 + 3 {
            e.signal(raised(n, qp(n), Signal::Icrc, 1), sl(&[n]), &mut out);
        }
        assert!(got.borrow().is_empty(), "none has ended");
        // The three without a record collect their verdicts until their bound, as the
        // others collect their packets: listed once they end.
        let mut no_file = Vec::new();
        e.drain_no_file(&mut no_file);
        assert!(no_file.is_empty());
        e.finish(&mut out);
        e.drain_no_file(&mut no_file);
        assert_eq!(no_file.iter().map(|n| n.status).collect::<Vec<_>>(), [Status::NoRoom; 3]);
        assert_eq!(got.borrow().len(), MAX_OPEN);
    }

    #[test]
    fn an_event_without_a_record_counts_the_signals_that_join_it() {
        // Capped (none a minute): the ICRC errors of one flow within the burst gap join the
        // event, which lists them all once its packets after it have passed.
        let mut e = Evidence::new(EvidenceConfig { max_per_minute: 0, ..cfg(0, After::Packets(2)) });
        let mut out = |_: EvidenceRecord| panic!("no record");
        for t in 1..=3 {
            e.hold(7, &frame(7, t as u8), 80, t, Vantage::Compute);
            e.signal(raised(7, qp(7), Signal::Icrc, t), sl(&[7]), &mut out);
        }
        e.hold(7, &frame(7, 4), 80, 4, Vantage::Compute);
        e.observe(4, &mut out);
        let mut no_file = Vec::new();
        e.drain_no_file(&mut no_file);
        assert_eq!(no_file.len(), 1);
        assert_eq!(no_file[0].status, Status::CappedPerMinute);
        assert_eq!(no_file[0].event.verdict, Verdict::IcrcError { packets: [3, 0] });
    }
}
