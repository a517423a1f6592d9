//! Clocks that jump by years, stand still or go back, and PSNs replayed from old
//! connections: no hang, no panic, every packet accounted for.

mod common;
use common::*;
use roceprobe::capture::pcap::Writer;
use roceprobe::wire::bth;
use roceprobe::wire::build::RoceFrame;

fn frame(qp: u32, psn: u32) -> Vec<u8> {
    RoceFrame::new(
        "10.8.0.1".parse().unwrap(),
        "10.8.0.2".parse().unwrap(),
        bth::Repr { opcode: 0x0a, dest_qp: qp, psn, ..Default::default() },
    )
    .emit()
}

#[test]
fn years_long_jumps_standing_clocks_and_replayed_psns() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("anomalies.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    let t0 = 1_800_000_000_000_000_000u64;
    let year = 365 * 86_400 * 1_000_000_000u64;
    let mut n = 0u64;
    let mut put = |ts: u64, f: &[u8]| {
        w.write(ts, f, f.len() as u32).unwrap();
        n += 1;
    };
    // A stream, then the clock jumps ten years ahead, back, and stands still for a while.
    for psn in 0..100 {
        put(t0 + u64::from(psn) * 1_000, &frame(7, psn));
    }
    put(t0 + 10 * year, &frame(7, 100));
    put(t0 + 200_000, &frame(7, 101));
    for psn in 102..1_102 {
        put(t0 + 300_000, &frame(7, psn));
    }
    // The same QP number and PSNs again, as a new connection reusing them would.
    for psn in 0..100 {
        put(t0 + 400_000 + u64::from(psn), &frame(7, psn));
    }
    drop(w);
    // 1 µs intervals: ten years of them would never end if empty intervals were walked.
    let s = replay_summary(&[&path], &["--interval", "1us"]);
    assert_eq!(s["packets"], n);
    assert_eq!(s["roce_packets"], n);
    let flows = s["flows"].as_array().unwrap();
    let packets: u64 = flows.iter().map(|f| f["packets"].as_u64().unwrap()).sum();
    assert_eq!(packets, n, "every packet in its flow");
    assert_eq!(s["first_packet"], roceprobe::report::time::rfc3339_nanos(t0));
    assert_eq!(s["last_packet"], roceprobe::report::time::rfc3339_nanos(t0 + 10 * year));
}
