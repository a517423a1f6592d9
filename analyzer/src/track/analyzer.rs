//! The analysis one worker owns: every tracker, fed one decoded packet at a time in packet
//! time. The worker (`runtime::worker`) moves frames in and reports out; what a packet means
//! is decided here: its vantage and flow, the flow table's counters, PSN analysis and
//! transmissions, NVMe/RDMA capsules and I/Os, CM handshakes, ERSPAN switch clocks, latency
//! samples.

use super::bounded::FifoMap;
use super::clock::MirrorClocks;
use super::evidence::{Evidence, EvidenceConfig, EvidenceRecord, NoFile};
use super::flow::{acked_psn, implied_ack, FlowDelta, FlowEvent, FlowRef, QpEnd, Recorded};
use super::io::{At, IoBatch, IoCountsByPair, IoTracker, Packet, Sent};
use super::nvme::{NvmeRecognizer, PendingKey};
use super::{FlowKey, FlowTable, Vantage, VantageMap};
use crate::metrics::latency::{LatencyBatch, LatencyRecorder};
use crate::metrics::snapshot::{Forgotten, Needed, TimeUse};
use crate::wire::bth::opcode as op;
use crate::wire::cm::{CmMessage, GSI_QPN};
use crate::wire::nvme::{classify, Capsule};
use crate::wire::{Decoded, RocePacket};
use std::net::IpAddr;

/// Latency sample buffers allocated at start-up for the first new series.
const SPARE_SERIES: usize = 64;

/// How a packet was seen.
#[derive(Debug, Clone, Copy)]
pub struct Seen {
    /// The capture source (port id, file index).
    pub source: u16,
    /// Length on the wire (of the mirrored frame, for a frame inside ERSPAN).
    pub wire_len: u32,
    /// Packet time.
    pub ts: u64,
    /// `ts` is an ERSPAN III switch's timestamp.
    pub switch_clock: bool,
    /// The packet came after the reorder window had passed it: counted in its flow, but
    /// analysed no further (its PSN, answers and capsules would be judged out of order).
    pub late: bool,
    /// The flow's compact key and hash, if found already ([`Analyzer::flow_ref`]).
    pub flow: Option<FlowRef>,
    /// The slot the flow index named first under that hash when the burst prefetched it
    /// (`FlowTable::prefetch_entry`): a hint, taken only if that slot holds the key.
    pub hint: Option<u32>,
}

/// What [`Analyzer::track`] may do with a packet, by its opcode (bits of [`ROLES`]): one
/// load decides what most packets skip, instead of a test for each thing they are not.
/// A UD SEND Only: a CM message if it goes to the GSI QP.
const MAY_BE_CM: u8 = 1;
/// The first packet of a RC or XRC SEND: may carry an NVMe capsule.
const MAY_BE_CAPSULE: u8 = 1 << 1;
/// A packet the I/O tracker looks at when it has I/Os or connections (the arms of the
/// match at the end of `track`).
const IO_PACKET: u8 = 1 << 2;
/// An I/O packet that refreshes its connection's state (the tracker forgets the state used
/// least recently), I/O or not: the tracker looks at it whenever it has connections.
const REFRESHES: u8 = 1 << 3;
/// A data phase's first packet (a WRITE First or Only, a READ Request): with two vantages,
/// one that names no live I/O's buffer is remembered for a while (the other vantage's copy
/// of its command may come after it), so the tracker looks at it whenever it has
/// connections, as at a refreshing packet.
const DATA_PHASE: u8 = 1 << 4;

