//! The worker: decode → track for every frame, snapshots at interval boundaries.

use super::{PipelineConfig, Recycled, ToStats};
use crate::capture::Frame;
use crate::metrics::{GlobalCounters, IntervalSnapshot};
use crate::track::clock::MirrorClocks;
use crate::track::flow::FlowDelta;
use crate::track::flow::Transmission;
use crate::track::nvme::{NvmeRecognizer, PendingKey, DEFAULT_MAX_PENDING};
use crate::track::{FlowKey, FlowTable, Vantage, VantageMap};
use crate::wire::bth::opcode as op;
use crate::wire::cm::{CmMessage, GSI_QPN};
use crate::wire::nvme::{classify, Capsule};
use crate::wire::{decode_frame, icrc, Decoded, RocePacket};
use crossbeam_channel::{Receiver, Sender};
use std::collections::HashMap;
use std::net::IpAddr;

/// Ended transmissions go to the stats side in batches of this many (or at each interval).
const TX_BATCH: usize = 1024;
/// Buffers allocated at start-up for each kind of message, before any come back.
const SPARE_BUFFERS: usize = 4;
/// CM ConnectRequests remembered until their reply.
const CM_PENDING: usize = 1024;

/// Buffers for messages to the stats side: spares allocated at start-up, then the ones the
/// stats side hands back. Only when none is at hand (the stats side is far behind, or does
/// not hand buffers back) is a new one allocated.
struct Buffers {
    back: Option<Receiver<Recycled>>,
    flows: Vec<Vec<FlowDelta>>,
    transmissions: Vec<Vec<Transmission>>,
}

impl Buffers {
    fn new(back: Option<Receiver<Recycled>>, flows_capacity: usize) -> Self {
        Self {
            back,
            flows: (0..SPARE_BUFFERS).map(|_| Vec::with_capacity(flows_capacity)).collect(),
            transmissions: (0..SPARE_BUFFERS).map(|_| Vec::with_capacity(TX_BATCH)).collect(),
        }
    }
    fn collect(&mut self) {
        if let Some(back) = &self.back {
            while let Ok(r) = back.try_recv() {
                match r {
                    Recycled::Flows(v) if self.flows.len() < self.flows.capacity() => self.flows.push(v),
                    Recycled::Transmissions(v)
                        if self.transmissions.len() < self.transmissions.capacity() =>
                    {
                        self.transmissions.push(v)
                    }
                    _ => {}
                }
            }
        }
    }
    fn flows(&mut self, capacity: usize) -> Vec<FlowDelta> {
        self.collect();
        self.flows.pop().unwrap_or_else(|| Vec::with_capacity(capacity))
    }
    fn transmissions(&mut self) -> Vec<Transmission> {
        self.collect();
        self.transmissions.pop().unwrap_or_else(|| Vec::with_capacity(TX_BATCH))
    }
}

/// Ended transmissions waiting to be handed over, in batches. A push never grows the
/// buffer: a full one is sent and replaced by a recycled one.
struct TxBatch {
    buf: Vec<Transmission>,
    tx: Sender<ToStats>,
}

impl TxBatch {
    fn push(&mut self, t: Transmission, buffers: &mut Buffers) {
        if self.buf.len() == TX_BATCH {
            self.flush(buffers);
        }
        self.buf.push(t);
    }
    fn flush(&mut self, buffers: &mut Buffers) {
        if !self.buf.is_empty() {
            let full = std::mem::replace(&mut self.buf, buffers.transmissions());
            let _ = self.tx.send(ToStats::Transmissions(full));
        }
    }
}

pub struct Worker {
    id: usize,
    flows: FlowTable,
    vantages: VantageMap,
    clocks: MirrorClocks,
    nvme: NvmeRecognizer,
    /// CM ConnectRequests by (vantage, local communication id): initiator IP and QPN,
    /// target IP, path MTU.
    cm_requests: HashMap<(Vantage, u32), (IpAddr, u32, IpAddr, u32), ahash::RandomState>,
    check_icrc: bool,
    counters: GlobalCounters,
    untracked_reported: u64,
    /// Earliest and latest frame timestamp in the open interval.
    first_ts: u64,
    last_ts: u64,
    interval_ns: u64,
    /// The open interval [start, end) in packet time; `None` before the first frame.
    current: Option<(u64, u64)>,
    ended: TxBatch,
    buffers: Buffers,
    tx: Sender<ToStats>,
}

