//! The worker: decode → track for every frame, snapshots at interval boundaries.

use super::reorder::{Held, Reorder};
use super::{interval_at, is_past, PipelineConfig, Recycled, ToStats};
use crate::capture::dpdk::prefetch;
use crate::capture::{Frame, BURST};
use crate::metrics::latency::LatencyBatch;
use crate::metrics::snapshot::Forgotten;
use crate::metrics::{GlobalCounters, IntervalSnapshot};
use crate::track::evidence::NoFile;
use crate::track::flow::{FlowDelta, FlowEvent, Transmission};
use crate::track::io::{IoBatch, IoCountsByPair};
use crate::track::{Analyzer, Seen};
use crate::wire::{
    could_be_mirrored, decode_again_if_cut, decode_frame_into, DecodeError, Decoded, Detached, NotRoce,
    RocePacket, PLAIN_HEADERS_LEN,
};
use crossbeam_channel::{Receiver, Sender};

/// Asks for the cache lines of a frame's headers (see [`PLAIN_HEADERS_LEN`]) ahead of its
/// decoding: its first line and the line of the last header byte, two when they straddle a
/// line boundary.
#[inline(always)]
fn prefetch_headers(frame: &[u8]) {
    let p = frame.as_ptr();
    prefetch(p, 1);
    prefetch(p.wrapping_add(frame.len().min(PLAIN_HEADERS_LEN).saturating_sub(1)), 1);
}

/// Ended transmissions go to the stats side in batches of this many (or at each interval).
const TX_BATCH: usize = 1024;
/// Buffers allocated at start-up for each kind of message, before any come back.
const SPARE_BUFFERS: usize = 4;
/// Room for the (initiator, target, op) keys of I/O outcomes that change in an interval
/// (more grow the buffer once; it comes back to be used again).
const IO_PAIRS: usize = 64;

/// Buffers for messages to the stats side: spares allocated at start-up, then the ones the
/// stats side hands back. Only when none is at hand (the stats side is far behind, or does
/// not hand buffers back) is a new one allocated.
struct Buffers {
    back: Option<Receiver<Recycled>>,
    flows: Vec<Vec<FlowDelta>>,
    latency: Vec<LatencyBatch>,
    ios: Vec<IoBatch>,
    /// Evidence events without a file, listed with each interval.
    no_file: Vec<Vec<NoFile>>,
    transmissions: Vec<Vec<Transmission>>,
}

impl Buffers {
    fn new(back: Option<Receiver<Recycled>>, flows_capacity: usize, slow_ios: usize) -> Self {
        Self {
            back,
            flows: (0..SPARE_BUFFERS).map(|_| Vec::with_capacity(flows_capacity)).collect(),
            latency: (0..SPARE_BUFFERS).map(|_| LatencyBatch::default()).collect(),
            ios: (0..SPARE_BUFFERS).map(|_| IoBatch::with_capacity(IO_PAIRS, slow_ios)).collect(),
            no_file: (0..SPARE_BUFFERS).map(|_| Vec::new()).collect(),
            transmissions: (0..SPARE_BUFFERS).map(|_| Vec::with_capacity(TX_BATCH)).collect(),
        }
    }

    fn collect(&mut self) {
        let Some(back) = &self.back else { return };
        while let Ok(r) = back.try_recv() {
            match r {
                Recycled::Interval { flows, latency: batch, ios, no_file } => {
                    if self.no_file.len() < self.no_file.capacity() {
                        self.no_file.push(no_file);
                    }
                    if self.flows.len() < self.flows.capacity() {
                        self.flows.push(flows);
                    }
                    if self.latency.len() < self.latency.capacity() {
                        self.latency.push(batch);
                    }
                    if self.ios.len() < self.ios.capacity() {
                        self.ios.push(ios);
                    }
                }
                Recycled::Transmissions(v) if self.transmissions.len() < self.transmissions.capacity() => {
                    self.transmissions.push(v)
                }
                Recycled::Transmissions(_) => {}
            }
        }
    }
}

/// Where the flow table's ended transmissions go, in batches. A push never grows a buffer: a
/// full batch is sent and replaced.
struct Out {
    worker: usize,
    /// The end of the interval the transmissions ending now are counted in (sent with each
    /// batch: the stats side waits until every worker has reported it, see
    /// [`crate::metrics::steps::Steps::offer_reported`]).
    interval_end: u64,
    /// Never wait for the stats side: a message it has no room for is dropped and counted.
    never_wait: bool,
    /// Messages dropped that way: (interval snapshots, transmission batches).
    dropped: (u64, u64),
    /// Evidence records the stats side had no room for (their events are lost with them).
    dropped_evidence: u64,
    /// Latency samples dropped in intervals whose snapshot was dropped: the next one says so.
    dropped_latency_samples: u64,
    ended: Vec<Transmission>,
    buffers: Buffers,
    tx: Sender<ToStats>,
}

impl Out {
    #[inline]
    fn event(&mut self, e: FlowEvent) {
        match e {
            FlowEvent::Ended(t) => {
                if self.ended.len() == TX_BATCH {
                    self.flush();
                }
                self.ended.push(t);
            }
            FlowEvent::Evidence(r) => {
                let msg = ToStats::Evidence(self.worker, r);
                if self.never_wait {
                    if self.tx.try_send(msg).is_err() {
                        self.dropped_evidence += 1;
                    }
                } else {
                    let _ = self.tx.send(msg);
                }
            }
        }
    }

    fn transmissions_buffer(&mut self) -> Vec<Transmission> {
        self.buffers.collect();
        self.buffers.transmissions.pop().unwrap_or_else(|| Vec::with_capacity(TX_BATCH))
    }

    fn flush(&mut self) {
        if !self.ended.is_empty() {
            let next = self.transmissions_buffer();
            let full = std::mem::replace(&mut self.ended, next);
            let msg = ToStats::Transmissions(self.worker, self.interval_end, full);
            if self.never_wait {
                if self.tx.try_send(msg).is_err() {
                    self.dropped.1 += 1;
                }
            } else {
                let _ = self.tx.send(msg);
            }
        }
    }
}

/// A frame handed to the analysis in a burst: `stamped` is `Some(switch_clock)` when it
/// has its final time already (a dispatcher or the reorder window gave it), `observe` a
/// time to observe before it; `late` when it came after the reorder window had passed it.
struct Incoming<'a> {
    f: Frame<'a>,
    stamped: Option<bool>,
    observe: Option<Told>,
    late: bool,
    /// The frame's packet, if it was decoded as it arrived (for its time), apart from the
    /// frame's bytes (see `Reorder::keep_packet`).
    packet: Option<&'a Detached>,
}

/// A frame of a burst between decoding and tracking.
#[derive(Clone, Copy)]
struct Staged<'a> {
    f: Frame<'a>,
    decoded: Decoded<'a>,
    /// How the tracker sees the packet, built as the frame is staged (its time, its flow's
    /// key and hash) and completed by the pipeline (the index's hint): handed to the
    /// tracker by reference, not built again from the staged fields.
    seen: Seen,
    observe: Option<Told>,
}