const ROLES: [u8; 256] = {
    let mut r = [0u8; 256];
    r[op::UD_SEND_ONLY as usize] = MAY_BE_CM;
    // RC (transport 0) and XRC (5): what `classify` reads.
    let mut t = 0;
    while t < 2 {
        let base = [0u8, 0xA0][t];
        let firsts = [op::SEND_FIRST, op::SEND_ONLY, op::SEND_ONLY_IMM, op::SEND_ONLY_INV];
        let mut i = 0;
        while i < firsts.len() {
            r[(base | (firsts[i] & 0x1F)) as usize] |= MAY_BE_CAPSULE;
            i += 1;
        }
        t += 1;
    }
    let io = [
        op::WRITE_FIRST,
        op::WRITE_ONLY,
        op::WRITE_ONLY_IMM,
        op::WRITE_MIDDLE,
        op::WRITE_LAST,
        op::WRITE_LAST_IMM,
        op::READ_REQUEST,
        op::READ_RESPONSE_FIRST,
        op::READ_RESPONSE_LAST,
        op::READ_RESPONSE_ONLY,
        op::ATOMIC_ACKNOWLEDGE,
    ];
    let mut i = 0;
    while i < io.len() {
        r[io[i] as usize] |= IO_PACKET;
        i += 1;
    }
    let data = [op::WRITE_FIRST, op::WRITE_ONLY, op::WRITE_ONLY_IMM, op::READ_REQUEST];
    let mut i = 0;
    while i < data.len() {
        r[data[i] as usize] |= DATA_PHASE;
        i += 1;
    }
    let refresh = [op::SEND_MIDDLE, op::SEND_LAST, op::SEND_LAST_IMM, op::SEND_LAST_INV, op::ACKNOWLEDGE];
    let mut i = 0;
    while i < refresh.len() {
        r[refresh[i] as usize] |= IO_PACKET | REFRESHES;
        i += 1;
    }
    r
};

/// A CM ConnectRequest awaiting its reply: the initiator's side (its IP, QPN and starting
/// PSN), the target's IP, the path MTU (0: not said), the NVMe/RDMA queue id it asks for.
#[derive(Debug, Clone, Copy)]
struct CmRequest {
    a: QpEnd,
    b_ip: IpAddr,
    mtu: u32,
    nvme_qid: Option<u16>,
}

/// The bounds and settings of the analysis (from the command line's options).
#[derive(Debug, Clone)]
pub struct AnalyzerConfig {
    pub vantages: VantageMap,
    pub max_flows: usize,
    pub flow_idle_ns: u64,
    pub flow_expire_ns: u64,
    /// Transmissions shorter than this many packets (and without a NAK) are counted per
    /// flow, not reported.
    pub min_transmission_packets: u64,
    pub mtu: Option<u32>,
    pub max_announced_flows: usize,
    pub max_ios: usize,
    pub io_timeout_ns: u64,
    /// How long packets may come out of time order (`--reorder-window`): with two
    /// vantages, how long an I/O seen at one waits for the other's copies.
    pub reorder_window_ns: u64,
    /// `--duplicate-window` (see `FlowTable::with_duplicate_window`).
    pub duplicate_window_ns: u64,
    pub max_latency_series: usize,
    pub max_pending_commands: usize,
    pub max_cm_requests: usize,
    pub check_icrc: bool,
    /// The slowest I/Os kept per interval (`--slow-ios`).
    pub slow_ios: usize,
    /// `--evidence-dir` and its bounds: keep the packets of each event.
    pub evidence: Option<EvidenceConfig>,
}

pub struct Analyzer {
    /// Per vantage (compute, storage).
    time_use: [TimeUse; 2],
    flows: FlowTable,
    ios: IoTracker,
    vantages: VantageMap,
    clocks: MirrorClocks,
    /// Latency histograms, per series.
    latency: LatencyRecorder,
    nvme: NvmeRecognizer,
    /// CM ConnectRequests by (vantage, requester's address, its communication id).
    cm_requests: FifoMap<(Vantage, IpAddr, u32), CmRequest>,
    /// The ConnectRequests answered already (the same keys), as many as `cm_requests`
    /// holds: a repeated reply is not a new connection (nor, once this has forgotten it, one
    /// for the connection the flows were announced for already, see
    /// `FlowTable::announce_pair`).
    cm_answered: FifoMap<(Vantage, IpAddr, u32), ()>,
    /// Frames arrive with their final time (a dispatcher applied the ERSPAN clocks).
    stamped: bool,
    /// The roles ([`ROLES`]) the I/O tracker looks at without a live I/O, when it has
    /// connections: [`REFRESHES`], and [`DATA_PHASE`] with two vantages.
    idle_roles: u8,
    /// With `--evidence-dir`.
    evidence: Option<Box<Evidence>>,
}

