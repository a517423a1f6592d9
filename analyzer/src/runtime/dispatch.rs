//! Software dispatch (`--workers N`, N > 1, or `live --rx-core`): the capture thread decodes each frame just
//! enough to find its inner IP pair and hands it to the worker that owns that pair, so every
//! packet between two hosts (both directions, both vantages: a QP's two directions, an I/O's
//! command and completion, a CM handshake) is analysed by one worker, which then needs no
//! shared state. It works whatever the NIC hashes on (ERSPAN, RSPAN, a single-queue vdev).
//!
//! The dispatcher applies the ERSPAN switch clocks (one anchor per session, as a single
//! worker would) and tells the workers the packet time (the highest, and the latest since
//! the clock last stepped: see `Told`), so that transmissions end and I/Os time out as with
//! one worker. Frames travel in batches whose buffers the workers hand back: in a
//! steady state nothing is allocated. A full worker queue makes the dispatcher wait (the
//! NIC then counts what it could not take as `imissed`).

use super::reorder::{is_clock_step, kept_len};
use super::worker::{TimeUse, Told};
use super::{PipelineConfig, PortReport, Recycled, ToStats, Worker};
use crate::capture::dpdk::prefetch;
use crate::capture::{Capture, Frame, Poll};
use crate::track::clock::MirrorClocks;
use crate::track::io::IoCountsByPair;
use crate::wire::{
    could_be_mirrored, decode_again_if_cut, decode_frame, mirror_of, plain_roce_pair, Decoded,
};
use anyhow::Result;
use crossbeam_channel::{bounded, Receiver, Sender};
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::AtomicBool;

const BATCH_BYTES: usize = 256 * 1024;
const BATCH_FRAMES: usize = 512;
/// How many frames of a batch ahead the worker prefetches a frame's headers.
const FRAMES_AHEAD: usize = 8;
/// Batches queued per worker.
const QUEUE: usize = 64;
/// Spare batches per worker: half of them made at start.
const SPARES: usize = 8;
/// Packet time after which a worker sent no frame is told the time (see
/// [`Lane::after_poll`]): a silent link's clock is offered as often.
const QUIET_TICK_NS: u64 = 1_000_000;
/// Room for every batch a lane can have made on its way back. The dispatcher makes one only
/// when none is spare, that is when all are queued, being analysed or being filled: at most
/// `QUEUE + 3` exist, so none is ever dropped. (With room for eight only, a worker that
/// caught up on a full queue while the receiving thread was off its CPU dropped the rest,
/// each a 256 KiB `munmap` whose TLB shootdown interrupted the other core, and the
/// dispatcher made them again page by page: 3,000 a second on many_qps with `--rx-core`.)
const RETURNS: usize = QUEUE + SPARES;
const _: () = assert!(RETURNS >= QUEUE + 3);

#[derive(Debug, Clone, Copy)]
struct Slot {
    offset: u32,
    len: u32,
    wire_len: u32,
    ts_ns: u64,
    /// The packet time to observe before this frame (see [`Told`]): the highest dispatched
    /// so far, this frame included, or the probe's clock offered while the link was silent
    /// (see `SilentLink`), whichever is later; and the latest since the clock last stepped.
    now: Told,
    /// Once a frame came out of time order (to any worker): the latest time before it,
    /// which arms each worker's reorder window as it would one worker's.
    armed_after: Option<u64>,
    source: u16,
    /// `ts_ns` is an ERSPAN III switch timestamp.
    switch_clock: bool,
}

/// Frames for one worker, copied out of the capture's buffers.
#[derive(Debug)]
pub struct Batch {
    bytes: Vec<u8>,
    slots: Vec<Slot>,
    /// A packet time to observe after the frames (the run's last, in the final batch).
    then: Told,
    /// With `then`: once some worker's frame came out of time order, the latest time before
    /// it (as [`Slot::armed_after`]), so that a worker told the time before any frame of
    /// its own told it so arms its window first, as one worker's was armed.
    then_armed_after: Option<u64>,
}

