//! Remote mirrors as switches send them: ERSPAN type I (GRE without sequence number and no
//! ERSPAN header), II and III; the switches' clocks (a 32-bit stamp that wraps across a
//! silence, one clock per switch and session, counters steered to the probe's clock, frames
//! without a switch time beside them); mirrors cut short by the switch or fragmented on
//! their way; a routed hop mirrored twice.

mod common;
use common::*;
use roceprobe::capture::pcap::{read_all_records, Writer};
use roceprobe::wire::bth;
use roceprobe::wire::build::{arp_frame, erspan_wrap, RoceFrame};
use roceprobe::wire::erspan::{Granularity, Repr};
use serde_json::Value;
use std::collections::BTreeSet;
use std::net::Ipv4Addr;

#[test]
fn erspan_iii_nanosecond_stamps_keep_time_across_a_ten_second_silence() {
    let name = "nvme_erspan3_ns";
    let t = scenario_truth(name);
    let files = scenario_files(name, &t);
    assert_eq!(files.len(), 1);
    let frames = tshark_fields(&files[0], &["frame.time_epoch", "erspan.gra", "erspan.timestamp"]);
    // tshark: every frame is ERSPAN III with granularity 10 (IEEE 1588, nanoseconds).
    assert!(frames.iter().all(|f| f[1] == "2"), "granularity");
    let capture: Vec<u64> = frames.iter().map(|f| epoch_ns(&f[0])).collect();
    let gap = capture.windows(2).map(|w| w[1] - w[0]).max().unwrap();
    assert!(gap > 10_000_000_000 - 1_000_000, "the capture's longest silence: {gap} ns");

    let dir = tempfile::tempdir().unwrap();
    let mut args = scenario_args(&t);
    args.extend(["--csv-dir".to_string(), dir.path().display().to_string()]);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let s = replay_summary(&[files[0].as_path()], &a);
    for v in ["compute", "storage"] {
        assert_eq!(s["time_sources"][v], serde_json::json!(["erspan"]), "{v}");
    }
    // Both mirror paths take the same 7 µs for every packet, so the switches' clocks, each
    // anchored to its session's first capture time, give every packet exactly the time it
    // was captured at: the first and the last, ten seconds and more apart.
    let first = rfc3339_ns(s["first_packet"].as_str().unwrap());
    let last = rfc3339_ns(s["last_packet"].as_str().unwrap());
    assert_eq!((first, last), (capture[0], *capture.last().unwrap()));
    // Every transmission starts and ends at a packet's capture time, on both sides of the
    // silence and at both vantages.
    let times: BTreeSet<u64> = capture.iter().copied().collect();
    let rows = read_csv(&dir.path().join("transmissions.csv"));
    let mut after = BTreeSet::new();
    for r in &rows {
        for column in ["start", "end"] {
            let at = rfc3339_ns(&r[column]);
            assert!(times.contains(&at), "a transmission's {column} {} is no packet's time", r[column]);
        }
        if rfc3339_ns(&r["start"]) > capture[0] + 10_000_000_000 {
            after.insert(r["vantage"].clone());
        }
    }
    assert_eq!(
        after.into_iter().collect::<Vec<_>>(),
        ["compute", "storage"],
        "transmissions after the silence"
    );
}