impl Analyzer {
    /// Memory [`Analyzer::new`] allocates for `cfg`'s bounds (a worker's): the option that
    /// sets each bound, its value, and the bytes, largest first.
    pub fn allocated_bytes(cfg: &AnalyzerConfig) -> Vec<(&'static str, usize, usize)> {
        type Cm = FifoMap<(Vantage, IpAddr, u32), CmRequest>;
        type CmAnswered = FifoMap<(Vantage, IpAddr, u32), ()>;
        let (cm, series) = (cfg.max_cm_requests, cfg.max_latency_series);
        let mut by = vec![
            ("--max-flows", cfg.max_flows, FlowTable::allocated_bytes(cfg.max_flows)),
            (
                "--max-announced-flows",
                cfg.max_announced_flows,
                FlowTable::announced_bytes(cfg.max_announced_flows),
            ),
            ("--max-ios", cfg.max_ios, IoTracker::allocated_bytes(cfg.max_ios, series)),
            ("--max-latency-series", series, LatencyRecorder::allocated_bytes(series, SPARE_SERIES)),
            (
                "--max-pending-commands",
                cfg.max_pending_commands,
                NvmeRecognizer::allocated_bytes(cfg.max_pending_commands),
            ),
            ("--max-cm-requests", cm, Cm::allocated_bytes(cm) + CmAnswered::allocated_bytes(cm)),
        ];
        by.sort_by_key(|&(_, _, b)| std::cmp::Reverse(b));
        by
    }

    pub fn new(cfg: &AnalyzerConfig) -> Self {
        let mut flows = FlowTable::new(cfg.max_flows, cfg.flow_idle_ns, cfg.mtu)
            .with_announced(cfg.max_announced_flows)
            .with_expiry(cfg.flow_expire_ns)
            .with_min_transmission_packets(cfg.min_transmission_packets)
            .with_icrc_check(cfg.check_icrc)
            .with_duplicate_window(cfg.duplicate_window_ns);
        let mut ios = IoTracker::new(cfg.max_ios, cfg.io_timeout_ns)
            .with_max_pairs(cfg.max_latency_series)
            .with_slow_ios(cfg.slow_ios)
            .with_vantage_wait(if cfg.vantages.maps_storage() { cfg.reorder_window_ns } else { 0 });
        let remembers_early = ios.remembers_early();
        if let Some(e) = &cfg.evidence {
            flows.signals = super::evidence::Signals::enabled();
            ios = ios.with_evidence(e.slow_io_ns);
        }
        Self {
            time_use: [TimeUse::default(); 2],
            flows,
            ios,
            vantages: cfg.vantages.clone(),
            clocks: MirrorClocks::default(),
            latency: LatencyRecorder::new(cfg.max_latency_series, SPARE_SERIES),
            nvme: NvmeRecognizer::new(cfg.max_pending_commands),
            cm_requests: FifoMap::new(cfg.max_cm_requests),
            cm_answered: FifoMap::new(cfg.max_cm_requests),
            stamped: false,
            idle_roles: if remembers_early { REFRESHES | DATA_PHASE } else { REFRESHES },
            evidence: cfg.evidence.map(|e| Box::new(Evidence::new(e))),
        }
    }

    /// Evidence events lost since the last call: signals beyond their buffer in one packet,
    /// events without a file beyond an interval's room for them.
    pub fn take_lost_signals(&mut self) -> u64 {
        let no_file = self.evidence.as_mut().map_or(0, |e| std::mem::take(&mut e.no_file_lost));
        std::mem::take(&mut self.flows.signals.lost) + std::mem::take(&mut self.ios.raised_lost) + no_file
    }

    /// The events without a file since the last call (see `Evidence::drain_no_file`).
    pub fn drain_no_file(&mut self, into: &mut Vec<NoFile>) {
        match self.evidence.as_mut() {
            Some(e) => e.drain_no_file(into),
            None => into.clear(),
        }
    }

