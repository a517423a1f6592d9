//! Per-packet cost of the analysis on one core, on in-memory frames (no capture I/O):
//! `decode` (the frame walk alone), `decode+track` (what a worker does per frame, handed
//! bursts of 32 as a capture does: decode, vantage, flow table, PSN analysis, transmissions,
//! NVMe recognition, latency; ICRC off) and `decode+track+icrc` (the same with
//! `--check-icrc`).
//!
//! The mix is every frame of the committed scenarios and real captures: NVMe/RDMA reads and
//! writes at two vantages, RC traffic under loss and congestion, CM, UD, UC, XRC and noise.
//! `cargo bench -p roceprobe --bench analysis`; ns/packet = time per iteration / frames.
//! With `ROCEPROBE_BENCH_MIX=FILE`, the frames of that capture instead (scripts/bench).
//! Every pass after the first moves each packet's PSN on by its flow's span in the capture
//! (`support/psn_advance.rs`, untimed), so that the passes are one stream in sequence rather than
//! the same PSNs again.

#[path = "support/held.rs"]
mod held;
#[path = "support/psn_advance.rs"]
mod psn_advance;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use psn_advance::Advance;
use roceprobe::capture::pcap::Replay;
use roceprobe::capture::{Capture, Frame, Poll, BURST};
use roceprobe::report::evidence::EvidenceSettings;
use roceprobe::runtime::{worker_with_draining_stats, PipelineConfig, Worker};
use roceprobe::track::VantageMap;
use roceprobe::wire::decode_frame;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn mix() -> Vec<(u64, Vec<u8>, u16)> {
    // scripts/bench measures its own mix.
    if let Ok(file) = std::env::var("ROCEPROBE_BENCH_MIX") {
        let mut out = Vec::new();
        let mut r = Replay::open(&[file.into()]).unwrap();
        while let Poll::Frames(_) = r.poll(|fr| out.push((fr.ts_ns, fr.data.to_vec(), fr.source))).unwrap() {}
        return out;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcap-fixtures");
    let mut files: Vec<Vec<PathBuf>> = Vec::new();
    for d in std::fs::read_dir(root.join("scenarios")).unwrap() {
        let d = d.unwrap().path();
        let mut p: Vec<PathBuf> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "pcap"))
            .collect();
        p.sort();
        files.push(p);
    }
    for e in std::fs::read_dir(root.join("captures")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "pcap") {
            files.push(vec![p]);
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let mut r = Replay::open(&f).unwrap();
        while let Poll::Frames(_) = r.poll(|fr| out.push((fr.ts_ns, fr.data.to_vec(), fr.source))).unwrap() {}
    }
    out
}

fn bench(c: &mut Criterion) {
    let frames = mix();
    let advance = Advance::plan(frames.iter().map(|f| &f.1[..]));
    let n = frames.len() as u64;
    let mut g = c.benchmark_group("analysis");
    g.throughput(Throughput::Elements(n));
    g.bench_function("decode", |b| {
        b.iter(|| {
            for (_, data, _) in &frames {
                black_box(decode_frame(black_box(data)));
            }
        })
    });
    let span =
        frames.iter().map(|f| f.0).max().unwrap() - frames.iter().map(|f| f.0).min().unwrap() + 1_000_000;
    // The default options (1 s interval, ICRC unchecked, 1 ms reorder window: one vantage
    // in time order, so frames are not held), then with --check-icrc, then with
    // --reorder-window 0, then with a second vantage mapped (that matches nothing here), so
    // that every frame is held for the window (what holding costs), then with `--flow-idle
    // 1h` (what ending a transmission per packet costs on sparse traffic).
    let default = PipelineConfig::new(VantageMap::default());
    let two = held::held_vantages();
    let idle = default.flow_idle;
    let hour = Duration::from_secs(3600);
    // With --evidence-dir (its defaults; the files are the stats side's, not measured):
    // every packet copied into the worker's ring, events' packets into their records.
    let evidence = Some(EvidenceSettings::with_defaults(std::env::temp_dir().join("roceprobe-bench")));
    for (name, check_icrc, reorder_window, flow_idle, vantages, evidence) in [
        ("decode+track", false, default.reorder_window, idle, VantageMap::default(), None),
        ("decode+track+icrc", true, default.reorder_window, idle, VantageMap::default(), None),
        ("decode+track+no-reorder", false, Duration::ZERO, idle, VantageMap::default(), None),
        ("decode+track+held", false, default.reorder_window, idle, two, None),
        ("decode+track+idle-1h", false, default.reorder_window, hour, VantageMap::default(), None),
        ("decode+track+evidence", false, default.reorder_window, idle, VantageMap::default(), evidence),
    ] {
        let cfg = PipelineConfig {
            check_icrc,
            reorder_window,
            flow_idle,
            evidence,
            ..PipelineConfig::new(vantages)
        };
        let (mut worker, drain) = worker_with_draining_stats(&cfg);
        let mut pass = 0u64;
        // Each pass's PSNs go on from the last's (see support/psn_advance.rs), untimed.
        let mut frames = frames.clone();
        g.bench_function(name, |b| {
            b.iter_custom(|passes| {
                let mut timed = Duration::ZERO;
                for _ in 0..passes {
                    pass += 1;
                    if pass > 1 {
                        advance.apply(frames.iter_mut().map(|f| &mut f.1));
                    }
                    let t = Instant::now();
                    feed(&mut worker, &frames, pass * span);
                    timed += t.elapsed();
                }
                timed
            })
        });
        worker.finish();
        drop(worker);
        drain.join().unwrap();
    }
    g.finish();
}

/// Every frame, time shifted by `shift`, in bursts as a capture hands them over.
fn feed(worker: &mut Worker, frames: &[(u64, Vec<u8>, u16)], shift: u64) {
    for chunk in frames.chunks(BURST) {
        let mut burst = [Frame { data: &[], wire_len: 0, ts_ns: 0, source: 0 }; BURST];
        for (b, (ts, data, source)) in burst.iter_mut().zip(chunk) {
            *b = Frame { data, wire_len: data.len() as u32, ts_ns: ts + shift, source: *source };
        }
        worker.handle_burst(&burst[..chunk.len()]);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
