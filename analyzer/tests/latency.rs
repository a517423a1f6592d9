//! I/O quality visibility (docs/METRICS.md, "I/O quality"): segment latencies against the generator's truth, what
//! one vantage alone can and cannot measure, and RDMA latencies of the real captures
//! against their own timestamps.

mod common;
use common::*;
use common::{scenario_files as files, scenario_truth as truth};
use roceprobe::capture::Capture;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Frames `ns` apart, the first at 0, for [`write_pcap`].
fn spaced(frames: Vec<Vec<u8>>, ns: u64) -> Vec<(u64, Vec<u8>)> {
    frames.into_iter().enumerate().map(|(i, f)| (ns * i as u64, f)).collect()
}

/// A CM MAD (256 bytes), written byte by byte from CM's layout: base version 1, class 7
/// (CM), class version 2, method 3 (Send), the attribute at 16; the message from byte 24,
/// which `fill` writes.
fn cm_mad(attribute: u16, fill: impl Fn(&mut [u8])) -> Vec<u8> {
    let mut m = vec![0u8; 256];
    m[..4].copy_from_slice(&[1, 7, 2, 3]);
    m[16..18].copy_from_slice(&attribute.to_be_bytes());
    fill(&mut m[24..]);
    m
}

/// The UD SEND Only to QP 1 (Q_Key 0x80010000) that carries a CM MAD.
fn cm_frame(src: std::net::IpAddr, dst: std::net::IpAddr, mad: &[u8]) -> Vec<u8> {
    use roceprobe::wire::ib_ext::{Deth, ExtHeaders};
    let deth = ExtHeaders { deth: Some(Deth { qkey: 0x8001_0000, src_qp: 1 }), ..Default::default() };
    roce(src, dst, roceprobe::wire::bth::opcode::UD_SEND_ONLY, 1, 0, deth, mad)
}

/// A ConnectRequest (RDMA-CM, port 4420) of communication id `comm` from QP `qpn` of
/// `src` to `dst` (IPv4), its requests starting at PSN `start`; with `nvme_qid`, NVMe/RDMA's
/// request data after RDMA-CM's 36-byte header (record format 0, the QID, HRQSIZE and
/// HSQSIZE 32, little-endian). The primary path as RoCE stacks write it (`rdma_cm.pcap`'s
/// requests): permissive LIDs (0xFFFF at 52 and 54), the two hosts' IPv4-mapped GIDs at 56
/// and 72 (where tshark finds the connection's hosts).
fn cm_req(comm: u32, qpn: u32, start: u32, ips: [[u8; 4]; 2], nvme_qid: Option<u16>) -> Vec<u8> {
    cm_mad(0x0010, |m: &mut [u8]| {
        m[0..4].copy_from_slice(&comm.to_be_bytes());
        m[8..16].copy_from_slice(&0x0000_0000_0106_1144u64.to_be_bytes());
        m[32..35].copy_from_slice(&qpn.to_be_bytes()[1..]);
        m[44..47].copy_from_slice(&start.to_be_bytes()[1..]);
        m[50] = 3 << 4;
        m[52..56].fill(0xFF);
        for (gid, ip) in [(56, ips[0]), (72, ips[1])] {
            m[gid + 10..gid + 12].fill(0xFF);
            m[gid + 12..gid + 16].copy_from_slice(&ip);
        }
        // Private data at 140: RDMA-CM's header (IPv4 as ::ffff:a.b.c.d).
        let p = &mut m[140..];
        p[1] = 4 << 4;
        p[14..16].fill(0xFF);
        p[16..20].copy_from_slice(&ips[0]);
        p[30..32].fill(0xFF);
        p[32..36].copy_from_slice(&ips[1]);
        if let Some(qid) = nvme_qid {
            p[38..40].copy_from_slice(&qid.to_le_bytes());
            p[40..42].copy_from_slice(&32u16.to_le_bytes());
            p[42..44].copy_from_slice(&32u16.to_le_bytes());
        }
    })
}

/// A ConnectReply of communication id `comm` to request `remote`, from QP `qpn`, its
/// requests starting at PSN `start`.
fn cm_rep(comm: u32, remote: u32, qpn: u32, start: u32) -> Vec<u8> {
    cm_mad(0x0013, |m: &mut [u8]| {
        m[0..4].copy_from_slice(&comm.to_be_bytes());
        m[4..8].copy_from_slice(&remote.to_be_bytes());
        m[12..15].copy_from_slice(&qpn.to_be_bytes()[1..]);
        m[20..23].copy_from_slice(&start.to_be_bytes()[1..]);
    })
}

/// The summary's first latency series whose `field` is `value`.
fn series_where<'a>(s: &'a Value, field: &str, value: &str) -> &'a Value {
    s["latency"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l[field] == value)
        .unwrap_or_else(|| panic!("no {field} {value}: {s}"))
}

/// The summary's one series of `op` has `want`'s samples (sorted, ns, from tshark's
/// times): their count, and its minimum and maximum.
fn assert_samples(s: &Value, op: &str, want: &[u64]) {
    let l = series_where(s, "op", op);
    assert_eq!(l["count"].as_u64(), Some(want.len() as u64), "{op}: {l}");
    for (field, expect) in [("min_us", want[0]), ("max_us", *want.last().unwrap())] {
        let got = l[field].as_f64().unwrap();
        assert!(close(got, expect), "{op}: {field} {got} µs, tshark's times give {expect} ns");
    }
}

/// The CM handshake (ConnectRequest, ConnectReply; communication ids `comm` and
/// `comm + 0x100`) of NVMe/RDMA queue `qid` between `hosts` (host, target; IPv4) on QPs
/// `qps` (the host's, the target's), the host's requests starting at PSN 100, the
/// target's at 200 (each message's starting PSN is the one its sender expects to
/// receive: the REQ's the target's, the REP's the host's).
fn nvme_queue_connected(hosts: [std::net::IpAddr; 2], qid: u16, qps: [u32; 2], comm: u32) -> [Vec<u8>; 2] {
    let ip = |a: std::net::IpAddr| match a {
        std::net::IpAddr::V4(v4) => v4.octets(),
        std::net::IpAddr::V6(_) => panic!("IPv4 hosts"),
    };
    [
        cm_frame(hosts[0], hosts[1], &cm_req(comm, qps[0], 200, [ip(hosts[0]), ip(hosts[1])], Some(qid))),
        cm_frame(hosts[1], hosts[0], &cm_rep(comm + 0x100, comm, qps[1], 100)),
    ]
}

/// Nearest-rank percentile, as HDR reports it (up to its bucket width).
fn pct(v: &[u64], q: f64) -> u64 {
    v[((q * v.len() as f64).ceil() as usize).max(1) - 1]
}

/// Within 3 significant digits (HDR reports a bucket's bounds), or 1 ns.
fn close(us: f64, ns: u64) -> bool {
    (us * 1000.0 - ns as f64).abs() <= (ns as f64 * 1e-3).max(1.0) + 1e-6
}

fn assert_series(name: &str, s: &Value, want: &BTreeMap<Series, Vec<u64>>, ops: &[&str]) {
    let got: BTreeMap<Series, &Value> = s["latency"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| ops.contains(&l["op"].as_str().unwrap()))
        .map(|l| {
            let k = (
                l["initiator_ip"].as_str().unwrap().to_owned(),
                l["target_ip"].as_str().unwrap().to_owned(),
                l["op"].as_str().unwrap().to_owned(),
                l["segment"].as_str().unwrap().to_owned(),
            );
            (k, l)
        })
        .collect();
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{name}: the series");
    for (k, v) in want {
        let g = got[k];
        assert_eq!(g["count"].as_u64().unwrap(), v.len() as u64, "{name} {k:?}: count");
        for (field, expect) in [
            ("min_us", v[0]),
            ("p50_us", pct(v, 0.5)),
            ("p90_us", pct(v, 0.9)),
            ("p99_us", pct(v, 0.99)),
            ("max_us", *v.last().unwrap()),
        ] {
            let us = g[field].as_f64().unwrap();
            assert!(close(us, expect), "{name} {k:?}: {field} {us} µs, truth {expect} ns");
        }
    }
}

const NVME_OPS: [&str; 3] = ["nvme_read", "nvme_write", "nvme_other"];
const ALL: [&str; 5] = ["io@compute", "io@storage", "compute", "network", "storage"];

#[test]
fn every_segment_matches_the_truth_through_vlan_split_files_and_erspan_iii() {
    // The _skewed scenarios: the same traffic over mirror paths of different delay and jitter.
    for name in [
        "nvme_vlan",
        "nvme_split",
        "nvme_erspan3",
        "nvme_split_skewed",
        "nvme_erspan3_skewed",
        "nvme_erspan3_ns",
    ] {
        let t = truth(name);
        let fs = files(name, &t);
        let refs: Vec<&Path> = fs.iter().map(PathBuf::as_path).collect();
        let args: Vec<String> = scenario_args(&t);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let s = replay_summary(&refs, &args);
        assert_series(name, &s, &truth_series(&t, &ALL), &NVME_OPS);
        // I/O counts per (initiator, target, op).
        let mut want: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        for io in t["ios"].as_array().unwrap() {
            let k = (
                io["initiator_ip"].as_str().unwrap().into(),
                io["target_ip"].as_str().unwrap().into(),
                io["op"].as_str().unwrap().into(),
            );
            *want.entry(k).or_insert(0) += 1;
        }
        let got: BTreeMap<(String, String, String), u64> = s["ios"]["by_pair"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let k = (
                    p["initiator_ip"].as_str().unwrap().into(),
                    p["target_ip"].as_str().unwrap().into(),
                    p["op"].as_str().unwrap().into(),
                );
                (k, p["completed"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(got, want, "{name}: completed I/Os per (initiator, target, op)");
        assert_eq!((s["ios"]["completed"].as_u64(), s["ios"]["timed_out"].as_u64()), (Some(120), Some(0)));
        assert_eq!((s["ios"]["retransmitted"].as_u64(), s["ios"]["overflowed"].as_u64()), (Some(0), Some(0)));
    }
}

#[test]
fn one_vantage_reports_only_what_it_can_measure() {
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    // The compute mirror alone: io@compute, and compute (host turnaround, READ service).
    let s = replay_summary(&[&fs[0]], &[]);
    assert_series("compute only", &s, &truth_series(&t, &["io@compute", "compute"]), &NVME_OPS);
    // The storage mirror alone: io@storage and storage.
    let s = replay_summary(&[&fs[1]], &["--vantage", "storage=file:0"]);
    assert_series("storage only", &s, &truth_series(&t, &["io@storage", "storage"]), &NVME_OPS);
    for l in s["latency"].as_array().unwrap() {
        assert!(!["network", "compute", "io@compute"].contains(&l["segment"].as_str().unwrap()), "{l}");
    }
}

#[test]
fn a_network_segment_below_zero_is_recorded_as_zero_and_counted() {
    // The storage mirror's copies of every completion (SEND Only and SEND Only with
    // Invalidate from a target, 10.0.2.x) stamped 6 µs later, as a mirror path that
    // queued them would: each I/O's storage part grows by 6 µs, so every one whose network
    // segment the truth puts under 6 µs (the reads' and in-capsule writes' 4 and 4.668 µs;
    // not the other writes' 8 µs) comes out below zero.
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let below: usize = t["ios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|io| io["network_ns"].as_u64().is_some_and(|n| n < 6_000))
        .count();
    assert_eq!(below, 89);
    let dir = tempfile::tempdir().unwrap();
    let late = dir.path().join("storage.pcap");
    let mut cqes = 0;
    copy_capture(&fs[1], &late, |ts, f| {
        // Ethernet, IPv4 without options, UDP to 4791, then the BTH's opcode.
        let roce = f.len() > 42 && f[23] == 17 && f[36..38] == [0x12, 0xB7];
        let cqe = roce && f[26..29] == [10, 0, 2] && [4, 23].contains(&f[42]);
        cqes += usize::from(cqe);
        Some(if cqe { ts + 6_000 } else { ts })
    });
    assert_eq!(cqes, 120, "one completion an I/O (tshark: 92 SEND Only, 28 with Invalidate)");
    let s = replay_summary(&[&fs[0], &late], &["--vantage", "storage=file:1"]);
    let ios = &s["ios"];
    assert_eq!(ios["completed"].as_u64(), Some(t["ios"].as_array().unwrap().len() as u64));
    assert_eq!(ios["network_below_zero"].as_u64(), Some(below as u64));
    // As given, none.
    let s = replay_summary(&[&fs[0], &fs[1]], &["--vantage", "storage=file:1"]);
    assert_eq!(s["ios"]["network_below_zero"].as_u64(), Some(0));
}

/// (time ns, src, dst, opcode, psn, DMA length) of the RoCE frames of a capture, by tshark.
fn tshark_packets(path: &Path) -> Vec<(u64, String, String, u64, u64, u64)> {
    let out = Command::new("tshark")
        .args(["-r", path.to_str().unwrap(), "-Y", "infiniband", "-T", "fields", "-E", "separator=,"])
        .args(["-e", "frame.time_epoch", "-e", "ip.src", "-e", "ip.dst", "-e", "infiniband.bth.opcode"])
        .args(["-e", "infiniband.bth.psn", "-e", "infiniband.reth.dmalen"])
        .output()
        .expect("tshark");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                epoch_ns(f[0]),
                f[1].into(),
                f[2].into(),
                f[3].parse().unwrap(),
                f[4].parse().unwrap(),
                f[5].parse().unwrap_or(0),
            )
        })
        .collect()
}

/// READ Request → its last READ Response (Last or Only: the first at or after its PSN).
fn read_latencies(pkts: &[(u64, String, String, u64, u64, u64)]) -> Vec<u64> {
    let mut out = Vec::new();
    for (t, src, dst, _, psn, _) in pkts.iter().filter(|p| p.3 == 12) {
        let resp = pkts
            .iter()
            .find(|r| (r.3 == 15 || r.3 == 16) && r.1 == *dst && r.2 == *src && r.4 >= *psn && r.0 >= *t);
        out.push(resp.unwrap().0 - t);
    }
    out.sort();
    out
}

/// A message's last packet (WRITE Last) → the first ACK at or past its PSN.
fn ack_latencies(pkts: &[(u64, String, String, u64, u64, u64)], last_opcode: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for (t, src, dst, _, psn, _) in pkts.iter().filter(|p| p.3 == last_opcode) {
        let ack = pkts.iter().find(|a| a.3 == 17 && a.1 == *dst && a.2 == *src && a.4 >= *psn && a.0 >= *t);
        out.push(ack.unwrap().0 - t);
    }
    out.sort();
    out
}

#[test]
fn rdma_read_and_rc_ack_of_the_real_captures_agree_with_their_timestamps() {
    for (name, op, want) in [
        ("rdma_read_lat.pcap", "rdma_read", read_latencies(&tshark_packets(&capture("rdma_read_lat.pcap")))),
        ("rdma_read_bw.pcap", "rdma_read", read_latencies(&tshark_packets(&capture("rdma_read_bw.pcap")))),
        ("rdma_write_bw.pcap", "rc_ack", ack_latencies(&tshark_packets(&capture("rdma_write_bw.pcap")), 8)),
    ] {
        assert_eq!(want.len(), 5, "{name}: five operations");
        let s = replay_summary(&[&capture(name)], &[]);
        let series: Vec<&Value> = s["latency"].as_array().unwrap().iter().filter(|l| l["op"] == op).collect();
        assert_eq!(series.len(), 1, "{name}: one {op} series");
        let l = series[0];
        assert_eq!(l["segment"], "io@compute");
        assert_eq!(l["count"].as_u64().unwrap(), 5, "{name}");
        for (field, expect) in [("min_us", want[0]), ("p50_us", pct(&want, 0.5)), ("max_us", want[4])] {
            let us = l[field].as_f64().unwrap();
            assert!(close(us, expect), "{name}: {field} {us} µs, from the timestamps {expect} ns");
        }
    }
}

/// The READs of the real captures cut at 60 bytes a frame (`editcap -s 60`): the READ
/// Requests' RETH, with the DMA length, is gone, yet each READ is answered by its last
/// response, with the latency the whole capture's frame times give (tshark).
#[test]
fn reads_whose_reth_was_cut_off_take_the_latency_of_the_whole_capture() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["rdma_read_lat.pcap", "rdma_read_bw.pcap"] {
        let want = read_latencies(&tshark_packets(&capture(name)));
        assert_eq!(want.len(), 5, "{name}: five READs");
        let cut = cut_capture(&capture(name), 60, dir.path());
        let s = replay_summary(&[&cut], &[]);
        let series: Vec<&Value> =
            s["latency"].as_array().unwrap().iter().filter(|l| l["op"] == "rdma_read").collect();
        assert_eq!(series.len(), 1, "{name}: one rdma_read series");
        assert_eq!(series[0]["count"].as_u64().unwrap(), 5, "{name}");
        for (field, expect) in [("min_us", want[0]), ("p50_us", pct(&want, 0.5)), ("max_us", want[4])] {
            let us = series[0][field].as_f64().unwrap();
            assert!(close(us, expect), "{name}: {field} {us} µs, from the timestamps {expect} ns");
        }
    }
}