impl Batch {
    fn new() -> Self {
        Self {
            bytes: Vec::with_capacity(BATCH_BYTES),
            slots: Vec::with_capacity(BATCH_FRAMES),
            then: Told::default(),
            then_armed_after: None,
        }
    }
    fn fits(&self, len: usize) -> bool {
        self.slots.len() < BATCH_FRAMES && self.bytes.len() + len <= BATCH_BYTES
    }
    /// Buffers the first `len` bytes of `f` (see [`Dispatcher::kept_at_least`]).
    fn push(
        &mut self,
        f: &Frame<'_>,
        len: usize,
        ts_ns: u64,
        now: Told,
        armed_after: Option<u64>,
        switch_clock: bool,
    ) {
        let data = &f.data[..len];
        self.slots.push(Slot {
            offset: self.bytes.len() as u32,
            len: data.len() as u32,
            wire_len: f.wire_len,
            ts_ns,
            now,
            armed_after,
            source: f.source,
            switch_clock,
        });
        self.bytes.extend_from_slice(data);
    }
    fn clear(&mut self) {
        self.bytes.clear();
        self.slots.clear();
        self.then = Told::default();
        self.then_armed_after = None;
    }
}

/// The frames' time order as one worker's reorder window sees it, which sees every frame:
/// in order until the first frame older than the latest before it, which arms the window
/// for good (see `Reorder::pass`). The workers each see only their own frames, so the
/// dispatcher tells them when that happened and the latest time before it.
#[derive(Debug, Clone, Copy, Default)]
struct Order {
    /// The latest frame time so far (until the window is armed).
    latest: u64,
    armed_after: Option<u64>,
}

impl Order {
    /// The clock stepped: one worker's window starts again, with nothing analysed since,
    /// so a worker armed from now on is armed after no time (its frames from before the
    /// step do not make later ones late).
    fn stepped(&mut self) {
        if self.armed_after.is_some() {
            self.armed_after = Some(0);
        }
    }

    #[inline]
    fn frame(&mut self, ts: u64) {
        if self.armed_after.is_none() {
            if ts < self.latest {
                self.armed_after = Some(self.latest);
            }
            self.latest = self.latest.max(ts);
        }
    }
}

/// The worker that owns a frame: by its inner IP pair, either way round.
fn owner(pair: (IpAddr, IpAddr), workers: usize) -> usize {
    use std::hash::{BuildHasher, Hash, Hasher};
    let (a, b) = if pair.0 <= pair.1 { pair } else { (pair.1, pair.0) };
    // A fixed seed: the same pair goes to the same worker on every run.
    let mut h = ahash::RandomState::with_seeds(1, 2, 3, 4).build_hasher();
    a.hash(&mut h);
    b.hash(&mut h);
    (h.finish() % workers as u64) as usize
}

struct Lane {
    tx: Sender<Batch>,
    spares: Receiver<Batch>,
    current: Batch,
    /// The highest packet time the worker has been sent (with a frame or a tick).
    told_ns: u64,
    /// The clock steps the worker has been told of ([`Told::steps`]).
    told_steps: u32,
    /// Of the clock steps since then, the latest time since the step before each, at each:
    /// the highest of them (see [`Lane::told`]).
    missed_current: u64,
}

impl Lane {
    /// `now` as this worker is told it. A worker told of several clock steps at once (its
    /// frames went by none of them) learns, as the time its I/Os had reached at the last,
    /// the highest the I/Os' clock reached between them: one worker's I/Os timed out by
    /// each frame's time as it came, and a frame between two steps (a clock that stepped
    /// forward, then back) may have timed out I/Os this worker holds.
    #[inline(always)]
    fn told(&mut self, mut now: Told) -> Told {
        if now.steps != self.told_steps {
            self.told_steps = now.steps;
            now.stepped_current = std::mem::take(&mut self.missed_current);
        }
        now
    }