/// Packet time as a dispatcher tells it to its workers: the highest time dispatched (which
/// a single worker's flow table keeps, and its intervals follow) and the latest since the
/// clock last stepped by more than a second (which a single worker's reorder window and I/O
/// timeouts follow, frame by frame). They differ only after the clock stepped back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Told {
    pub highest: u64,
    pub current: u64,
    /// How many times the clock has stepped (a frame more than a second from the latest
    /// time, either way) so far. A worker that learns of a step it saw no frame of starts
    /// its reorder window again, as one worker's started again at that frame. 0 without a
    /// dispatcher.
    pub steps: u32,
    /// The highest time before the clock last stepped: what one worker's analysis had
    /// reached when its window started again there (it analyses what it holds first).
    pub stepped_from: u64,
    /// The latest time since the step before that one, at the last step: what one worker's
    /// I/O timeouts had reached there (`current` then). Told of several steps at once, a
    /// worker gets the highest `current` at any of them (the I/O timeouts one worker's
    /// frames reached in between).
    pub stepped_current: u64,
}

impl Told {
    /// One time for both (no dispatcher, or a silent link's clock).
    pub fn at(t: u64) -> Self {
        Self { highest: t, current: t, steps: 0, stepped_from: 0, stepped_current: 0 }
    }
}

pub use crate::metrics::snapshot::TimeUse;

/// Packets between the steps of a burst's prefetching pipeline (see `Worker::burst`). Two
/// left the flow's hot lines still on their way when the step after read them (on this
/// kind of VM a miss that also misses the TLB takes several hundred ns): four analysed 13 %
/// more packets a second live on many QPs than two, and eight, once a packet asked for
/// fewer lines, about 6 % more than four in memory (many QPs timed as live).
const PIPE: usize = 8;

/// The next step, from step `k` on, of the tracking loop of a burst of `n` staged packets
/// (`lag` steps before the first is tracked, see `Worker::track_staged`) at which something
/// happens: a packet's bucket read for its entry's prefetch (pipeline step `n + k` is `j +
/// PIPE` for some packet `j`), its entry read for what it touches next (`j + 2 × PIPE`), or
/// a packet tracked. A short burst (a late frame analysed alone, a live poll of a few
/// frames) skips the steps between, which would find nothing to do: 21 of the 24 for one
/// packet.
#[inline(always)]
fn next_step(n: usize, lag: usize, k: usize) -> usize {
    if k >= lag {
        return k;
    }
    let t = n + k;
    let next = if t < PIPE {
        PIPE
    } else if t < PIPE + n {
        t
    } else if t < 2 * PIPE {
        2 * PIPE
    } else if t < 2 * PIPE + n {
        t
    } else {
        n + lag
    };
    next.min(n + lag) - n
}

/// Flows in the table from which the pipeline's third prefetch step (what a packet
/// touches after its flow's hot lines) is taken. A smaller table (its entries are 1,360
/// bytes) stays in the core's cache: there the step is instructions that prefetch nothing
/// missing. Left out below this, the bench's mix took 1,101 instructions a packet instead
/// of 1,183 and its fastest pass in memory 2-5 % less time; many QPs took 10-20 % more
/// without it.
const PREFETCH_NEXT_FROM_FLOWS: usize = 512;

