//! The real soft-RoCE captures: roceprobe's per-flow counts equal tshark's, and the DPDK
//! path (net_pcap vdev) gives the same summary as offline replay.

mod common;
use common::*;
use serde_json::Value;
use std::process::Command;

/// tshark's `frame.time_epoch` ("1781943735.815013000") as the summary writes times.
fn rfc3339(epoch: &Value) -> String {
    let (s, frac) = epoch.as_str().unwrap().split_once('.').unwrap();
    let ns: u64 =
        s.parse::<u64>().unwrap() * 1_000_000_000 + format!("{frac:0<9}")[..9].parse::<u64>().unwrap();
    roceprobe::report::time::rfc3339_nanos(ns)
}

#[test]
fn replay_counts_equal_tshark_on_every_real_capture() {
    let truth = pinned_truth();
    for name in REAL_CAPTURES {
        let t = &truth["captures"][name];
        let s = replay_summary(&[&capture(name)], &["--check-icrc"]);
        assert_eq!(s["packets"], t["packets"], "{name}: frames");
        assert_eq!(s["ended"], "complete", "{name}: read to its end");
        assert_eq!(s["roce_packets"], t["roce_packets"], "{name}: RoCE frames");
        assert_eq!(
            s["non_roce_packets"].as_u64().unwrap(),
            t["packets"].as_u64().unwrap() - t["roce_packets"].as_u64().unwrap(),
            "{name}: non-RoCE frames"
        );
        let errors: u64 = s["decode_errors"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(errors, 0, "{name}: decode errors");
        assert_eq!(flow_view(&s["flows"]), flow_view(&t["flows"]), "{name}: flows");
        assert_eq!(s["first_packet"], rfc3339(&t["first_time_epoch"]), "{name}: first frame time");
        assert_eq!(s["last_packet"], rfc3339(&t["last_time_epoch"]), "{name}: last frame time");
        for f in s["flows"].as_array().unwrap() {
            assert_eq!(f["vantage"], "compute", "{name}: without --vantage all traffic is compute");
            assert_eq!(f["icrc_errors"], 0, "{name}: every real packet's ICRC checks out");
            // perftest's SEND exchange is not NVMe, though two of its messages have a CQE's shape.
            assert_eq!((&f["nvme_commands"], &f["nvme_completions"]), (&0.into(), &0.into()), "{name}");
        }
    }
}

/// Every real capture as a capture taking 60 bytes of each frame writes it (`editcap -s
/// 60`, as `tcpdump -s 60`): the BTH ends at byte 54, so the RETH of every RDMA WRITE First
/// and READ Request, the AtomicETH, the DETH and every payload are cut off (tshark: no
/// `infiniband.reth` left). Every packet still counts in its flow as tshark counts the whole
/// frames (packets, bytes on the wire, payload bytes, opcodes), and no PSN is taken for
/// lost or sent again: each READ Request, its length unknown, reserves no fixed span.
#[test]
fn a_capture_cut_inside_the_extension_headers_counts_every_packet_as_tshark_does_whole() {
    let truth = pinned_truth();
    let dir = tempfile::tempdir().unwrap();
    for name in REAL_CAPTURES {
        let t = &truth["captures"][name];
        let cut = cut_capture(&capture(name), 60, dir.path());
        let reth = tshark_fields(&cut, &["infiniband.reth.dmalen"]);
        assert!(reth.iter().all(|f| f[0].is_empty()), "{name}: a RETH left whole");
        let s = replay_summary(&[&cut], &[]);
        assert_eq!((&s["packets"], &s["roce_packets"]), (&t["packets"], &t["roce_packets"]), "{name}");
        let errors: u64 = s["decode_errors"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
        assert_eq!(errors, 0, "{name}: decode errors");
        assert_eq!(flow_view(&s["flows"]), flow_view(&t["flows"]), "{name}: flows");
        for f in s["flows"].as_array().unwrap() {
            for k in ["gap_psns", "retx_packets", "out_of_window"] {
                assert_eq!(f[k], 0, "{name}: {k} of {} -> {} QP {}", f["src_ip"], f["dst_ip"], f["dst_qpn"]);
            }
        }
    }
}

#[test]
fn transports_of_the_real_captures() {
    let expect = [("pingpong_uc.pcap", "UC"), ("pingpong_ud.pcap", "UD"), ("rdma_atomic_bw.pcap", "RC")];
    for (name, transport) in expect {
        let s = replay_summary(&[&capture(name)], &[]);
        for f in s["flows"].as_array().unwrap() {
            assert_eq!(f["transport"], transport, "{name}");
        }
    }
}

#[test]
fn live_through_dpdk_net_pcap_equals_replay_on_every_real_capture() {
    for name in REAL_CAPTURES {
        let path = capture(name);
        let replay = replay_summary(&[&path], &[]);
        let live = live_summary(&[&path], &[]);
        // The times came from the file both ways (net_pcap hands them to the probe in the
        // RX timestamp field, as a NIC would its own).
        assert_eq!(replay["time_sources"], serde_json::json!({"compute": ["pcap"]}), "{name}");
        assert_eq!(live, replay, "{name}: live (net_pcap) and replay summaries differ");
    }
}

#[test]
fn tshark_still_reports_the_pinned_figures() {
    // The pinned figures are only worth something if tshark agrees with them today.
    let script = fixtures().join("../scripts/tshark-truth");
    let o = Command::new("python3").arg(script).arg("--check").output().expect("python3");
    assert!(
        o.status.success(),
        "scripts/tshark-truth --check: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn two_files_are_two_vantages() {
    // The same capture as compute (file 0) and storage (file 1): every flow twice, once per
    // vantage, with the same counts; through DPDK the ports map the same way.
    let a = capture("rdma_write_bw.pcap");
    let single = replay_summary(&[&a], &[]);
    let both = replay_summary(&[&a, &a], &["--vantage", "storage=file:1"]);
    assert_eq!(both["packets"].as_u64().unwrap(), 2 * single["packets"].as_u64().unwrap());
    let flows = both["flows"].as_array().unwrap();
    let n = single["flows"].as_array().unwrap().len();
    assert_eq!(flows.len(), 2 * n);
    for (i, v) in ["compute", "storage"].iter().enumerate() {
        let part: Vec<Value> = flows[i * n..(i + 1) * n].to_vec();
        assert!(part.iter().all(|f| f["vantage"] == *v));
        assert_eq!(flow_view(&Value::Array(part)), flow_view(&single["flows"]));
    }
    // net_pcap hands each file over as fast as it can, a burst per port in turn: the second
    // port's frames of second 0 come after the first port's of second 1. Here the order
    // between the vantages does not matter, so frames are analysed as they come.
    let live = live_summary(&[&a, &a], &["--vantage", "storage=port:1", "--reorder-window", "0"]);
    assert_eq!(live["flows"], both["flows"]);
}

#[test]
fn every_real_roce_frame_carries_a_good_icrc() {
    use roceprobe::wire::{decode_frame, icrc, Decoded};
    let mut checked = 0;
    for name in REAL_CAPTURES {
        for f in roceprobe::capture::pcap::read_all_frames(&capture(name)).unwrap() {
            if let Decoded::Roce(p) = decode_frame(&f) {
                assert_eq!(icrc::check(&p.icrc), Some(true), "{name}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 236, "the RoCE frames tshark counts in the ten captures");
}

/// rdma_cm.pcap (a real RoCE stack's CM handshake, then SENDs both ways), and the same
/// connection again 100 s later as a new connection on the same QPs: new communication ids,
/// every PSN (the packets' and the REQ's and REP's starting PSNs) moved on by 0x500000.
/// tshark reads the REQ's starting PSN as the first PSN of the responder's requests and the
/// REP's as the requester's (what each sender expects to receive), so the second
/// connection restarts each direction there, and every count of the run is twice the
/// capture's alone. Before, the REQ's PSN restarted the requester's direction: a gap of
/// 672,919 PSNs one way and 31 retransmissions the other.
#[test]
fn a_new_connection_restarts_each_direction_at_the_psn_cm_announced_for_it() {
    use roceprobe::capture::pcap::{read_all_records, Writer};
    const D: u32 = 0x50_0000;
    let file = capture("rdma_cm.pcap");
    let rows = tshark_fields(
        &file,
        &[
            "ip.src",
            "ip.dst",
            "infiniband.bth.opcode",
            "infiniband.bth.psn",
            "infiniband.cm.req.startpsn",
            "infiniband.cm.rep.startpsn",
        ],
    );
    let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    for column in [4, 5] {
        let cm = rows.iter().find(|r| !r[column].is_empty()).expect("the REQ and the REP");
        // The first request sent to the CM message's sender (not an RC response, 13-18,
        // nor a CM MAD, 100).
        let request = |r: &&Vec<String>| !matches!(r[2].parse::<u8>().unwrap(), 13..=18 | 100);
        let first = rows.iter().filter(request).find(|r| r[1] == cm[0]).unwrap();
        assert_eq!(hex(&cm[column]), first[3].parse::<u32>().unwrap(), "{cm:?} / {first:?}");
    }
    let records = read_all_records(&file).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let twice = dir.path().join("twice.pcap");
    let mut w = Writer::new(std::fs::File::create(&twice).unwrap()).unwrap();
    for (ts, len, f) in &records {
        w.write(*ts, f, *len).unwrap();
    }
    let add = |b: &mut [u8], at: usize| {
        let v = u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]]).wrapping_add(D) & 0xFF_FFFF;
        b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
    };
    for (ts, len, f) in &records {
        let mut f = f.clone();
        assert_eq!(&f[12..14], [0x08, 0x00], "plain IPv4 frames");
        let bth = 14 + usize::from(f[14] & 0x0F) * 4 + 8;
        add(&mut f, bth + 9);
        if f[bth] == 100 && f[bth + 5..bth + 8] == [0, 0, 1] {
            // A CM MAD after BTH and DETH; its message at 24 (communication ids first).
            let mad = bth + 20;
            let msg = mad + 24;
            let attribute = u16::from_be_bytes([f[mad + 16], f[mad + 17]]);
            f[mad + 15] ^= 0x5A; // a transaction of its own
            f[msg] ^= 0x5A;
            if attribute != 0x0010 {
                f[msg + 4] ^= 0x5A;
            }
            match attribute {
                0x0010 => add(&mut f, msg + 44),
                0x0013 => add(&mut f, msg + 20),
                _ => {}
            }
        }
        w.write(ts + 100_000_000_000, &f, *len).unwrap();
    }
    drop(w);
    let once = replay_summary(&[file.as_path()], &[]);
    let both = replay_summary(&[twice.as_path()], &[]);
    let fields = ["packets", "bytes", "messages", "retx_packets", "gap_psns", "out_of_window", "nak_seq"];
    let view = |s: &Value| -> Vec<(String, Vec<u64>)> {
        let mut v: Vec<_> = s["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    format!("{}>{} {}", f["src_ip"], f["dst_ip"], f["dst_qpn"]),
                    fields.map(|k| f[k].as_u64().unwrap()).to_vec(),
                )
            })
            .collect();
        v.sort();
        v
    };
    let doubled: Vec<_> =
        view(&once).into_iter().map(|(k, v)| (k, v.iter().map(|n| 2 * n).collect())).collect();
    assert_eq!(view(&both), doubled);
}

/// `rdma_cm.pcap` without the first request of each direction of its connection (tshark:
/// the first frame to each CM message's sender that is neither an RC response nor a CM
/// MAD, its PSN the message's starting PSN). Each direction's PSN analysis starts at the
/// PSN CM announced for it, so the lost request is a gap of one PSN there, before any
/// packet of the flow was seen; nothing else moves. Before, the first packet seen started
/// the analysis and the loss went unseen.
#[test]
fn a_first_request_lost_right_after_cm_announced_its_psn_is_a_gap() {
    use roceprobe::capture::pcap::{read_all_records, Writer};
    let file = capture("rdma_cm.pcap");
    let rows = tshark_fields(
        &file,
        &[
            "frame.number",
            "ip.src",
            "ip.dst",
            "infiniband.bth.opcode",
            "infiniband.bth.psn",
            "infiniband.bth.destqp",
            "infiniband.cm.req.startpsn",
            "infiniband.cm.rep.startpsn",
        ],
    );
    let hex = |s: &str| u32::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let request =
        |r: &&Vec<String>| !r[3].is_empty() && !matches!(r[3].parse::<u8>().unwrap(), 13..=18 | 100);
    let mut lost = Vec::new();
    for column in [6, 7] {
        let cm = rows.iter().find(|r| !r[column].is_empty()).expect("the REQ and the REP");
        let first = rows.iter().filter(request).find(|r| r[2] == cm[1]).unwrap();
        assert_eq!(hex(&cm[column]), first[4].parse::<u32>().unwrap());
        lost.push((
            first[0].parse::<usize>().unwrap() - 1,
            first[1].clone(),
            first[2].clone(),
            hex(&first[5]),
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("first_lost.pcap");
    let mut w = Writer::new(std::fs::File::create(&cut).unwrap()).unwrap();
    for (k, (ts, len, f)) in read_all_records(&file).unwrap().iter().enumerate() {
        if !lost.iter().any(|l| l.0 == k) {
            w.write(*ts, f, *len).unwrap();
        }
    }
    drop(w);
    let s = replay_summary(&[cut.as_path()], &[]);
    for f in s["flows"].as_array().unwrap() {
        let gap = lost.iter().any(|l| f["src_ip"] == l.1 && f["dst_ip"] == l.2 && f["dst_qpn"] == l.3);
        let at = format!("{} -> {} QP {}", f["src_ip"], f["dst_ip"], f["dst_qpn"]);
        assert_eq!(f["gap_psns"], u64::from(gap), "{at}");
        assert_eq!((&f["retx_packets"], &f["out_of_window"]), (&0.into(), &0.into()), "{at}");
    }
    assert_eq!(
        s["flows"].as_array().unwrap().iter().map(|f| f["gap_psns"].as_u64().unwrap()).sum::<u64>(),
        2
    );
}

/// `rdma_write_bw.pcap` as a pcapng file whose interface says (`if_fcslen` 4) its frames end
/// with their 4-byte FCS, written so here (tshark finds an `eth.fcs` in every frame): the
/// flows are the capture's as tshark counts them without it. Before, each frame counted 4
/// bytes more.
#[test]
fn a_pcapng_file_of_frames_with_their_fcs_counts_them_without_it() {
    use roceprobe::capture::pcap::read_all_records;
    let name = "rdma_write_bw.pcap";
    let block = |kind: u32, body: &[u8]| {
        let len = (12 + body.len()) as u32;
        [&kind.to_le_bytes()[..], &len.to_le_bytes(), body, &len.to_le_bytes()].concat()
    };
    let mut file =
        block(0x0A0D_0D0A, &[&0x1A2B_3C4Du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xFF; 8]].concat());
    // Link type 1 (Ethernet), snap length 0; if_tsresol 9 (ns), if_fcslen 4; end of options.
    file.extend(block(
        1,
        &[1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 1, 0, 9, 0, 0, 0, 13, 0, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0],
    ));
    for (ts, len, f) in read_all_records(&capture(name)).unwrap() {
        assert_eq!(len as usize, f.len(), "whole frames");
        let mut data = f.clone();
        data.extend([0u8; 4]);
        let n = data.len() as u32;
        data.resize(data.len().div_ceil(4) * 4, 0);
        let head = [0u32, (ts >> 32) as u32, ts as u32, n, n];
        file.extend(block(
            6,
            &[&head.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()[..], &data].concat(),
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fcs.pcapng");
    std::fs::write(&path, &file).unwrap();
    let t = &pinned_truth()["captures"][name];
    let fcs = tshark_fields(&path, &["eth.fcs"]);
    assert_eq!(fcs.len() as u64, t["packets"].as_u64().unwrap());
    assert!(fcs.iter().all(|f| !f[0].is_empty()), "tshark reads an FCS in every frame");
    let s = replay_summary(&[path.as_path()], &[]);
    assert_eq!((&s["packets"], &s["roce_packets"]), (&t["packets"], &t["roce_packets"]));
    assert_eq!(flow_view(&s["flows"]), flow_view(&t["flows"]));
}

#[test]
fn flush_and_atomic_write_are_requests_in_sequence() {
    // IBTA 1.5's RC FLUSH (opcode 0x1C: FETH, then RETH) and ATOMIC WRITE (0x1D: RETH, then
    // 8 bytes), which Linux rxe sends, put into the real SEND ping-pong after the second
    // SEND from 10.1.16.62 (to QP 32) and its ACK, with that SEND's next PSNs; the
    // flow's later SENDs and the ACKs that answer them move 2 PSNs on. tshark 4.0 reads
    // the new frames' PSNs but names neither opcode. By hand: no decode error, no gap, two
    // messages more (7), and every request of the flow is answered by the ACK that covers
    // it, the two new ones by the next one (7 `rc_ack` samples).
    let records = roceprobe::capture::pcap::read_all_records(&capture("pingpong_rc.pcap")).unwrap();
    let roce = |f: &[u8]| f.len() > 54 && f[23] == 17 && f[36..38] == [0x12, 0xB7];
    let from = |f: &[u8], last: u8| f[26..30] == [10, 1, 16, last];
    let psn = |f: &[u8]| u32::from_be_bytes([0, f[51], f[52], f[53]]);
    let set_psn = |f: &mut Vec<u8>, p: u32| f[51..54].copy_from_slice(&p.to_be_bytes()[1..]);
    // .62's SENDs (opcode 4) and the ACKs from .61 (opcode 17) in .62's PSN sequence.
    let first =
        records.iter().find(|r| roce(&r.2) && from(&r.2, 62) && r.2[42] == 4).map(|r| psn(&r.2)).unwrap();
    let in_seq = |f: &[u8]| roce(f) && psn(f).wrapping_sub(first) < 100;
    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
    let (mut sends, mut inserted) = (0, false);
    for (ts, _, f) in &records {
        let mut f = f.clone();
        if in_seq(&f) && inserted {
            let p = psn(&f);
            set_psn(&mut f, p + 2);
        }
        let is_send = in_seq(&f) && from(&f, 62) && f[42] == 4;
        let is_its_ack = in_seq(&f) && from(&f, 61) && f[42] == 17;
        out.push((*ts, f.clone()));
        sends += usize::from(is_send);
        if is_its_ack && sends == 2 && !inserted {
            // After the second SEND's ACK: FLUSH and ATOMIC WRITE, 1 µs apart, built on the
            // SEND's headers (ICRC left zero: unchecked by default).
            let send =
                out.iter().rev().find(|(_, g)| in_seq(g) && from(g, 62) && g[42] == 4).unwrap().1.clone();
            let next = psn(&send) + 1;
            for (k, (opcode, ext)) in
                [(0x1Cu8, [&[0u8, 0, 0, 0x11][..], &[0x7B; 16][..]].concat()), (0x1D, [0x7B; 24].to_vec())]
                    .into_iter()
                    .enumerate()
            {
                let mut g = send[..54].to_vec();
                g[42] = opcode;
                g[43] &= 0xCF; // no pad
                set_psn(&mut g, next + k as u32);
                g.extend(&ext);
                g.extend([0u8; 4]);
                let ip_len = (g.len() - 14) as u16;
                g[16..18].copy_from_slice(&ip_len.to_be_bytes());
                g[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
                out.push((ts + 1_000 * (k as u64 + 1), g));
            }
            inserted = true;
        }
    }
    assert!(inserted);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flush.pcap");
    let mut w = roceprobe::capture::pcap::Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    for (ts, f) in &out {
        w.write(*ts, f, f.len() as u32).unwrap();
    }
    drop(w);
    // tshark reads the two new frames' opcodes and PSNs where they were put.
    let new = tshark_fields_where(
        &path,
        "infiniband.bth.opcode >= 28",
        &["infiniband.bth.opcode", "infiniband.bth.psn"],
    );
    assert_eq!(new, [["28", &(first + 2).to_string()[..]], ["29", &(first + 3).to_string()[..]]]);
    let s = replay_summary(&[path.as_path()], &[]);
    let errors: u64 = s["decode_errors"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    assert_eq!(errors, 0, "{}", s["decode_errors"]);
    let flow = s["flows"].as_array().unwrap().iter().find(|f| f["src_ip"] == "10.1.16.62").unwrap();
    assert_eq!(flow["opcodes"], serde_json::json!({"4": 5, "17": 5, "28": 1, "29": 1}), "{flow}");
    let got = |field: &str| flow[field].as_u64().unwrap();
    assert_eq!((got("gap_psns"), got("retx_packets"), got("out_of_window")), (0, 0, 0), "{flow}");
    assert_eq!(got("messages"), 7);
    let acks = s["latency"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["op"] == "rc_ack" && l["initiator_ip"] == "10.1.16.62")
        .unwrap();
    assert_eq!(acks["count"], 7, "{acks}");
}

#[test]
fn frames_cut_without_a_word_count_as_long_as_their_headers_say() {
    // Every record of the real RDMA WRITE run cut to 100 bytes, its length on the wire
    // made 100 too: what a local SPAN port that truncates its copies delivers, or a cut
    // capture replayed through `net_pcap`. Nothing says the frames were cut; their IP
    // headers say how long they were, and each flow's packets, bytes, payload bytes and
    // opcodes are tshark's on the whole frames (before, `bytes` counted 100 a frame while
    // the payload, from the headers, counted the whole: 1,500 bytes beside 15,000 of
    // payload on QP 27).
    // Then every record cut by 2 bytes, inside its ICRC (every payload whole): counted
    // whole too, and the same with a second capture beside it, whose frames make the
    // probe hold them for the time order (a held frame keeps its headers and payload, not
    // its ICRC; before, a frame cut in its ICRC counted 2 bytes short unless held).
    let name = "rdma_write_bw.pcap";
    let dir = tempfile::tempdir().unwrap();
    let t = &pinned_truth()["captures"][name];
    // (how, bytes kept of a frame of n)
    let at_100 = |n: usize| n.min(100);
    let in_icrc = |n: usize| n - 2;
    for (how, keep) in [("at 100", &at_100 as &dyn Fn(usize) -> usize), ("in the ICRC", &in_icrc)] {
        let path = dir.path().join("cut.pcap");
        let mut w = roceprobe::capture::pcap::Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
        let mut cut = 0;
        for (ts, _, f) in roceprobe::capture::pcap::read_all_records(&capture(name)).unwrap() {
            let keep = keep(f.len());
            cut += usize::from(keep < f.len());
            w.write(ts, &f[..keep], keep as u32).unwrap();
        }
        drop(w);
        assert!(cut >= 15, "{how}: the WRITEs are cut");
        let other = capture("rdma_read_bw.pcap");
        for files in [vec![path.as_path()], vec![path.as_path(), other.as_path()]] {
            let s = replay_summary(&files, &[]);
            let errors: u64 =
                s["decode_errors"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
            assert_eq!(errors, 0, "{how}: {}", s["decode_errors"]);
            let flows: Vec<Value> = s["flows"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| t["flows"].as_array().unwrap().iter().any(|g| g["dst_qpn"] == f["dst_qpn"]))
                .cloned()
                .collect();
            assert_eq!(
                flow_view(&Value::Array(flows)),
                flow_view(&t["flows"]),
                "{how}, {} files",
                files.len()
            );
        }
    }
}
