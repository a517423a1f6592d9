//! allocations_per_packet for scripts/bench: a counting allocator over the analysis loop
//! (decode, track, record; interval snapshots and transmissions handed to a stats side that
//! hands the buffers back), on the same mix as the `analysis` benchmark.
//! `cargo bench -p roceprobe --bench allocations` prints `allocations_per_packet=N`.

use roceprobe::capture::pcap::Replay;
use roceprobe::capture::{Capture, Frame, Poll, BURST};
use roceprobe::report::evidence::EvidenceSettings;
use roceprobe::runtime::{recycle, PipelineConfig, Worker};
use roceprobe::track::VantageMap;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;
use std::time::Duration;

struct Counting;
thread_local! {
    static WATCHING: Cell<bool> = const { Cell::new(false) };
    static COUNT: Cell<u64> = const { Cell::new(0) };
}
fn count() {
    if WATCHING.with(Cell::get) {
        COUNT.with(|c| c.set(c.get() + 1));
    }
}
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        System.alloc(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        System.realloc(p, l, n)
    }
}
#[global_allocator]
static GLOBAL: Counting = Counting;

/// Intervals of 1 ms: snapshots go to the stats side all the time.
const INTERVAL_NS: u64 = 1_000_000;

fn main() {
    let file = std::env::args().skip(1).find(|a| a.ends_with(".pcap")).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../pcap-fixtures/scenarios/nvme_vlan/nvme_vlan.pcap")
            .display()
            .to_string()
    });
    let mut frames = Vec::new();
    let mut r = Replay::open(&[file.into()]).unwrap();
    while let Poll::Frames(_) = r.poll(|f| frames.push((f.ts_ns, f.data.to_vec(), f.source))).unwrap() {}
    // Passes follow each other by whole intervals, so every pass cuts its bursts alike.
    let span = (frames.iter().map(|f| f.0).max().unwrap() - frames.iter().map(|f| f.0).min().unwrap()
        + 1_000_000)
        .next_multiple_of(INTERVAL_NS);
    // `--evidence`: with --evidence-dir (its defaults) on, as live: the worker never
    // waits for records, this thread hands them back between bursts.
    let evidence = std::env::args().any(|a| a == "--evidence");
    let cfg = PipelineConfig {
        interval: Duration::from_nanos(INTERVAL_NS),
        check_icrc: true,
        evidence: evidence
            .then(|| EvidenceSettings::with_defaults(std::env::temp_dir().join("roceprobe-bench"))),
        never_wait: evidence,
        ..PipelineConfig::new(VantageMap::default())
    };
    let (tx, rx) = crossbeam_channel::bounded(256);
    let (back_tx, back_rx) = crossbeam_channel::bounded(64);
    let mut w = Worker::with_recycling(0, &cfg, tx, back_rx);
    let mut pass = 0u64;
    let mut run = |w: &mut Worker, passes: u64| {
        for _ in 0..passes {
            // In bursts, as a capture hands them over; a burst ends where an interval does,
            // so that the stats side (this thread, between bursts) takes each snapshot
            // before the next closes, as a stats thread that keeps up does.
            for chunk in frames.chunk_by(|a, b| a.0 / INTERVAL_NS == b.0 / INTERVAL_NS) {
                for chunk in chunk.chunks(BURST) {
                    let mut burst = [Frame { data: &[], wire_len: 0, ts_ns: 0, source: 0 }; BURST];
                    for (b, (ts, data, source)) in burst.iter_mut().zip(chunk) {
                        let ts_ns = ts + pass * span;
                        *b = Frame { data, wire_len: data.len() as u32, ts_ns, source: *source };
                    }
                    w.handle_burst(&burst[..chunk.len()]);
                    while let Ok(m) = rx.try_recv() {
                        if let Some(b) = recycle(m) {
                            let _ = back_tx.try_send(b);
                        }
                    }
                }
            }
            pass += 1;
        }
    };
    run(&mut w, 3);
    WATCHING.with(|x| x.set(true));
    run(&mut w, 50);
    WATCHING.with(|x| x.set(false));
    let packets = 50 * frames.len() as u64;
    let allocations = COUNT.with(Cell::get);
    let name = if evidence { "allocations_per_packet_evidence" } else { "allocations_per_packet" };
    println!("{name}={}", allocations as f64 / packets as f64);
    println!("allocations_counted={allocations} packets_counted={packets}");
}