/// rdma_read_bw's five READs (3,000 bytes each) are all sent before their first response,
/// so each one's span is taken with the path MTU unknown: anything from 1 to 12 PSNs. With
/// one READ's last response removed, that READ has no latency, and no later READ's last
/// response (within its 12 PSNs) answers it: the request after it says where it ends. The
/// truth, from tshark's reading of each edited capture: a READ is answered by a READ
/// Response Last or Only at its PSN + 2 (3,000 bytes at the 1,024-byte MTU its First and
/// Middle responses carry), none other.
#[test]
fn a_read_whose_last_response_was_lost_is_answered_by_no_later_reads() {
    let dir = tempfile::tempdir().unwrap();
    let name = capture("rdma_read_bw.pcap");
    let frames = |path: &Path, filter: &str| -> Vec<(u64, u64)> {
        let out = Command::new("tshark")
            .args(["-r", path.to_str().unwrap(), "-Y", filter, "-T", "fields", "-E", "separator=,"])
            .args(["-e", "frame.number", "-e", "infiniband.bth.psn"])
            .output()
            .expect("tshark");
        let text = String::from_utf8(out.stdout).unwrap();
        text.lines()
            .map(|l| l.split_once(',').map(|(f, p)| (f.parse().unwrap(), p.parse().unwrap())).unwrap())
            .collect()
    };
    let reads = frames(&name, "infiniband.bth.opcode == 12");
    let lasts = frames(&name, "infiniband.bth.opcode == 15");
    assert_eq!(reads.len(), 5, "five READs");
    // The four READs a later READ's response could answer.
    for &(_, psn) in &reads[..4] {
        let &(frame, _) = lasts.iter().find(|l| l.1 == psn + 2).expect("its last response");
        let edited = dir.path().join(format!("without_{frame}.pcap"));
        let ok = Command::new("editcap").arg(&name).arg(&edited).arg(frame.to_string()).status().unwrap();
        assert!(ok.success(), "editcap");
        let pkts = tshark_packets(&edited);
        let mut want: Vec<u64> = pkts
            .iter()
            .filter(|p| p.3 == 12)
            .filter_map(|(t, src, dst, _, psn, _)| {
                let end = pkts
                    .iter()
                    .find(|r| (r.3 == 15 || r.3 == 16) && r.1 == *dst && r.2 == *src && r.4 == psn + 2)?;
                Some(end.0 - t)
            })
            .collect();
        want.sort();
        assert_eq!(want.len(), 4, "frame {frame}: four READs answered");
        let s = replay_summary(&[&edited], &[]);
        let series: Vec<&Value> =
            s["latency"].as_array().unwrap().iter().filter(|l| l["op"] == "rdma_read").collect();
        assert_eq!(series.len(), 1);
        assert_eq!(series[0]["count"].as_u64(), Some(4), "without frame {frame}");
        for (field, expect) in [("min_us", want[0]), ("p50_us", pct(&want, 0.5)), ("max_us", want[3])] {
            let us = series[0][field].as_f64().unwrap();
            assert!(
                close(us, expect),
                "without frame {frame}: {field} {us} µs, from the timestamps {expect} ns"
            );
        }
    }
}

#[test]
fn timed_out_retransmitted_and_overflowed_ios_are_counted_as_the_truth_says() {
    let t = truth("nvme_faults");
    let fs = files("nvme_faults", &t);
    let refs: Vec<&Path> = fs.iter().map(PathBuf::as_path).collect();
    let args: Vec<String> = scenario_args(&t);
    assert!(args.contains(&"--io-timeout".to_owned()) && args.contains(&"--max-ios".to_owned()));
    let want = &t["io_outcomes"];
    // Through replay, which merges the two files by time. (DPDK's net_pcap replays each file
    // at full speed, interleaving the two ports burst by burst, which changes outcomes that
    // depend on the order across vantages; see docs/DEPLOYMENT.md.)
    let s = replay_summary(&refs, &args.iter().map(String::as_str).collect::<Vec<_>>());
    for k in ["completed", "timed_out", "retransmitted", "overflowed"] {
        assert_eq!(s["ios"][k], want[k], "{k}");
    }
    assert_eq!(s["ios"]["unfinished"], 0);
}

#[test]
fn a_capsule_sent_again_after_its_io_finished_changes_no_io() {
    // nvme_split with the first I/O's completion sent again 15 µs after it came and its
    // command 50 µs after it came, at both vantages (the same bytes: the same PSN, as a
    // transport retransmission sends them). By then the I/O had finished (the host's ACK
    // of the completion came 4.4 µs after it, truth's anchors), and the host's NIC drops
    // such copies: no I/O begins or ends with them. Every segment, count and outcome must
    // stay the truth's, where the copies used to complete the next I/O that reused the CID
    // early and to start one that timed out.
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let io = &t["ios"][0];
    assert_eq!((io["cid"].as_u64(), io["op"].as_str()), (Some(0), Some("nvme_read")));
    let anchor = |name: &str| io["anchors"][name].as_u64().unwrap();
    assert!(anchor("ack@compute") < anchor("cqe@compute") + 15_000);
    let dir = tempfile::tempdir().unwrap();
    let mut copies = Vec::new();
    for (v, file) in ["compute", "storage"].iter().zip(&fs) {
        let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
        let mut r = roceprobe::capture::pcap::Replay::open(std::slice::from_ref(file)).unwrap();
        while let roceprobe::capture::Poll::Frames(_) =
            r.poll(|f| frames.push((f.ts_ns, f.data.to_vec()))).unwrap()
        {}
        let mut again = Vec::new();
        for (what, later) in [("cqe", 15_000), ("sqe_first", 50_000)] {
            let at = anchor(&format!("{what}@{v}"));
            let f = frames.iter().find(|f| f.0 == at).unwrap_or_else(|| panic!("{what}@{v} in {file:?}"));
            again.push((at + later, f.1.clone()));
        }
        frames.extend(again);
        frames.sort_by_key(|f| f.0);
        let path = dir.path().join(format!("{v}.pcap"));
        let mut w = roceprobe::capture::pcap::Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
        for (ts, data) in &frames {
            w.write(*ts, data, data.len() as u32).unwrap();
        }
        copies.push(path);
    }
    let refs: Vec<&Path> = copies.iter().map(PathBuf::as_path).collect();
    let args: Vec<String> = scenario_args(&t);
    let s = replay_summary(&refs, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_series("nvme_split resent", &s, &truth_series(&t, &ALL), &NVME_OPS);
    let ios = &s["ios"];
    assert_eq!((ios["completed"].as_u64(), ios["timed_out"].as_u64()), (Some(120), Some(0)));
    assert_eq!((ios["retransmitted"].as_u64(), ios["unfinished"].as_u64()), (Some(0), Some(0)));
}

#[test]
fn a_command_first_seen_behind_its_flows_psn_is_taken() {
    // The storage mirror alone, with one command moved after the next request of its flow
    // (as when the command was lost before this mirror and resent after a later packet
    // passed): its PSN is behind the flow's expected one, but no I/O had it, so it begins
    // its I/O as usual. Every I/O completes, as the truth says.
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let storage = &fs[1];
    // (src, dst, destination QP, opcode) of every frame, by tshark, in file order.
    let rows =
        tshark_fields(storage, &["ip.src", "ip.dst", "infiniband.bth.destqp", "infiniband.bth.opcode"]);
    let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut r = roceprobe::capture::pcap::Replay::open(std::slice::from_ref(storage)).unwrap();
    while let roceprobe::capture::Poll::Frames(_) =
        r.poll(|f| frames.push((f.ts_ns, f.data.to_vec()))).unwrap()
    {}
    assert_eq!(rows.len(), frames.len());
    // A request: an RC opcode below READ Response First (0x0D).
    let request = |k: usize| rows[k][3].parse::<u64>().is_ok_and(|o| o < 0x0D);
    // The first I/O whose command at storage comes after a request of its flow and before
    // another (so that moving it leaves a gap of one PSN, then fills it).
    let (sqe, next) = t["ios"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|io| {
            let at = io["anchors"]["sqe_first@storage"].as_u64()?;
            let k = frames.iter().position(|f| f.0 == at)?;
            let same = |j: usize| rows[j][..3] == rows[k][..3] && request(j);
            (0..k).any(same).then_some(())?;
            Some((k, (k + 1..frames.len()).find(|&j| same(j))?))
        })
        .next()
        .expect("a command followed by a request of its flow");
    let moved = (frames[next].0 + 1, frames[sqe].1.clone());
    frames.remove(sqe);
    frames.insert(next, moved);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("storage.pcap");
    let mut w = roceprobe::capture::pcap::Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    for (ts, data) in &frames {
        w.write(*ts, data, data.len() as u32).unwrap();
    }
    drop(w);
    let s = replay_summary(&[&path], &["--vantage", "storage=file:0"]);
    let want = t["ios"].as_array().unwrap().len() as u64;
    let ios = &s["ios"];
    assert_eq!((ios["completed"].as_u64(), ios["timed_out"].as_u64()), (Some(want), Some(0)));
    assert_eq!(ios["unfinished"].as_u64(), Some(0));
    // The flow's PSN analysis saw the command behind: one retransmitted packet, one gap.
    let flows = s["flows"].as_array().unwrap();
    let sum = |k: &str| flows.iter().map(|f| f[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!((sum("retx_packets"), sum("gap_psns")), (1, 1));
}

/// Eight I/O queues (QP pairs) between one host and one target, each with a read of CID 7
/// outstanding at once, as a Linux host numbers every queue's commands from its tags (each
/// queue's PSNs its own): each target ACKs its command (which pairs the queue's two
/// directions), then the completions
/// come in the reverse order, each ACKed by the host. Every I/O completes (none times out),
/// and each queue's completion counts once on its own flow. The probe followed four I/Os
/// with one CID at once, and counted one completion for all eight queues.
#[test]
fn every_io_queue_may_use_a_cid_at_once() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders};
    use roceprobe::wire::nvme::{opcode, Sgl, Sqe, FLAGS_SGL, SQE_LEN};
    use std::net::IpAddr;
    const QUEUES: u32 = 8;
    let (host, target): (IpAddr, IpAddr) = ("10.7.0.1".parse().unwrap(), "10.7.0.2".parse().unwrap());
    let frame = roce;
    let ack = || ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() };
    let (host_qp, target_qp) = (|q: u32| 0x100 + q, |q: u32| 0x200 + q);
    let mut frames = Vec::new();
    for q in 0..QUEUES {
        let sqe = Sqe {
            opcode: opcode::READ,
            flags: FLAGS_SGL,
            cid: 7,
            nsid: 1,
            sgl: Sgl::Keyed {
                address: 0x10_0000 * u64::from(q + 1),
                length: 4096,
                key: 0x40 + q,
                invalidate: false,
            },
            slba: u64::from(q),
            nlb: 7,
        };
        let mut capsule = [0u8; SQE_LEN];
        sqe.emit(&mut capsule);
        let psn = 1000 + 100 * q;
        frames.push(frame(host, target, op::SEND_ONLY, target_qp(q), psn, ExtHeaders::default(), &capsule));
        frames.push(frame(target, host, op::ACKNOWLEDGE, host_qp(q), psn, ack(), &[]));
    }
    for q in (0..QUEUES).rev() {
        let capsule = completion_capsule(7, 1, q as u16 + 1);
        let psn = 5000 + 100 * q;
        frames.push(frame(target, host, op::SEND_ONLY, host_qp(q), psn, ExtHeaders::default(), &capsule));
        frames.push(frame(host, target, op::ACKNOWLEDGE, target_qp(q), psn, ack(), &[]));
    }
    let dir = tempfile::tempdir().unwrap();
    let timed = spaced(frames, 1_000);
    let pcap = write_pcap(dir.path(), "queues.pcap", &timed);
    let s = replay_summary(&[pcap.as_path()], &[]);
    let ios = &s["ios"];
    assert_eq!((ios["completed"].as_u64(), ios["timed_out"].as_u64()), (Some(8), Some(0)), "{ios}");
    let flows = s["flows"].as_array().unwrap();
    for q in 0..QUEUES {
        let on = |src: IpAddr, qpn: u32| {
            flows
                .iter()
                .find(|f| f["src_ip"] == src.to_string() && f["dst_qpn"] == qpn)
                .unwrap_or_else(|| panic!("the flow to QP {qpn:#x}"))
        };
        assert_eq!(on(host, target_qp(q))["nvme_commands"], 1, "queue {q}");
        assert_eq!(on(target, host_qp(q))["nvme_completions"], 1, "queue {q}");
    }
}