    /// Signals raised since the last call become events or join theirs.
    #[cold]
    #[inline(never)]
    fn take_signals(&mut self, out: &mut impl FnMut(FlowEvent)) {
        let Some(ev) = self.evidence.as_mut() else { return };
        let mut send = |r: EvidenceRecord| out(FlowEvent::Evidence(r));
        let flows = &self.flows;
        for &r in &flows.signals.flows {
            ev.signal(r, |s| flows.qp_slots(&r.qp, Some(r.slot), s), &mut send);
        }
        for &r in &self.ios.raised {
            ev.io_event(r, |s| flows.qp_slots(&r.qp, None, s), &mut send);
        }
        self.flows.signals.flows.clear();
        self.ios.raised.clear();
    }

    /// With `--evidence-dir`, after [`Analyzer::track`] of a packet (the captured `frame`,
    /// `frame_len` bytes on the wire, at `ts`): if it counted in a flow it goes into the
    /// ring and the events collecting its flow's, then the signals it raised are taken
    /// (joining those events' verdicts, or starting events), then the events it completed
    /// end.
    #[cold]
    #[inline(never)]
    pub fn keep_evidence(&mut self, frame: &[u8], frame_len: u32, ts: u64, out: &mut impl FnMut(FlowEvent)) {
        let kept = self.flows.take_last_recorded();
        if let (Some(ev), Some((slot, vantage))) = (self.evidence.as_mut(), kept) {
            ev.hold(slot, frame, frame_len, ts, vantage);
        }
        if self.flows.signals.any() || !self.ios.raised.is_empty() {
            self.take_signals(out);
        }
        if let Some(ev) = self.evidence.as_mut() {
            ev.observe(ts, &mut |r| out(FlowEvent::Evidence(r)));
        }
    }

    /// Frames will come with their final time: a dispatcher in front applies the ERSPAN
    /// switch clocks (one anchor per session for all workers).
    pub fn set_stamped(&mut self) {
        self.stamped = true;
    }

    /// A frame's time, and whether it is an ERSPAN III switch timestamp (the packet's time:
    /// it was taken at the mirror). `frame` was decoded to `decoded`; `capture_ns` is the
    /// time the capture gave it. A mirror of a frame that is no RoCE packet is timed by its
    /// switch too; any frame without a switch time it could use stands where the
    /// switch-timed frames do ([`MirrorClocks::unstamped`]).
    #[inline]
    pub fn packet_time(&mut self, decoded: &Decoded<'_>, frame: &[u8], capture_ns: u64) -> (u64, bool) {
        let switch = match decoded {
            Decoded::Roce(RocePacket { mirror: Some(m), .. }) if !self.stamped => {
                m.timed().and_then(|(session, t)| self.clocks.time(session, t, capture_ns))
            }
            Decoded::Roce(_) => None,
            _ => self.not_roce_time(frame, capture_ns),
        };
        match switch {
            Some(ts) => (ts, true),
            None => (self.unstamped_time(capture_ns), false),
        }
    }

    /// The switch time of a frame that is no RoCE packet (or does not decode), if it is an
    /// ERSPAN III mirror whose stamp is believed. Out of the packets' path.
    #[cold]
    #[inline(never)]
    fn not_roce_time(&mut self, frame: &[u8], capture_ns: u64) -> Option<u64> {
        if self.stamped || !crate::wire::could_be_mirrored(frame) {
            return None;
        }
        let (session, t) = crate::wire::mirror_of(frame)?.timed()?;
        self.clocks.time(session, t, capture_ns)
    }

    /// The time of a frame without a switch time, captured at `capture_ns` (see
    /// [`MirrorClocks::unstamped`]); as given when a dispatcher in front timed it (this
    /// worker's clocks then see no stamp, and add nothing).
    #[inline]
    pub fn unstamped_time(&self, capture_ns: u64) -> u64 {
        self.clocks.unstamped(capture_ns)
    }

    /// A RoCE packet's vantage.
    #[inline]
    pub fn vantage_of(&self, p: &RocePacket<'_>, source: u16) -> Vantage {
        self.vantages.resolve(source, p.outer_vlan(), p.mirror.and_then(|m| m.session))
    }

    /// The flow table, for prefetching a burst's flow state (see `FlowTable::prefetch_*`).
    #[inline]
    pub fn flows(&self) -> &FlowTable {
        &self.flows
    }

