//! A flood of distinct QPs, sixteen times the flow table: memory stays under the documented
//! figure and the overflow is reported. (Its own test binary, so that the peak memory of
//! its children is the probe's alone.)

mod common;
use common::*;
use roceprobe::capture::pcap::Writer;
use roceprobe::wire::bth;
use roceprobe::wire::build::RoceFrame;

/// The documented ceiling (docs/RELIABILITY.md) for `replay` at the default bounds.
const MAX_RSS_MIB: i64 = 256;

#[test]
fn a_million_distinct_qps_stay_within_the_memory_figure() {
    const QPS: u32 = 1_000_000;
    const MAX_FLOWS: u32 = 65_536;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flood.pcap");
    let mut w = Writer::new(std::io::BufWriter::new(std::fs::File::create(&path).unwrap())).unwrap();
    let t0 = 1_800_000_000_000_000_000u64;
    for qp in 0..QPS {
        // RDMA WRITE Only, one per QP, 100 ns apart: every packet is a new flow.
        let f = RoceFrame::new(
            "10.9.0.1".parse().unwrap(),
            "10.9.0.2".parse().unwrap(),
            bth::Repr { opcode: 0x0a, dest_qp: qp + 1, psn: qp, ..Default::default() },
        )
        .emit();
        w.write(t0 + u64::from(qp) * 100, &f, f.len() as u32).unwrap();
    }
    drop(w);
    let s = replay_summary(&[&path], &["--max-flows", &MAX_FLOWS.to_string()]);
    assert_eq!(s["roce_packets"], QPS);
    assert_eq!(s["flows"].as_array().unwrap().len() as u32, MAX_FLOWS);
    assert_eq!(s["untracked_packets"], QPS - MAX_FLOWS, "the overflow is reported");
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: an out-pointer to a local.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) }, 0);
    let peak_mib = usage.ru_maxrss / 1024;
    eprintln!("peak resident memory of the probe: {peak_mib} MiB");
    assert!(peak_mib < MAX_RSS_MIB, "{peak_mib} MiB, documented under {MAX_RSS_MIB} MiB");
}
