//! Hostile input: every real frame, truncated and with random bytes flipped, goes through
//! the worker. Nothing panics, and every frame is accounted for exactly once:
//! packets = RoCE + non-RoCE + malformed.

mod common;
use common::*;
use roceprobe::capture::pcap::read_all_frames;
use roceprobe::capture::Frame;
use roceprobe::metrics::Totals;
use roceprobe::runtime::{PipelineConfig, ToStats, Worker};
use roceprobe::track::VantageMap;
use std::time::Duration;

#[test]
fn mutated_and_truncated_frames_never_panic_and_always_balance() {
    let frames: Vec<Vec<u8>> =
        REAL_CAPTURES.iter().flat_map(|n| read_all_frames(&capture(n)).unwrap()).collect();
    let cfg = PipelineConfig {
        interval: Duration::from_millis(1),
        max_flows: 64,
        check_icrc: true,
        flow_idle: Duration::from_micros(100),
        ..PipelineConfig::new(VantageMap::default())
    };
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut worker = Worker::new(0, &cfg, tx);
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    let mut fed = 0u64;
    let mut ts = 1_000_000_000u64;
    for round in 0..40 {
        for f in &frames {
            let mut m = f.clone();
            if round % 4 == 1 {
                m.truncate(rng.below(f.len() + 1));
            } else {
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(m.len());
                    m[i] = rng.next() as u8;
                }
            }
            // Clocks that jump back and forth, too.
            ts = if rng.below(10) == 0 {
                ts.saturating_sub(rng.next() % 5_000_000)
            } else {
                ts + rng.next() % 200_000
            };
            worker.handle(Frame { data: &m, wire_len: f.len() as u32, ts_ns: ts, source: 0 });
            fed += 1;
        }
    }
    worker.finish();
    drop(worker);
    let mut t = Totals::default();
    for msg in rx.iter() {
        match msg {
            ToStats::Interval(s) => t.add(&s),
            ToStats::Transmissions(_, end, ts) => t.add_transmissions(&ts, end),
            ToStats::Ports { .. } | ToStats::Evidence(..) => {}
        }
    }
    let c = &t.counters;
    assert_eq!(c.packets, fed);
    assert_eq!(c.roce_packets + c.non_roce_packets + c.decode_error_total(), fed);
    assert!(c.decode_error_total() > 0, "mutations produced malformed frames");
    assert!(c.roce_packets > 0, "intact enough frames still decode");
    let tracked: u64 = t.flows.values().map(|f| f.counts.packets).sum();
    // A mutated TTL makes some frames a lower-TTL copy of a packet seen just before: the
    // mirror's second copy, counted as such in its flow, not as one of its packets.
    let duplicates: u64 = t.flows.values().map(|f| f.counts.mirror_duplicates).sum();
    assert_eq!(
        tracked + duplicates + t.untracked_packets,
        c.roce_packets,
        "every RoCE frame is in a flow, a flow's duplicate or untracked"
    );
    for f in t.flows.values() {
        let by_opcode: u64 = f.opcodes.values().sum::<u64>() + f.other_opcodes;
        assert_eq!(by_opcode, f.counts.packets, "per-opcode counts add up to the flow's packets");
    }
}