    /// A RoCE packet's flow, in the compact form the flow table looks it up by, with its
    /// hash (for prefetching, and the lookup).
    #[inline(always)]
    pub fn flow_ref(&self, p: &RocePacket<'_>, source: u16) -> FlowRef {
        self.flows.flow_ref(self.vantage_of(p, source), &p.ip.src, &p.ip.dst, p.bth.dest_qp())
    }

    /// Packet time moved on to `ts`: I/Os older than `--io-timeout` end.
    #[inline]
    pub fn advance(&mut self, ts: u64) {
        self.ios.expire(ts, &mut self.latency);
    }

    /// Time moved on to `now` without a packet here: transmissions idle for `--flow-idle`
    /// have ended (they are closed by the next packet of their flow or before the interval
    /// is handed over, see [`Analyzer::end_idle`]), and I/Os older than `--io-timeout` at
    /// `current` end. `current` is `now` but after the clock stepped back, when `now` is the
    /// highest time before the step (which the flow table keeps, as it does from packets)
    /// and `current` the time since (by which I/Os time out, as they do from packets).
    #[inline]
    pub fn observe(&mut self, now: u64, current: u64, out: &mut impl FnMut(FlowEvent)) {
        self.flows.advance(now);
        self.ios.expire(current, &mut self.latency);
        if self.evidence.is_some() {
            self.take_signals(out);
            if let Some(ev) = self.evidence.as_mut() {
                ev.observe(now, &mut |r| out(FlowEvent::Evidence(r)));
            }
        }
    }

    /// Before the open interval is handed over: the transmissions that went idle in it end
    /// (to `out`), so that they are reported in it.
    pub fn end_idle(&mut self, out: &mut impl FnMut(FlowEvent)) {
        self.flows.end_idle(out);
    }

    /// Time is known to have reached `t` (a later frame, or a clock, says so) while no
    /// frame before it is still to come: what comes due before `t` happens now, so that it
    /// is counted in the interval that ends at `t` (transmissions that went idle end at
    /// the next [`Analyzer::end_idle`]; I/Os time out, or stop waiting for a vantage, here).
    pub fn come_due(&mut self, t: u64) {
        self.flows.advance(t);
        self.ios.expire(t, &mut self.latency);
    }

    /// The first time something comes due (see [`Analyzer::come_due`]) if no frame comes
    /// before it: a transmission left open by the last [`Analyzer::end_idle`] goes idle, or
    /// an I/O times out or stops waiting.
    pub fn next_due(&self) -> Option<u64> {
        self.flows.next_idle().into_iter().chain(self.ios.next_due()).min()
    }

    /// The end: every open transmission and I/O ends.
    pub fn finish(&mut self, out: &mut impl FnMut(FlowEvent)) {
        self.flows.close_all(out);
        self.ios.finish_all(&mut self.latency);
        if self.evidence.is_some() {
            self.take_signals(out);
            if let Some(ev) = self.evidence.as_mut() {
                ev.finish(&mut |r| out(FlowEvent::Evidence(r)));
            }
        }
    }

    /// Hands over the flows that changed, the latency series that recorded, the I/O
    /// outcomes that changed and the slowest I/Os since the last call; returns the latency
    /// samples dropped (beyond the series bound) since then.
    pub fn drain_interval(
        &mut self,
        flows: &mut Vec<FlowDelta>,
        latency: &mut LatencyBatch,
        ios: &mut IoBatch,
    ) -> u64 {
        self.flows.drain_interval(flows);
        self.latency.drain(latency);
        self.ios.drain_interval(&mut ios.pairs, &mut ios.slowest);
        std::mem::take(&mut self.latency.dropped_samples)
    }

    /// Flows tracked now (a capacity hint for hand-over buffers).
    pub fn tracked_flows(&self) -> usize {
        self.flows.len()
    }

    /// NVMe capsules each vantage saw first after their I/O had ended, since the last call
    /// (see `IoTracker::take_copies_after_end`).
    pub fn take_io_copies_after_end(&mut self) -> [u64; 2] {
        self.ios.take_copies_after_end()
    }