#[test]
fn a_reads_last_response_is_one_of_its_own_psns() {
    // With room for eight I/Os, most of nvme_vlan's commands are not followed; the READs of
    // their writes still come, on the queues of writes that are. A last READ Response
    // answers the READ whose PSNs it is in, never the one before it: every I/O that
    // completes has the segments the truth gives it.
    let t = truth("nvme_vlan");
    let fs = files("nvme_vlan", &t);
    let refs: Vec<&Path> = fs.iter().map(PathBuf::as_path).collect();
    let mut args: Vec<String> = scenario_args(&t);
    args.extend(["--max-ios", "8", "--slow-ios", "200"].map(String::from));
    let s = replay_summary(&refs, &args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(s["ios"]["overflowed"].as_u64().unwrap() > 100, "most commands not followed");
    let slowest = s["ios"]["slowest"].as_array().unwrap();
    assert_eq!(slowest.len() as u64, s["ios"]["completed"].as_u64().unwrap());
    let mut split_writes = 0;
    for e in slowest {
        let candidates: Vec<&Value> = t["ios"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|io| {
                io["initiator_ip"] == e["initiator_ip"]
                    && io["target_ip"] == e["target_ip"]
                    && io["target_qpn"] == e["qpn"]
                    && io["cid"] == e["cid"]
                    && io["op"] == e["op"]
            })
            .collect();
        // A command whose copy at one vantage found no room has only the other's segments.
        let measured: Vec<(&str, f64)> = ["compute", "network", "storage"]
            .into_iter()
            .filter_map(|seg| e[format!("{seg}_us")].as_f64().map(|us| (seg, us)))
            .collect();
        if e["op"] == "nvme_write" && measured.len() == 3 {
            split_writes += 1;
        }
        let matches = |io: &&Value| {
            measured
                .iter()
                .all(|&(seg, us)| (us * 1000.0 - io[format!("{seg}_ns")].as_f64().unwrap()).abs() <= 1.0)
        };
        assert!(candidates.iter().any(matches), "{e}: no I/O of the truth has these segments");
    }
    assert!(split_writes >= 10, "only {split_writes} writes split into their three segments");
}

/// The time of a truth I/O's anchor `a` (`sqe_first@compute`, `cqe@storage`, ...).
fn at(io: &Value, a: &str) -> u64 {
    io["anchors"][a].as_u64().unwrap()
}

/// Every truth I/O whose CID its host uses again next on its queue, with that next I/O
/// (the first whose command the compute vantage saw after the I/O's completion).
fn cids_used_again(ios: &[Value]) -> impl Iterator<Item = (&Value, &Value)> {
    let same = |io: &Value, other: &Value| {
        ["initiator_ip", "target_ip", "target_qpn", "cid"].iter().all(|k| io[k] == other[k])
    };
    ios.iter().filter_map(move |io| {
        let next = ios
            .iter()
            .filter(|o| same(o, io) && at(o, "sqe_first@compute") > at(io, "cqe@compute"))
            .min_by_key(|o| at(o, "sqe_first@compute"))?;
        Some((io, next))
    })
}

/// The first of [`cids_used_again`].
fn cid_used_again(ios: &[Value]) -> (&Value, &Value) {
    cids_used_again(ios).next().unwrap()
}

/// The entry of `slowest` (a summary's `ios.slowest`) for truth I/O `io`: its host, CID and
/// compute-vantage time.
fn slow_io<'a>(slowest: &'a [Value], io: &Value) -> &'a Value {
    slowest
        .iter()
        .find(|e| {
            e["initiator_ip"] == io["initiator_ip"]
                && e["cid"] == io["cid"]
                && close(e["io@compute_us"].as_f64().unwrap(), io["io_compute_ns"].as_u64().unwrap())
        })
        .unwrap_or_else(|| panic!("{io}"))
}

/// `from` (a capture) written to `to` without the frames at the times `gone` (one each).
fn without_frames_at(from: &Path, to: &Path, gone: &[u64]) {
    let (written, read) = copy_capture(from, to, |ts, _| (!gone.contains(&ts)).then_some(ts));
    assert_eq!(read - written, gone.len(), "{}: a frame at each of {gone:?}", from.display());
}

/// An entry of the summary's slowest I/Os without a storage segment, nor a network one.
fn no_storage_segments(e: &Value) -> bool {
    e["io@storage_us"].is_null() && e["network_us"].is_null() && e["storage_us"].is_null()
}

#[test]
fn a_completion_one_mirror_missed_ends_its_io_when_that_mirror_sees_the_cid_again() {
    // nvme_split without the storage mirror's copy of one completion whose CID the host
    // uses again next (the compute mirror sees both). The storage vantage sees the next
    // command with that CID after the compute vantage made its I/O: the earlier I/O ends
    // there with no storage segment, and the next completion at the storage vantage is the
    // next I/O's (its segments the truth's), not taken for the earlier one's.
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let ios = t["ios"].as_array().unwrap();
    let (lost, next) = cid_used_again(ios);
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage.pcap");
    without_frames_at(&fs[1], &storage, &[at(lost, "cqe@storage")]);
    let args: Vec<String> = scenario_args(&t);
    let mut extra: Vec<&str> = args.iter().map(String::as_str).collect();
    extra.extend(["--slow-ios", "1000"]);
    let s = replay_summary(&[&fs[0], &storage], &extra);
    assert_eq!(s["ios"]["completed"].as_u64(), Some(ios.len() as u64));
    let slowest = s["ios"]["slowest"].as_array().unwrap();
    let find = |io: &Value| slow_io(slowest, io);
    let e = find(lost);
    assert!(no_storage_segments(e), "{e}");
    let e = find(next);
    for (ours, truth) in
        [("io@storage_us", "io_storage_ns"), ("network_us", "network_ns"), ("storage_us", "storage_ns")]
    {
        assert!(close(e[ours].as_f64().unwrap(), next[truth].as_u64().unwrap()), "{ours}: {e} {next}");
    }
}

#[test]
fn a_completion_seen_before_its_cids_reuse_is_the_older_ios_with_the_storage_clock_behind() {
    // nvme_split with the storage mirror's clock behind the compute mirror's, without the
    // compute mirror's copy of one I/O's command and the storage mirror's copy of its
    // completion: of the I/Os whose CID the host uses again, the one used again soonest,
    // the storage clock behind by 1 µs more than the time from the completion at compute
    // to the next command at storage. The storage vantage then sees the CID used again
    // before the compute vantage sees the completion, while the next command's copy at
    // compute is still to come. The completion is the earlier I/O's, which completes with
    // no segment from command to completion (each vantage lost one end), and the next I/O
    // has every segment the truth gives it. Before (a review's 10 µs on CID 3 of queue
    // 512): the earlier I/O timed out and the next took the completion, its compute time
    // 0 (its command came at compute after that completion).
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let ios = t["ios"].as_array().unwrap();
    let (lost, next) = cids_used_again(ios)
        .min_by_key(|(io, next)| at(next, "sqe_first@storage") - at(io, "cqe@compute"))
        .unwrap();
    let behind = at(next, "sqe_first@storage") - at(lost, "cqe@compute") + 1_000;
    assert!(behind < 100_000, "{behind} ns: well inside the reorder window");
    let dir = tempfile::tempdir().unwrap();
    let (compute, storage) = (dir.path().join("compute.pcap"), dir.path().join("storage.pcap"));
    without_frames_at(&fs[0], &compute, &[at(lost, "sqe_first@compute")]);
    let gone = at(lost, "cqe@storage");
    let (written, read) = copy_capture(&fs[1], &storage, |ts, _| (ts != gone).then(|| ts - behind));
    assert_eq!(read - written, 1);
    let args: Vec<String> = scenario_args(&t);
    for workers in ["1", "4"] {
        let mut extra: Vec<&str> = args.iter().map(String::as_str).collect();
        extra.extend(["--slow-ios", "1000", "--workers", workers]);
        let s = replay_summary(&[&compute, &storage], &extra);
        assert_eq!(
            (s["ios"]["completed"].as_u64(), s["ios"]["timed_out"].as_u64()),
            (Some(ios.len() as u64), Some(0)),
            "{workers} workers"
        );
        let slowest = s["ios"]["slowest"].as_array().unwrap();
        let e = slow_io(slowest, next);
        for (ours, truth) in [
            ("io@compute_us", "io_compute_ns"),
            ("io@storage_us", "io_storage_ns"),
            ("compute_us", "compute_ns"),
            ("network_us", "network_ns"),
            ("storage_us", "storage_ns"),
        ] {
            assert!(close(e[ours].as_f64().unwrap(), next[truth].as_u64().unwrap()), "{ours}: {e} {next}");
        }
        // The earlier I/O gives neither end-to-end time; no I/O has a compute time of 0.
        assert_eq!(slowest.len(), ios.len() - 1, "{workers} workers");
        assert!(slowest.iter().all(|e| e["io@compute_us"].as_f64() != Some(0.0)), "{workers} workers");
    }
}

