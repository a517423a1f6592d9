//! The per-packet path allocates nothing: a counting global allocator watches this thread
//! while frames go through decode + track (from memory) and through the DPDK RX loop
//! (net_pcap vdev looping a real capture: RX burst into the fixed array, bulk free).
//! This binary has its own process, so it may initialise EAL.

mod common;
use common::*;
use roceprobe::capture::dpdk::{DpdkCapture, FlowControl, PortSetup, StopWhen};
use roceprobe::capture::pcap::read_all_frames;
use roceprobe::capture::{Capture, Frame, Poll};
use roceprobe::runtime::{PipelineConfig, Worker};
use roceprobe::track::VantageMap;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Duration;

const PORT_SETUP: PortSetup = PortSetup {
    max_frame: roceprobe::defaults::MAX_FRAME,
    flow_control: FlowControl::Off,
    probe_clock: false,
    looped_frames: 0,
};

struct Counting;

thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    // Per thread, so tests running side by side do not count each other's allocations.
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    // Bytes allocated and not freed while watched.
    static HELD: Cell<i64> = const { Cell::new(0) };
}

fn count_one(bytes: i64) {
    if WATCHING.with(Cell::get) {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        HELD.with(|h| h.set(h.get() + bytes));
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count_one(l.size() as i64);
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        if WATCHING.with(Cell::get) {
            HELD.with(|h| h.set(h.get() - l.size() as i64));
        }
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count_one(n as i64 - l.size() as i64);
        System.realloc(p, l, n)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn watched<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCATIONS.with(Cell::get);
    WATCHING.with(|w| w.set(true));
    let r = f();
    WATCHING.with(|w| w.set(false));
    (r, ALLOCATIONS.with(Cell::get) - before)
}

fn config() -> PipelineConfig {
    // One interval for the whole test: closing an interval (not per packet) allocates.
    // Transmissions end (every idle gap in the captures' timestamps) and go into a batch
    // allocated in advance.
    PipelineConfig {
        interval: Duration::from_secs(3600),
        max_flows: 1024,
        check_icrc: true,
        ..PipelineConfig::new(VantageMap::default())
    }
}

/// What the command line's memory check counts for a worker's tables (`Analyzer::allocated_bytes`,
/// which refuses bounds beyond the machine's memory before any work) is what making them
/// allocates, counted by the allocator: within a quarter, at two sizes of every bound.
#[test]
fn the_tables_memory_is_what_the_memory_check_counts() {
    for bound in [1usize << 12, 1 << 17] {
        let cfg = PipelineConfig {
            max_flows: bound,
            max_ios: bound,
            max_latency_series: bound,
            max_pending_commands: bound,
            max_cm_requests: bound,
            max_announced_flows: bound,
            ..PipelineConfig::new(VantageMap::default())
        }
        .analyzer();
        let before = HELD.with(Cell::get);
        let (analyzer, _) = watched(|| roceprobe::track::Analyzer::new(&cfg));
        let held = (HELD.with(Cell::get) - before) as f64;
        drop(analyzer);
        let counted = roceprobe::track::Analyzer::allocated_bytes(&cfg);
        let sum: usize = counted.iter().map(|&(_, _, b)| b).sum();
        let ratio = sum as f64 / held;
        assert!(
            (0.8..1.25).contains(&ratio),
            "bounds of {bound}: {sum} counted, {held} allocated: {counted:?}"
        );
    }
}

#[test]
fn decode_and_track_allocate_nothing_per_packet() {
    let frames: Vec<Vec<u8>> =
        REAL_CAPTURES.iter().flat_map(|n| read_all_frames(&capture(n)).unwrap()).collect();
    let (tx, _rx) = crossbeam_channel::unbounded();
    let mut worker = Worker::new(0, &config(), tx);
    let feed = |w: &mut Worker| {
        for f in &frames {
            w.handle(Frame { data: f, wire_len: f.len() as u32, ts_ns: 1_000, source: 0 });
        }
    };
    // First pass: new flows enter the table (pre-allocated at construction).
    let (_, first) = watched(|| feed(&mut worker));
    let (_, steady) = watched(|| {
        for _ in 0..50 {
            feed(&mut worker)
        }
    });
    assert_eq!(first, 0, "allocations while flows were created");
    assert_eq!(steady, 0, "allocations in {} frames", 50 * frames.len());
}

/// Every frame of every generated scenario with its timestamp, shifted so that passes follow
/// each other in time.
fn scenario_frames() -> Vec<(u64, Vec<u8>, u16)> {
    let dir = fixtures().join("scenarios");
    let mut out = Vec::new();
    let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for d in names {
        let mut pcaps: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
            .collect();
        pcaps.sort();
        let mut r = roceprobe::capture::pcap::Replay::open(&pcaps).unwrap();
        while let Poll::Frames(_) = r.poll(|f| out.push((f.ts_ns, f.data.to_vec(), f.source))).unwrap() {}
    }
    out
}

#[test]
fn the_whole_analysis_allocates_nothing_per_packet_in_a_steady_state() {
    // Intervals of 100 µs and transmissions that end after 20 µs idle: messages to the stats
    // side all the time, whose buffers a stats thread hands back as the real one does. The
    // reorder window is shorter than an interval, as it is by default (1 ms against 1 s):
    // one frame then closes at most two intervals, and the buffers in circulation suffice
    // for a stats side that takes the messages after each frame.
    let cfg = PipelineConfig {
        interval: Duration::from_micros(100),
        max_flows: 1024,
        check_icrc: true,
        flow_idle: Duration::from_micros(20),
        reorder_window: Duration::from_micros(50),
        ..PipelineConfig::new(VantageMap::default())
    };
    let frames = scenario_frames();
    // Each pass shifted by a whole number of intervals: every pass meets the same interval
    // boundaries, so the busiest interval is the same each time.
    let span = (frames.iter().map(|f| f.0).max().unwrap() - frames.iter().map(|f| f.0).min().unwrap()
        + 1_000_000)
        .next_multiple_of(100_000);
    // The stats side's part, done right after each frame: take every message and hand its
    // buffers back, as a stats side that keeps up does. (One that falls behind makes the
    // worker allocate new buffers rather than wait.)
    let (tx, rx) = crossbeam_channel::bounded(256);
    let (back_tx, back_rx) = crossbeam_channel::bounded(64);
    let mut worker = Worker::with_recycling(0, &cfg, tx, back_rx);
    let mut messages = 0u64;
    let mut pass = 0u64;
    let mut feed = |w: &mut Worker, messages: &mut u64| {
        for (ts, data, source) in &frames {
            w.handle(Frame { data, wire_len: data.len() as u32, ts_ns: ts + pass * span, source: *source });
            while let Ok(m) = rx.try_recv() {
                *messages += 1;
                if let Some(r) = roceprobe::runtime::recycle(m) {
                    let _ = back_tx.try_send(r);
                }
            }
        }
        pass += 1;
    };
    // Flows created, buffers in circulation, each grown to the most an interval needs. The
    // growth happens in the passes up to the one that crosses the first second of replayed
    // time (with the 180 ms collective scenario among the fixtures, the seventh; none in the
    // twenty after it): ten passes cover it.
    for _ in 0..10 {
        feed(&mut worker, &mut messages);
    }
    let (_, allocations) = watched(|| {
        for _ in 0..20 {
            feed(&mut worker, &mut messages)
        }
    });
    worker.finish();
    drop(worker);
    assert!(messages > 100, "{messages} messages to the stats side");
    assert_eq!(allocations, 0, "allocations in {} frames", 20 * frames.len());
}

#[test]
fn dpdk_rx_loop_allocates_nothing_per_packet() {
    let path = capture("rdma_cm.pcap");
    let mut eal = eal_args(&[]);
    eal.push("--vdev".into());
    eal.push(format!("net_pcap0,rx_pcap={},infinite_rx=1", path.display()));
    let mut cap =
        DpdkCapture::start(&eal, &[], StopWhen::default(), 0, 0, 1, PORT_SETUP).expect("DPDK start");
    let (tx, _rx) = crossbeam_channel::unbounded();
    let mut worker = Worker::new(0, &config(), tx);
    let mut received = 0u64;
    // Warm-up: the first bursts fill the flow table and the mempool caches.
    while received < 10_000 {
        if let Poll::Frames(n) = cap.poll_burst(|fs| worker.handle_burst(fs)).unwrap() {
            received += n as u64;
        }
    }
    let (frames, allocations) = watched(|| {
        let mut n = 0u64;
        while n < 200_000 {
            if let Poll::Frames(k) = cap.poll_burst(|fs| worker.handle_burst(fs)).unwrap() {
                n += k as u64;
            }
        }
        n
    });
    assert!(frames >= 200_000);
    assert_eq!(allocations, 0, "allocations in {frames} frames received through DPDK");
    let stats = cap.stats();
    assert!(stats[0].ipackets >= received + frames, "port stats count what was received");
}