    /// Sends what is buffered, and time to observe after it (a silent link's clock, live),
    /// when the worker has room and a batch is spare; never waits nor allocates: a worker
    /// that is behind gets the time with the next tick.
    fn tick(&mut self, now: Told, armed_after: Option<u64>) {
        if self.tx.is_full() {
            return;
        }
        let Ok(next) = self.spares.try_recv() else { return };
        // The dispatcher is the only sender: there is room.
        self.hand_over_tick(now, armed_after, next, false);
    }

    /// Like [`Lane::tick`], but waiting for room as frames do ([`Lane::send`]): the time a
    /// quiet worker is told between polls then depends on the frames alone, not on how far
    /// behind the worker is, so a replay gives the same results on every run. (A tick
    /// skipped for want of room was told later, at another time, and a worker's late frames
    /// could end a transmission in one run and join it in the next.)
    fn tick_waiting(&mut self, now: Told, armed_after: Option<u64>) {
        let next = self.spares.try_recv().unwrap_or_else(|_| Batch::new());
        self.hand_over_tick(now, armed_after, next, true);
    }

    /// Sends the buffered batch with the time to observe after its frames, `next` in its
    /// place; `wait` for room.
    fn hand_over_tick(&mut self, now: Told, armed_after: Option<u64>, next: Batch, wait: bool) {
        self.current.then = self.told(now);
        self.current.then_armed_after = armed_after;
        let full = std::mem::replace(&mut self.current, next);
        if wait {
            let _ = self.tx.send(full);
        } else {
            let _ = self.tx.try_send(full);
        }
        self.told_ns = now.highest;
    }

    /// After a poll: what is buffered goes (its frames tell the worker the time); a worker
    /// none of whose frames came for [`QUIET_TICK_NS`] of packet time while the others'
    /// did is told the time as a tick ([`Lane::tick_waiting`]), as a silent link's clock tells
    /// them all. Its intervals close, its transmissions end and its I/Os time out as the
    /// others' do, and what waits for every worker's report does not wait for its next
    /// frame.
    fn after_poll(&mut self, now: Told, armed_after: Option<u64>) {
        if !self.current.slots.is_empty() {
            self.send();
        } else if now.highest >= self.told_ns.saturating_add(QUIET_TICK_NS) {
            self.tick_waiting(now, armed_after);
        }
    }

    fn send(&mut self) {
        let Some(last) = self.current.slots.last() else { return };
        self.told_ns = self.told_ns.max(last.now.highest);
        let next = self.spares.try_recv().unwrap_or_else(|_| Batch::new());
        let full = std::mem::replace(&mut self.current, next);
        let _ = self.tx.send(full);
    }
}

/// Runs `cfg.workers` workers on their own threads behind this thread's dispatch.
pub fn run<C: Capture>(
    capture: &mut C,
    cfg: &PipelineConfig,
    stop: &AtomicBool,
    tx: Sender<ToStats>,
    backs: Vec<Receiver<Recycled>>,
    ports: &mut PortReport,
) -> (Result<()>, IoCountsByPair, [TimeUse; 2]) {
    let ports_tx = tx.clone();
    let (lanes, handles) = match spawn_workers(cfg, tx, backs) {
        Ok(workers) => workers,
        Err(e) => return (Err(e), BTreeMap::new(), Default::default()),
    };
    let mut d = Dispatcher::new(lanes, cfg.kept_at_least());
    let result = d.dispatch(capture, stop, ports, &ports_tx);
    let told = d.told();
    let (joined, ios, time_use) = end_workers(d.lanes, handles, told, d.order.armed_after);
    (joined.and(result), ios, time_use)
}

/// What a worker thread hands back: its I/O counts and its time use.
type WorkerHandle = std::thread::JoinHandle<(IoCountsByPair, [TimeUse; 2])>;