    /// Packets of flows that did not fit in the table, so far.
    pub fn untracked_packets(&self) -> u64 {
        self.flows.untracked_packets
    }

    /// Whether some frame was timed by a switch's ERSPAN clock (whose time the probe's
    /// clock cannot stand in for).
    pub fn saw_switch_clock(&self) -> bool {
        self.time_use.iter().any(|u| u.switch_clock)
    }

    /// Where each vantage's packet times came from (compute, storage).
    pub fn time_use(&self) -> [TimeUse; 2] {
        self.time_use
    }

    /// I/O outcomes per (initiator, target, op) so far.
    pub fn io_counts(&self) -> IoCountsByPair {
        self.ios.counts()
    }

    /// Tracks one RoCE packet, seen as `seen` says; ended transmissions go to `out`.
    /// Allocates nothing. With `--evidence-dir`, [`Analyzer::keep_evidence`] follows.
    #[inline]
    pub fn track(&mut self, p: &RocePacket<'_>, seen: &Seen, out: &mut impl FnMut(FlowEvent)) {
        let Seen { source, ts, switch_clock, late, .. } = *seen;
        let vantage = match seen.flow {
            Some(r) => r.vantage(),
            None => self.vantage_of(p, source),
        };
        let u = &mut self.time_use[vantage as usize];
        if switch_clock {
            u.switch_clock = true;
        } else {
            u.capture_sources |= 1 << source.min(63);
        }
        let dst_qpn = p.bth.dest_qp();
        let key = || FlowKey { vantage, src: p.ip.src, dst: p.ip.dst, dst_qpn };
        let slot = match self.flows.record(key, p, seen, &mut self.latency, out) {
            Recorded::Flow(slot) => Some(slot),
            Recorded::Untracked => None,
            // Its ICRC wrong: counted in its flow, but nothing else trusts it.
            Recorded::Corrupt => return,
            // The mirror's second copy of a packet counted already.
            Recorded::Duplicate => return,
        };
        let opcode = p.bth.opcode();
        let psn = p.bth.psn();
        if late {
            return;
        }
        let role = ROLES[usize::from(opcode)];
        // CM is followed even on flows beyond --max-flows: its own tables are bounded.
        if role & MAY_BE_CM != 0 && dst_qpn == GSI_QPN {
            self.connection_management(vantage, p);
            return;
        }
        let Some(slot) = slot else { return };
        // Without a live I/O, only the packets that refresh their connection's state (and,
        // with two vantages, a data phase's first) can change the I/O tracker; without
        // connection state, nothing but a capsule can. What is skipped would change nothing
        // but its flow's hint (a cache), whatever other host pairs this worker tracks.
        let io_wants = role & IO_PACKET != 0
            && !(self.ios.is_idle() && (self.ios.has_no_connections() || role & self.idle_roles == 0));
        if role & MAY_BE_CAPSULE == 0 && !io_wants {
            return;
        }
        let rec = &mut self.latency;
        // The addresses are read where a branch needs them: copied here, before the
        // match, they cost every packet ten instructions that nearly none uses.
        let ip = &p.ip;
        let capsule = if role & MAY_BE_CAPSULE != 0 {
            classify(opcode, p.payload, p.payload_len)
        } else {
            Capsule::None
        };
        match capsule {
            Capsule::Command(sqe) => {
                self.flows.count_capsule(slot, true);
                let again = self.flows.was_sent_again();
                let key = PendingKey { vantage, host: ip.src, target: ip.dst, cid: sqe.cid };
                self.nvme.command(key, dst_qpn, again);
                let whole = opcode & 0x1F != op::SEND_FIRST;
                self.ios.command(
                    At { vantage, ts, host: ip.src, target: ip.dst },
                    Sent { target_qpn: dst_qpn, psn, whole, again },
                    &sqe,
                    self.flows.io_hint(slot),
                    rec,
                );
            }
            Capsule::Completion(cqe) => {
                let again = self.flows.was_sent_again();
                let key = PendingKey { vantage, host: ip.dst, target: ip.src, cid: cqe.cid };
                // The I/O queue: the target's QP, this flow's pair (when known).
                let target_qpn = self.flows.peer_qpn(slot);
                let recognized = self.nvme.completion(key, target_qpn, again);
                let answered = self.ios.completion(
                    At { vantage, ts, host: ip.dst, target: ip.src },
                    target_qpn,
                    cqe.cid,
                    Packet { psn, again },
                    self.flows.io_hint(slot),
                    rec,
                );
                // A completion answers a command seen the other way if either table still
                // held it: the pending commands (`--max-pending-commands`) or the I/Os
                // (`--max-ios`). Not a copy sent again.
                if recognized || (answered && !again) {
                    self.flows.count_capsule(slot, false);
                }
            }
            Capsule::None if !io_wants => {}
            Capsule::None => match (opcode, self.flows.io_hint(slot)) {
                (op::SEND_MIDDLE | op::SEND_LAST | op::SEND_LAST_IMM | op::SEND_LAST_INV, hint) => {
                    let last = opcode != op::SEND_MIDDLE;
                    self.ios.capsule_packet(
                        At { vantage, ts, host: ip.src, target: ip.dst },
                        dst_qpn,
                        last,
                        hint,
                    );
                }
                (op::WRITE_FIRST | op::WRITE_ONLY | op::WRITE_ONLY_IMM, _) => {
                    if let Some(r) = p.exts.reth {
                        let (sender, hint) = self.flows.sender_and_hint(slot);
                        let queue = self.ios.data_write(
                            At { vantage, ts, host: ip.dst, target: ip.src },
                            psn,
                            (r.rkey, r.va),
                            (sender, hint),
                            opcode == op::WRITE_FIRST,
                        );
                        self.flows.pair_with_queue(slot, queue);
                    }
                }
                // The rest of a read's data WRITE, sent again.
                (op::WRITE_MIDDLE | op::WRITE_LAST | op::WRITE_LAST_IMM, _) => {
                    self.data_write_sent_again(slot, At { vantage, ts, host: ip.dst, target: ip.src }, psn);
                }
                (op::READ_REQUEST, _) => {
                    if let Some(r) = p.exts.reth {
                        let (sender, hint) = self.flows.sender_and_hint(slot);
                        let queue = self.ios.read_request(
                            At { vantage, ts, host: ip.dst, target: ip.src },
                            psn,
                            r.dma_len,
                            (r.rkey, r.va),
                            (sender, hint),
                        );
                        self.flows.pair_with_queue(slot, queue);
                    }
                }
                (op::READ_RESPONSE_LAST | op::READ_RESPONSE_ONLY, _) => {
                    let at = At { vantage, ts, host: ip.src, target: ip.dst };
                    self.ios.read_response_end(
                        at,
                        dst_qpn,
                        psn,
                        self.flows.path_mtu(slot),
                        self.flows.io_hint(slot),
                    );
                    // Its AETH acknowledges the completions the target sent before.
                    if let Some(acked) = implied_ack(opcode, &p.exts, psn) {
                        self.ios.ack(at, dst_qpn, acked, self.flows.io_hint(slot), rec);
                    }
                }
                // The AETH of a response that acknowledges what came before it.
                (op::READ_RESPONSE_FIRST | op::ATOMIC_ACKNOWLEDGE, hint) => {
                    if let Some(acked) = implied_ack(opcode, &p.exts, psn) {
                        let at = At { vantage, ts, host: ip.src, target: ip.dst };
                        self.ios.ack(at, dst_qpn, acked, hint, rec);
                    }
                }
                (op::ACKNOWLEDGE, hint) => {
                    if let Some((acked, _)) = acked_psn(opcode, &p.exts, psn) {
                        self.ios.ack(
                            At { vantage, ts, host: ip.src, target: ip.dst },
                            dst_qpn,
                            acked,
                            hint,
                            rec,
                        );
                    }
                }
                _ => {}
            },
        }
    }

