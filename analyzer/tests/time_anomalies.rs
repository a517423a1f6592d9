//! Clocks that jump by years, stand still or go back, and PSNs and NVMe command
//! identifiers replayed from old connections: no hang, no panic, every packet accounted
//! for, no I/O completed by another connection's completion.

mod common;
use common::*;
use roceprobe::capture::pcap::Writer;
use roceprobe::wire::bth;
use roceprobe::wire::build::RoceFrame;

fn frame(qp: u32, psn: u32) -> Vec<u8> {
    write_only([10, 8, 0, 1], [10, 8, 0, 2], qp, psn)
}

/// An RDMA WRITE Only from `src` to `dst`'s QP `qp`.
fn write_only(src: [u8; 4], dst: [u8; 4], qp: u32, psn: u32) -> Vec<u8> {
    RoceFrame::new(src.into(), dst.into(), bth::Repr { opcode: 0x0a, dest_qp: qp, psn, ..Default::default() })
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
    // A stream, then the clock jumps ten years ahead for two frames (a lone frame would be
    // one wrong stamp, replayed at the time of the frame before it), back, and stands still
    // for a while.
    for psn in 0..100 {
        put(t0 + u64::from(psn) * 1_000, &frame(7, psn));
    }
    put(t0 + 10 * year, &frame(7, 100));
    put(t0 + 10 * year + 1_000, &frame(7, 101));
    put(t0 + 200_000, &frame(7, 102));
    for psn in 103..1_102 {
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
    assert_eq!(s["last_packet"], roceprobe::report::time::rfc3339_nanos(t0 + 10 * year + 1_000));
    assert_eq!(s["ports"]["0"]["retimed"], 0);
}

/// An NVMe/RDMA connection closes and a new one between the same hosts reuses its command
/// identifiers; a completion of the old connection then shows up again (a late mirror copy,
/// a stale retransmission). It must not complete the new connection's I/O.
#[test]
fn command_ids_replayed_from_an_old_connection() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders};
    use roceprobe::wire::nvme::{self, Cqe};
    let (host, target) = ("10.8.1.1".parse().unwrap(), "10.8.1.2".parse().unwrap());
    let mut capsule = [0u8; nvme::SQE_LEN + 64];
    in_capsule_write(5, 64).emit(&mut capsule);
    let mut cqe = [0u8; nvme::CQE_LEN];
    Cqe { cid: 5, ..Default::default() }.emit(&mut cqe);
    let send = |to_target: bool, qp: u32, psn: u32, payload: &[u8]| {
        let (s, d) = if to_target { (host, target) } else { (target, host) };
        let mut f =
            RoceFrame::new(s, d, bth::Repr { opcode: op::SEND_ONLY, dest_qp: qp, psn, ..Default::default() });
        f.payload = payload;
        f.emit()
    };
    let ack = |to_target: bool, qp: u32, psn: u32| {
        let (s, d) = if to_target { (host, target) } else { (target, host) };
        let mut f = RoceFrame::new(
            s,
            d,
            bth::Repr { opcode: op::ACKNOWLEDGE, dest_qp: qp, psn, ..Default::default() },
        );
        f.ext = ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() };
        f.emit()
    };
    // (µs, frame). The old connection: host QP 0x11, target QP 0x21; the new one: 0x12, 0x22.
    let frames = [
        (0, send(true, 0x21, 100, &capsule)),
        (2, ack(false, 0x11, 100)),
        (10, send(false, 0x11, 500, &cqe)),
        (12, ack(true, 0x21, 500)),
        (100, send(true, 0x22, 200, &capsule)),
        (102, ack(false, 0x12, 200)),
        (105, send(false, 0x11, 500, &cqe)), // the old connection's completion again
        (150, send(false, 0x12, 600, &cqe)),
        (152, ack(true, 0x22, 600)),
    ];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cids.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    let t0 = 1_800_000_000_000_000_000u64;
    for (us, f) in &frames {
        w.write(t0 + us * 1_000, f, f.len() as u32).unwrap();
    }
    drop(w);
    let s = replay_summary(&[&path], &[]);
    assert_eq!(s["ios"]["completed"], 2);
    assert_eq!((&s["ios"]["timed_out"], &s["ios"]["retransmitted"]), (&0.into(), &0.into()));
    let io = s["latency"].as_array().unwrap().iter().find(|l| l["segment"] == "io@compute").unwrap();
    assert_eq!(io["op"], "nvme_write");
    // 10 µs on the old connection, 50 µs on the new one (not 5 µs to the stale copy), within
    // the histograms' 3 significant digits.
    assert_eq!(io["count"], 2);
    let near = |v: &serde_json::Value, want: f64| (v.as_f64().unwrap() - want).abs() <= want * 1e-3;
    assert!(near(&io["min_us"], 10.0) && near(&io["max_us"], 50.0), "{io}");
}