/// Starts one worker thread per receiver of recycled buffers, each behind a lane.
fn spawn_workers(
    cfg: &PipelineConfig,
    tx: Sender<ToStats>,
    backs: Vec<Receiver<Recycled>>,
) -> Result<(Vec<Lane>, Vec<WorkerHandle>)> {
    let n = backs.len();
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let mut lanes = Vec::with_capacity(n);
    let mut handles = Vec::with_capacity(n);
    for (id, back) in backs.into_iter().enumerate() {
        let (in_tx, in_rx) = bounded::<Batch>(QUEUE);
        let (spare_tx, spare_rx) = bounded::<Batch>(RETURNS);
        for _ in 0..SPARES / 2 {
            let _ = spare_tx.try_send(Batch::new());
        }
        let (cfg, tx) = (cfg.clone(), tx.clone());
        let core = super::worker_core(&cfg, &cores, id);
        let handle = std::thread::Builder::new().name(format!("roceprobe-worker-{id}")).spawn(move || {
            if let Some(c) = core {
                core_affinity::set_for_current(c);
            }
            let w = Worker::with_recycling(id, &cfg, tx, back).stamped();
            work(w, in_rx, spare_tx)
        })?;
        handles.push(handle);
        lanes.push(Lane {
            tx: in_tx,
            spares: spare_rx,
            current: Batch::new(),
            told_ns: 0,
            told_steps: 0,
            missed_current: 0,
        });
    }
    Ok((lanes, handles))
}

/// A worker thread: analyses the batches its lane sends, handing each back emptied, until
/// the lane closes.
fn work(mut w: Worker, batches: Receiver<Batch>, spares: Sender<Batch>) -> (IoCountsByPair, [TimeUse; 2]) {
    for mut batch in batches {
        let (bytes, slots) = (&batch.bytes, &batch.slots);
        w.handle_stamped_burst(slots.iter().enumerate().map(|(i, s)| {
            // The frames were written on the receiving lcore: the first lines of one a few
            // frames on are asked for from that core's cache while this one is analysed.
            if let Some(ahead) = slots.get(i + FRAMES_AHEAD) {
                prefetch(bytes.as_ptr().wrapping_add(ahead.offset as usize), 2);
            }
            let data = &bytes[s.offset as usize..(s.offset + s.len) as usize];
            let f = Frame { data, wire_len: s.wire_len, ts_ns: s.ts_ns, source: s.source };
            (f, s.switch_clock, s.now, s.armed_after)
        }));
        w.observe_told_after(batch.then, batch.then_armed_after);
        batch.clear();
        let _ = spares.try_send(batch);
    }
    w.finish();
    (w.io_counts(), w.time_use())
}

/// The capture thread's side: the lanes to the workers, the switch clocks and packet time.
struct Dispatcher {
    lanes: Vec<Lane>,
    clocks: MirrorClocks,
    /// The latest packet time dispatched (or offered by a silent link's clock).
    now: u64,
    /// The latest packet time dispatched since the clock last stepped (a frame more than a
    /// second from it, either way), as each worker's reorder window and a single worker's
    /// I/O timeouts follow packet time (see [`Told`]).
    current: u64,
    /// The latest capture timestamp seen.
    seen: u64,
    /// Frames in time order so far (see [`Order`]).
    order: Order,
    /// How many times the clock has stepped ([`Told::steps`]) and the highest time
    /// dispatched before the last step ([`Told::stepped_from`]). `current` at each step
    /// each lane keeps, for the steps its worker has not been told of ([`Lane::told`]).
    steps: u32,
    stepped_from: u64,
    silent: super::SilentLink,
    /// Some frame carried an ERSPAN III switch timestamp.
    switch_clock: bool,
    /// The bytes of each frame handed to its worker beyond those the analysis reads
    /// ([`PipelineConfig::kept_at_least`], [`kept_len`]), at most a batch (headers are what
    /// count).
    kept_at_least: usize,
}

impl Dispatcher {
    fn new(lanes: Vec<Lane>, kept_at_least: usize) -> Self {
        Self {
            kept_at_least,
            lanes,
            clocks: MirrorClocks::default(),
            now: 0,
            current: 0,
            seen: 0,
            order: Order::default(),
            steps: 0,
            stepped_from: 0,
            silent: super::SilentLink::default(),
            switch_clock: false,
        }
    }

