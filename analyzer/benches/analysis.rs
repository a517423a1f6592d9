//! Per-packet cost of the analysis on one core, on in-memory frames (no capture I/O):
//! `decode` (the frame walk alone) and `decode+track` (what a worker does per frame: decode,
//! vantage, flow table, PSN analysis, transmissions, NVMe recognition, ICRC off).
//!
//! The mix is every frame of the committed scenarios and real captures: NVMe/RDMA reads and
//! writes at two vantages, RC traffic under loss and congestion, CM, UD, UC, XRC and noise.
//! `cargo bench -p roceprobe --bench analysis`; ns/packet = time per iteration / frames.
//! With `ROCEPROBE_BENCH_MIX=FILE`, the frames of that capture instead (scripts/bench).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use roceprobe::capture::pcap::Replay;
use roceprobe::capture::{Capture, Frame, Poll, BURST};
use roceprobe::runtime::{recycle, PipelineConfig, Worker};
use roceprobe::track::VantageMap;
use roceprobe::wire::decode_frame;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bytes of each receive buffer (a 9 KiB jumbo frame fits).
const RX_BUFFER: usize = 9216;

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
    // The default 1 s interval: closing an interval resets every latency histogram used in
    // it (a memset each), a cost a realistic interval spreads over millions of packets.
    let cfg = PipelineConfig::new(VantageMap::default());
    let (tx, rx) = crossbeam_channel::bounded(1024);
    let (back_tx, back_rx) = crossbeam_channel::bounded(64);
    let drain = std::thread::spawn(move || {
        for m in rx {
            if let Some(r) = recycle(m) {
                let _ = back_tx.try_send(r);
            }
        }
    });
    let mut worker = Worker::with_recycling(0, &cfg, tx, back_rx);
    let span =
        frames.iter().map(|f| f.0).max().unwrap() - frames.iter().map(|f| f.0).min().unwrap() + 1_000_000;
    let mut pass = 0u64;
    let mut rx_ring = vec![[0u8; RX_BUFFER]; BURST];
    g.bench_function("decode+track", |b| {
        b.iter(|| {
            pass += 1;
            // In bursts, as a capture hands them over: each burst is first copied into the
            // same receive buffers, as a NIC's DMA into recycled mbufs leaves frames in the
            // cache (the copy is counted in the time). Without it, a large mix would measure
            // the misses of reading hundreds of MiB of frames that no NIC delivers cold.
            for chunk in frames.chunks(BURST) {
                let mut lens = [0usize; BURST];
                for (k, (_, data, _)) in chunk.iter().enumerate() {
                    let n = data.len().min(RX_BUFFER);
                    rx_ring[k][..n].copy_from_slice(&data[..n]);
                    lens[k] = n;
                }
                let mut burst = [Frame { data: &[], wire_len: 0, ts_ns: 0, source: 0 }; BURST];
                for (k, (b, (ts, data, source))) in burst.iter_mut().zip(chunk).enumerate() {
                    let wire_len = data.len() as u32;
                    *b = Frame {
                        data: &rx_ring[k][..lens[k]],
                        wire_len,
                        ts_ns: ts + pass * span,
                        source: *source,
                    };
                }
                worker.handle_burst(&burst[..chunk.len()]);
            }
        })
    });
    g.finish();
    worker.finish();
    drop(worker);
    drain.join().unwrap();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(5));
    targets = bench
}
criterion_main!(benches);