impl Worker {
    /// A worker whose message buffers are not handed back (tests, fuzzing).
    pub fn new(id: usize, cfg: &PipelineConfig, tx: Sender<ToStats>) -> Self {
        Self::build(id, cfg, tx, None)
    }

    /// A worker that reuses the buffers the stats side hands back on `back`.
    pub fn with_recycling(
        id: usize,
        cfg: &PipelineConfig,
        tx: Sender<ToStats>,
        back: Receiver<Recycled>,
    ) -> Self {
        Self::build(id, cfg, tx, Some(back))
    }

    fn build(id: usize, cfg: &PipelineConfig, tx: Sender<ToStats>, back: Option<Receiver<Recycled>>) -> Self {
        let mut buffers = Buffers::new(back, cfg.max_flows.min(4096));
        Self {
            id,
            flows: FlowTable::new(cfg.max_flows, cfg.flow_idle.as_nanos() as u64, cfg.mtu),
            vantages: cfg.vantages.clone(),
            clocks: MirrorClocks::default(),
            nvme: NvmeRecognizer::new(DEFAULT_MAX_PENDING),
            cm_requests: HashMap::with_capacity_and_hasher(CM_PENDING, ahash::RandomState::new()),
            check_icrc: cfg.check_icrc,
            counters: GlobalCounters::default(),
            untracked_reported: 0,
            first_ts: u64::MAX,
            last_ts: 0,
            interval_ns: (cfg.interval.as_nanos() as u64).max(1),
            current: None,
            ended: TxBatch { buf: buffers.transmissions(), tx: tx.clone() },
            buffers,
            tx,
        }
    }

    /// Intervals are aligned to multiples of the interval since the epoch, so reports of
    /// several probes (and of several runs over one capture) line up.
    fn interval_of(&self, ts: u64) -> (u64, u64) {
        let start = ts - ts % self.interval_ns;
        (start, start.saturating_add(self.interval_ns))
    }

    /// Processes one frame. Allocates nothing.
    #[inline]
    pub fn handle(&mut self, f: Frame<'_>) {
        let decoded = decode_frame(f.data);
        // An ERSPAN III switch timestamp is the packet's time: it was taken at the mirror.
        let ts = match &decoded {
            Decoded::Roce(RocePacket { mirror: Some(m), .. }) => match m.time {
                Some(t) => self.clocks.time(m.session, t, f.ts_ns),
                None => f.ts_ns,
            },
            _ => f.ts_ns,
        };
        self.advance_time(ts);
        self.counters.packets += 1;
        match decoded {
            Decoded::Roce(p) => {
                self.counters.roce_packets += 1;
                self.track(&p, f.source, p.inner_frame_len.unwrap_or(f.wire_len), ts);
            }
            Decoded::NotRoce(_) => self.counters.non_roce_packets += 1,
            Decoded::Error(e) => self.counters.decode_errors[e.index()] += 1,
        }
    }

    #[inline]
    fn advance_time(&mut self, ts: u64) {
        match self.current {
            None => self.current = Some(self.interval_of(ts)),
            // A frame at or past the end closes the interval. A frame from before the start
            // (a clock that stepped back) is counted in the open interval.
            Some((start, end)) if ts >= end => {
                self.emit(start, end);
                self.current = Some(self.interval_of(ts));
            }
            Some(_) => {}
        }
        self.first_ts = self.first_ts.min(ts);
        self.last_ts = self.last_ts.max(ts);
    }

    #[inline]
    fn track(&mut self, p: &RocePacket<'_>, source: u16, wire_len: u32, ts: u64) {
        let vantage = self.vantages.resolve(source, p.outer_vlan(), p.mirror.map(|m| m.session));
        let key = FlowKey { vantage, src: p.ip.src, dst: p.ip.dst, dst_qpn: p.bth.dest_qp() };
        let (ended, buffers) = (&mut self.ended, &mut self.buffers);
        let Some(slot) = self.flows.record(key, p, wire_len, ts, &mut |t| ended.push(t, buffers)) else {
            return;
        };
        let opcode = p.bth.opcode();
        if self.check_icrc && icrc::check(&p.icrc) == Some(false) {
            self.flows.counts_mut(slot).icrc_errors += 1;
        }
        if opcode == op::UD_SEND_ONLY && key.dst_qpn == GSI_QPN {
            self.connection_management(vantage, p);
            return;
        }
        match classify(opcode, p.payload, p.payload_len) {
            Capsule::Command(sqe) => {
                self.flows.counts_mut(slot).nvme_commands += 1;
                let k = PendingKey { vantage, host: p.ip.src, target: p.ip.dst, cid: sqe.cid };
                self.nvme.command(k, ts);
            }
            Capsule::Completion(cqe) => {
                let k = PendingKey { vantage, host: p.ip.dst, target: p.ip.src, cid: cqe.cid };
                if self.nvme.completion(k) {
                    self.flows.counts_mut(slot).nvme_completions += 1;
                }
            }
            Capsule::None => {}
        }
    }