#[test]
fn a_later_ios_completion_is_not_taken_for_an_earlier_one_that_lost_its_own_everywhere() {
    // nvme_split, one I/O whose CID the host uses again next on its queue (the last such in
    // the run: its host pair has I/Os seen whole at both vantages before it), its
    // completion lost at both mirrors, and the next I/O's command lost at the storage
    // mirror; also, in a second run, the storage mirror loses the earlier I/O's command
    // too (four copies lost in all, a review's case). The compute vantage saw the CID used
    // again before the next completion came: that completion is the next I/O's, which gets
    // the truth's compute-vantage segments, and the earlier I/O gets none. Before: the
    // earlier I/O took it (an I/O time at compute from one I/O's command to the next's
    // completion), and in the second run the next I/O was left unfinished.
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let ios = t["ios"].as_array().unwrap();
    let (lost, next) = cids_used_again(ios).max_by_key(|(io, _)| at(io, "sqe_first@compute")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let compute = dir.path().join("compute.pcap");
    without_frames_at(&fs[0], &compute, &[at(lost, "cqe@compute")]);
    let args: Vec<String> = scenario_args(&t);
    for also_command in [false, true] {
        let storage = dir.path().join("storage.pcap");
        let mut gone = vec![at(lost, "cqe@storage"), at(next, "sqe_first@storage")];
        if also_command {
            gone.push(at(lost, "sqe_first@storage"));
        }
        without_frames_at(&fs[1], &storage, &gone);
        for workers in ["1", "4"] {
            let mut extra: Vec<&str> = args.iter().map(String::as_str).collect();
            extra.extend(["--slow-ios", "1000", "--workers", workers]);
            let s = replay_summary(&[&compute, &storage], &extra);
            let why = format!("{workers} workers, the earlier command lost at storage: {also_command}");
            // The earlier I/O ends without a completion: timed out, or still awaiting the
            // lost one when the capture ends.
            let n = |k: &str| s["ios"][k].as_u64().unwrap();
            assert_eq!(
                (n("completed"), n("timed_out") + n("unfinished")),
                (ios.len() as u64 - 1, 1),
                "{why}"
            );
            let slowest = s["ios"]["slowest"].as_array().unwrap();
            let e = slow_io(slowest, next);
            for (ours, truth) in [("io@compute_us", "io_compute_ns"), ("compute_us", "compute_ns")] {
                assert!(
                    close(e[ours].as_f64().unwrap(), next[truth].as_u64().unwrap()),
                    "{ours}: {e} {next} {why}"
                );
            }
            let taken = at(next, "cqe@compute") - at(lost, "sqe_first@compute");
            assert!(
                slowest.iter().all(|e| !close(e["io@compute_us"].as_f64().unwrap_or(0.0), taken)),
                "an I/O from the earlier command to the next completion: {why}"
            );
        }
    }
}

#[test]
fn a_completion_one_mirror_missed_is_no_later_ios_when_that_mirror_missed_the_cids_reuse_too() {
    // As above, and the storage mirror missed the next command with that CID as well (the
    // compute mirror sees both): nothing at the storage vantage says the CID was used
    // again. The next completion it sees with that CID is the next I/O's, a later PSN than
    // the completion the compute vantage saw for the earlier I/O (a mirror's two copies of
    // a packet carry one PSN): the earlier I/O ends without its storage segments, as
    // above. Before, it took that completion: its storage segment ran to the next I/O's
    // completion (225.7 µs where the truth's longest is 76.2 on nvme_vlan, found by a
    // review), with a network segment below zero.
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let ios = t["ios"].as_array().unwrap();
    let (lost, next) = cid_used_again(ios);
    let gone = [at(lost, "cqe@storage"), at(next, "sqe_first@storage")];
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage.pcap");
    without_frames_at(&fs[1], &storage, &gone);
    let args: Vec<String> = scenario_args(&t);
    for workers in ["1", "4"] {
        let mut extra: Vec<&str> = args.iter().map(String::as_str).collect();
        extra.extend(["--slow-ios", "1000", "--workers", workers]);
        let s = replay_summary(&[&fs[0], &storage], &extra);
        assert_eq!(s["ios"]["completed"].as_u64(), Some(ios.len() as u64));
        assert_eq!(s["ios"]["network_below_zero"].as_u64(), Some(0), "{workers} workers");
        let slowest = s["ios"]["slowest"].as_array().unwrap();
        let find = |io: &Value| slow_io(slowest, io);
        // Neither has a storage segment: the earlier lost its completion there, the next
        // its command.
        for io in [lost, next] {
            let e = find(io);
            assert!(no_storage_segments(e), "{e}");
        }
        // No storage segment longer than the truth's longest.
        let longest = ios.iter().map(|io| io["io_storage_ns"].as_u64().unwrap()).max().unwrap();
        for e in slowest {
            if let Some(us) = e["io@storage_us"].as_f64() {
                assert!(us * 1_000.0 <= longest as f64 + 1.0, "{e}");
            }
        }
    }
}

#[test]
fn a_write_whose_command_one_mirror_lost_keeps_that_mirrors_data_segment_whatever_its_clock() {
    // nvme_split without the compute mirror's copy of a write's command (single-packet
    // ones whose data the target READs, the first five), the storage mirror's times moved
    // later so that its copy of the command comes 1 µs after the compute copy of the
    // READ Request (within the default 1 ms wait for a second vantage): the compute
    // vantage sees the data phase before any copy of the command. Its compute segment
    // (the READ Request to its last response, at the compute vantage) is still the
    // truth's, as it is with the mirrors' times as captured. Before, that READ Request
    // found no I/O and the segment was lost (found by a review; 15 µs of offset sufficed).
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let ios = t["ios"].as_array().unwrap();
    let writes = ios.iter().filter(|io| {
        io["op"] == "nvme_write"
            && io["anchors"].get("read_request@compute").is_some()
            && at(io, "sqe_first@compute") == at(io, "sqe_last@compute")
    });
    let args: Vec<String> = scenario_args(&t);
    let dir = tempfile::tempdir().unwrap();
    let mut cases = 0;
    // The first write again with its compute READ Request sent twice (1 µs apart): it is
    // counted retransmitted, as a data phase sent again after its command is.
    let first = writes.clone().next().unwrap();
    for (io, resent) in writes.take(5).map(|io| (io, false)).chain([(first, true)]) {
        let shift = at(io, "read_request@compute") - at(io, "sqe_first@storage") + 1_000;
        assert!(at(io, "sqe_first@storage") + shift < at(io, "last_read_response@compute"));
        let (compute, storage) = (dir.path().join("compute.pcap"), dir.path().join("storage.pcap"));
        let mut records = roceprobe::capture::pcap::read_all_records(&fs[0]).unwrap();
        let n = records.len();
        records.retain(|r| r.0 != at(io, "sqe_first@compute"));
        assert_eq!(records.len(), n - 1);
        if resent {
            let read = records.iter().find(|r| r.0 == at(io, "read_request@compute")).unwrap().clone();
            records.push((read.0 + 1_000, read.1, read.2));
            records.sort_by_key(|r| r.0);
        }
        write_records(&compute, &records);
        copy_capture(&fs[1], &storage, |ts, _| Some(ts + shift));
        let mut extra: Vec<&str> = args.iter().map(String::as_str).collect();
        extra.extend(["--slow-ios", "1000"]);
        let sum = replay_summary(&[&compute, &storage], &extra);
        assert_eq!(sum["ios"]["completed"].as_u64(), Some(ios.len() as u64));
        let e = sum["ios"]["slowest"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| {
                e["initiator_ip"] == io["initiator_ip"]
                    && e["cid"] == io["cid"]
                    && e["qpn"] == io["target_qpn"]
                    && e["io@storage_us"]
                        .as_f64()
                        .is_some_and(|us| close(us, io["io_storage_ns"].as_u64().unwrap()))
            })
            .unwrap_or_else(|| panic!("{io}"));
        let compute_ns = io["compute_ns"].as_u64().unwrap();
        assert_eq!(compute_ns, at(io, "last_read_response@compute") - at(io, "read_request@compute"));
        assert!(e["compute_us"].as_f64().is_some_and(|us| close(us, compute_ns)), "{e} {io}");
        assert!(e["io@compute_us"].is_null(), "{e}");
        assert_eq!(sum["ios"]["retransmitted"], u64::from(resent), "{io}");
        cases += 1;
    }
    assert_eq!(cases, 6);
}

/// Where a frame's BTH begins (Ethernet, at most one 802.1Q tag, IPv4 without options,
/// UDP), read by hand.
fn bth_at(f: &[u8]) -> usize {
    let l3 = if f[12..14] == [0x81, 0x00] { 18 } else { 14 };
    assert_eq!((f[l3] & 0xF0, f[l3 + 9]), (0x40, 17), "IPv4, UDP");
    l3 + usize::from(f[l3] & 0x0F) * 4 + 8
}

#[test]
fn a_data_phase_of_an_io_both_mirrors_missed_is_not_the_next_ios_on_its_buffer() {
    // nvme_split with one write's command (A) removed from both mirrors' captures, and the
    // next write on its queue (B, its command after A's completion) made to name A's buffer
    // (its SGL and its READ Request's RETH rewritten to A's R_Key and address, by hand at
    // their offsets), as a host reusing the buffer does. A's READ Request at each vantage
    // found no I/O; B's command, within the wait for a second vantage, must not take it:
    // each vantage sees B's own command and READ Request. B's segments are the truth's and
    // it is not retransmitted. (Found by a review of the mend above: storage 50.1 µs and
    // network 22.4 where the truth has 64.5 and 8.0, and B counted as retransmitted.)
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let ios = t["ios"].as_array().unwrap();
    let writes: Vec<&Value> = ios
        .iter()
        .filter(|io| {
            io["op"] == "nvme_write"
                && io["anchors"].get("read_request@compute").is_some()
                && at(io, "sqe_first@compute") == at(io, "sqe_last@compute")
        })
        .collect();
    let same_queue =
        |a: &Value, b: &Value| a["initiator_ip"] == b["initiator_ip"] && a["target_qpn"] == b["target_qpn"];
    // A's READ Request after two completions on its queue at both vantages (its flow, the
    // target's to the host, has found its NVMe connection by then).
    let after_a_completion = |a: &Value| {
        let before = ios.iter().filter(|c| {
            same_queue(a, c)
                && ["compute", "storage"]
                    .iter()
                    .all(|v| at(c, &format!("cqe@{v}")) < at(a, &format!("read_request@{v}")))
        });
        before.count() >= 2
    };
    let (a, b) = writes
        .iter()
        .flat_map(|&a| writes.iter().map(move |&b| (a, b)))
        .find(|(a, b)| {
            same_queue(a, b)
                && after_a_completion(a)
                && at(b, "sqe_first@compute") > at(a, "cqe@compute")
                && at(b, "sqe_first@compute") < at(a, "read_request@storage") + 1_000_000
        })
        .expect("two writes on one queue");
    let records: Vec<_> = fs.iter().map(|f| roceprobe::capture::pcap::read_all_records(f).unwrap()).collect();
    // A's buffer, from its command at the compute vantage (the SQE's keyed SGL: address
    // at bytes 24-31, key at 35-38, little-endian).
    let sqe_of = |f: &[u8]| bth_at(f) + 12;
    let a_cmd = &records[0].iter().find(|r| r.0 == at(a, "sqe_first@compute")).unwrap().2;
    let s = sqe_of(a_cmd);
    let (va, key) = (&a_cmd[s + 24..s + 32], &a_cmd[s + 35..s + 39]);
    let (va, key) = (u64::from_le_bytes(va.try_into().unwrap()), u32::from_le_bytes(key.try_into().unwrap()));
    let dir = tempfile::tempdir().unwrap();
    let mut edited = Vec::new();
    for (k, vantage) in ["compute", "storage"].iter().enumerate() {
        let path = dir.path().join(format!("{vantage}.pcap"));
        let mut w = roceprobe::capture::pcap::Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
        let (a_sqe, b_sqe, b_read) = (
            at(a, &format!("sqe_first@{vantage}")),
            at(b, &format!("sqe_first@{vantage}")),
            at(b, &format!("read_request@{vantage}")),
        );
        let mut changed = 0;
        for (ts, len, f) in &records[k] {
            let mut f = f.clone();
            let op = f[bth_at(&f)];
            if *ts == a_sqe && op == 0x04 {
                changed += 1;
                continue;
            }
            if *ts == b_sqe && op == 0x04 {
                let s = sqe_of(&f);
                f[s + 24..s + 32].copy_from_slice(&va.to_le_bytes());
                f[s + 35..s + 39].copy_from_slice(&key.to_le_bytes());
                changed += 1;
            }
            if *ts == b_read && op == 0x0C {
                // The RETH after the BTH: address, R_Key (big-endian).
                let r = bth_at(&f) + 12;
                f[r..r + 8].copy_from_slice(&va.to_be_bytes());
                f[r + 8..r + 12].copy_from_slice(&key.to_be_bytes());
                changed += 1;
            }
            w.write(*ts, &f, *len).unwrap();
        }
        assert_eq!(changed, 3, "{vantage}");
        drop(w);
        edited.push(path);
    }
    let args: Vec<String> = scenario_args(&t);
    for workers in ["1", "4"] {
        let mut extra: Vec<&str> = args.iter().map(String::as_str).collect();
        extra.extend(["--slow-ios", "1000", "--workers", workers]);
        let sum = replay_summary(&[&edited[0], &edited[1]], &extra);
        assert_eq!(sum["ios"]["retransmitted"], 0, "{workers} workers");
        let e = slow_io(sum["ios"]["slowest"].as_array().unwrap(), b);
        for (ours, truth) in [
            ("io@storage_us", "io_storage_ns"),
            ("compute_us", "compute_ns"),
            ("network_us", "network_ns"),
            ("storage_us", "storage_ns"),
        ] {
            assert!(
                close(e[ours].as_f64().unwrap(), b[truth].as_u64().unwrap()),
                "{workers} workers, {ours}: {e} {b}"
            );
        }
    }
}

#[test]
fn an_io_whose_command_and_completion_only_different_mirrors_kept_completes() {
    // nvme_split without the compute mirror's copy of each single-packet command and the
    // storage mirror's copy of that I/O's completion, one I/O at a time (the first ten
    // such I/Os): the storage vantage saw the command, the compute vantage the completion,
    // so the I/O completed (the truth's 120), though no segment can be measured. Before,
    // the compute vantage's completion went to no I/O (none had its command there) and
    // the I/O counted as timed out or unfinished (found by a review's drop sweep).
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let ios = t["ios"].as_array().unwrap();
    let single = ios.iter().filter(|io| at(io, "sqe_first@compute") == at(io, "sqe_last@compute"));
    let args: Vec<String> = scenario_args(&t);
    let dir = tempfile::tempdir().unwrap();
    let mut cases = 0;
    for io in single.take(10) {
        let (compute, storage) = (dir.path().join("compute.pcap"), dir.path().join("storage.pcap"));
        without_frames_at(&fs[0], &compute, &[at(io, "sqe_first@compute")]);
        without_frames_at(&fs[1], &storage, &[at(io, "cqe@storage")]);
        let mut extra: Vec<&str> = args.iter().map(String::as_str).collect();
        extra.extend(["--slow-ios", "1000"]);
        let sum = replay_summary(&[&compute, &storage], &extra);
        let i = &sum["ios"];
        let counts = (&i["completed"], &i["timed_out"], &i["unfinished"], &i["network_below_zero"]);
        assert_eq!(counts, (&ios.len().into(), &0.into(), &0.into(), &0.into()), "{io}");
        cases += 1;
    }
    assert_eq!(cases, 10);
}

#[test]
fn a_vantage_whose_copies_come_later_than_the_window_counts_each_io_once() {
    // nvme_split with the storage mirror's times 2 ms later than the compute mirror's, more
    // than the reorder window (1 ms): every storage copy comes after its I/O has ended at
    // the compute vantage. Each I/O is counted once (the truth's 120, their bytes), with
    // the compute vantage's segments, and every storage capsule (a command and a
    // completion an I/O) is counted as having come after its I/O's end. So too with
    // `--max-ios` at the truth's count: the probe remembers the capsules of as many
    // finished I/Os, and the first storage copy comes after the 120th I/O ended (a table
    // of twice as many places, direct-mapped, forgot some: 141 I/Os, 4 timed out).
    let t = truth("nvme_split");
    let fs = files("nvme_split", &t);
    let dir = tempfile::tempdir().unwrap();
    let storage = dir.path().join("storage.pcap");
    copy_capture(&fs[1], &storage, |ts, _| Some(ts + 2_000_000));
    let ios = t["ios"].as_array().unwrap();
    let bytes: u64 = ios.iter().map(|io| io["bytes"].as_u64().unwrap()).sum();
    let bound = ios.len().to_string();
    for max_ios in [None, Some(bound.as_str())] {
        let mut args: Vec<String> = scenario_args(&t);
        args.extend(max_ios.map(|m| ["--max-ios".to_owned(), m.to_owned()]).into_iter().flatten());
        let extra: Vec<&str> = args.iter().map(String::as_str).collect();
        let s = replay_summary(&[&fs[0], &storage], &extra);
        assert_eq!(
            (s["ios"]["completed"].as_u64(), s["ios"]["bytes"].as_u64(), s["ios"]["timed_out"].as_u64()),
            (Some(ios.len() as u64), Some(bytes), Some(0)),
            "--max-ios {max_ios:?}"
        );
        assert_eq!(s["ios"]["overflowed"], 0, "--max-ios {max_ios:?}");
        assert_eq!(
            s["reorder"]["io_copies_after_end"],
            serde_json::json!({"compute": 0, "storage": 2 * ios.len()}),
            "--max-ios {max_ios:?}"
        );
        assert_eq!(s["reorder"]["late_packets"], serde_json::json!({"compute": 0, "storage": 0}));
        let o = Command::new(bin()).args(["replay"]).args(&extra).arg(&fs[0]).arg(&storage).output().unwrap();
        let report = String::from_utf8_lossy(&o.stdout);
        assert!(
            report.contains(&format!(
                "NVMe capsules after their I/O had ended at the other vantage: 0 compute, {} storage",
                2 * ios.len()
            )),
            "{report}"
        );
    }
}

/// A WRITE, then a READ on the same QP, answered by a READ Response Only (its AETH an ACK),
/// an idle 100 ms, then a SEND and its ACK (the same for an ATOMIC Acknowledge in place of
/// the READ Response). The READ's response acknowledges the WRITE before it (the responder
/// executes requests in PSN order): the WRITE's rc_ack ends there, 10 µs, not at the SEND's
/// ACK 100 ms later, which took it as its first ACK covering the WRITE's PSN. The times,
/// opcodes and AETH syndromes are tshark's.
#[test]
fn a_read_response_or_atomic_acknowledge_acknowledges_the_messages_before_it() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, AtomicEth, ExtHeaders, Reth};
    use std::net::IpAddr;
    let (a, b): (IpAddr, IpAddr) = ("10.8.0.1".parse().unwrap(), "10.8.0.2".parse().unwrap());
    let frame = roce;
    let ack = || ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() };
    let (us, ms) = (1_000u64, 1_000_000u64);
    for atomic in [false, true] {
        let (second, answer) = if atomic {
            let eth = AtomicEth { va: 0x1000, rkey: 7, swap_add: 1, compare: 0 };
            let fetch = ExtHeaders { atomic: Some(eth), ..Default::default() };
            let ack_eth =
                ExtHeaders { aeth: Some(Aeth::ack(31, 2)), atomic_ack: Some(0), ..Default::default() };
            (
                frame(a, b, op::FETCH_ADD, 0x20, 31, fetch, &[]),
                frame(b, a, op::ATOMIC_ACKNOWLEDGE, 0x10, 31, ack_eth, &[]),
            )
        } else {
            let read =
                ExtHeaders { reth: Some(Reth { va: 0x1000, rkey: 7, dma_len: 64 }), ..Default::default() };
            (
                frame(a, b, op::READ_REQUEST, 0x20, 31, read, &[]),
                frame(b, a, op::READ_RESPONSE_ONLY, 0x10, 31, ack(), &[0u8; 64]),
            )
        };
        let frames = [
            (
                0,
                frame(
                    a,
                    b,
                    op::WRITE_ONLY,
                    0x20,
                    30,
                    ExtHeaders {
                        reth: Some(Reth { va: 0x2000, rkey: 7, dma_len: 64 }),
                        ..Default::default()
                    },
                    &[0u8; 64],
                ),
            ),
            (us, second),
            (10 * us, answer),
            (100 * ms, frame(a, b, op::SEND_ONLY, 0x20, 32, ExtHeaders::default(), &[0u8; 64])),
            (100 * ms + 5 * us, frame(b, a, op::ACKNOWLEDGE, 0x10, 32, ack(), &[])),
        ];
        let dir = tempfile::tempdir().unwrap();
        let pcap = write_pcap(dir.path(), "implied.pcap", &frames);
        // tshark's reading: (time, opcode, PSN, AETH syndrome) of each frame.
        let out = Command::new("tshark")
            .args(["-r", pcap.to_str().unwrap(), "-T", "fields", "-E", "separator=,"])
            .args(["-e", "frame.time_epoch", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn"])
            .args(["-e", "infiniband.aeth.syndrome"])
            .output()
            .expect("tshark");
        let rows: Vec<(u64, u64, u64, Option<u64>)> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                (epoch_ns(f[0]), f[1].parse().unwrap(), f[2].parse().unwrap(), f[3].parse().ok())
            })
            .collect();
        // Message ends (WRITE Only 10, SEND Only 4) → the first response at or past their
        // PSN whose AETH says ACK (syndrome below 0x20): an ACKNOWLEDGE (17), a READ
        // Response First, Last or Only (13, 15, 16) or an ATOMIC Acknowledge (18).
        let mut want: Vec<u64> = rows
            .iter()
            .filter(|r| r.1 == 10 || r.1 == 4)
            .map(|m| {
                let answer = rows.iter().find(|r| {
                    [13, 15, 16, 17, 18].contains(&r.1)
                        && r.3.is_some_and(|s| s < 0x20)
                        && r.2 >= m.2
                        && r.0 >= m.0
                });
                answer.unwrap().0 - m.0
            })
            .collect();
        want.sort();
        assert_eq!(want, [5 * us, 10 * us], "atomic: {atomic}: tshark's times");
        let s = replay_summary(&[pcap.as_path()], &[]);
        let l =
            s["latency"].as_array().unwrap().iter().find(|l| l["op"] == "rc_ack").expect("an rc_ack series");
        assert_eq!(l["count"].as_u64(), Some(2), "atomic: {atomic}");
        for (field, expect) in [("min_us", want[0]), ("max_us", want[1])] {
            let got = l[field].as_f64().unwrap();
            assert!(
                close(got, expect),
                "atomic: {atomic}: {field} {got} µs, tshark's times give {expect} ns"
            );
        }
    }
}