/// Moves frames into its [`Analyzer`] and reports out: interval snapshots at interval
/// boundaries of packet time, ended transmissions in batches.
pub struct Worker {
    id: usize,
    analyzer: Analyzer,
    /// `--evidence-dir`: every tracked frame is kept for the evidence.
    evidence: bool,
    counters: GlobalCounters,
    untracked_reported: u64,
    forgotten_reported: Forgotten,
    /// Earliest and latest frame timestamp in the open interval.
    first_ts: u64,
    last_ts: u64,
    interval_ns: u64,
    /// The open interval [start, end) in packet time; `None` before the first frame.
    current: Option<(u64, u64)>,
    /// Frames held until the reorder window has passed them (`None`: a window of 0).
    reorder: Option<Box<Reorder>>,
    /// The highest packet time a dispatcher told (see [`Told`]); 0 without one.
    highest_told: u64,
    /// The highest time the analysis has observed (see [`Worker::observe_released`]).
    highest_reached: u64,
    /// The clock steps a dispatcher told of so far ([`Told::steps`]).
    told_steps: u32,
    out: Out,
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
        let mut out = Out {
            worker: id,
            interval_end: 0,
            never_wait: cfg.never_wait,
            dropped: (0, 0),
            dropped_evidence: 0,
            dropped_latency_samples: 0,
            ended: Vec::new(),
            buffers: Buffers::new(back, cfg.max_flows.min(4096), cfg.slow_ios),
            tx: tx.clone(),
        };
        out.ended = out.transmissions_buffer();
        Self {
            id,
            analyzer: Analyzer::new(&cfg.analyzer()),
            evidence: cfg.evidence.is_some(),
            counters: GlobalCounters::default(),
            untracked_reported: 0,
            forgotten_reported: Forgotten::default(),
            first_ts: u64::MAX,
            last_ts: 0,
            interval_ns: (cfg.interval.as_nanos() as u64).max(1),
            current: None,
            reorder: (!cfg.reorder_window.is_zero()).then(|| {
                let r = Reorder::new(cfg.reorder_window.as_nanos() as u64, cfg.kept_at_least());
                // Two vantages or several sources (ports, files) interleave out of time
                // order from the start; one source is held only once it does.
                let interleaved = cfg.vantages.maps_storage() || cfg.source_times.len() > 1;
                Box::new(if interleaved { r } else { r.unarmed() })
            }),
            highest_told: 0,
            highest_reached: 0,
            told_steps: 0,
            out,
            tx,
        }
    }

    /// Frames will come with their final time: a dispatcher in front applies the ERSPAN
    /// switch clocks (one anchor per session for all workers).
    pub fn stamped(mut self) -> Self {
        self.analyzer.set_stamped();
        self
    }

    /// The latest packet time across all workers, or the clock of a live capture whose link
    /// is silent: the open interval closes, transmissions end and I/Os time out as they
    /// would with one worker seeing packets, even when this one sees none for a while.
    #[inline]
    pub fn observe_time(&mut self, now: u64) {
        self.observe_told(Told::at(now));
    }

    /// [`Worker::observe_time`] with the two times a dispatcher tells (see [`Told`]).
    #[inline]
    pub fn observe_told(&mut self, t: Told) {
        let Some(mut r) = self.reorder.take() else {
            self.highest_told = self.highest_told.max(t.highest);
            self.observe_released(t);
            return;
        };
        // A step first, at the time reached before it (see `restart_if_stepped`).
        self.restart_if_stepped(&mut r, t);
        self.highest_told = self.highest_told.max(t.highest);
        if r.is_armed() {
            r.observe(t.current);
            self.release_due(&mut r, true);
            self.reorder = Some(r);
        } else {
            // Nothing held: as without a window (a clock observed is no frame's time, and
            // frames stamped before it may still come).
            self.reorder = Some(r);
            self.observe_released(t);
        }
    }

    /// [`Worker::observe_told`] for a time a dispatcher told without a frame (a tick, or
    /// the run's end), with `armed_after` as its frames carry it (see
    /// [`Worker::handle_stamped_burst`]): once some worker's frame came out of time order,
    /// this worker's window is armed before the time is observed, as one worker's was. The
    /// time then moves the window on, not the analysis past frames that other workers still
    /// hold. (Unarmed, a worker sent no frame yet would take the highest time told as
    /// reached; a late frame of its own would then end a transmission that it joins with one
    /// worker.)
    pub fn observe_told_after(&mut self, t: Told, armed_after: Option<u64>) {
        if let Some(mut r) = self.reorder.take() {
            // A clock step first (the window starts again), then armed after the frames
            // one worker analysed since, as `handle_stamped_burst` does for a frame.
            self.restart_if_stepped(&mut r, t);
            if let Some(latest) = armed_after.filter(|_| !r.is_armed()) {
                r.arm_after(latest, t.current);
            }
            self.reorder = Some(r);
        }
        self.observe_told(t);
    }

    /// Time moved on to `t`, every frame before it analysed already: the open interval and
    /// the flow table follow the highest time, the I/O timeouts the current one; but the
    /// first time a highest time is told, the I/O timeouts reach it, as one worker's do by
    /// analysing the frame of that time. (After a step back this worker may learn of that
    /// frame only with its first frame after the step, before which it has begun no I/O
    /// the step could time out.)
    fn observe_released(&mut self, t: Told) {
        match self.current {
            Some((_, end)) if is_past(t.highest, end) => self.close_intervals(t.highest),
            // No frame analysed yet: the time told opens the interval that holds it, as a
            // frame of that time would (one worker's interval is open from its first frame
            // on). This worker then reports its intervals, empty, as the others report
            // theirs: what waits for every worker's report (an interval's slowest I/Os, a
            // collective step) does not wait for this one's first frame, which, live, may
            // never come.
            None if t.highest > 0 => self.open(self.interval_of(t.highest)),
            _ => {}
        }
        let ios_at = if t.highest > self.highest_reached { t.highest } else { t.current };
        self.highest_reached = self.highest_reached.max(t.highest);
        let out = &mut self.out;
        self.analyzer.observe(t.highest, ios_at, &mut |e| out.event(e));
    }

    /// Whether some frame was timed by a switch's ERSPAN clock (whose time the probe's
    /// clock cannot stand in for).
    pub fn saw_switch_clock(&self) -> bool {
        self.analyzer.saw_switch_clock()
    }

    /// Where each vantage's packet times came from (compute, storage).
    pub fn time_use(&self) -> [TimeUse; 2] {
        self.analyzer.time_use()
    }

    /// I/O outcomes per (initiator, target, op) so far.
    pub fn io_counts(&self) -> IoCountsByPair {
        self.analyzer.io_counts()
    }

    /// The interval that holds `ts` (see [`interval_at`]).
    fn interval_of(&self, ts: u64) -> (u64, u64) {
        interval_at(ts, self.interval_ns)
    }

    /// Processes one frame. Allocates nothing.
    #[inline]
    pub fn handle(&mut self, f: Frame<'_>) {
        self.handle_burst(std::slice::from_ref(&f));
    }

    /// Processes a burst of frames, as [`Worker::handle`] does one by one, with the same
    /// results; but it first decodes all of them and prefetches the flow state each will
    /// touch (its index bucket, then its entry, then the entry of the flow a response
    /// answers), so that the burst's cache misses overlap: on a fabric of many thousand QPs
    /// nearly every packet's flow is out of the cache. Allocates nothing. Called once a
    /// burst, and kept a function of its own under whole-program LTO, so that profiles and
    /// callgrind count a burst's work under its name.
    #[inline(never)]
    pub fn handle_burst<'a>(&mut self, frames: &[Frame<'a>]) {
        let unstamped =
            |f: &Frame<'a>| Incoming { f: *f, stamped: None, observe: None, late: false, packet: None };
        let Some(mut r) = self.reorder.take() else {
            return self.arrive(frames.iter().map(unstamped), false);
        };
        // While frames come in time order and the window holds none, they go on in bursts
        // straight from `frames`, as `arrive` would send them, without being copied aside
        // first; from the first frame out of order (which arms the window), `arrive` takes
        // over, with that frame's time as it was given.
        let mut rest = frames;
        while !rest.is_empty() && !r.is_armed() {
            let chunk = &rest[..rest.len().min(BURST)];
            // A NIC writes frames to memory, not to this core's cache: the headers of every
            // frame of the chunk are asked for before the first is decoded.
            for f in chunk {
                prefetch_headers(f.data);
            }
            // Each frame decoded and timed as it is staged: the frames up to the first one
            // out of time order are tracked as a burst.
            let mut staged: [Option<Staged<'a>>; BURST] = [None; BURST];
            let mut n = 0;
            let mut out_of_order = None;
            let next = self.prefetches_next();
            for f in chunk {
                let s = self.stage(&mut staged[n], *f, None, None, None, false);
                if !r.pass(s.seen.ts) {
                    out_of_order = Some((s.seen.ts, s.seen.switch_clock));
                    break;
                }
                self.ahead(&mut staged, n, next);
                n += 1;
            }
            self.track_staged(&mut staged[..n], next);
            rest = &rest[n..];
            if let Some((ts, switch)) = out_of_order {
                let first = Incoming {
                    f: Frame { ts_ns: ts, ..rest[0] },
                    stamped: Some(switch),
                    observe: None,
                    late: false,
                    packet: None,
                };
                self.reorder = Some(r);
                return self.arrive(std::iter::once(first).chain(rest[1..].iter().map(unstamped)), false);
            }
        }
        let armed = r.is_armed();
        self.reorder = Some(r);
        if armed {
            self.arrive(rest.iter().map(unstamped), false);
        }
    }

    /// Frames as they arrive: without a reorder window, or while frames come in time order
    /// before the window holds any, straight on in bursts; else held by the window, and
    /// what it has passed released (with `observe`, and the time it has passed observed).
    fn arrive<'a>(&mut self, frames: impl Iterator<Item = Incoming<'a>>, observe: bool) {
        let Some(mut r) = self.reorder.take() else {
            let mut frames = frames.peekable();
            while frames.peek().is_some() {
                self.burst(frames.by_ref().take(BURST));
            }
            return;
        };
        let mut passed: [Option<Incoming<'a>>; BURST] = [const { None }; BURST];
        let mut n = 0;
        for i in frames {
            if let Some(t) = i.observe.filter(|t| t.steps > self.told_steps) {
                // The frames passed on before this one go first.
                if n > 0 {
                    self.burst(passed[..n].iter_mut().filter_map(Option::take));
                    n = 0;
                }
                self.restart_if_stepped(&mut r, t);
            }
            let (ts, switch, packet) = match i.stamped {
                Some(sw) => (i.f.ts_ns, sw, 0),
                None if could_be_mirrored(i.f.data) => self.mirror_time(&mut r, &i.f),
                // Any other frame is timed by its capture (where the switch-timed frames
                // stand, if any were).
                None => (self.analyzer.unstamped_time(i.f.ts_ns), false, 0),
            };
            if !r.is_armed() && r.pass(ts) {
                let f = Frame { ts_ns: ts, ..i.f };
                passed[n] = Some(Incoming { f, stamped: Some(switch), ..i });
                n += 1;
                if n == BURST {
                    self.burst(passed.iter_mut().filter_map(Option::take));
                    n = 0;
                }
                continue;
            }
            // The frames passed on before this one go first (a burst staged for none costs
            // what one of a few does: with the window armed, every frame comes here).
            if n > 0 {
                self.burst(passed[..n].iter_mut().filter_map(Option::take));
                n = 0;
            }
            if let Some(t) = i.observe {
                self.highest_told = self.highest_told.max(t.highest);
                r.observe(t.current);
                // A highest time a clock step ahead of the window, not reached yet (another
                // worker's frames jumped ahead): what is held is analysed and the analysis
                // reaches it, as one worker's does at the frame of that time, whose window
                // starts again there.
                if t.highest > self.highest_reached && r.is_clock_step(t.highest) {
                    self.restart_at_step(&mut r, u64::MAX);
                }
            }
            self.hold(&mut r, &i.f, ts, switch, packet);
        }
        if n > 0 {
            self.burst(passed[..n].iter_mut().filter_map(Option::take));
        }
        if r.is_armed() {
            self.release_due(&mut r, observe);
        }
        self.reorder = Some(r);
    }

    /// The packet time, as it arrives, of a frame that may be an ERSPAN mirror: decoded
    /// for it (the switch's clock). While the window holds frames, the decoded packet is
    /// kept for when the frame is released (its place in `r`, 0 if none), so that the
    /// frame is decoded once. Out of line: the loop that holds frames stays as short for
    /// every other frame, which is timed by its capture.
    #[inline(never)]
    fn mirror_time(&mut self, r: &mut Reorder, f: &Frame<'_>) -> (u64, bool, u32) {
        let mut d = Decoded::NotRoce(NotRoce::NotIp);
        decode_frame_into(f.data, &mut d);
        let (ts, switch) = self.analyzer.packet_time(&d, f.data, f.ts_ns);
        let packet = match &d {
            Decoded::Roce(p) if r.is_armed() => r.keep_packet(p, f.data),
            _ => 0,
        };
        (ts, switch, packet)
    }

    /// Holds a frame until the reorder window has passed it; a late one is analysed at once.
    /// A frame seconds away from the others is a clock that stepped: what is held is
    /// analysed, and the window starts again from it (as frames arrive, from then on).
    #[inline]
    fn hold(&mut self, r: &mut Reorder, f: &Frame<'_>, ts: u64, switch: bool, packet: u32) {
        if r.is_clock_step(ts) {
            self.restart_at_step(r, u64::MAX);
        }
        if r.is_late(ts) {
            self.reach_late_bound(r);
            let f = Frame { ts_ns: ts, ..*f };
            let packet = r.take_packet(packet);
            let packet = packet.as_ref();
            self.burst(std::iter::once(Incoming {
                f,
                stamped: Some(switch),
                observe: None,
                late: true,
                packet,
            }));
        } else {
            r.push(f, ts, switch, packet, &mut |r| {
                // Frames the window has passed go first (a batch that moved time on, say
                // past a silence, holds them until its end); only if none has, the oldest
                // goes before its time.
                if self.release(r, true) == 0 {
                    self.counters.released_early += self.release(r, false) as u64;
                }
            });
        }
    }

    /// Before a late frame is analysed: every frame the window has passed is analysed, and
    /// the analysis reaches the time before which frames are late. A late frame then finds
    /// the same state whatever batches brought the frames and however many workers share
    /// them. Otherwise one worker would have analysed the frames before the window was
    /// armed (its flows' clock at the latest of them), and another worker, which saw none
    /// of those frames, would not; the late frame would end a transmission with one worker
    /// and join it with several.
    #[inline(never)]
    fn reach_late_bound(&mut self, r: &mut Reorder) {
        while self.release(r, true) > 0 {}
        let bound = r.late_before();
        if bound > 0 {
            self.observe_released(Told::at(bound));
        }
    }

    /// A dispatcher told of a clock step this worker has not started its window again for
    /// (the step's frame went to another worker): everything held is analysed and the
    /// window starts again, as one worker's did at that frame. Otherwise the window would
    /// judge frames after the step by the times before it (late, for a clock that stepped
    /// back and then forward again to within a second of where it was).
    fn restart_if_stepped(&mut self, r: &mut Reorder, t: Told) {
        if t.steps > self.told_steps {
            self.told_steps = t.steps;
            // The analysis reaches what one worker's reached at the step: the highest time
            // before it (not the highest told now, which may be the step's own frame).
            self.highest_told = self.highest_told.max(t.stepped_from);
            // And its I/Os what one worker's had: after a step back, the latest time since
            // it, not the highest before it.
            self.restart_at_step(r, t.stepped_current);
        }
    }

    /// At a clock step: everything held is analysed, the analysis reaches the highest time
    /// seen or told, and the window starts again. Behind a dispatcher the highest time told
    /// may be later than any frame this worker analysed (other workers' frames): the
    /// analysis reaches it as one worker's does by analysing the frame of that time (after
    /// a step back the window is told the time since the step only). I/Os time out by
    /// `current` (see [`Worker::release_all`]).
    fn restart_at_step(&mut self, r: &mut Reorder, current: u64) {
        self.release_all(r, current);
        r.restart();
    }

    /// Everything held is analysed, and the analysis reaches the highest time seen or told
    /// (at a clock step, and at the end: what another worker's frames told this one, that
    /// the window had not passed yet, counts as it does with one worker). I/Os time out by
    /// `current`, at least the latest frame held and at most the highest time: at the end
    /// and at a step told after a step back, the latest time since the clock last stepped,
    /// as they do by frames (the highest may be from before a step back, older than the
    /// I/Os begun since); `u64::MAX` for the highest.
    fn release_all(&mut self, r: &mut Reorder, current: u64) {
        while self.release(r, false) > 0 {}
        let highest = r.latest().max(self.highest_told);
        // Even with the highest time reached already: the I/Os' clock may not be (a step
        // back, then one told forward to a time below the highest).
        if highest > 0 {
            let current = current.clamp(r.latest(), highest);
            self.observe_released(Told { highest, current, ..Told::default() });
        }
        // Reached, whether observed now or by analysing the frame of that time.
        self.highest_reached = self.highest_reached.max(highest);
    }

    /// Analyses the frames the reorder window has passed, oldest first; with `observe`, then
    /// tells the analysis how far time has moved (as [`Worker::observe_time`] does without
    /// a window).
    fn release_due(&mut self, r: &mut Reorder, observe: bool) {
        while self.release(r, true) > 0 {}
        let now = r.watermark();
        if observe && now > 0 {
            self.observe_released(Told::at(now));
            r.passed(now);
        }
    }

    /// Analyses up to a burst of held frames: those due, or the oldest whether due or not.
    /// Returns how many.
    fn release(&mut self, r: &mut Reorder, due: bool) -> usize {
        let mut out = [Held::default(); BURST];
        let n = if due { r.due(&mut out) } else { r.oldest(&mut out) };
        if n > 0 {
            let kept = r.keeps_packets();
            let frames = out[..n].iter().map(|h| Incoming {
                f: r.frame(h),
                stamped: Some(h.switch),
                observe: None,
                late: false,
                packet: if kept { r.packet(h) } else { None },
            });
            self.burst(frames);
            r.done(&out[..n]);
        }
        n
    }

    /// Like [`Worker::handle_burst`] for frames a dispatcher stamped with their final time,
    /// each with whether that time is a switch clock's, the latest time to observe (see
    /// [`Worker::observe_time`]) before it, and, once some worker's frame came out of time
    /// order, the latest time before that frame (see [`Reorder::arm_after`]).
    pub fn handle_stamped_burst<'a>(
        &mut self,
        frames: impl Iterator<Item = (Frame<'a>, bool, Told, Option<u64>)>,
    ) {
        let mut frames = frames.map(|(f, sw, t, after)| {
            (Incoming { f, stamped: Some(sw), observe: Some(t), late: false, packet: None }, after)
        });
        let Some(mut r) = self.reorder.take() else {
            return self.arrive(frames.map(|(i, _)| i), true);
        };
        // As in `handle_burst`: frames in time order go on in bursts as they come, while the
        // window holds none; from the first out of order (which arms it), `arrive` takes over.
        // A frame out of order at another worker arms this window too, as it would one
        // worker's that saw every frame.
        let mut out_of_order = None;
        let mut stepped = None;
        // A frame taken back after its clock step was dealt with, to go on as any other.
        let mut pending: Option<(Incoming<'a>, Option<u64>)> = None;
        let mut more = true;
        let mut told_steps = self.told_steps;
        while more && !r.is_armed() {
            let mut taken = 0;
            self.burst(std::iter::from_fn(|| {
                if taken == BURST {
                    return None;
                }
                let Some((i, armed_after)) = pending.take().or_else(|| frames.next()) else {
                    more = false;
                    return None;
                };
                // A clock step this worker saw no frame of: its window starts again below,
                // before this frame is judged.
                if i.observe.is_some_and(|t| t.steps > told_steps) {
                    stepped = Some((i, armed_after));
                    return None;
                }
                if let Some(latest) = armed_after {
                    r.arm_after(latest, i.f.ts_ns);
                    out_of_order = Some(i);
                    return None;
                }
                if !r.pass(i.f.ts_ns) {
                    out_of_order = Some(i);
                    return None;
                }
                taken += 1;
                Some(i)
            }));
            if let Some((first, armed_after)) = stepped.take() {
                // As one worker's window was: started again at the step; then the frame
                // goes on as any other (armed by it, if some frame came out of order since,
                // after the frames one worker analysed from the step on).
                if let Some(t) = first.observe {
                    self.restart_if_stepped(&mut r, t);
                }
                told_steps = self.told_steps;
                pending = Some((first, armed_after));
            }
        }
        let armed = r.is_armed();
        self.reorder = Some(r);
        // The frames from the first out of order on, or all of them if the window held
        // frames already: `arrive` holds them (and releases what is due).
        let rest = pending.into_iter().chain(frames).map(|(i, _)| i);
        match out_of_order {
            Some(first) => self.arrive(std::iter::once(first).chain(rest), true),
            None if armed => self.arrive(rest, true),
            None => {}
        }
    }

    /// At most [`BURST`] frames: decoded, timed and their flows' keys hashed first, each
    /// key's index bucket prefetched as it is hashed (the decoding of the frames after it
    /// covers the miss); pipelined, three steps `PIPE` packets apart: read a packet's
    /// bucket and prefetch the entry it names; read the entry and prefetch what the packet
    /// touches next (its request's ring slot; for a response, the flow it answers; for a
    /// packet not of its flow's first opcode, the line counting it); track the packet, in
    /// order. The first two steps begin while the burst is still being staged
    /// ([`Worker::ahead`]), the tracking after it. Only a few packets' misses are in flight
    /// at once: prefetching a whole burst at each step asks for more lines than the CPU has
    /// miss buffers, and the prefetches beyond them come to nothing.
    fn burst<'a>(&mut self, frames: impl Iterator<Item = Incoming<'a>>) {
        let mut staged: [Option<Staged<'a>>; BURST] = [None; BURST];
        let mut n = 0;
        let next = self.prefetches_next();
        for Incoming { f, stamped, observe, late, packet } in frames.take(BURST) {
            self.stage(&mut staged[n], f, packet, stamped, observe, late);
            self.ahead(&mut staged, n, next);
            n += 1;
        }
        self.track_staged(&mut staged[..n], next);
    }

    /// A frame staged into `at`: decoded there (the decoded packet is written where it is
    /// kept, not moved there; a `packet` decoded as the frame arrived is attached to the
    /// frame's bytes instead), timed (by `stamped`'s time, or as it arrives), and its
    /// flow's key hashed, the key's index bucket prefetched.
    #[inline(always)]
    fn stage<'s, 'a>(
        &mut self,
        at: &'s mut Option<Staged<'a>>,
        f: Frame<'a>,
        packet: Option<&Detached>,
        stamped: Option<bool>,
        observe: Option<Told>,
        late: bool,
    ) -> &'s mut Staged<'a> {
        let seen = Seen {
            source: f.source,
            wire_len: f.wire_len,
            ts: f.ts_ns,
            switch_clock: false,
            late,
            flow: None,
            hint: None,
        };
        let s = at.insert(Staged { f, decoded: Decoded::NotRoce(NotRoce::NotIp), seen, observe });
        match packet {
            Some(p) => s.decoded = Decoded::Roce(p.attach(f.data)),
            None => decode_frame_into(f.data, &mut s.decoded),
        }
        (s.seen.ts, s.seen.switch_clock) = match stamped {
            Some(sw) => (f.ts_ns, sw),
            None => self.analyzer.packet_time(&s.decoded, f.data, f.ts_ns),
        };
        if let Decoded::Roce(p) = &s.decoded {
            // A frame counts as long as the frame the monitored link carried (a mirror's
            // inner frame; a frame cut inside its payload, as its headers say).
            if p.may_be_longer() {
                s.seen.wire_len = p.link_len(f.data, s.seen.wire_len);
            }
            let r = self.analyzer.flow_ref(p, f.source);
            self.analyzer.flows().prefetch_index(r.hash);
            s.seen.flow = Some(r);
        }
        s
    }

    /// Whether the burst's pipeline takes its third step (see [`PREFETCH_NEXT_FROM_FLOWS`]).
    #[inline(always)]
    fn prefetches_next(&self) -> bool {
        self.analyzer.tracked_flows() >= PREFETCH_NEXT_FROM_FLOWS
    }

    /// The pipeline's first two steps at step `t` of a burst (`t` counts the frames staged
    /// so far, then the tracking loop's steps after them): the index bucket of the packet
    /// `PIPE` before, read for its entry's prefetch, and that entry of the packet `2 × PIPE`
    /// before, read for what the packet touches next. Taken while the burst is staged too,
    /// so that the first packets' lines come while the later frames are decoded, not while
    /// the loop waits on them.
    #[inline(always)]
    fn ahead(&self, staged: &mut [Option<Staged<'_>>], t: usize, next: bool) {
        if let Some(Some(s)) = t.checked_sub(PIPE).and_then(|j| staged.get_mut(j)) {
            if let Some(r) = s.seen.flow {
                s.seen.hint = self.analyzer.flows().prefetch_entry(r.hash);
            }
        }
        if !next {
            return;
        }
        if let Some(Some(s)) = t.checked_sub(2 * PIPE).and_then(|j| staged.get(j)) {
            if let (Some(slot), Decoded::Roce(p)) = (s.seen.hint, &s.decoded) {
                self.analyzer.flows().prefetch_next(slot, p.bth.opcode(), p.bth.psn());
            }
        }
    }

    /// Tracks staged frames, in order, at the pipeline's steps after the staging's
    /// ([`Worker::ahead`]): a packet is tracked at least `PIPE` steps after its entry was
    /// read for what it touches next.
    #[inline(always)]
    fn track_staged(&mut self, staged: &mut [Option<Staged<'_>>], next: bool) {
        let n = staged.len();
        // An empty burst (`arrive` hands over the frames passed so far before each frame
        // it holds: none while the window holds every frame) has nothing to step through.
        if n == 0 {
            return;
        }
        // Steps before the first packet is tracked: none after a full burst (its first
        // packets' lines were asked for while the later ones were staged).
        let lag = (3 * PIPE).saturating_sub(n);
        let mut k = 0;
        while k < n + lag {
            self.ahead(staged, n + k, next);
            let step = k;
            k = next_step(n, lag, k + 1);
            if let Some(j) = step.checked_sub(lag) {
                if let Some(s) = &staged[j] {
                    if let Some(t) = s.observe.filter(|t| !self.analysing_covers(s, t.highest)) {
                        self.observe_told(t);
                    }
                    self.process(s);
                    // Kept here, not in `process`, which stays as it is without evidence.
                    if self.evidence && matches!(s.decoded, Decoded::Roce(_)) {
                        let out = &mut self.out;
                        self.analyzer.keep_evidence(s.f.data, s.f.wire_len, s.seen.ts, &mut |e| out.event(e));
                    }
                }
            }
        }
    }

    /// Whether analysing staged frame `s` moves time as far as observing `now` before it
    /// would, so that the observing can be left out: `now` is no later than the frame's
    /// time (behind a dispatcher it is the frame's own time, nearly always), and the frame is
    /// a RoCE packet (its flow table moves to its time, as observing does; any other frame
    /// only closes the interval and times I/Os out). Not with evidence (observing ends its
    /// records). The reorder window needs no check: a frame with a time to observe is
    /// tracked in a burst only while the window holds none (`handle_stamped_burst`,
    /// `arrive`), and the window is out of `self.reorder` then.
    #[inline(always)]
    fn analysing_covers(&self, s: &Staged<'_>, now: u64) -> bool {
        now <= s.seen.ts && matches!(s.decoded, Decoded::Roce(_)) && !self.evidence
    }

    #[inline(always)]
    fn process(&mut self, s: &Staged<'_>) {
        let (f, seen) = (&s.f, &s.seen);
        self.advance_time(seen.ts);
        self.counters.packets += 1;
        match &s.decoded {
            Decoded::Roce(p) => self.roce(p, f, seen),
            Decoded::NotRoce(_) => self.counters.non_roce_packets += 1,
            Decoded::Error(DecodeError::ExtHeadersTruncated) => self.cut(s),
            Decoded::Error(e) => self.counters.decode_errors[e.index()] += 1,
        }
    }

    /// A RoCE packet counted and tracked.
    #[inline(always)]
    fn roce(&mut self, p: &RocePacket<'_>, f: &Frame<'_>, seen: &Seen) {
        self.counters.roce_packets += 1;
        // Without a switch time it could use: none, or one not believed.
        if let Some(m) = p.mirror {
            self.counters.erspan += 1;
            if m.erspan_type == 3 && !seen.switch_clock {
                self.counters.erspan_untimed += 1;
            }
        }
        if seen.late {
            let v = self.analyzer.vantage_of(p, f.source);
            self.counters.late_packets[v as usize] += 1;
        }
        let out = &mut self.out;
        self.analyzer.track(p, seen, &mut |e| out.event(e));
    }

    /// A frame whose bytes end inside its extension headers: if its capture cut it (fewer
    /// bytes captured than the wire carried), still its RoCE packet
    /// ([`decode_again_if_cut`]), timed as it was (by its capture, or its mirror's switch:
    /// the same whichever way it decodes), its flow looked up here (it was staged as no
    /// RoCE packet); else the error it is. Out of the packets' path.
    #[cold]
    #[inline(never)]
    fn cut(&mut self, s: &Staged<'_>) {
        let f = &s.f;
        let mut d = Decoded::Error(DecodeError::ExtHeadersTruncated);
        decode_again_if_cut(f.data, f.wire_len, &mut d);
        let p = match d {
            Decoded::Roce(p) => p,
            // Not cut by its capture, or broken in its own right (its lengths contradict
            // each other).
            Decoded::Error(e) => return self.counters.decode_errors[e.index()] += 1,
            Decoded::NotRoce(_) => return self.counters.non_roce_packets += 1,
        };
        let wire_len = p.link_len(f.data, s.seen.wire_len);
        self.roce(&p, f, &Seen { wire_len, ..s.seen });
        if self.evidence {
            let out = &mut self.out;
            self.analyzer.keep_evidence(f.data, f.wire_len, s.seen.ts, &mut |e| out.event(e));
        }
    }

    #[inline(always)]
    fn advance_time(&mut self, ts: u64) {
        match self.current {
            None => self.open(self.interval_of(ts)),
            // A frame at or past the end closes the interval. A frame from before the start
            // (a clock that stepped back) is counted in the open interval.
            Some((_, end)) if is_past(ts, end) => self.close_intervals(ts),
            Some(_) => {}
        }
        self.first_ts = self.first_ts.min(ts);
        self.last_ts = self.last_ts.max(ts);
        self.analyzer.advance(ts);
    }

    /// Time moved on to `now`, past the open interval, every frame before `now` analysed:
    /// closes the open interval with what came due before its end counted in it (a
    /// transmission that went idle, an I/O that timed out: [`Analyzer::come_due`]), then
    /// each interval between it and `now`'s in which something more came due, the same way
    /// (intervals without a frame; those in which nothing happened are not reported), and
    /// opens `now`'s. Each event is thus counted in the interval of its own time, whether or
    /// not a frame came in that interval, and whichever frames or clocks told the worker
    /// that time had passed (one worker, or several behind a dispatcher, give the same).
    #[cold]
    #[inline(never)]
    fn close_intervals(&mut self, now: u64) {
        let Some((mut start, mut end)) = self.current else { return };
        let to = self.interval_of(now);
        loop {
            self.out.interval_end = end;
            self.analyzer.come_due(end);
            self.emit(start, end);
            match self.analyzer.next_due() {
                Some(t) if t >= end && t < to.0 => (start, end) = self.interval_of(t),
                _ => break,
            }
        }
        self.open(to);
    }

    /// Opens the interval `(start, end)`: what happens from now on is counted in it.
    fn open(&mut self, interval: (u64, u64)) {
        self.current = Some(interval);
        self.out.interval_end = interval.1;
    }

    fn emit(&mut self, start_ns: u64, end_ns: u64) {
        // The transmissions that went idle in the interval end in it, and go before it.
        let out = &mut self.out;
        self.analyzer.end_idle(&mut |e| out.event(e));
        self.out.flush();
        self.out.buffers.collect();
        let tracked = self.analyzer.tracked_flows();
        let mut flows = self.out.buffers.flows.pop().unwrap_or_else(|| Vec::with_capacity(tracked));
        let mut latency = self.out.buffers.latency.pop().unwrap_or_default();
        let mut ios = self.out.buffers.ios.pop().unwrap_or_default();
        let mut evidence_no_file = self.out.buffers.no_file.pop().unwrap_or_default();
        self.analyzer.drain_no_file(&mut evidence_no_file);
        let dropped_latency_samples = self.analyzer.drain_interval(&mut flows, &mut latency, &mut ios)
            + std::mem::take(&mut self.out.dropped_latency_samples);
        let (dropped_snapshots, dropped_batches) = std::mem::take(&mut self.out.dropped);
        for (a, b) in
            self.counters.io_copies_after_end.iter_mut().zip(self.analyzer.take_io_copies_after_end())
        {
            *a += b;
        }
        let dropped_evidence =
            std::mem::take(&mut self.out.dropped_evidence) + self.analyzer.take_lost_signals();
        // What was reported before this snapshot, should it be dropped (below).
        let reported = (self.untracked_reported, self.forgotten_reported);
        let untracked_now = self.analyzer.untracked_packets();
        let untracked = untracked_now - self.untracked_reported;
        self.untracked_reported = untracked_now;
        let forgotten_now = self.analyzer.forgotten();
        let forgotten = forgotten_now.since(&self.forgotten_reported);
        self.forgotten_reported = forgotten_now;
        let seen = self.counters.packets > 0;
        let snap = IntervalSnapshot {
            worker: self.id,
            start_ns,
            end_ns,
            first_ts_ns: seen.then_some(self.first_ts),
            last_ts_ns: seen.then_some(self.last_ts),
            counters: std::mem::take(&mut self.counters),
            untracked_packets: untracked,
            dropped_snapshots,
            dropped_batches,
            dropped_evidence,
            dropped_latency_samples,
            forgotten,
            needed: self.analyzer.needed(),
            time_use: self.analyzer.time_use(),
            flows,
            latency,
            ios,
            evidence_no_file,
        };
        self.first_ts = u64::MAX;
        self.last_ts = 0;
        // Live, a slow stats side (a CSV file on a slow disk) must not stall capture: what it
        // has no room for is dropped and counted, and the next snapshot says so (with the
        // drops and losses this one carried: what it held is lost, not the count of what was
        // lost: its untracked packets, forgotten entries and dropped samples go with the next).
        // Otherwise the worker waits. (A send error means the stats side panicked; that is
        // reported when it is joined.)
        let msg = ToStats::Interval(snap);
        if self.out.never_wait {
            if let Err(e) = self.tx.try_send(msg) {
                if let ToStats::Interval(s) = e.into_inner() {
                    self.out.dropped.0 += s.dropped_snapshots + 1;
                    self.out.dropped.1 += s.dropped_batches;
                    self.out.dropped_evidence += s.dropped_evidence;
                    self.out.dropped_latency_samples += s.dropped_latency_samples;
                    (self.untracked_reported, self.forgotten_reported) = reported;
                }
            }
        } else {
            let _ = self.tx.send(msg);
        }
    }

    /// Ends every open transmission and I/O and closes the open interval (end of input or
    /// shutdown).
    pub fn finish(&mut self) {
        // Nothing arrives any more: wait for the reports rather than lose the last of it.
        self.out.never_wait = false;
        if let Some(mut r) = self.reorder.take() {
            let latest = r.latest();
            self.release_all(&mut r, latest);
            self.reorder = Some(r);
        }
        let out = &mut self.out;
        self.analyzer.finish(&mut |e| out.event(e));
        self.out.flush();
        if let Some((start, end)) = self.current.take() {
            self.emit(start, end);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::ToStats;
    use crate::track::VantageMap;

    const S: u64 = 1_000_000_000;

    fn frame(ts_ns: u64) -> Frame<'static> {
        // Not even Ethernet: counted as malformed, which is all this test needs.
        Frame { data: &[0u8; 4], wire_len: 4, ts_ns, source: 0 }
    }

    /// A worker that analyses frames in arrival order (no reorder window), and its reports.
    fn in_order_worker() -> (Worker, crossbeam_channel::Receiver<ToStats>) {
        let cfg = PipelineConfig {
            reorder_window: std::time::Duration::ZERO,
            ..PipelineConfig::new(VantageMap::default())
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        (Worker::new(0, &cfg, tx), rx)
    }

    /// The intervals a worker has reported so far: start, end, packets.
    fn reported(rx: &crossbeam_channel::Receiver<ToStats>) -> Vec<(u64, u64, u64)> {
        rx.try_iter()
            .filter_map(|m| match m {
                ToStats::Interval(s) => Some((s.start_ns, s.end_ns, s.counters.packets)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn intervals_follow_packet_time() {
        // In arrival order (no reorder window): what a frame from before the open interval does.
        let cfg = PipelineConfig {
            max_flows: 16,
            reorder_window: std::time::Duration::ZERO,
            ..PipelineConfig::new(VantageMap::default())
        };
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
                ToStats::Transmissions(..) | ToStats::Ports { .. } | ToStats::Evidence(..) => None,
            })
            .map(|s| (s.start_ns, s.end_ns, s.counters.packets, s.first_ts_ns, s.last_ts_ns))
            .collect();
        assert_eq!(
            snaps,
            vec![
                (10 * S, 11 * S, 1, Some(10 * S + S / 2), Some(10 * S + S / 2)),
                // A frame from before the open interval (a clock step back) counts in it.
                (11 * S, 12 * S, 2, Some(10 * S + 9 * S / 10), Some(11 * S + S / 5)),
                // Empty intervals are skipped, not reported as zeros (unless a silent live
                // link's clock closes them: see `observe_time`).
                (13 * S, 14 * S, 1, Some(13 * S + S / 10), Some(13 * S + S / 10)),
            ]
        );
    }

    #[test]
    fn a_worker_without_frames_reports_the_intervals_it_is_told_of() {
        // Behind a dispatcher, or on an RX queue of its own, a worker may see no frame for a
        // while (all the traffic hashed elsewhere), and be told the time only: it reports the
        // intervals that time closes, as one that saw frames does, so that what waits for
        // every worker (`Progress`) goes on. Its first frame then counts in the open interval.
        let (mut w, rx) = in_order_worker();
        // A batch with no time told (a dispatcher's between ticks) opens nothing.
        w.observe_told(Told::default());
        w.observe_time(10 * S + S / 2);
        w.observe_time(11 * S + S / 4);
        w.observe_time(12 * S + S / 4);
        assert_eq!(reported(&rx), vec![(10 * S, 11 * S, 0), (11 * S, 12 * S, 0)]);
        // A frame from before the open interval counts in it.
        w.handle(frame(11 * S + S / 2));
        w.finish();
        assert_eq!(reported(&rx), vec![(12 * S, 13 * S, 1)]);
    }

    #[test]
    fn the_last_interval_before_the_clock_ends_closes_once() {
        // Times a hostile capture can give (pcapng ticks clamped to u64::MAX): the 1 s
        // interval that starts at the last whole second before 2^64 ns would end past it, so
        // it ends at u64::MAX and holds that time too. Each of the three frames at u64::MAX
        // would otherwise close it again and reopen it, one report per frame.
        let (mut w, rx) = in_order_worker();
        let last_start = u64::MAX - u64::MAX % S; // 18,446,744,073 s
        for ts in [last_start - 1, last_start + 5, u64::MAX, u64::MAX, u64::MAX] {
            w.handle(frame(ts));
        }
        w.observe_time(u64::MAX);
        w.finish();
        assert_eq!(reported(&rx), vec![(last_start - S, last_start, 1), (last_start, u64::MAX, 4)]);
    }
}

#[cfg(test)]
mod backpressure {
    use super::*;
    use crate::track::VantageMap;

    #[test]
    fn a_live_worker_drops_and_counts_rather_than_wait_for_reports() {
        let cfg = PipelineConfig {
            never_wait: true,
            reorder_window: std::time::Duration::ZERO,
            ..PipelineConfig::new(VantageMap::default())
        };
        let (tx, rx) = crossbeam_channel::bounded(1);
        let mut w = Worker::new(0, &cfg, tx);
        let s = 1_000_000_000u64;
        let frame = |ts| Frame { data: &[0u8; 4], wire_len: 4, ts_ns: ts, source: 0 };
        w.handle(frame(10 * s));
        w.handle(frame(11 * s)); // interval 10 closes: fits in the queue
        w.handle(frame(12 * s)); // interval 11 closes: no room, dropped, counted
        let first = rx.try_recv().unwrap();
        assert!(matches!(first, ToStats::Interval(ref i) if i.dropped_snapshots == 0));
        w.handle(frame(13 * s)); // interval 12 closes: it says one was dropped
        match rx.try_recv().unwrap() {
            ToStats::Interval(i) => assert_eq!((i.start_ns, i.dropped_snapshots), (12 * s, 1)),
            _ => panic!("an interval"),
        }
        // Three in a row find no room (13 fits, 14, 15 and 16 do not): the one that fits
        // next says three were dropped, although the second and third carried the count.
        for t in 14..=17 {
            w.handle(frame(t * s));
        }
        assert!(matches!(rx.try_recv().unwrap(), ToStats::Interval(ref i) if i.start_ns == 13 * s));
        w.handle(frame(18 * s)); // interval 17 closes
        match rx.try_recv().unwrap() {
            ToStats::Interval(i) => assert_eq!((i.start_ns, i.dropped_snapshots), (17 * s, 3)),
            _ => panic!("an interval"),
        }
        // The queue is full again after interval 18 closes, yet the end of the run waits.
        w.handle(frame(19 * s));
        let last = std::thread::spawn(move || {
            w.finish();
        });
        let starts: Vec<u64> = rx
            .iter()
            .filter_map(|m| match m {
                ToStats::Interval(i) => Some(i.start_ns),
                _ => None,
            })
            .collect();
        last.join().unwrap();
        assert_eq!(starts, [18 * s, 19 * s]);
    }

    /// A dropped snapshot loses what it held, not the counts of what was lost: the packets
    /// it counted as untracked (a flow beyond `--max-flows`) go with the next snapshot.
    #[test]
    fn a_dropped_snapshot_hands_its_untracked_packets_on() {
        use crate::wire::{bth, build::RoceFrame};
        let cfg = PipelineConfig {
            never_wait: true,
            max_flows: 1,
            reorder_window: std::time::Duration::ZERO,
            ..PipelineConfig::new(VantageMap::default())
        };
        let (tx, rx) = crossbeam_channel::bounded(1);
        let mut w = Worker::new(0, &cfg, tx);
        let s = 1_000_000_000u64;
        // RC SEND Only on QP 5 (tracked) and QP 6 (no room: untracked), both one way.
        let send = |qp: u32, psn: u32| {
            let repr = bth::Repr { opcode: 0x04, dest_qp: qp, psn, ..Default::default() };
            RoceFrame::new("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap(), repr).emit()
        };
        let (a, b) = (send(5, 1), send(6, 1));
        fn at(data: &[u8], ts: u64) -> Frame<'_> {
            Frame { data, wire_len: data.len() as u32, ts_ns: ts, source: 0 }
        }
        w.handle(at(&a, 10 * s));
        w.handle(at(&b, 11 * s)); // interval 10 closes: fits in the queue
        w.handle(at(&b, 11 * s + 1));
        w.handle(at(&a, 12 * s)); // interval 11 (two untracked) closes: no room, dropped
        let untracked = |m: ToStats| match m {
            ToStats::Interval(i) => (i.start_ns, i.dropped_snapshots, i.untracked_packets),
            _ => panic!("an interval"),
        };
        assert_eq!(untracked(rx.try_recv().unwrap()), (10 * s, 0, 0));
        w.handle(at(&a, 13 * s)); // interval 12 closes: it carries interval 11's counts
        assert_eq!(untracked(rx.try_recv().unwrap()), (12 * s, 1, 2));
    }
}