#[test]
fn erspan_type_i_is_decoded_as_tshark_decodes_it() {
    let name = "misc_erspan1";
    let t = scenario_truth(name);
    for f in scenario_files(name, &t) {
        let frames = tshark_fields(
            &f,
            &["gre.flags_and_version", "gre.proto", "erspan.version", "infiniband.bth.opcode"],
        );
        // GRE without any flag (no sequence number), protocol 0x88BE, no ERSPAN header;
        // tshark finds the mirrored RoCE packet right after it.
        assert!(
            frames.iter().all(|l| l[0] == "0x0000" && l[1] == "0x88be" && l[2].is_empty()),
            "{}",
            f.display()
        );
        let roce = frames.iter().filter(|l| !l[3].is_empty()).count();
        assert!(roce * 10 > frames.len() * 7, "{}: {roce} of {} frames RoCE", f.display(), frames.len());
    }
    // What the probe counts in them is the truth (tests/scenarios.rs compares every flow).
    let s = replay_summary(
        &scenario_files(name, &t).iter().map(|p| p.as_path()).collect::<Vec<_>>(),
        &scenario_args(&t).iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert_eq!((&s["packets"], &s["roce_packets"]), (&t["packets"], &t["roce_packets"]));
    assert_eq!(s["decode_errors"].as_object().unwrap().values().filter(|v| v.as_u64() != Some(0)).count(), 0);
}

#[test]
fn a_routed_hop_mirrored_at_both_ports_counts_each_packet_once() {
    let name = "rc_loss_routed";
    let t = scenario_truth(name);
    let files = scenario_files(name, &t);
    // tshark: half the frames are the router's copies, TTL one less (IPv4 checksum right)
    // and its MAC as the source, each 0.5 to 2 µs after the copy it received.
    let frames = tshark_fields(
        &files[0],
        &["frame.time_epoch", "eth.src", "ip.ttl", "ip.checksum.status", "infiniband.bth.psn"],
    );
    let routed: Vec<&Vec<String>> = frames.iter().filter(|f| f[1] == "02:00:00:00:fe:01").collect();
    assert_eq!(routed.len() * 2, frames.len());
    assert!(routed.iter().all(|f| f[2] == "63"), "the router's copies have TTL 63");
    assert!(frames.iter().filter(|f| f[1] != "02:00:00:00:fe:01").all(|f| f[2] == "64"));
    let flow_dups: u64 =
        t["flows"].as_array().unwrap().iter().map(|f| f["mirror_duplicates"].as_u64().unwrap_or(0)).sum();
    assert_eq!(flow_dups, routed.len() as u64);

    let a: Vec<String> = scenario_args(&t);
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    let s = replay_summary(&[files[0].as_path()], &a);
    // Every flow as the truth has it: packets, retransmissions (go-back-N after a loss in
    // the fabric, RNR resends) and the duplicates, each router copy counted once as such.
    let sum = |s: &Value, field: &str| -> u64 {
        s["flows"].as_array().unwrap().iter().map(|f| f[field].as_u64().unwrap_or(0)).sum()
    };
    for field in [
        "packets",
        "bytes",
        "retx_packets",
        "retx_episodes",
        "gap_psns",
        "nak_seq",
        "nak_rnr",
        "mirror_duplicates",
    ] {
        assert_eq!(sum(&s, field), sum(&t, field), "{field}");
    }
    assert!(sum(&t, "retx_packets") > 0, "a scenario with retransmissions");
    assert_eq!(s["mirror_duplicates"]["compute"].as_u64(), Some(flow_dups));
    assert_eq!(s["packets"].as_u64(), Some(frames.len() as u64), "every frame is received");
    // Without the rule, every router copy would be a retransmission.
    let mut off = a.clone();
    off.extend(["--duplicate-window", "0"]);
    let s0 = replay_summary(&[files[0].as_path()], &off);
    assert_eq!(sum(&s0, "mirror_duplicates"), 0);
    assert!(
        sum(&s0, "retx_packets") > sum(&t, "retx_packets") + flow_dups / 2,
        "{}",
        sum(&s0, "retx_packets")
    );
}

/// nvme_erspan3 with one compute-session stamp set 5 ms ahead (50,000 of its 100 ns ticks,
/// tshark reads the new stamp): a bogus stamp within the second beyond which a stamp is
/// distrusted. That packet is timed by its capture (one more `erspan_untimed_packets`),
/// and no later frame reads as late: every I/O and every segment's sample count are the
/// unedited run's, and each figure within 0.1 µs of it (the one packet's capture time is
/// not its switch time: the mirror path's delay differs from the session's first packet's
/// by tens of ns). Before, the frames of the next 5 ms were late (counted, not analysed).
#[test]
fn an_erspan_iii_stamp_milliseconds_ahead_makes_no_frame_late() {
    let name = "nvme_erspan3";
    let t = scenario_truth(name);
    let file = &scenario_files(name, &t)[0];
    let stamps = tshark_fields(file, &["erspan.spanid", "erspan.timestamp"]);
    // The 200th frame of the compute session (101), well inside the run.
    let k = stamps.iter().enumerate().filter(|(_, f)| f[0] == "101").nth(200).unwrap().0;
    let old: u32 = stamps[k][1].parse().unwrap();
    let mut records = read_all_records(file).unwrap();
    let frame = &mut records[k].2;
    let at = frame.windows(4).position(|w| w == old.to_be_bytes()).expect("the stamp's bytes");
    frame[at..at + 4].copy_from_slice(&(old + 50_000).to_be_bytes());
    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("ahead.pcap");
    write_records(&edited, &records);
    let now = tshark_fields(&edited, &["erspan.timestamp"]);
    assert_eq!(now[k][0], (old + 50_000).to_string(), "tshark's reading of the edited stamp");
    let args = scenario_args(&t);
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let before = replay_summary(&[file.as_path()], &a);
    let after = replay_summary(&[edited.as_path()], &a);
    assert_eq!(after["reorder"]["late_packets"], serde_json::json!({"compute": 0, "storage": 0}));
    assert_eq!(
        after["erspan_untimed_packets"].as_u64(),
        before["erspan_untimed_packets"].as_u64().map(|n| n + 1)
    );
    assert_eq!(after["ios"], before["ios"]);
    let series = |s: &Value| -> Vec<Value> {
        s["latency"].as_array().unwrap().iter().filter(|l| l["segment"] != "rc_ack").cloned().collect()
    };
    let (after, before) = (series(&after), series(&before));
    assert_eq!(after.len(), before.len());
    for (a, b) in after.iter().zip(&before) {
        for (field, value) in b.as_object().unwrap() {
            match (value.as_f64(), field.ends_with("_us")) {
                (Some(v), true) => {
                    assert!((a[field].as_f64().unwrap() - v).abs() < 0.1, "{field}: {a} / {b}")
                }
                _ => assert_eq!(&a[field], value, "{field}: {a} / {b}"),
            }
        }
    }
}

/// A switch whose IEEE 1588 clock runs 5 ms behind the probe's (ERSPAN III, platform
/// sub-header 5: absolute time) mirrors 2,000 RC SEND Only packets of one QP, PSNs 0 to
/// 1,999, 10 µs apart; every 100th packet the same session also carries a mirrored ARP, and
/// the probe's port an unmirrored one, at the same capture time. Every frame without a
/// switch time stands where the mirrored traffic does, and a mirror of a frame that is no
/// RoCE packet is timed by its switch: no packet is late and no PSN is missing (by the
/// construction: 2,000 messages, 40 frames that are not RoCE). Before, each ARP was timed
/// by its capture, 5 ms ahead of the switch's time, and the next 5 ms of the QP's packets
/// were late (left out of the PSN analysis, counted as gaps). The same with two workers.
#[test]
fn frames_without_a_switch_time_stand_where_the_mirrored_traffic_does() {
    let (switch, probe) = (Ipv4Addr::new(192, 168, 0, 1), Ipv4Addr::new(192, 168, 0, 9));
    let capture0 = 1_800_000_000_000_000_000u64;
    let behind = 5_000_000u64;
    let mirror = |inner: &[u8], switch_ns: u64, seq: u32| {
        let h = Repr {
            timestamp: (switch_ns % 1_000_000_000) as u32,
            granularity: Granularity::Ieee1588,
            platform: Some((5, 0, (switch_ns / 1_000_000_000) as u32)),
            ..Repr::of_session(3, 7)
        };
        erspan_wrap(inner, &h, switch, probe, seq)
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("behind.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    let arp = arp_frame(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let mut seq = 0;
    for k in 0..2_000u32 {
        let capture = capture0 + u64::from(k) * 10_000;
        // Stamped 1 µs before it reaches the probe, on a clock 5 ms behind.
        let stamped = capture - 1_000 - behind;
        let inner = RoceFrame::new(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            bth::Repr { opcode: 0x04, dest_qp: 7, psn: k, ..Default::default() },
        )
        .emit();
        let f = mirror(&inner, stamped, seq);
        seq += 1;
        w.write(capture, &f, f.len() as u32).unwrap();
        if k % 100 == 50 {
            let f = mirror(&arp, stamped, seq);
            seq += 1;
            w.write(capture, &f, f.len() as u32).unwrap();
            w.write(capture, &arp, arp.len() as u32).unwrap();
        }
    }
    drop(w);
    for workers in ["1", "2"] {
        let s = replay_summary(&[path.as_path()], &["--workers", workers]);
        assert_eq!(s["non_roce_packets"], 40, "workers {workers}");
        assert_eq!(s["erspan_untimed_packets"], 0, "workers {workers}");
        assert_eq!(s["reorder"]["late_packets"]["compute"], 0, "workers {workers}");
        let f = s["flows"].as_array().unwrap().iter().find(|f| f["dst_qpn"] == 7).unwrap();
        assert_eq!(
            (&f["messages"], &f["gap_psns"], &f["late_packets"]),
            (&2000.into(), &0.into(), &0.into())
        );
    }
}

/// A mirror session that cuts each frame (a truncation size of 60 bytes: the BTH ends at 54,
/// a READ Request's RETH is cut off) and says so in the ERSPAN header's T bit (tshark reads
/// `erspan.truncated` 1 on every frame): each mirrored packet counts in its flow as tshark
/// counts the whole capture, with one worker and two. Without the T bit the same frames are
/// broken: the five READ Requests (tshark's opcode 12 count) are `ext_headers_truncated`.
#[test]
fn a_mirror_that_cuts_frames_and_says_so_loses_no_packet() {
    let name = "rdma_read_bw.pcap";
    let t = &pinned_truth()["captures"][name];
    let dir = tempfile::tempdir().unwrap();
    let write = |truncated: bool| {
        let path = dir.path().join(format!("cut_{truncated}.pcap"));
        let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
        let h = Repr { truncated, index: 1, ..Repr::of_session(2, 3) };
        let (switch, probe) = ("192.168.0.1".parse().unwrap(), "192.168.0.9".parse().unwrap());
        for (seq, (ts, _, f)) in read_all_records(&capture(name)).unwrap().iter().enumerate() {
            let m = erspan_wrap(&f[..f.len().min(60)], &h, switch, probe, seq as u32);
            w.write(*ts, &m, m.len() as u32).unwrap();
        }
        path
    };
    let cut = write(true);
    let frames =
        tshark_fields(&cut, &["erspan.truncated", "infiniband.bth.opcode", "infiniband.reth.dmalen"]);
    assert_eq!(frames.len() as u64, t["packets"].as_u64().unwrap());
    assert!(frames.iter().all(|f| f[0] == "1" && f[2].is_empty()), "every frame cut and marked");
    assert_eq!(
        frames.iter().filter(|f| !f[1].is_empty()).count() as u64,
        t["roce_packets"].as_u64().unwrap()
    );
    for workers in ["1", "2"] {
        let s = replay_summary(&[cut.as_path()], &["--workers", workers]);
        assert_eq!(s["roce_packets"], t["roce_packets"], "workers {workers}");
        assert_eq!(flow_view(&s["flows"]), flow_view(&t["flows"]), "workers {workers}: flows");
        for f in s["flows"].as_array().unwrap() {
            assert_eq!((&f["gap_psns"], &f["retx_packets"]), (&0.into(), &0.into()), "workers {workers}");
        }
    }
    let reads =
        t["flows"].as_array().unwrap().iter().map(|f| f["opcodes"]["12"].as_u64().unwrap_or(0)).sum::<u64>();
    assert_eq!(reads, 5);
    let s = replay_summary(&[write(false).as_path()], &[]);
    assert_eq!(s["decode_errors"]["ext_headers_truncated"], reads);
    assert_eq!(s["roce_packets"].as_u64().unwrap(), t["roce_packets"].as_u64().unwrap() - reads);
}

/// Two switches mirroring under the same ERSPAN III session id (1, as two switches
/// configured alike do; tshark: one `erspan.spanid`, two tunnel sources), each stamping
/// with its own free-running 32-bit counter in 100 ns units, 2^31 ticks apart, their
/// packets interleaved 10 µs apart. Each switch is a clock of its own: every packet is timed
/// by its switch (none untimed), at its capture time (both paths take the same time), and
/// nothing is late or lost. Kept as one clock, the two counters contradicted each other at
/// every packet.
#[test]
fn two_switches_mirroring_under_one_session_id_keep_their_own_clocks() {
    let base = 1_800_000_000_000_000_000u64;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("two_switches.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    let probe = Ipv4Addr::new(192, 168, 0, 9);
    for k in 0..2_000u32 {
        let (switch, offset, src, dst, qp) = if k % 2 == 0 {
            (Ipv4Addr::new(192, 168, 0, 1), 0u32, "10.0.0.1", "10.0.0.2", 7)
        } else {
            (Ipv4Addr::new(192, 168, 0, 2), 1 << 31, "10.0.1.1", "10.0.1.2", 8)
        };
        let h = Repr {
            timestamp: offset.wrapping_add(k * 100),
            granularity: Granularity::Nanos100,
            ..Repr::of_session(3, 1)
        };
        let inner = RoceFrame::new(
            src.parse().unwrap(),
            dst.parse().unwrap(),
            bth::Repr { opcode: 0x04, dest_qp: qp, psn: k / 2, ..Default::default() },
        )
        .emit();
        let f = erspan_wrap(&inner, &h, switch, probe, k);
        w.write(base + u64::from(k) * 10_000, &f, f.len() as u32).unwrap();
    }
    drop(w);
    let frames = tshark_fields(&path, &["ip.src", "erspan.spanid", "erspan.gra", "erspan.timestamp"]);
    assert!(frames.iter().all(|f| f[0].starts_with("192.168.0.") && f[1].starts_with('1') && f[2] == "1"));
    assert_eq!(frames[1][3], (1u64 << 31 | 100).to_string(), "tshark: switch b's counter");
    for workers in ["1", "2"] {
        let s = replay_summary(&[path.as_path()], &["--workers", workers]);
        assert_eq!(s["erspan_untimed_packets"], 0, "workers {workers}");
        assert_eq!(s["time_sources"]["compute"], serde_json::json!(["erspan"]), "workers {workers}");
        assert_eq!(s["reorder"]["late_packets"]["compute"], 0, "workers {workers}");
        assert_eq!(rfc3339_ns(s["first_packet"].as_str().unwrap()), base, "workers {workers}");
        assert_eq!(
            rfc3339_ns(s["last_packet"].as_str().unwrap()),
            base + 1_999 * 10_000,
            "workers {workers}"
        );
        for f in s["flows"].as_array().unwrap() {
            assert_eq!((&f["messages"], &f["gap_psns"]), (&1000.into(), &0.into()), "workers {workers}");
        }
    }
}

/// Two switches whose free-running ERSPAN III counters (100 ns ticks) run 50 ppm fast and
/// 50 ppm slow, each mirroring a QP, a packet every millisecond for 60 s, 1 µs on its way
/// to the probe. Anchored once, the two clocks would part by 100 µs a second, past the
/// 1 ms reorder window after 10 s, and from then on every packet of the slow switch would
/// be late (left out of its flow's PSN analysis). Steered to the probe's clock, none is
/// late, none untimed, and the last packet is within 5 µs of its capture time.
#[test]
fn two_switch_counters_drifting_apart_are_each_steered_to_the_probes_clock() {
    let base = 1_800_000_000_000_000_000u64;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drift.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    let probe = Ipv4Addr::new(192, 168, 0, 9);
    let mut last = 0;
    for k in 0..60_000u64 {
        for (n, ppm) in [(1u8, 50i128), (2, -50)] {
            let sent = k * 1_000_000 + u64::from(n - 1) * 500_000;
            let ticks = (i128::from(sent) * (1_000_000 + ppm) / 1_000_000 / 100) as u32;
            let h = Repr {
                timestamp: ticks,
                granularity: Granularity::Nanos100,
                ..Repr::of_session(3, u16::from(n))
            };
            let inner = RoceFrame::new(
                Ipv4Addr::new(10, 0, n, 1).into(),
                Ipv4Addr::new(10, 0, n, 2).into(),
                bth::Repr { opcode: 0x04, dest_qp: u32::from(n), psn: k as u32, ..Default::default() },
            )
            .emit();
            let f = erspan_wrap(&inner, &h, Ipv4Addr::new(192, 168, 0, n), probe, k as u32);
            last = base + sent + 1_000;
            w.write(last, &f, f.len() as u32).unwrap();
        }
    }
    drop(w);
    for workers in ["1", "2"] {
        let s = replay_summary(&[path.as_path()], &["--workers", workers]);
        assert_eq!(s["erspan_untimed_packets"], 0, "workers {workers}");
        assert_eq!(s["reorder"]["late_packets"]["compute"], 0, "workers {workers}");
        for f in s["flows"].as_array().unwrap() {
            assert_eq!(
                (&f["messages"], &f["gap_psns"], &f["late_packets"]),
                (&60_000.into(), &0.into(), &0.into()),
                "workers {workers}"
            );
        }
        let end = rfc3339_ns(s["last_packet"].as_str().unwrap());
        assert!(
            end.abs_diff(last) <= 5_000,
            "workers {workers}: the last packet {} ns off",
            end.abs_diff(last)
        );
    }
}

/// `rdma_write_bw.pcap` mirrored through ERSPAN II towards a path of a 576-byte MTU, so
/// the tunnel fragments each mirror of more than that (written here: the outer IPv4
/// datagram cut into 552-byte parts, More Fragments and offsets set; tshark reassembles
/// them into the whole mirrors, and without reassembly decodes the first fragments' RoCE
/// headers). Each first fragment is the mirrored frame cut short: every flow counts as
/// tshark counts the capture, and the later fragments are frames that are no RoCE packet.
#[test]
fn a_mirror_fragmented_on_its_way_to_the_probe_loses_no_packet() {
    let name = "rdma_write_bw.pcap";
    let t = &pinned_truth()["captures"][name];
    let h = Repr { index: 1, ..Repr::of_session(2, 3) };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fragmented.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    let (mut frames, mut tails) = (0u64, 0u64);
    for (seq, (ts, _, f)) in read_all_records(&capture(name)).unwrap().iter().enumerate() {
        let m =
            erspan_wrap(f, &h, "192.168.0.1".parse().unwrap(), "192.168.0.9".parse().unwrap(), seq as u32);
        assert_eq!((&m[12..14], m[14]), (&[0x08, 0x00][..], 0x45), "Ethernet, IPv4 without options");
        let parts: Vec<&[u8]> = m[34..].chunks(552).collect();
        for (k, part) in parts.iter().enumerate() {
            let mut frag = m[..34].to_vec();
            frag[16..18].copy_from_slice(&(20 + part.len() as u16).to_be_bytes());
            let more = if k + 1 < parts.len() { 0x2000 } else { 0 };
            frag[20..22].copy_from_slice(&(more | (k * 552 / 8) as u16).to_be_bytes());
            frag[24..26].copy_from_slice(&[0, 0]);
            let sum =
                frag[14..34].chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum::<u32>();
            let sum = !(((sum & 0xFFFF) + (sum >> 16)) as u16);
            frag[24..26].copy_from_slice(&sum.to_be_bytes());
            frag.extend_from_slice(part);
            w.write(*ts, &frag, frag.len() as u32).unwrap();
            frames += 1;
            tails += u64::from(k > 0);
        }
    }
    drop(w);
    // tshark's frame lengths: 5 of 1,098 bytes (their mirrors' 1,114 bytes after the outer
    // IPv4 header in three parts), 5 of 1,082 and 5 of 1,010 (two parts), the rest whole.
    assert_eq!(tails, 5 * 2 + 10);
    let roce = t["roce_packets"].as_u64().unwrap();
    let whole = tshark_fields_where(&path, "infiniband", &["frame.number"]);
    assert_eq!(whole.len() as u64, roce, "tshark, reassembling");
    let out = std::process::Command::new("tshark")
        .args(["-o", "ip.defragment:FALSE", "-r"])
        .arg(&path)
        .args(["-Y", "infiniband && ip.flags.mf == 1", "-T", "fields", "-e", "frame.number"])
        .output()
        .unwrap();
    let first_fragments = String::from_utf8(out.stdout).unwrap().lines().count() as u64;
    assert_eq!(first_fragments, 15, "tshark, without reassembly: the fragmented mirrors' RoCE headers");
    for workers in ["1", "2"] {
        let s = replay_summary(&[path.as_path()], &["--workers", workers]);
        assert_eq!(s["packets"].as_u64().unwrap(), frames, "workers {workers}");
        assert_eq!(s["roce_packets"].as_u64().unwrap(), roce, "workers {workers}");
        let others = t["packets"].as_u64().unwrap() - roce;
        assert_eq!(s["non_roce_packets"].as_u64().unwrap(), others + tails, "workers {workers}");
        assert_eq!(flow_view(&s["flows"]), flow_view(&t["flows"]), "workers {workers}");
    }
}