/// Two NVMe/RDMA queues between a host and a target, each connected by CM (RDMA-CM on port
/// 4420) whose ConnectRequest's private data, after RDMA-CM's 36-byte IP header, holds
/// NVMe/RDMA's request data (record format 0, then the QID, little-endian: written here
/// byte by byte from the transport binding's layout): QID 0, the admin queue, and QID 1.
/// On each, a command of opcode 0x02 with a keyed SGL, the target's RDMA WRITE of its data,
/// its completion. On the admin queue 0x02 is Get Log Page: an `nvme_other` I/O; on the
/// I/O queue a Read: `nvme_read`. Before the QID was read both were reads.
#[test]
fn commands_on_an_admin_queue_cm_connected_are_nvme_other() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{ExtHeaders, Reth};
    use roceprobe::wire::nvme::{opcode, Sgl, Sqe, FLAGS_SGL, SQE_LEN};
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.9.0.1".parse().unwrap(), "10.9.0.2".parse().unwrap());
    let frame = roce;
    let mut frames = Vec::new();
    for (qid, host_qp, target_qp) in [(0u16, 0x101u32, 0x201u32), (1, 0x102, 0x202)] {
        frames.extend(nvme_queue_connected(
            [host, target],
            qid,
            [host_qp, target_qp],
            0x1000 + u32::from(qid),
        ));
        let sqe = Sqe {
            opcode: opcode::READ,
            flags: FLAGS_SGL,
            cid: 3,
            nsid: if qid == 0 { 0xFFFF_FFFF } else { 1 },
            sgl: Sgl::Keyed { address: 0x10_0000, length: 4096, key: 0x77, invalidate: false },
            slba: 0,
            nlb: 7,
        };
        let mut capsule = [0u8; SQE_LEN];
        sqe.emit(&mut capsule);
        frames.push(frame(host, target, op::SEND_ONLY, target_qp, 100, ExtHeaders::default(), &capsule));
        let reth = ExtHeaders {
            reth: Some(Reth { va: 0x10_0000, rkey: 0x77, dma_len: 4096 }),
            ..Default::default()
        };
        frames.push(frame(target, host, op::WRITE_ONLY, host_qp, 200, reth, &[0u8; 1024]));
        let cqe = completion_capsule(3, 1, qid);
        frames.push(frame(target, host, op::SEND_ONLY, host_qp, 201, ExtHeaders::default(), &cqe));
    }
    let dir = tempfile::tempdir().unwrap();
    let timed = spaced(frames, 10_000);
    let pcap = write_pcap(dir.path(), "admin.pcap", &timed);
    // tshark reads the two ConnectRequests' QPNs as written (the MAD is CM's).
    let out = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap(), "-Y", "infiniband.cm.req", "-T", "fields"])
        .args(["-e", "infiniband.cm.req.localqpn"])
        .output()
        .expect("tshark");
    let qpns: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_owned).collect();
    assert_eq!(qpns, ["0x000101", "0x000102"], "tshark's reading of the ConnectRequests");
    let s = replay_summary(&[pcap.as_path()], &[]);
    let mut ops: Vec<(String, u64)> = s["ios"]["by_pair"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["op"].as_str().unwrap().to_owned(), p["completed"].as_u64().unwrap()))
        .collect();
    ops.sort();
    assert_eq!(ops, [("nvme_other".to_owned(), 1), ("nvme_read".to_owned(), 1)], "{}", s["ios"]);
}

/// XRC: two SEND Only (0xA4, with their XRCETH), each acknowledged (0xB1) 10 and 7 µs
/// later, and a READ (0xAC) answered by its READ Response Only (0xB0) 12 µs later. XRC's
/// responder answers as RC's does: the same `rc_ack` and `rdma_read` latencies, from
/// tshark's times, opcodes and PSNs (tshark 4.0 decodes XRC's BTH, nothing after it).
#[test]
fn xrc_requests_await_their_answers_as_rcs_do() {
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use std::net::IpAddr;
    let (a, b): (IpAddr, IpAddr) = ("10.10.0.1".parse().unwrap(), "10.10.0.2".parse().unwrap());
    let frame = roce;
    let xrc = |reth| ExtHeaders { xrc_srq: Some(0x55), reth, ..Default::default() };
    let ack = || ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() };
    let us = 1_000u64;
    let read = Some(Reth { va: 0x1000, rkey: 1, dma_len: 256 });
    let frames = [
        (0, frame(a, b, 0xA4, 0x20, 10, xrc(None), &[0u8; 128])),
        (10 * us, frame(b, a, 0xB1, 0x10, 10, ack(), &[])),
        (20 * us, frame(a, b, 0xA4, 0x20, 11, xrc(None), &[0u8; 128])),
        (27 * us, frame(b, a, 0xB1, 0x10, 11, ack(), &[])),
        (40 * us, frame(a, b, 0xAC, 0x20, 12, xrc(read), &[])),
        (52 * us, frame(b, a, 0xB0, 0x10, 12, ack(), &[0u8; 256])),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "xrc.pcap", &frames);
    let pkts = tshark_packets(&pcap);
    assert_eq!(
        pkts.iter().map(|p| p.3).collect::<Vec<_>>(),
        [164, 177, 164, 177, 172, 176],
        "tshark's opcodes"
    );
    // A request → the first answer of its kind, the other way, at or past its PSN.
    let answered = |request: u64, answer: u64| -> Vec<u64> {
        let mut v: Vec<u64> = pkts
            .iter()
            .filter(|p| p.3 == request)
            .map(|q| {
                pkts.iter().find(|r| r.3 == answer && r.1 == q.2 && r.4 >= q.4 && r.0 >= q.0).unwrap().0 - q.0
            })
            .collect();
        v.sort();
        v
    };
    let s = replay_summary(&[pcap.as_path()], &[]);
    for (op, want) in [("rc_ack", answered(164, 177)), ("rdma_read", answered(172, 176))] {
        assert_samples(&s, op, &want);
    }
}

/// A connection CM set up (REQ, REP: the REP's starting PSN, what B expects to receive,
/// says A's requests start at PSN 100; the REQ's, 900, is B's), five WRITEs in order,
/// then the ConnectRequest sent again (it crossed the reply) and the same reply again,
/// then five more WRITEs in order. The repeated reply announces the connection already
/// running, not a new one: no gap, no retransmission (restarted at PSN 100 again, the five
/// after it were a gap of five). Then a new connection on the same QPs (new communication
/// ids) whose REP says PSN 7: A's WRITEs from 7 are in order too, and again for a third
/// connection whose REP says 7 again (new ids: not a repeat). The same with another
/// connection set up between the reply and its repeat and room for one ConnectRequest
/// (`--max-cm-requests 1`): the answered one is forgotten, the repeat still restarts
/// nothing (before, a gap of five).
#[test]
fn a_repeated_connect_reply_restarts_nothing() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::ExtHeaders;
    use std::net::IpAddr;
    let (a, b): (IpAddr, IpAddr) = ("10.11.0.1".parse().unwrap(), "10.11.0.2".parse().unwrap());
    let ips = [[10, 11, 0, 1], [10, 11, 0, 2]];
    let (req, rep) =
        (cm_frame(a, b, &cm_req(0x51, 0x10, 900, ips, None)), cm_frame(b, a, &cm_rep(0x52, 0x51, 0x20, 100)));
    let write = |psn| roce(a, b, op::WRITE_ONLY, 0x20, psn, ExtHeaders::default(), &[0u8; 64]);
    let (c, d): (IpAddr, IpAddr) = ("10.11.0.3".parse().unwrap(), "10.11.0.4".parse().unwrap());
    let other = [
        cm_frame(c, d, &cm_req(0x71, 0x30, 500, [[10, 11, 0, 3], [10, 11, 0, 4]], None)),
        cm_frame(d, c, &cm_rep(0x72, 0x71, 0x40, 600)),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (between, extra) in [(&other[..0], &[][..]), (&other[..], &["--max-cm-requests", "1"][..])] {
        let mut frames = vec![req.clone(), rep.clone()];
        frames.extend((100..105).map(write));
        frames.extend(between.iter().cloned());
        frames.extend([req.clone(), rep.clone()]);
        frames.extend((105..110).map(write));
        frames.push(cm_frame(a, b, &cm_req(0x61, 0x10, 900, ips, None)));
        frames.push(cm_frame(b, a, &cm_rep(0x62, 0x61, 0x20, 7)));
        frames.extend((7..12).map(write));
        // And one more on the same QPs with the same starting PSNs (its own communication
        // ids): a new connection, its WRITEs from 7 in order again.
        frames.push(cm_frame(a, b, &cm_req(0x81, 0x10, 900, ips, None)));
        frames.push(cm_frame(b, a, &cm_rep(0x82, 0x81, 0x20, 7)));
        frames.extend((7..12).map(write));
        let timed = spaced(frames, 1_000);
        let pcap = write_pcap(dir.path(), "cm.pcap", &timed);
        let s = replay_summary(&[pcap.as_path()], extra);
        let f = s["flows"].as_array().unwrap().iter().find(|f| f["dst_qpn"] == 0x20).expect("A's requests");
        let got: Vec<u64> =
            ["packets", "retx_packets", "gap_psns", "out_of_window"].map(|k| f[k].as_u64().unwrap()).into();
        assert_eq!(got, [20, 0, 0, 0], "{extra:?}: {f}");
    }
}