    /// The time to tell the workers, but for [`Told::stepped_current`], which each lane
    /// fills in ([`Lane::told`]).
    fn told(&self) -> Told {
        Told {
            highest: self.now,
            current: self.current,
            steps: self.steps,
            stepped_from: self.stepped_from,
            stepped_current: 0,
        }
    }

    /// Polls `capture` and dispatches its frames until it ends, fails or `stop` is set.
    fn dispatch<C: Capture>(
        &mut self,
        capture: &mut C,
        stop: &AtomicBool,
        ports: &mut PortReport,
        ports_tx: &Sender<ToStats>,
    ) -> Result<()> {
        // Once stopped, what the rings still hold is dispatched too.
        let mut drain = super::Drain::default();
        loop {
            if drain.done(stop, capture) {
                return Ok(());
            }
            // As in `drive`: a file's next frame may open an interval.
            if let Some(t) = capture.next_ts() {
                ports.observe(t, || capture.stats(), ports_tx);
            }
            match capture.poll(|f| self.frame(f)) {
                Ok(Poll::Frames(n)) => {
                    let (now, armed_after) = (self.told(), self.order.armed_after);
                    self.lanes.iter_mut().for_each(|l| l.after_poll(now, armed_after));
                    ports.observe(self.seen, || capture.stats(), ports_tx);
                    drain.took(n);
                }
                Ok(Poll::Idle) if drain.ends_at_idle() => return Ok(()),
                Ok(Poll::Idle) => {
                    self.idle(capture, ports, ports_tx);
                    std::hint::spin_loop()
                }
                Ok(Poll::End) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Buffers one frame for the worker that owns it, sending that lane's batch first if
    /// the frame does not fit.
    #[inline]
    fn frame(&mut self, f: Frame<'_>) {
        self.seen = self.seen.max(f.ts_ns);
        let (lane, ts, switch) = self.route(&f);
        self.order.frame(ts);
        let before = self.now;
        self.now = self.now.max(ts);
        self.current = if is_clock_step(self.current, ts) {
            self.steps += 1;
            self.stepped_from = before;
            for l in &mut self.lanes {
                l.missed_current = l.missed_current.max(self.current);
            }
            self.order.stepped();
            ts
        } else {
            self.current.max(ts)
        };
        let told = self.told();
        let l = &mut self.lanes[lane];
        let now = l.told(told);
        let len = kept_len(f.data, self.kept_at_least).min(BATCH_BYTES);
        if !l.current.fits(len) {
            l.send();
        }
        l.current.push(&f, len, ts, now, self.order.armed_after, switch);
    }

    /// A frame's lane, its packet time (an ERSPAN III switch timestamp on the switch's
    /// clock, else the capture's), and whether that time is the switch's.
    #[inline]
    fn route(&mut self, f: &Frame<'_>) -> (usize, u64, bool) {
        let workers = self.lanes.len();
        // A frame without a switch time it could use stands where the switch-timed frames
        // do (`MirrorClocks::unstamped`), as with one worker.
        if workers == 1 && !could_be_mirrored(f.data) {
            // One worker (a dedicated receive lcore) and a frame that cannot carry a
            // switch's time: nothing to decode here, the worker does it.
            return (0, self.clocks.unstamped(f.ts_ns), false);
        }
        if let Some(pair) = plain_roce_pair(f.data) {
            // Nearly every frame: its pair read at fixed offsets, the rest left to the worker.
            return (owner(pair, workers), self.clocks.unstamped(f.ts_ns), false);
        }
        // Frames that are not RoCE are counted by worker 0; a mirror is timed by its switch
        // whatever it carries.
        let mut d = decode_frame(f.data);
        if !matches!(d, Decoded::Roce(_)) {
            decode_again_if_cut(f.data, f.wire_len, &mut d);
        }
        let (lane, mirror) = match d {
            Decoded::Roce(p) => (owner((p.ip.src, p.ip.dst), workers), p.mirror),
            _ if could_be_mirrored(f.data) => (0, mirror_of(f.data)),
            _ => (0, None),
        };
        match mirror.and_then(|m| m.timed()).and_then(|(s, t)| self.clocks.time(s, t, f.ts_ns)) {
            Some(ts) => {
                self.switch_clock = true;
                (lane, ts, true)
            }
            None => (lane, self.clocks.unstamped(f.ts_ns), false),
        }
    }

    /// While the link is silent, offers the workers the probe's clock as packet time.
    fn idle<C: Capture>(&mut self, capture: &mut C, ports: &mut PortReport, ports_tx: &Sender<ToStats>) {
        if let Some(t) = self.silent.tick(capture, self.switch_clock) {
            self.now = self.now.max(t);
            self.current = self.current.max(t);
            let (now, armed_after) = (self.told(), self.order.armed_after);
            self.lanes.iter_mut().for_each(|l| l.tick(now, armed_after));
            ports.observe(t, || capture.stats(), ports_tx);
        }
    }
}

/// Sends every lane what is still buffered, with the run's last packet time, so every
/// worker ends its I/Os as one worker would have; then closes the lane and merges what the
/// worker counted.
fn end_workers(
    lanes: Vec<Lane>,
    handles: Vec<WorkerHandle>,
    now: Told,
    armed_after: Option<u64>,
) -> (Result<()>, IoCountsByPair, [TimeUse; 2]) {
    let mut ios = BTreeMap::new();
    let mut time_use = [TimeUse::default(); 2];
    for (mut l, h) in lanes.into_iter().zip(handles) {
        l.hand_over_tick(now, armed_after, Batch::new(), true);
        drop(l);
        match h.join() {
            Ok((counts, used)) => {
                super::merge_worker(&mut ios, &mut time_use, counts, used);
            }
            Err(_) => return (Err(anyhow::anyhow!("a worker thread panicked")), ios, time_use),
        }
    }
    (Ok(()), ios, time_use)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::pcap::Replay;
    use crate::track::VantageMap;
    use std::time::Duration;

    #[test]
    fn a_worker_no_frame_goes_to_is_told_the_time() {
        // perftest's RDMA WRITE bandwidth run: one host pair, 1.28 s of packet time. Its
        // RoCE frames go to one worker, its TCP frames (perftest's own exchange) to worker 0:
        // of four workers, at least two get no frame, and are told the time as it passes.
        // They report each 100 ms interval from the first frame's on, as the busy ones do,
        // not only at the end (what waits for every worker's report waits for theirs).
        let mut capture = Replay::open(&[crate::test_capture("rdma_write_bw.pcap")]).unwrap();
        let cfg = PipelineConfig {
            workers: 4,
            interval: Duration::from_millis(100),
            ..PipelineConfig::new(VantageMap::default())
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        let (_backs_tx, backs): (Vec<_>, Vec<_>) = (0..4).map(|_| bounded::<Recycled>(64)).unzip();
        // As a replay polls: no burst spans two intervals.
        capture.split_bursts_at(100_000_000);
        let mut ports = PortReport::new(cfg.interval);
        let (result, _, _) = run(&mut capture, &cfg, &AtomicBool::new(false), tx, backs, &mut ports);
        result.unwrap();
        let mut reported = vec![Vec::new(); 4];
        let mut packets = [0; 4];
        for m in rx.try_iter() {
            if let ToStats::Interval(s) = m {
                reported[s.worker].push(s.start_ns);
                packets[s.worker] += s.counters.packets;
            }
        }
        // 60 frames, 40 of them TCP (tshark).
        assert_eq!((packets.iter().sum::<u64>(), packets[0]), (60, 40), "{packets:?}");
        // The capture's frames (tshark's times) fall in four of the 100 ms intervals.
        let every: Vec<u64> = [1_781_621_760_100, 1_781_621_761_100, 1_781_621_761_200, 1_781_621_761_400]
            .map(|ms| ms * 1_000_000)
            .into();
        let idle: Vec<usize> = (0..4).filter(|&w| packets[w] == 0).collect();
        assert_eq!(idle.len(), 2, "{packets:?}");
        for w in idle {
            assert_eq!(reported[w], every, "worker {w}");
        }
    }
}
