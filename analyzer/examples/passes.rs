//! Times passes of the analysis (`decode+track`, default options, one core, bursts of 32)
//! over the frames of a capture in memory, and prints the fastest and the median pass. The
//! fastest pass is what an A/B comparison on a shared or virtual machine should read: steal
//! time and other tenants only ever make a pass slower.
//!
//! `--rate MPPS` times the frames as a live capture at that rate does instead of by the
//! file: every burst of 32 the time of its poll, the bursts evenly spaced. On a capture of
//! many QPs looped at a few Mpps, each QP's packets are then milliseconds apart, as they are
//! live (the file's own times are closer together).
//!
//! Every pass after the first moves each packet's PSN on by its flow's span in the capture
//! (`benches/support/psn_advance.rs`), so that the passes are one stream of traffic in sequence,
//! not the same PSNs again (every request a retransmission); `--same-psns` sends the
//! capture as it is each pass. `--evidence` keeps evidence with `--evidence-dir`'s defaults,
//! as the benchmark's `decode+track+evidence` does; `--held` maps a second vantage, so that
//! the reorder window holds every frame, as `decode+track+held` does. `--max-latency-series
//! N` gives the analysis room for N latency series, as the probe's option of that name does
//! (the default, 1,024, is fewer than the host pairs of many_qps: most of its ACKs' samples
//! are then dropped, not recorded).
//!
//! `cargo run --release -p roceprobe --example passes -- FILE.pcap [PASSES] [--flow-idle-1h] [--rate MPPS] [--same-psns] [--evidence] [--held] [--max-latency-series N]`

#[path = "../benches/support/held.rs"]
mod held;
#[path = "../benches/support/psn_advance.rs"]
mod psn_advance;

use psn_advance::Advance;
use roceprobe::capture::pcap::Replay;
use roceprobe::capture::{Capture, Frame, Poll, BURST};
use roceprobe::runtime::{worker_with_draining_stats, PipelineConfig};
use roceprobe::track::VantageMap;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(file) = args.first() else {
        eprintln!(
            "usage: passes FILE.pcap [PASSES] [--flow-idle-1h] [--rate MPPS] [--same-psns] [--evidence] [--held] [--max-latency-series N]"
        );
        std::process::exit(2);
    };
    let passes: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(30);
    let rate: Option<f64> = args.iter().position(|a| a == "--rate").map(|i| {
        args.get(i + 1).and_then(|r| r.parse().ok()).filter(|&r: &f64| r > 0.0).unwrap_or_else(|| {
            eprintln!("passes: --rate needs a positive number of Mpps");
            std::process::exit(2);
        })
    });
    let mut frames = Vec::new();
    let mut r = Replay::open(&[file.into()]).unwrap_or_else(|e| {
        eprintln!("passes: {file}: {e}");
        std::process::exit(1);
    });
    while let Poll::Frames(_) = r.poll(|fr| frames.push((fr.ts_ns, fr.data.to_vec(), fr.source))).unwrap() {}
    let first = frames.iter().map(|f| f.0).min().unwrap_or(0);
    if let Some(mpps) = rate {
        let burst_ns = BURST as f64 * 1e3 / mpps;
        for (i, f) in frames.iter_mut().enumerate() {
            f.0 = first + ((i / BURST) as f64 * burst_ns) as u64;
        }
    }
    let span = frames.iter().map(|f| f.0).max().unwrap_or(0) - first + 1_000_000;
    // `--held`: every frame held by the reorder window, as the benchmark's `decode+track+held`.
    let held = args.iter().any(|a| a == "--held");
    let mut cfg = PipelineConfig::new(if held { held::held_vantages() } else { VantageMap::default() });
    // `--max-latency-series N`: room for N latency series (as the option of that name).
    if let Some(i) = args.iter().position(|a| a == "--max-latency-series") {
        cfg.max_latency_series = args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or_else(|| {
            eprintln!("passes: --max-latency-series needs a number");
            std::process::exit(2);
        });
    }
    if args.iter().any(|a| a == "--flow-idle-1h") {
        cfg.flow_idle = Duration::from_secs(3600);
    }
    // With --evidence-dir's defaults, as the benchmark's `decode+track+evidence` (the files
    // are the stats side's, not timed).
    if args.iter().any(|a| a == "--evidence") {
        let dir = std::env::temp_dir().join("roceprobe-passes");
        cfg.evidence = Some(roceprobe::report::evidence::EvidenceSettings::with_defaults(dir));
    }
    // Each pass's PSNs go on from the last's, unless asked to send the same again.
    let advance =
        (!args.iter().any(|a| a == "--same-psns")).then(|| Advance::plan(frames.iter().map(|f| &f.1[..])));
    let (mut worker, drain) = worker_with_draining_stats(&cfg);
    let mut times = Vec::with_capacity(passes);
    for pass in 1..=passes as u64 + 3 {
        if let (Some(a), true) = (&advance, pass > 1) {
            a.apply(frames.iter_mut().map(|f| &mut f.1));
        }
        let t = Instant::now();
        for chunk in frames.chunks(BURST) {
            let mut burst = [Frame { data: &[], wire_len: 0, ts_ns: 0, source: 0 }; BURST];
            for (b, (ts, data, source)) in burst.iter_mut().zip(chunk) {
                *b = Frame { data, wire_len: data.len() as u32, ts_ns: ts + pass * span, source: *source };
            }
            worker.handle_burst(&burst[..chunk.len()]);
        }
        if pass > 3 {
            times.push(t.elapsed());
        }
    }
    worker.finish();
    drop(worker);
    drain.join().unwrap();
    times.sort();
    let ns = |d: Duration| d.as_nanos() as f64 / frames.len() as f64;
    println!(
        "frames={} passes={} min_ms={:.2} median_ms={:.2} min_ns_per_packet={:.1} median_ns_per_packet={:.1}",
        frames.len(),
        times.len(),
        times[0].as_secs_f64() * 1e3,
        times[times.len() / 2].as_secs_f64() * 1e3,
        ns(times[0]),
        ns(times[times.len() / 2])
    );
}