/// Two hosts connect to one target with the same communication id (each host numbers its
/// own: Linux's are a small counter xored with a random value per host), their
/// ConnectRequests before either reply, and again one after the other. Each reply answers
/// its own host's request: every flow's requests start where CM said, and with each
/// direction's first request left out, every flow counts a gap of one (hand-set PSNs).
#[test]
fn two_hosts_may_use_one_communication_id() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::ExtHeaders;
    use std::net::IpAddr;
    let t: IpAddr = "10.13.0.100".parse().unwrap();
    let hosts: [(IpAddr, [u8; 4]); 2] =
        [("10.13.0.1".parse().unwrap(), [10, 13, 0, 1]), ("10.13.0.2".parse().unwrap(), [10, 13, 0, 2])];
    // Per host k: its QP 0x200 + k (the target's requests start at 900 + 50k), the target's
    // QP 0x100 + k (the host's requests start at 100 + 200k).
    let req = |k: usize| {
        let (h, ip) = hosts[k];
        cm_frame(h, t, &cm_req(0x1000, 0x200 + k as u32, 900 + 50 * k as u32, [ip, [10, 13, 0, 100]], None))
    };
    let rep = |k: usize| {
        cm_frame(t, hosts[k].0, &cm_rep(0x2000 + k as u32, 0x1000, 0x100 + k as u32, 100 + 200 * k as u32))
    };
    let writes = |k: usize| {
        let (h, _) = hosts[k];
        let (hq, tq, hs, ts) =
            (0x200 + k as u32, 0x100 + k as u32, 100 + 200 * k as u32, 900 + 50 * k as u32);
        let mut v: Vec<Vec<u8>> = (hs + 1..hs + 4)
            .map(|p| roce(h, t, op::WRITE_ONLY, tq, p, ExtHeaders::default(), &[0u8; 64]))
            .collect();
        v.extend(
            (ts + 1..ts + 4).map(|p| roce(t, h, op::WRITE_ONLY, hq, p, ExtHeaders::default(), &[0u8; 64])),
        );
        v
    };
    let dir = tempfile::tempdir().unwrap();
    for (case, cm) in [
        ("interleaved", [req(0), req(1), rep(0), rep(1)]),
        ("one after the other", [req(0), rep(0), req(1), rep(1)]),
    ] {
        let mut frames = cm.to_vec();
        frames.extend(writes(0));
        frames.extend(writes(1));
        let pcap = write_pcap(dir.path(), "cm.pcap", &spaced(frames, 1_000));
        let s = replay_summary(&[pcap.as_path()], &[]);
        let gaps: Vec<(String, u64, u64)> = s["flows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["transport"] == "RC")
            .map(|f| {
                (
                    f["src_ip"].as_str().unwrap().to_owned(),
                    f["dst_qpn"].as_u64().unwrap(),
                    f["gap_psns"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(gaps.len(), 4, "{case}: {gaps:?}");
        assert!(gaps.iter().all(|g| g.2 == 1), "{case}: each flow a gap of one: {gaps:?}");
    }
}

/// An NVMe read whose completion the host acknowledges with the AETH of a READ Response
/// (the target READs another I/O's write data right after the completion), its explicit
/// ACK 50 µs later. The response acknowledges every PSN up to its own, the completion's
/// too: the read's compute segment (the host NIC's turnaround) is the 3 µs from the
/// completion to that response, not the 50 µs to the ACKNOWLEDGE. Times hand-set.
#[test]
fn a_host_read_response_acknowledges_the_completion_before_it() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use roceprobe::wire::nvme::{opcode, Sgl, Sqe, FLAGS_SGL, SQE_LEN};
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.12.0.1".parse().unwrap(), "10.12.0.2".parse().unwrap());
    let (host_qp, target_qp) = (0x111u32, 0x222u32);
    let ack = |psn| {
        roce(
            host,
            target,
            op::ACKNOWLEDGE,
            target_qp,
            psn,
            ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() },
            &[],
        )
    };
    let command = |cid, opc, address| {
        let sqe = Sqe {
            opcode: opc,
            flags: FLAGS_SGL,
            cid,
            nsid: 1,
            sgl: Sgl::Keyed { address, length: 1024, key: 0x99, invalidate: false },
            slba: 0,
            nlb: 1,
        };
        let mut capsule = [0u8; SQE_LEN];
        sqe.emit(&mut capsule);
        capsule
    };
    let completion = |cid| completion_capsule(cid, 1, 1);
    let target_ack = |psn| {
        roce(
            target,
            host,
            op::ACKNOWLEDGE,
            host_qp,
            psn,
            ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() },
            &[],
        )
    };
    let reth = |va| ExtHeaders { reth: Some(Reth { va, rkey: 0x99, dma_len: 1024 }), ..Default::default() };
    let us = 1_000u64;
    let frames = vec![
        // The host's write (CID 2) and read (CID 1) commands, each ACKed by the target.
        (
            0,
            roce(
                host,
                target,
                op::SEND_ONLY,
                target_qp,
                100,
                ExtHeaders::default(),
                &command(2, opcode::WRITE, 0x2000),
            ),
        ),
        (us, target_ack(100)),
        (
            2 * us,
            roce(
                host,
                target,
                op::SEND_ONLY,
                target_qp,
                101,
                ExtHeaders::default(),
                &command(1, opcode::READ, 0x1000),
            ),
        ),
        (3 * us, target_ack(101)),
        // The read's data, its completion (PSN 201), then the target READs the write's data.
        (10 * us, roce(target, host, op::WRITE_ONLY, host_qp, 200, reth(0x1000), &[0u8; 1024])),
        (11 * us, roce(target, host, op::SEND_ONLY, host_qp, 201, ExtHeaders::default(), &completion(1))),
        (12 * us, roce(target, host, op::READ_REQUEST, host_qp, 202, reth(0x2000), &[])),
        // The host's READ Response Only (PSN 202, AETH ACK) 3 µs after the completion.
        (
            14 * us,
            roce(
                host,
                target,
                op::READ_RESPONSE_ONLY,
                target_qp,
                202,
                ExtHeaders { aeth: Some(Aeth::ack(31, 2)), ..Default::default() },
                &[0u8; 1024],
            ),
        ),
        (20 * us, roce(target, host, op::SEND_ONLY, host_qp, 203, ExtHeaders::default(), &completion(2))),
        // The explicit ACK, up to the write's completion, long after.
        (61 * us, ack(203)),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "implied_nvme.pcap", &frames);
    let s = replay_summary(&[pcap.as_path()], &["--slow-ios", "10"]);
    assert_eq!(s["ios"]["completed"].as_u64(), Some(2), "{}", s["ios"]);
    let read =
        s["ios"]["slowest"].as_array().unwrap().iter().find(|io| io["op"] == "nvme_read").expect("the read");
    assert!(close(read["compute_us"].as_f64().unwrap(), 3 * us), "{read}");
}

/// Two NVMe/RDMA queues CM connected (QID 0, the admin queue, and QID 1), each opened by a
/// Fabrics Connect (opcode 0x7F, command type 0x01 in byte 4, its 1 KiB of data in the
/// capsule), then admin commands on the admin queue (Identify and Get Log Page with data the
/// target writes, Keep Alive without) and, on the I/O queue, two Flushes, a Dataset
/// Management and a Read, each completed. Every command but the Read is `nvme_other`,
/// counted by command as tshark's NVMe/RDMA dissector reads them (the queue's QID from the
/// handshake, the opcode, a Fabrics command's type), named after the NVMe specifications.
#[test]
fn other_nvme_commands_are_counted_by_command_as_tshark_reads_them() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{ExtHeaders, Reth};
    use roceprobe::wire::nvme::{Sgl, Sqe, FLAGS_SGL, SQE_LEN};
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.13.0.1".parse().unwrap(), "10.13.0.2".parse().unwrap());
    let keyed = |length: u32| Sgl::Keyed { address: 0x20_0000, length, key: 0x99, invalidate: false };
    let connect = (0x7F, 0x01, Sgl::InCapsule { offset: 0, length: 1024 });
    let queues = [
        (
            0u16,
            0x131u32,
            0x231u32,
            vec![connect, (0x06, 0, keyed(4096)), (0x18, 0, keyed(0)), (0x02, 0, keyed(512))],
        ),
        (
            1,
            0x132,
            0x232,
            vec![
                connect,
                (0x00, 1, keyed(0)),
                (0x00, 1, keyed(0)),
                (0x09, 1, keyed(16)),
                (0x02, 1, keyed(4096)),
            ],
        ),
    ];
    let mut frames = Vec::new();
    for (qid, host_qp, target_qp, commands) in queues {
        frames.extend(nvme_queue_connected(
            [host, target],
            qid,
            [host_qp, target_qp],
            0x2000 + u32::from(qid),
        ));
        let (mut host_psn, mut target_psn) = (100, 200);
        for (cid, (opcode, nsid, sgl)) in commands.into_iter().enumerate() {
            let sqe = Sqe { opcode, flags: FLAGS_SGL, cid: cid as u16, nsid, sgl, slba: 0, nlb: 0 };
            let mut capsule =
                vec![
                    0u8;
                    SQE_LEN + if let Sgl::InCapsule { length, .. } = sgl { length as usize } else { 0 }
                ];
            sqe.emit(&mut capsule);
            frames.push(roce(
                host,
                target,
                op::SEND_ONLY,
                target_qp,
                host_psn,
                ExtHeaders::default(),
                &capsule,
            ));
            host_psn += 1;
            if let Sgl::Keyed { address, length, key, .. } = sgl {
                if length > 0 && opcode != 0x09 {
                    let reth = ExtHeaders {
                        reth: Some(Reth { va: address, rkey: key, dma_len: length }),
                        ..Default::default()
                    };
                    let data = vec![0u8; length as usize];
                    frames.push(roce(target, host, op::WRITE_ONLY, host_qp, target_psn, reth, &data));
                    target_psn += 1;
                }
            }
            let cqe = completion_capsule(cid as u16, cid as u16 + 1, qid);
            frames.push(roce(target, host, op::SEND_ONLY, host_qp, target_psn, ExtHeaders::default(), &cqe));
            target_psn += 1;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "commands.pcap", &spaced(frames, 10_000));
    let out = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap(), "-Y", "nvme.cmd.opc || nvme.fabrics.cmd.opc", "-T", "fields"])
        .args([
            "-e",
            "nvme-rdma.cmd.qid",
            "-e",
            "nvme.cmd.opc",
            "-e",
            "nvme.fabrics.cmd.opc",
            "-e",
            "nvme.fabrics.cmd.fctype",
        ])
        .output()
        .expect("tshark");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The names of the commands sent, from the NVMe specifications' tables.
    let name = |qid: &str, opcode: &str, fctype: &str| -> Option<&'static str> {
        Some(match (qid, opcode, fctype) {
            (_, "", "0x01") => "fabrics.connect",
            ("0x0000", "0x06", _) => "admin.identify",
            ("0x0000", "0x18", _) => "admin.keep_alive",
            ("0x0000", "0x02", _) => "admin.get_log_page",
            ("0x0001", "0x00", _) => "io.flush",
            ("0x0001", "0x09", _) => "io.dataset_management",
            ("0x0001", "0x02", _) => return None, // a Read: nvme_read
            other => panic!("a command the test did not send: {other:?}"),
        })
    };
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    let text = String::from_utf8(out.stdout).unwrap();
    for line in text.lines() {
        let c: Vec<&str> = line.split('\t').collect();
        if let Some(n) = name(c[0], c[1], c[3]) {
            *want.entry(n.into()).or_default() += 1;
        }
    }
    assert_eq!(want.values().sum::<u64>(), 8, "tshark decodes every command: {text}");
    let csv = dir.path().join("csv");
    let s = replay_summary(&[pcap.as_path()], &["--csv-dir", csv.to_str().unwrap()]);
    let pairs = s["ios"]["by_pair"].as_array().unwrap();
    let other = pairs.iter().find(|p| p["op"] == "nvme_other").expect("nvme_other I/Os");
    let got: BTreeMap<String, u64> = serde_json::from_value(other["opcodes"].clone()).unwrap();
    assert_eq!(got, want, "summary: {other}");
    assert_eq!(other["completed"].as_u64(), Some(8));
    assert_eq!(s["ios"]["opcodes"], other["opcodes"], "the totals");
    let read = pairs.iter().find(|p| p["op"] == "nvme_read").expect("the read");
    assert!(read.get("opcodes").is_none(), "reads and writes are not counted by command: {read}");
    // io.csv's opcodes column, over the rows of the run.
    let mut from_csv: BTreeMap<String, u64> = BTreeMap::new();
    for row in read_csv(&csv.join("io.csv")) {
        for item in row["opcodes"].split_whitespace() {
            let (command, n) = item.split_once('=').unwrap();
            *from_csv.entry(command.into()).or_default() += n.parse::<u64>().unwrap();
        }
    }
    assert_eq!(from_csv, want, "io.csv");
}

/// Requests sent again: a WRITE whose first copy went unanswered (lost past the mirror),
/// sent again 100 µs later and acknowledged 10 µs after that; a READ sent again likewise; a
/// WRITE acknowledged, then sent again (its ACK lost past the mirror) and acknowledged
/// again. A request sent again is the same request: one sample each, from its first copy
/// to the first answer that covers it, as tshark's times and PSNs give them (each request
/// PSN's first frame → the first ACK, or READ Response, at or past its PSN after it).
#[test]
fn a_request_sent_again_is_answered_once_from_its_first_copy() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use std::net::IpAddr;
    let (a, b): (IpAddr, IpAddr) = ("10.14.0.1".parse().unwrap(), "10.14.0.2".parse().unwrap());
    let none = ExtHeaders::default;
    let ack = || ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() };
    let read = || ExtHeaders { reth: Some(Reth { va: 0x1000, rkey: 1, dma_len: 256 }), ..Default::default() };
    let us = 1_000u64;
    let write = |psn| roce(a, b, op::WRITE_ONLY, 0x20, psn, none(), &[0u8; 64]);
    let frames = [
        (0, write(10)),
        (100 * us, write(10)),
        (110 * us, roce(b, a, op::ACKNOWLEDGE, 0x10, 10, ack(), &[])),
        (200 * us, roce(a, b, op::READ_REQUEST, 0x20, 11, read(), &[])),
        (300 * us, roce(a, b, op::READ_REQUEST, 0x20, 11, read(), &[])),
        (305 * us, roce(b, a, op::READ_RESPONSE_ONLY, 0x10, 11, ack(), &[0u8; 256])),
        (400 * us, write(12)),
        (410 * us, roce(b, a, op::ACKNOWLEDGE, 0x10, 12, ack(), &[])),
        (500 * us, write(12)),
        (505 * us, roce(b, a, op::ACKNOWLEDGE, 0x10, 12, ack(), &[])),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "again.pcap", &frames);
    let pkts = tshark_packets(&pcap);
    assert_eq!(pkts.len(), frames.len(), "tshark reads every frame");
    let first_copy_to_answer = |request: u64, answers: &[u64]| -> Vec<u64> {
        let mut seen = std::collections::BTreeSet::new();
        let mut v: Vec<u64> = pkts
            .iter()
            .filter(|q| q.3 == request && seen.insert((q.1.clone(), q.2.clone(), q.4)))
            .map(|q| {
                pkts.iter()
                    .find(|r| answers.contains(&r.3) && r.1 == q.2 && r.4 >= q.4 && r.0 >= q.0)
                    .unwrap()
                    .0
                    - q.0
            })
            .collect();
        v.sort();
        v
    };
    let want_acks = first_copy_to_answer(u64::from(op::WRITE_ONLY), &[u64::from(op::ACKNOWLEDGE)]);
    let want_reads = first_copy_to_answer(u64::from(op::READ_REQUEST), &[u64::from(op::READ_RESPONSE_ONLY)]);
    assert_eq!((want_acks.len(), want_reads.len()), (2, 1));
    let s = replay_summary(&[pcap.as_path()], &[]);
    for (op_, want) in [("rc_ack", want_acks), ("rdma_read", want_reads)] {
        assert_samples(&s, op_, &want);
    }
    let f = s["flows"].as_array().unwrap().iter().find(|f| f["dst_qpn"] == 0x20).unwrap();
    assert_eq!(f["retx_packets"], 3, "{f}");
}

/// A READ of 4,096 bytes (four responses at `--mtu 1024`) whose second response was lost
/// past the mirror: its last response comes at 5 µs, and the requester asks again at 20 µs
/// for the rest (a READ of 3,072 bytes from the PSN it missed), answered at 24 µs. The
/// second READ is the rest of the first: one sample, from the first READ to the first
/// response Last within its span (tshark's times and PSNs), not a second one of 4 µs.
#[test]
fn a_read_asked_again_from_inside_its_span_is_the_same_read() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use std::net::IpAddr;
    let (a, b): (IpAddr, IpAddr) = ("10.14.0.1".parse().unwrap(), "10.14.0.2".parse().unwrap());
    let ack = || ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() };
    let read = |va, dma_len| ExtHeaders { reth: Some(Reth { va, rkey: 1, dma_len }), ..Default::default() };
    let none = ExtHeaders::default;
    let us = 1_000u64;
    let data = [0u8; 1024];
    let frames = [
        (0, roce(a, b, op::READ_REQUEST, 0x20, 300, read(0x1000, 4096), &[])),
        (2 * us, roce(b, a, op::READ_RESPONSE_FIRST, 0x10, 300, ack(), &data)),
        (4 * us, roce(b, a, op::READ_RESPONSE_MIDDLE, 0x10, 302, none(), &data)),
        (5 * us, roce(b, a, op::READ_RESPONSE_LAST, 0x10, 303, ack(), &data)),
        (20 * us, roce(a, b, op::READ_REQUEST, 0x20, 301, read(0x1400, 3072), &[])),
        (22 * us, roce(b, a, op::READ_RESPONSE_FIRST, 0x10, 301, ack(), &data)),
        (23 * us, roce(b, a, op::READ_RESPONSE_MIDDLE, 0x10, 302, none(), &data)),
        (24 * us, roce(b, a, op::READ_RESPONSE_LAST, 0x10, 303, ack(), &data)),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "read_again.pcap", &frames);
    let pkts = tshark_packets(&pcap);
    assert_eq!(pkts.len(), frames.len(), "tshark reads every frame");
    // The first READ (opcode 12) and its span of 4,096 / 1,024 PSNs; the first READ
    // Response Last (15) within it.
    let first = pkts.iter().find(|p| p.3 == 12).unwrap();
    let end = pkts.iter().find(|p| p.3 == 15 && (first.4..first.4 + first.5 / 1024).contains(&p.4)).unwrap();
    for workers in ["1", "2"] {
        let s = replay_summary(&[pcap.as_path()], &["--mtu", "1024", "--workers", workers]);
        assert_samples(&s, "rdma_read", &[end.0 - first.0]);
    }
}

/// Three READs of 4 KiB, each answered by one READ Response Only (so the path MTU is never
/// learned: the first READ's span is kept as its widest, 16 PSNs at 256 bytes): READ 100
/// (answered at 3 µs), READ 101 lost before the mirror, READ 102 (after READ 100's
/// response, or before it); a NAK for 101, then 101 and 102 sent again, answered at 13
/// and 14 µs. 101's copy sent again is the first this
/// vantage saw of another READ, not part of READ 100's widest span: three samples, each
/// from a READ's first copy to its response (tshark's times and PSNs), not two.
#[test]
fn a_new_read_inside_an_earlier_read_s_widest_span_keeps_its_sample() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use std::net::IpAddr;
    let (a, b): (IpAddr, IpAddr) = ("10.14.0.1".parse().unwrap(), "10.14.0.2".parse().unwrap());
    let ack = || ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() };
    let nak = || ExtHeaders { aeth: Some(Aeth::nak(0, 1)), ..Default::default() };
    let read = |psn: u32| {
        let reth = ExtHeaders {
            reth: Some(Reth { va: 0x10000 * u64::from(psn), rkey: 1, dma_len: 4096 }),
            ..Default::default()
        };
        roce(a, b, op::READ_REQUEST, 0x20, psn, reth, &[])
    };
    let response = |psn| roce(b, a, op::READ_RESPONSE_ONLY, 0x10, psn, ack(), &[0u8; 4096]);
    let us = 1_000u64;
    // READ 102 after READ 100's response, then (a second capture) before it: READ 100's
    // span is then fitted to where 102 begins, past the lost 101.
    for read_102_at in [4 * us, us] {
        let frames = [
            (0, read(100)),
            (read_102_at, read(102)),
            (3 * us, response(100)),
            (5 * us, roce(b, a, op::ACKNOWLEDGE, 0x10, 101, nak(), &[])),
            (6 * us, read(101)),
            (7 * us, read(102)),
            (13 * us, response(101)),
            (14 * us, response(102)),
        ];
        let mut frames = frames.to_vec();
        frames.sort_by_key(|f| f.0);
        let dir = tempfile::tempdir().unwrap();
        let pcap = write_pcap(dir.path(), "reads.pcap", &frames);
        let pkts = tshark_packets(&pcap);
        assert_eq!(pkts.len(), frames.len(), "tshark reads every frame");
        // Each READ PSN's first copy (opcode 12) to the first READ Response Only (16) at it.
        let mut want: Vec<u64> = Vec::new();
        for q in pkts.iter().filter(|q| q.3 == 12) {
            if pkts.iter().any(|e| e.3 == 12 && e.4 == q.4 && e.0 < q.0) {
                continue;
            }
            let r = pkts.iter().find(|r| r.3 == 16 && r.4 == q.4 && r.0 > q.0).unwrap();
            want.push(r.0 - q.0);
        }
        want.sort();
        assert_eq!(want.len(), 3);
        for workers in ["1", "2"] {
            let s = replay_summary(&[pcap.as_path()], &["--workers", workers]);
            assert_samples(&s, "rdma_read", &want);
        }
    }
}