    /// A CM MAD: a ConnectReply names the QP pair its request started.
    fn connection_management(&mut self, vantage: Vantage, p: &RocePacket<'_>) {
        match CmMessage::parse(p.payload) {
            Some((_, CmMessage::Req(r))) if self.cm_requests.len() < CM_PENDING => {
                let mtu = r.path_mtu_bytes().unwrap_or(0);
                self.cm_requests.insert((vantage, r.local_comm_id), (p.ip.src, r.local_qpn, p.ip.dst, mtu));
            }
            Some((_, CmMessage::Rep(r))) => {
                if let Some((a_ip, a_qpn, b_ip, mtu)) = self.cm_requests.remove(&(vantage, r.remote_comm_id))
                {
                    if b_ip == p.ip.src {
                        self.flows.announce_pair(vantage, a_ip, a_qpn, b_ip, r.local_qpn, mtu);
                    }
                }
            }
            Some((_, CmMessage::Rej { remote_comm_id, .. })) => {
                self.cm_requests.remove(&(vantage, remote_comm_id));
            }
            _ => {}
        }
    }

    fn emit(&mut self, start_ns: u64, end_ns: u64) {
        self.ended.flush(&mut self.buffers);
        let mut flows = self.buffers.flows(self.flows.len());
        self.flows.drain_interval(&mut flows);
        let untracked = self.flows.untracked_packets - self.untracked_reported;
        self.untracked_reported = self.flows.untracked_packets;
        let seen = self.counters.packets > 0;
        let snap = IntervalSnapshot {
            worker: self.id,
            start_ns,
            end_ns,
            first_ts_ns: seen.then_some(self.first_ts),
            last_ts_ns: seen.then_some(self.last_ts),
            counters: std::mem::take(&mut self.counters),
            untracked_packets: untracked,
            flows,
        };
        self.first_ts = u64::MAX;
        self.last_ts = 0;
        // The stats side outlives every worker (it ends when all senders are gone), so a
        // send error means it panicked; that is reported when it is joined.
        let _ = self.tx.send(ToStats::Interval(snap));
    }

    /// Ends every open transmission and closes the open interval (end of input or
    /// shutdown).
    pub fn finish(&mut self) {
        let (ended, buffers) = (&mut self.ended, &mut self.buffers);
        self.flows.close_all(&mut |t| ended.push(t, buffers));
        self.ended.flush(&mut self.buffers);
        if let Some((start, end)) = self.current.take() {
            self.emit(start, end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ToStats;

    const S: u64 = 1_000_000_000;

    fn frame(ts_ns: u64) -> Frame<'static> {
        // Not even Ethernet: counted as malformed, which is all this test needs.
        Frame { data: &[0u8; 4], wire_len: 4, ts_ns, source: 0 }
    }

    #[test]
    fn intervals_follow_packet_time() {
        let cfg = PipelineConfig { max_flows: 16, ..PipelineConfig::new(VantageMap::default()) };
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut w = Worker::new(0, &cfg, tx);
        for ts in [10 * S + S / 2, 11 * S + S / 5, 10 * S + 9 * S / 10, 13 * S + S / 10] {
            w.handle(frame(ts));
        }
        w.finish();
        drop(w);
        type Row = (u64, u64, u64, Option<u64>, Option<u64>);
        let snaps: Vec<Row> = rx
            .iter()
            .filter_map(|m| match m {
                ToStats::Interval(s) => Some(s),
                ToStats::Transmissions(_) => None,
            })
            .map(|s| (s.start_ns, s.end_ns, s.counters.packets, s.first_ts_ns, s.last_ts_ns))
            .collect();
        assert_eq!(
            snaps,
            vec![
                (10 * S, 11 * S, 1, Some(10 * S + S / 2), Some(10 * S + S / 2)),
                // A frame from before the open interval (a clock step back) counts in it.
                (11 * S, 12 * S, 2, Some(10 * S + 9 * S / 10), Some(11 * S + S / 5)),
                // Empty intervals are skipped, not reported as zeros.
                (13 * S, 14 * S, 1, Some(13 * S + S / 10), Some(13 * S + S / 10)),
            ]
        );
    }
}