    /// A WRITE Middle or Last of flow `slot` (from `at.target` to `at.host`): one its flow
    /// sent already may be part of a read's data (see [`IoTracker::data_write_again`]).
    /// Its test inline: every WRITE Middle and Last comes here while I/Os are live.
    #[inline(always)]
    fn data_write_sent_again(&mut self, slot: u32, at: At, psn: u32) {
        if !self.flows.was_sent_again() {
            return;
        }
        if let Some(target_qpn) = self.flows.peer_qpn(slot) {
            let mtu = self.flows.path_mtu(slot);
            self.ios.data_write_again(at, target_qpn, psn, mtu, self.flows.io_hint(slot));
        }
    }

    /// A CM MAD: a ConnectReply names the QP pair its request started.
    fn connection_management(&mut self, vantage: Vantage, p: &RocePacket<'_>) {
        match CmMessage::parse(p.payload) {
            Some((_, CmMessage::Req(r))) => {
                let mtu = r.path_mtu_bytes().unwrap_or(0);
                // The REQ's starting PSN is the one its sender's receive queue expects (the
                // first of the responder's requests; Linux's CM sets its rq_psn from it),
                // kept here for the other end; the REP's is the requester's first.
                let a = QpEnd { ip: p.ip.src, qpn: r.local_qpn, start_psn: Some(r.starting_psn) };
                let req = CmRequest { a, b_ip: p.ip.dst, mtu, nvme_qid: r.nvme_qid };
                // A communication id is its sender's own: two hosts may use the same one.
                self.cm_requests.insert((vantage, p.ip.src, r.local_comm_id), req);
            }
            Some((_, CmMessage::Rep(r))) => {
                let key = (vantage, p.ip.dst, r.remote_comm_id);
                if let Some(CmRequest { a, b_ip, mtu, nvme_qid }) = self.cm_requests.remove(&key) {
                    // A ConnectRequest sent again that crossed its reply is answered again
                    // by the same reply: the connection is the one announced already, with
                    // its data flowing, and starts nothing again.
                    if b_ip == p.ip.src && !self.cm_answered.contains_key(&key) {
                        self.cm_answered.insert(key, ());
                        let b = QpEnd { ip: b_ip, qpn: r.local_qpn, start_psn: a.start_psn };
                        let a = QpEnd { start_psn: Some(r.starting_psn), ..a };
                        self.flows.announce_pair(vantage, a, b, mtu, r.remote_comm_id);
                        // The queue is the admin queue or not, whatever an earlier
                        // connection on the QP was.
                        self.ios.nvme_queue(a.ip, b_ip, r.local_qpn, nvme_qid == Some(0));
                    }
                }
            }
            Some((_, CmMessage::Rej { remote_comm_id, .. })) => {
                self.cm_requests.remove(&(vantage, p.ip.dst, remote_comm_id));
            }
            _ => {}
        }
    }