/// Twenty-four I/O queues between one host and one target, their connections set up before
/// the capture began (no CM), as a host with one queue per CPU has: on every queue five
/// reads with CIDs 0 to 4, the queues' commands interleaved so that every CID is in flight
/// on many queues at once, each read's data, completion and the ACKs as real stacks send
/// them (initial PSNs apart, as RDMA stacks pick them at random). Every read completes, 14 µs
/// after its command at this one vantage (times hand-set).
#[test]
fn many_queues_between_two_hosts_pair_and_complete_without_cm() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use roceprobe::wire::nvme::{opcode, Sgl, Sqe, FLAGS_SGL, SQE_LEN};
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.15.0.1".parse().unwrap(), "10.15.0.2".parse().unwrap());
    const QUEUES: u32 = 24;
    let ack = |psn| ExtHeaders { aeth: Some(Aeth::ack(31, psn)), ..Default::default() };
    let us = 1_000u64;
    let mut frames = Vec::new();
    for round in 0..5u16 {
        for q in 0..QUEUES {
            let (host_qp, target_qp) = (0x500 + q, 0x700 + q);
            let (host_psn, target_psn) =
                (q * 300_007 + 17 + u32::from(round), q * 500_009 + 5 + 2 * u32::from(round));
            let t = u64::from(round) * 100 * us + u64::from(q) * us / 2;
            let va = 0x10_0000 + u64::from(q) * 0x1_0000 + u64::from(round) * 0x1000;
            let sqe = Sqe {
                opcode: opcode::READ,
                flags: FLAGS_SGL,
                cid: round,
                nsid: 1,
                sgl: Sgl::Keyed { address: va, length: 4096, key: 0x40 + q, invalidate: false },
                slba: 0,
                nlb: 7,
            };
            let mut capsule = [0u8; SQE_LEN];
            sqe.emit(&mut capsule);
            let reth =
                ExtHeaders { reth: Some(Reth { va, rkey: 0x40 + q, dma_len: 4096 }), ..Default::default() };
            let cqe = completion_capsule(round, round + 1, q as u16 + 1);
            frames.extend([
                (t, roce(host, target, op::SEND_ONLY, target_qp, host_psn, ExtHeaders::default(), &capsule)),
                (t + us, roce(target, host, op::ACKNOWLEDGE, host_qp, host_psn, ack(1), &[])),
                (t + 6 * us, roce(target, host, op::WRITE_ONLY, host_qp, target_psn, reth, &[0u8; 4096])),
                (
                    t + 14 * us,
                    roce(target, host, op::SEND_ONLY, host_qp, target_psn + 1, ExtHeaders::default(), &cqe),
                ),
                (t + 15 * us, roce(host, target, op::ACKNOWLEDGE, target_qp, target_psn + 1, ack(2), &[])),
            ]);
        }
    }
    frames.sort_by_key(|f| f.0);
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "queues.pcap", &frames);
    let s = replay_summary(&[pcap.as_path()], &[]);
    all_complete_in(&s, u64::from(QUEUES) * 5, 14_000, "");
}

/// The summary's I/Os: `n` completed, none timed out or unfinished, and every io@compute
/// sample `ns` (its only series).
fn all_complete_in(s: &Value, n: u64, ns: u64, case: &str) {
    let ios = &s["ios"];
    let outcomes: Vec<u64> =
        ["completed", "timed_out", "unfinished"].map(|k| ios[k].as_u64().unwrap()).into();
    assert_eq!(outcomes, [n, 0, 0], "{case}: {ios}");
    let l = series_where(s, "segment", "io@compute");
    assert_eq!(l["count"].as_u64(), Some(n), "{case}");
    assert!(
        close(l["min_us"].as_f64().unwrap(), ns) && close(l["max_us"].as_f64().unwrap(), ns),
        "{case}: {l}"
    );
}

/// Two I/O queues between one host and target whose host PSNs start alike (hand-set):
/// queue A's flush (CID 0, PSN 1000) completes; on queue B the host's PSN 1000 (a flush,
/// CID 0) is lost before the mirror, PSN 1001 (CID 1) comes, the target NAKs the sequence,
/// and the host sends 1000 and 1001 again, which complete. Queue B's CID 0 was never seen
/// before: it is an I/O of its own, not a copy of queue A's finished one (same CID and
/// PSN, another queue). Three flushes complete; before, two did, B's CID 0 counted
/// nowhere.
#[test]
fn a_resent_command_is_no_copy_of_another_queues_with_its_cid_and_psn() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders};
    use roceprobe::wire::nvme::opcode;
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.16.0.1".parse().unwrap(), "10.16.0.2".parse().unwrap());
    let ack = |psn| ExtHeaders { aeth: Some(Aeth::ack(31, psn)), ..Default::default() };
    let nak = |psn| ExtHeaders { aeth: Some(Aeth::nak(0, psn)), ..Default::default() };
    let none = ExtHeaders::default;
    let flush = |cid: u16| keyed_sqe(opcode::FLUSH, cid, 0, 0, 0);
    let cqe = |cid: u16| completion_capsule(cid, cid + 1, 1);
    let us = 1_000u64;
    // (host QP, target QP) of queues A and B; the target's PSNs on each.
    let ((ha, ta), (hb, tb)) = ((0x210, 0x310), (0x211, 0x311));
    let frames = vec![
        (10 * us, roce(host, target, op::SEND_ONLY, ta, 1000, none(), &flush(0))),
        (11 * us, roce(target, host, op::ACKNOWLEDGE, ha, 1000, ack(1), &[])),
        (20 * us, roce(target, host, op::SEND_ONLY, ha, 5000, none(), &cqe(0))),
        (21 * us, roce(host, target, op::ACKNOWLEDGE, ta, 5000, ack(1), &[])),
        // Queue B: PSN 1000 lost upstream of the mirror.
        (80 * us, roce(host, target, op::SEND_ONLY, tb, 1001, none(), &flush(1))),
        (81 * us, roce(target, host, op::ACKNOWLEDGE, hb, 1000, nak(1), &[])),
        (90 * us, roce(host, target, op::SEND_ONLY, tb, 1000, none(), &flush(0))),
        (91 * us, roce(host, target, op::SEND_ONLY, tb, 1001, none(), &flush(1))),
        (92 * us, roce(target, host, op::ACKNOWLEDGE, hb, 1001, ack(2), &[])),
        (100 * us, roce(target, host, op::SEND_ONLY, hb, 7000, none(), &cqe(0))),
        (101 * us, roce(target, host, op::SEND_ONLY, hb, 7001, none(), &cqe(1))),
        (102 * us, roce(host, target, op::ACKNOWLEDGE, tb, 7001, ack(3), &[])),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "queues.pcap", &frames);
    for workers in ["1", "4"] {
        let s = replay_summary(&[pcap.as_path()], &["--workers", workers]);
        let ios = &s["ios"];
        let outcomes: Vec<u64> =
            ["completed", "timed_out", "unfinished"].map(|k| ios[k].as_u64().unwrap()).into();
        assert_eq!(outcomes, [3, 0, 0], "{workers} workers: {ios}");
    }
}

/// Sixteen I/O queues between one host and target, no CM, each with its 16 CIDs in flight
/// at once (reads: a command, its data WRITE, a completion; hand-set times and PSNs), as a
/// host with a queue per CPU runs when the probe starts: more unpaired queues between two
/// hosts than the index of request flows holds (8), so an ACK pairs only some of them
/// before their completions come. A read's data WRITE names its buffer, and so its
/// command and queue: the completion after it is its queue's. Every read completes with
/// io@compute as set (14 µs); before, the first completions on the queues not yet paired
/// went to no I/O, theirs timed out.
#[test]
fn many_queues_with_many_cids_in_flight_pair_by_their_data() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use roceprobe::wire::nvme::opcode;
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.17.0.1".parse().unwrap(), "10.17.0.2".parse().unwrap());
    const QUEUES: u32 = 16;
    const DEPTH: u16 = 16;
    let ack = |psn| ExtHeaders { aeth: Some(Aeth::ack(31, psn)), ..Default::default() };
    let us = 1_000u64;
    let mut frames = Vec::new();
    for q in 0..QUEUES {
        let (host_qp, target_qp) = (0x500 + q, 0x700 + q);
        let (host_psn, target_psn) = (q * 300_007 + 17, q * 500_009 + 5);
        for cid in 0..DEPTH {
            let k = u32::from(cid);
            // Commands of every queue first, 100 ns apart; each read's data and completion
            // 14 µs after its command, the queues interleaved.
            let t = 10 * us + u64::from(k * QUEUES + q) * 100;
            let va = 0x100_0000 + u64::from(q) * 0x10_0000 + u64::from(k) * 0x1000;
            let key = 0x4000 + q * 64 + k;
            let capsule = keyed_sqe(opcode::READ, cid, va, 512, key);
            let reth = ExtHeaders { reth: Some(Reth { va, rkey: key, dma_len: 512 }), ..Default::default() };
            let cqe = completion_capsule(cid, cid + 1, q as u16 + 1);
            let (hp, tp) = (host_psn + k, target_psn + 2 * k);
            frames.extend([
                (t, roce(host, target, op::SEND_ONLY, target_qp, hp, ExtHeaders::default(), &capsule)),
                (t + 6 * us, roce(target, host, op::WRITE_ONLY, host_qp, tp, reth, &[0u8; 512])),
                (
                    t + 14 * us,
                    roce(target, host, op::SEND_ONLY, host_qp, tp + 1, ExtHeaders::default(), &cqe),
                ),
                (t + 15 * us, roce(host, target, op::ACKNOWLEDGE, target_qp, tp + 1, ack(k + 1), &[])),
            ]);
        }
        // The target acknowledges the queue's commands once they are all in.
        let t = 10 * us + u64::from(u32::from(DEPTH) * QUEUES) * 100 + u64::from(q);
        frames.push((
            t,
            roce(target, host, op::ACKNOWLEDGE, host_qp, host_psn + u32::from(DEPTH) - 1, ack(1), &[]),
        ));
    }
    frames.sort_by_key(|f| f.0);
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "queues.pcap", &frames);
    for workers in ["1", "4"] {
        let s = replay_summary(&[pcap.as_path()], &["--workers", workers]);
        all_complete_in(&s, u64::from(QUEUES) * u64::from(DEPTH), 14_000, workers);
    }
}

/// Two I/O queues between one host and target whose PSNs run alike on both (hand-set), so
/// that no acknowledgement tells their two directions' pairs apart: queue A's write (CID
/// 5, in its capsule) completes (the completion's PSN 5000), then A's next command uses
/// CID 5 again at 100 µs; the target sends the first completion again at 118 µs (its ACK
/// was slow), and the second I/O's own completion comes at 300 µs. The copy belongs to the
/// finished I/O and answers nothing, though its flow is not paired: the second I/O's
/// io@compute is 200 µs (before the queue-keyed capsules were looked up without their
/// queue there, it was 18 µs).
#[test]
fn a_completion_sent_again_on_a_flow_not_paired_answers_no_later_io() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders};
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.18.0.1".parse().unwrap(), "10.18.0.2".parse().unwrap());
    let ack = |psn| ExtHeaders { aeth: Some(Aeth::ack(31, psn)), ..Default::default() };
    let none = ExtHeaders::default;
    let command = |cid: u16| {
        let mut c = vec![0u8; 64 + 512];
        in_capsule_write(cid, 512).emit(&mut c);
        c
    };
    let cqe = |cid: u16| completion_capsule(cid, cid + 1, 1);
    let us = 1_000u64;
    // Queue k: the host's QP 0x100 + k, the target's 0x200 + k; the same PSNs on both.
    let (ha, ta, hb, tb) = (0x100, 0x200, 0x101, 0x201);
    let frames = vec![
        (10 * us, roce(host, target, op::SEND_ONLY, ta, 1000, none(), &command(5))),
        (11 * us, roce(host, target, op::SEND_ONLY, tb, 1000, none(), &command(9))),
        (12 * us, roce(target, host, op::ACKNOWLEDGE, ha, 1000, ack(1), &[])),
        (13 * us, roce(target, host, op::ACKNOWLEDGE, hb, 1000, ack(1), &[])),
        (30 * us, roce(target, host, op::SEND_ONLY, ha, 5000, none(), &cqe(5))),
        (31 * us, roce(target, host, op::SEND_ONLY, hb, 5000, none(), &cqe(9))),
        (32 * us, roce(host, target, op::ACKNOWLEDGE, ta, 5000, ack(1), &[])),
        (33 * us, roce(host, target, op::ACKNOWLEDGE, tb, 5000, ack(1), &[])),
        (100 * us, roce(host, target, op::SEND_ONLY, ta, 1001, none(), &command(5))),
        (101 * us, roce(host, target, op::SEND_ONLY, tb, 1001, none(), &command(10))),
        (102 * us, roce(target, host, op::ACKNOWLEDGE, ha, 1001, ack(2), &[])),
        (103 * us, roce(target, host, op::ACKNOWLEDGE, hb, 1001, ack(2), &[])),
        // The first completion sent again.
        (118 * us, roce(target, host, op::SEND_ONLY, ha, 5000, none(), &cqe(5))),
        (300 * us, roce(target, host, op::SEND_ONLY, ha, 5001, none(), &cqe(5))),
        (301 * us, roce(target, host, op::SEND_ONLY, hb, 5001, none(), &cqe(10))),
        (302 * us, roce(host, target, op::ACKNOWLEDGE, ta, 5001, ack(2), &[])),
        (303 * us, roce(host, target, op::ACKNOWLEDGE, tb, 5001, ack(2), &[])),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "queues.pcap", &frames);
    let s = replay_summary(&[pcap.as_path()], &["--slow-ios", "10"]);
    assert_eq!(s["ios"]["completed"].as_u64(), Some(4), "{}", s["ios"]);
    let second = s["ios"]["slowest"]
        .as_array()
        .unwrap()
        .iter()
        .find(|io| {
            io["cid"] == 5 && io["qpn"] == ta && io["completed_at"].as_str().unwrap().ends_with(".000300000Z")
        })
        .unwrap_or_else(|| panic!("queue A's second I/O: {}", s["ios"]));
    assert!(close(second["io@compute_us"].as_f64().unwrap(), 200 * us), "{second}");
}

