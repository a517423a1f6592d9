//! The bodies of the cargo-fuzz targets (`fuzz/`), here so that the committed corpus is
//! replayed by the ordinary tests through exactly the same code.

use crate::capture::Frame;
use crate::report::evidence::EvidenceSettings;
use crate::runtime::{PipelineConfig, ToStats, Worker};
use crate::track::vantage::{Rule, SourceKind};
use crate::track::VantageMap;
use crate::wire::cm::CmMessage;
use crate::wire::{decode_frame, icrc, nvme, Decoded};
use std::time::Duration;

/// Every decoder on one frame: the frame walk (extension headers parsed in it), ICRC, NVMe capsules and
/// CM MADs. Whatever the bytes, nothing may panic.
pub fn decode(data: &[u8]) {
    if let Decoded::Roce(p) = decode_frame(data) {
        let _ = icrc::check(&p.icrc);
        let _ = nvme::classify(p.bth.opcode(), p.payload, p.payload_len);
        let _ = CmMessage::parse(p.payload);
        assert!(p.payload.len() as u64 <= u64::from(p.payload_len));
    }
    let _ = nvme::Sqe::parse(data);
    let _ = nvme::Cqe::parse(data);
    let _ = CmMessage::parse(data);
}

/// The worker on a stream of frames cut from `data`: each frame is a 2-byte length, a
/// 1-byte time step and a source byte, then the frame. Checks that every frame is
/// accounted for exactly once.
pub fn worker(data: &[u8]) {
    run_worker(data, VantageMap::default(), None);
}

/// [`worker`] with two vantages (sources 1 and 3, VLAN 200 and ERSPAN session 5 are the
/// storage side's), so that the reorder window holds every frame and an I/O seen at one
/// vantage waits for the other's copies, and with evidence kept by `--evidence-dir`'s
/// defaults (the worker's side of it: its records go nowhere here, no file is written).
pub fn worker_two_vantages(data: &[u8]) {
    let rules: Vec<Rule> = ["storage=file:1", "storage=file:3", "storage=vlan:200", "storage=erspan:5"]
        .iter()
        .map(|r| r.parse().expect("a valid rule"))
        .collect();
    let vantages = VantageMap::new(&rules, SourceKind::File, &[0, 1, 2, 3]).expect("valid rules");
    run_worker(data, vantages, Some(EvidenceSettings::with_defaults("evidence-unused".into())));
}

fn run_worker(data: &[u8], vantages: VantageMap, evidence: Option<EvidenceSettings>) {
    let cfg = PipelineConfig {
        interval: Duration::from_micros(50),
        max_flows: 8,
        check_icrc: true,
        flow_idle: Duration::from_micros(20),
        // Tiny tables, so that inputs reach what happens when they are full (and a worker
        // per input is cheap to make).
        io_timeout: Duration::from_micros(30),
        flow_expire: Duration::from_micros(40),
        max_ios: 8,
        max_latency_series: 4,
        max_pending_commands: 4,
        max_cm_requests: 2,
        max_announced_flows: 4,
        evidence,
        ..PipelineConfig::new(vantages)
    };
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut w = Worker::new(0, &cfg, tx);
    let mut rest = data;
    let mut ts: u64 = 1_000_000;
    let mut frames = 0u64;
    while rest.len() >= 4 {
        let len = usize::from(u16::from_le_bytes([rest[0], rest[1]])) % 2048;
        // Steps back in time as well as forward.
        ts = ts.wrapping_add(u64::from(rest[2]) * 1_000).wrapping_sub(40_000);
        let source = u16::from(rest[3] & 3);
        rest = &rest[4..];
        let n = len.min(rest.len());
        w.handle(Frame { data: &rest[..n], wire_len: n as u32, ts_ns: ts, source });
        frames += 1;
        rest = &rest[n..];
    }
    w.finish();
    drop(w);
    let mut seen = 0;
    let (mut tracked, mut in_transmissions) = (0, 0);
    for msg in rx.iter() {
        match msg {
            ToStats::Interval(s) => {
                let c = &s.counters;
                assert_eq!(c.packets, c.roce_packets + c.non_roce_packets + c.decode_error_total());
                seen += c.packets;
                tracked += s.flows.iter().map(|f| f.counts.packets).sum::<u64>();
                // Transmissions too short to be reported are counted in their flow's interval.
                in_transmissions += s.flows.iter().map(|f| f.short.packets).sum::<u64>();
            }
            ToStats::Transmissions(_, _, t) => {
                in_transmissions += t.iter().map(|t| t.counts.packets).sum::<u64>()
            }
            ToStats::Ports { .. } | ToStats::Evidence(..) => {}
        }
    }
    assert_eq!(seen, frames);
    assert_eq!(tracked, in_transmissions, "every tracked packet is in exactly one transmission");
}