/// Frames stamped hours ahead (a bad capture timestamp, or an ERSPAN III switch time from a
/// broken clock) in a stream of one source. One such frame alone is a timestamp gone wrong:
/// it is replayed at the time of the frame before it, and counted as retimed. Two in a row
/// are a clock that stepped ahead and back: the frames after them, at the right time, are a
/// clock that stepped back (the reorder window starts again), not frames too late to
/// analyse. Either way every request is analysed: 200 messages, no loss, no late packets.
/// The flow's transmissions follow its clock: one of 200 packets with the frame retimed;
/// with the clock stepped ahead and back, the first 100 packets, the two ahead, then (the
/// flow table keeping the latest time) each packet after the step back one of its own: 100.
#[test]
fn frames_stamped_hours_ahead_leave_the_rest_analysed() {
    let t0 = 1_800_000_000_000_000_000u64;
    let ahead = t0 + 10 * 3_600_000_000_000;
    for (wrong, retimed, last, transmissions) in [(1, 1, t0 + 199_000, 1), (2, 0, ahead + 1_000, 100)] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ahead.pcap");
        let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
        for psn in 0..200u32 {
            let ts = if (100..100 + wrong).contains(&psn) {
                ahead + u64::from(psn - 100) * 1_000
            } else {
                t0 + u64::from(psn) * 1_000
            };
            let f = frame(9, psn);
            w.write(ts, &f, f.len() as u32).unwrap();
        }
        drop(w);
        let s = replay_summary(&[&path], &[]);
        let f = &s["flows"].as_array().unwrap()[0];
        assert_eq!(
            (f["packets"].as_u64(), f["messages"].as_u64(), f["late_packets"].as_u64()),
            (Some(200), Some(200), Some(0)),
            "{wrong} ahead: {f}"
        );
        assert_eq!((f["gap_psns"].as_u64(), f["retx_packets"].as_u64()), (Some(0), Some(0)), "{f}");
        assert_eq!(f["transmissions"], transmissions, "{wrong} ahead: {f}");
        assert_eq!(s["ports"]["0"]["retimed"], retimed, "{wrong} ahead");
        assert_eq!(s["last_packet"], roceprobe::report::time::rfc3339_nanos(last), "{wrong} ahead");
    }
}

/// The clock steps back five seconds, and an NVMe write begun after the step is still open
/// when the capture ends: it is unfinished, not timed out, however many workers share the
/// frames. (Behind a dispatcher, a worker once ended the run at the highest time told,
/// from before the step, by which the I/O was seconds old.)
#[test]
fn an_io_begun_after_the_clock_stepped_back_is_unfinished_at_the_end() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::nvme;
    let (host, target) = ([10, 8, 3, 1], [10, 8, 3, 2]);
    let mut capsule = [0u8; nvme::SQE_LEN + 64];
    in_capsule_write(9, 64).emit(&mut capsule);
    let mut command = RoceFrame::new(
        host.into(),
        target.into(),
        bth::Repr { opcode: op::SEND_ONLY, dest_qp: 0x31, psn: 7, ..Default::default() },
    );
    command.payload = &capsule;
    let command = command.emit();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("step.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    let t0 = 1_800_000_000_000_000_000u64;
    let ms = 1_000_000u64;
    // Eight other host pairs (some on another worker than the I/O's) send every 500 ms for
    // ten seconds; the host sends one request at the start; then the clock is five seconds
    // back, the host sends its command, whose completion the capture does not hold, and
    // the capture ends half a second later. Each pair sends its request at `t` plus its
    // number in ns.
    let pairs = |w: &mut Writer<std::fs::File>, t: u64, psn: u32| {
        for pair in 0..8u8 {
            let f = write_only([10, 8, 4, pair], [10, 8, 5, pair], 0x40, psn);
            w.write(t + u64::from(pair), &f, f.len() as u32).unwrap();
        }
    };
    let request = write_only(host, target, 0x31, 6);
    w.write(t0, &request, request.len() as u32).unwrap();
    for k in 0..=20u64 {
        pairs(&mut w, t0 + k * 500 * ms, k as u32);
    }
    w.write(t0 + 5_000 * ms, &command, command.len() as u32).unwrap();
    // The other pairs go on after the step for half a second (a frame alone five seconds
    // back would be one wrong stamp, retimed).
    for k in 1..=5u64 {
        pairs(&mut w, t0 + 5_000 * ms + k * 100 * ms, 20 + k as u32);
    }
    drop(w);
    for workers in ["1", "2", "4"] {
        let s = replay_summary(&[&path], &["--workers", workers]);
        let ios = &s["ios"];
        assert_eq!(
            (&ios["unfinished"], &ios["timed_out"], &ios["completed"]),
            (&1.into(), &0.into(), &0.into()),
            "--workers {workers}: {ios}"
        );
    }
}