    /// The bounds that would have lost nothing so far (see [`Needed`]).
    pub fn needed(&self) -> Needed {
        // A table that forgets: `None` when nothing forgotten was answered.
        let forgetting = |n: Option<u64>, floor| Needed::at_least(Needed::of(n), floor);
        Needed {
            max_flows: Needed::at_least(self.flows.needed(), self.flows.needed_is_floor()),
            max_latency_series: Needed::at_least(self.latency.needed(), self.latency.needed_is_floor()),
            max_pending_commands: forgetting(self.nvme.needed(), self.nvme.needed_is_floor()),
            max_cm_requests: forgetting(self.cm_requests.needed(), self.cm_requests.needed_is_floor()),
            max_announced_flows: forgetting(
                self.flows.announced_needed(),
                self.flows.announced_needed_is_floor(),
            ),
            max_ios: forgetting(self.ios.connections_needed(), self.ios.connections_needed_is_floor()),
            max_ios_commands: self.ios.commands_needed(),
        }
    }

    /// What the bounded tables forgot so far.
    pub fn forgotten(&self) -> Forgotten {
        Forgotten {
            nvme_commands: self.nvme.forgotten(),
            cm_requests: self.cm_requests.forgotten,
            announced_flows: self.flows.announced_forgotten(),
            io_connections: self.ios.connections_forgotten(),
            io_acks: self.ios.acks_lost(),
            rdma_requests: self.flows.requests_pushed_out,
            idle_flows: self.flows.expired_flows,
            summary_flows: 0,
        }
    }
}