/// Two I/O queues' writes name one buffer (the same R_Key and address, as two writes of
/// one registered page to two targets' queues would): the target READs it on each queue.
/// A READ cannot tell which command it serves, so it pairs no flows, and each write
/// completes on its own queue (hand-set times: io@compute 62 µs each). Before, the READ on
/// queue A paired A's target flow with queue B's, and A's write never completed.
#[test]
fn writes_naming_one_buffer_on_two_queues_both_complete() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use roceprobe::wire::nvme::opcode;
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.19.0.1".parse().unwrap(), "10.19.0.2".parse().unwrap());
    let ack = |psn| ExtHeaders { aeth: Some(Aeth::ack(31, psn)), ..Default::default() };
    let none = ExtHeaders::default;
    let (va, key) = (0x7f00_0010_0000u64, 0x1234u32);
    let command = |cid: u16| keyed_sqe(opcode::WRITE, cid, va, 4096, key);
    let cqe = |cid: u16| completion_capsule(cid, cid + 1, 1);
    let read = ExtHeaders { reth: Some(Reth { va, rkey: key, dma_len: 4096 }), ..Default::default() };
    let us = 1_000u64;
    let (ha, ta, hb, tb) = (0x100, 0x200, 0x101, 0x201);
    let frames = vec![
        (10 * us, roce(host, target, op::SEND_ONLY, ta, 1000, none(), &command(1))),
        (11 * us, roce(host, target, op::SEND_ONLY, tb, 3000, none(), &command(2))),
        (15 * us, roce(target, host, op::READ_REQUEST, ha, 5000, read, &[])),
        (16 * us, roce(target, host, op::READ_REQUEST, hb, 7000, read, &[])),
        (20 * us, roce(host, target, op::READ_RESPONSE_ONLY, ta, 5000, ack(1), &[0u8; 4096])),
        (21 * us, roce(host, target, op::READ_RESPONSE_ONLY, tb, 7000, ack(1), &[0u8; 4096])),
        (25 * us, roce(target, host, op::ACKNOWLEDGE, ha, 1000, ack(1), &[])),
        (26 * us, roce(target, host, op::ACKNOWLEDGE, hb, 3000, ack(1), &[])),
        (72 * us, roce(target, host, op::SEND_ONLY, ha, 5001, none(), &cqe(1))),
        (73 * us, roce(target, host, op::SEND_ONLY, hb, 7001, none(), &cqe(2))),
        (74 * us, roce(host, target, op::ACKNOWLEDGE, ta, 5001, ack(2), &[])),
        (75 * us, roce(host, target, op::ACKNOWLEDGE, tb, 7001, ack(2), &[])),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "shared.pcap", &frames);
    let s = replay_summary(&[pcap.as_path()], &["--slow-ios", "10"]);
    let ios = &s["ios"];
    let outcomes: Vec<u64> =
        ["completed", "timed_out", "unfinished"].map(|k| ios[k].as_u64().unwrap()).into();
    assert_eq!(outcomes, [2, 0, 0], "{ios}");
    for io in ios["slowest"].as_array().unwrap() {
        assert!(close(io["io@compute_us"].as_f64().unwrap(), 62 * us), "{io}");
    }
}

/// At the storage mirror alone: a read's command at 2.0 µs, its data at 10.0, its
/// completion at 22.1, then the host's copy of the command sent again at 23.1 (its ACK of
/// the completion had not come: the host's transport resent the capsule), and the host's
/// ACK at 30.0. The target served the first copy: io@storage is 22.1 − 2.0 = 20.1 µs, and
/// the I/O was retransmitted (times hand-set).
#[test]
fn a_command_copy_after_its_completion_moves_no_anchor() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use roceprobe::wire::nvme::{opcode, Sgl, Sqe, FLAGS_SGL, SQE_LEN};
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.16.0.1".parse().unwrap(), "10.16.0.2".parse().unwrap());
    let (host_qp, target_qp) = (0x161u32, 0x261u32);
    let sgl = Sgl::Keyed { address: 0x30_0000, length: 4096, key: 0x5, invalidate: false };
    let sqe = Sqe { opcode: opcode::READ, flags: FLAGS_SGL, cid: 0, nsid: 1, sgl, slba: 0, nlb: 7 };
    let mut capsule = [0u8; SQE_LEN];
    sqe.emit(&mut capsule);
    let cqe = completion_capsule(0, 1, 1);
    let reth =
        ExtHeaders { reth: Some(Reth { va: 0x30_0000, rkey: 0x5, dma_len: 4096 }), ..Default::default() };
    let ack = ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() };
    let command = || roce(host, target, op::SEND_ONLY, target_qp, 40, ExtHeaders::default(), &capsule);
    let frames = [
        (2_000, command()),
        (10_000, roce(target, host, op::WRITE_ONLY, host_qp, 70, reth, &[0u8; 4096])),
        (22_100, roce(target, host, op::SEND_ONLY, host_qp, 71, ExtHeaders::default(), &cqe)),
        (23_100, command()),
        (30_000, roce(host, target, op::ACKNOWLEDGE, target_qp, 71, ack, &[])),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "late_copy.pcap", &frames);
    let s = replay_summary(&[pcap.as_path()], &["--vantage", "storage=file:0"]);
    let l = series_where(&s, "segment", "io@storage");
    assert_eq!(l["count"], 1, "{l}");
    assert!(close(l["max_us"].as_f64().unwrap(), 20_100), "{l}");
    assert_eq!(
        (s["ios"]["completed"].as_u64(), s["ios"]["retransmitted"].as_u64()),
        (Some(1), Some(1)),
        "{}",
        s["ios"]
    );
}

/// Two reads' commands, one completed 10 µs later, the other never: the exit report says
/// one I/O was still awaiting its completion when the run ended.
#[test]
fn the_exit_report_names_an_io_left_open() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::ExtHeaders;
    use roceprobe::wire::nvme::{opcode, Sgl, Sqe, FLAGS_SGL, SQE_LEN};
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.17.0.1".parse().unwrap(), "10.17.0.2".parse().unwrap());
    let command = |cid: u16, psn| {
        let sgl = Sgl::Keyed { address: 0x1000 * u64::from(cid + 1), length: 512, key: 9, invalidate: false };
        let mut capsule = [0u8; SQE_LEN];
        Sqe { opcode: opcode::READ, flags: FLAGS_SGL, cid, nsid: 1, sgl, slba: 0, nlb: 0 }.emit(&mut capsule);
        roce(host, target, op::SEND_ONLY, 0x271, psn, ExtHeaders::default(), &capsule)
    };
    let cqe = completion_capsule(1, 1, 1);
    let frames = spaced(
        vec![
            command(1, 10),
            command(2, 11),
            roce(target, host, op::SEND_ONLY, 0x171, 50, ExtHeaders::default(), &cqe),
        ],
        5_000,
    );
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "open.pcap", &frames);
    let o = Command::new(bin()).args(["replay", pcap.to_str().unwrap()]).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success());
    assert!(
        out.lines().any(|l| l == "  I/Os: 1 still awaiting their completion at the end (ios.unfinished)"),
        "{out}"
    );
}

/// A 16 KiB write whose data the target READs in four parts of 4 KiB (each READ where the
/// last ended, as a target whose READs take a bounded number of pages does), each answered
/// by its READ Response Only; times hand-set (µs): command 0, READs 5, 6, 7, 8, their
/// responses 9, 10, 11, 12, completion 20, the host's ACK 21. The READ phase runs from the
/// first READ to the last one's response: compute = 12 − 5 = 7; storage (this capture as
/// the storage mirror) = (5 − 0) + (20 − 12) = 13; nothing was sent again.
#[test]
fn a_write_read_in_several_parts_spans_them_all() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use roceprobe::wire::nvme::{opcode, Sgl, Sqe, FLAGS_SGL, SQE_LEN};
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.18.0.1".parse().unwrap(), "10.18.0.2".parse().unwrap());
    let (host_qp, target_qp) = (0x181u32, 0x281u32);
    let (va, key) = (0x40_0000u64, 0x33u32);
    let sgl = Sgl::Keyed { address: va, length: 16_384, key, invalidate: false };
    let mut capsule = [0u8; SQE_LEN];
    Sqe { opcode: opcode::WRITE, flags: FLAGS_SGL, cid: 4, nsid: 1, sgl, slba: 0, nlb: 31 }
        .emit(&mut capsule);
    let cqe = completion_capsule(4, 1, 1);
    let us = 1_000u64;
    let mut frames =
        vec![(0, roce(host, target, op::SEND_ONLY, target_qp, 100, ExtHeaders::default(), &capsule))];
    for k in 0..4u32 {
        let reth = ExtHeaders {
            reth: Some(Reth { va: va + u64::from(k) * 4096, rkey: key, dma_len: 4096 }),
            ..Default::default()
        };
        let ack = ExtHeaders { aeth: Some(Aeth::ack(31, k + 1)), ..Default::default() };
        frames.push((
            (5 + u64::from(k)) * us,
            roce(target, host, op::READ_REQUEST, host_qp, 500 + k, reth, &[]),
        ));
        frames.push((
            (9 + u64::from(k)) * us,
            roce(host, target, op::READ_RESPONSE_ONLY, target_qp, 500 + k, ack, &[0u8; 4096]),
        ));
    }
    frames.push((20 * us, roce(target, host, op::SEND_ONLY, host_qp, 504, ExtHeaders::default(), &cqe)));
    let ack = ExtHeaders { aeth: Some(Aeth::ack(31, 9)), ..Default::default() };
    frames.push((21 * us, roce(host, target, op::ACKNOWLEDGE, target_qp, 504, ack, &[])));
    frames.sort_by_key(|f| f.0);
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "parts.pcap", &frames);
    for (vantage, segment, want_ns) in [("compute", "compute", 7_000), ("storage", "storage", 13_000)] {
        let s = replay_summary(&[pcap.as_path()], &["--vantage", &format!("{vantage}=file:0")]);
        let l = series_where(&s, "segment", segment);
        assert_eq!(l["count"], 1, "{l}");
        assert!(close(l["max_us"].as_f64().unwrap(), want_ns), "{segment}: {l}");
        let ios = &s["ios"];
        assert_eq!((ios["completed"].as_u64(), ios["retransmitted"].as_u64()), (Some(1), Some(0)), "{ios}");
    }
}

/// A 3 KiB read on a queue connected by CM (path MTU 1,024: its data is a WRITE First,
/// Middle and Last, PSNs 200-202), seen at the storage mirror: the Middle is lost past the
/// mirror, the host NAKs PSN 201 (sequence error) and the target sends the Middle and the
/// Last again before the completion. A packet of the read's data was seen twice, so the
/// read is retransmitted (tshark reads the Middle's PSN twice); the same capture without
/// the NAK and the two copies has none. Times hand-set (µs).
#[test]
fn a_data_write_sent_again_from_its_middle_marks_the_read_retransmitted() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{nak_code, Aeth, ExtHeaders, Reth};
    use roceprobe::wire::nvme::{opcode, Sgl, Sqe, FLAGS_SGL, SQE_LEN};
    use std::net::IpAddr;
    let (host, target): (IpAddr, IpAddr) = ("10.19.0.1".parse().unwrap(), "10.19.0.2".parse().unwrap());
    let (host_qp, target_qp) = (0x191u32, 0x291u32);
    let (va, key) = (0x50_0000u64, 0x44u32);
    let sgl = Sgl::Keyed { address: va, length: 3072, key, invalidate: false };
    let mut capsule = [0u8; SQE_LEN];
    Sqe { opcode: opcode::READ, flags: FLAGS_SGL, cid: 6, nsid: 1, sgl, slba: 0, nlb: 5 }.emit(&mut capsule);
    let cqe = completion_capsule(6, 1, 1);
    let none = ExtHeaders::default;
    let reth = ExtHeaders { reth: Some(Reth { va, rkey: key, dma_len: 3072 }), ..Default::default() };
    let aeth = |a| ExtHeaders { aeth: Some(a), ..Default::default() };
    let data = |opcode, psn, ext| roce(target, host, opcode, host_qp, psn, ext, &[0u8; 1024]);
    let us = 1_000u64;
    let [req, rep] = nvme_queue_connected([host, target], 1, [host_qp, target_qp], 0x1900);
    let resent = [
        (
            23 * us,
            roce(
                host,
                target,
                op::ACKNOWLEDGE,
                target_qp,
                201,
                aeth(Aeth::nak(nak_code::PSN_SEQUENCE_ERROR, 0)),
                &[],
            ),
        ),
        (25 * us, data(op::WRITE_MIDDLE, 201, none())),
        (26 * us, data(op::WRITE_LAST, 202, none())),
    ];
    let mut frames = vec![
        (0, req),
        (us, rep),
        (10 * us, roce(host, target, op::SEND_ONLY, target_qp, 100, none(), &capsule)),
        (12 * us, roce(target, host, op::ACKNOWLEDGE, host_qp, 100, aeth(Aeth::ack(31, 1)), &[])),
        (20 * us, data(op::WRITE_FIRST, 200, reth)),
        (21 * us, data(op::WRITE_MIDDLE, 201, none())),
        (22 * us, data(op::WRITE_LAST, 202, none())),
        (30 * us, roce(target, host, op::SEND_ONLY, host_qp, 203, none(), &cqe)),
        (31 * us, roce(host, target, op::ACKNOWLEDGE, target_qp, 203, aeth(Aeth::ack(31, 2)), &[])),
    ];
    let dir = tempfile::tempdir().unwrap();
    let clean = write_pcap(dir.path(), "clean.pcap", &frames);
    frames.extend(resent);
    frames.sort_by_key(|f| f.0);
    let again = write_pcap(dir.path(), "again.pcap", &frames);
    let middles: Vec<_> = tshark_packets(&again).into_iter().filter(|p| p.3 == 7).map(|p| p.4).collect();
    assert_eq!(middles, [201, 201], "tshark's WRITE Middles' PSNs");
    for (pcap, want) in [(&clean, 0), (&again, 1)] {
        let s = replay_summary(&[pcap.as_path()], &["--vantage", "storage=file:0"]);
        let ios = &s["ios"];
        assert_eq!(
            (ios["completed"].as_u64(), ios["retransmitted"].as_u64()),
            (Some(1), Some(want)),
            "{}: {ios}",
            pcap.display()
        );
    }
}

/// Two QPs between A and B without CM, both sending WRITE Only from PSN 100, each WRITE
/// acknowledged 10 µs later: while both QPs' PSNs are alike an ACK cannot tell which QP it
/// answers, and the pair is learned from the first ACK that can (QP 1's third, after QP 2
/// stopped). By the definition (the first ACK covering a message) every sample is 10 µs
/// (tshark's times and PSNs below); the messages the earlier ACKs covered give none, rather
/// than one to the ACK that paired them (50 and 30 µs before). Times hand-set.
#[test]
fn an_ack_that_pairs_late_answers_only_what_no_earlier_ack_covered() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders};
    use std::net::IpAddr;
    let (a, b): (IpAddr, IpAddr) = ("10.20.0.1".parse().unwrap(), "10.20.0.2".parse().unwrap());
    let write = |qp, psn| roce(a, b, op::WRITE_ONLY, qp, psn, ExtHeaders::default(), &[0u8; 64]);
    let ack = |qp, psn| {
        roce(
            b,
            a,
            op::ACKNOWLEDGE,
            qp,
            psn,
            ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() },
            &[],
        )
    };
    let us = 1_000u64;
    let frames = vec![
        (0, write(0x21, 100)),
        (us, write(0x22, 100)),
        (10 * us, ack(0x11, 100)),
        (11 * us, ack(0x12, 100)),
        (20 * us, write(0x21, 101)),
        (21 * us, write(0x22, 101)),
        (30 * us, ack(0x11, 101)),
        (31 * us, ack(0x12, 101)),
        (40 * us, write(0x21, 102)),
        (50 * us, ack(0x11, 102)),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "late_pair.pcap", &frames);
    // tshark reads the WRITE Only (10) and ACK (17) packets and their PSNs as written.
    let read: Vec<(u64, u64)> = tshark_packets(&pcap).iter().map(|p| (p.3, p.4)).collect();
    let (w, k) = (10, 17);
    assert_eq!(
        read,
        [(w, 100), (w, 100), (k, 100), (k, 100), (w, 101), (w, 101), (k, 101), (k, 101), (w, 102), (k, 102)]
    );
    let s = replay_summary(&[pcap.as_path()], &[]);
    assert_samples(&s, "rc_ack", &[10_000]);
}
