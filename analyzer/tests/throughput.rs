//! Throughput visibility (docs/METRICS.md, "Transmissions"): transmissions against the captures' own timestamps,
//! the CSV reports' contract and sums, and the bound on tracked flows.

mod common;
use common::*;
use roceprobe::report::time::rfc3339_nanos;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

const FLOWS_HEADER: &str = "interval_start,interval_end,vantage,src_ip,dst_ip,dst_qpn,transport,packets,bytes,payload_bytes,retx_packets,retx_bytes,gap_psns,nak_seq,nak_rnr,nak_other,cnp,ecn_ce,throughput_gbps";
const TRANSMISSIONS_HEADER: &str = "start,end,vantage,src_ip,dst_ip,dst_qpn,transport,duration_s,packets,bytes,payload_bytes,retx_packets,retx_bytes,retx_rate,gap_psns,nak_seq,nak_rnr,cnp,ecn_ce,effective_gbps,raw_gbps";

/// Runs a replay with `--csv-dir` and `--summary`; returns (summary, flows rows, transmissions rows).
fn run_with_csv(files: &[&Path], extra: &[&str]) -> (Value, Vec<csv::StringRecord>, Vec<csv::StringRecord>) {
    let dir = tempfile::tempdir().unwrap();
    let csv_dir = dir.path().join("csv");
    let summary = dir.path().join("s.json");
    let mut args: Vec<String> =
        vec!["replay".into(), "-q".into(), "--csv-dir".into(), csv_dir.display().to_string()];
    args.extend(["--summary".into(), summary.display().to_string()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(files.iter().map(|f| f.display().to_string()));
    let o = Command::new(bin()).args(&args).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let read = |name: &str, header: &str| -> Vec<csv::StringRecord> {
        let text = std::fs::read_to_string(csv_dir.join(name)).unwrap();
        assert!(text.starts_with(&format!("{header},")), "{name} header: {}", text.lines().next().unwrap());
        assert!(text.ends_with("\r\n"), "{name}: RFC 4180 lines end with CRLF");
        let mut r = csv::ReaderBuilder::new().has_headers(true).from_reader(text.as_bytes());
        let width = r.headers().unwrap().len();
        let rows: Vec<csv::StringRecord> = r.records().map(|x| x.expect("every row parses")).collect();
        assert!(rows.iter().all(|row| row.len() == width), "{name}: every row has every column");
        rows
    };
    let flows = read("flows.csv", FLOWS_HEADER);
    let tx = read("transmissions.csv", TRANSMISSIONS_HEADER);
    (serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap(), flows, tx)
}

type Key = (String, String, String, String);

fn key(r: &csv::StringRecord) -> Key {
    (r[2].to_owned(), r[3].to_owned(), r[4].to_owned(), r[5].to_owned())
}

#[test]
fn no_gap_and_no_retransmission_in_the_real_captures() {
    for name in REAL_CAPTURES {
        let s = replay_summary(&[&capture(name)], &[]);
        for f in s["flows"].as_array().unwrap() {
            for field in
                ["gap_psns", "retx_packets", "out_of_window", "nak_seq", "nak_rnr", "nak_other", "cnp"]
            {
                assert_eq!(f[field], 0, "{name}: flow {} {field}", f["dst_qpn"]);
            }
        }
    }
    // rdma_read_bw's READ Requests step by 3 PSNs (3000 bytes at MTU 1024): 5 requests, no
    // gap, with the MTU learned from the READ Responses or given.
    for extra in [&[][..], &["--mtu", "1024"][..]] {
        let s = replay_summary(&[&capture("rdma_read_bw.pcap")], extra);
        let reads = s["flows"].as_array().unwrap().iter().find(|f| f["opcodes"]["12"] == 5).unwrap();
        assert_eq!((reads["messages"].as_u64(), reads["gap_psns"].as_u64()), (Some(5), Some(0)));
    }
    // With a wrong MTU, the same stream shows gaps: the span really is counted.
    let s = replay_summary(&[&capture("rdma_read_bw.pcap")], &["--mtu", "4096"]);
    let reads = s["flows"].as_array().unwrap().iter().find(|f| f["opcodes"]["12"] == 5).unwrap();
    assert_eq!(reads["gap_psns"], 8, "4 steps of 3 PSNs where 1 was expected");
}

/// Transmissions of one capture computed from tshark's view of it: per flow, split where
/// the gap between packets exceeds 1 ms (the default --flow-idle).
fn tshark_transmissions(path: &Path) -> BTreeMap<Key, Vec<(u64, u64, u64, u64)>> {
    let out = Command::new("tshark")
        .args(["-r", path.to_str().unwrap(), "-Y", "infiniband", "-T", "fields", "-E", "separator=,"])
        .args([
            "-e",
            "frame.time_epoch",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "infiniband.bth.destqp",
            "-e",
            "frame.len",
        ])
        .output()
        .expect("tshark");
    let mut per_flow: BTreeMap<Key, Vec<(u64, u64)>> = BTreeMap::new();
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let f: Vec<&str> = line.split(',').collect();
        let ns = epoch_ns(f[0]);
        let qpn = u64::from_str_radix(f[3].trim_start_matches("0x"), 16).unwrap();
        let k = ("compute".to_owned(), f[1].to_owned(), f[2].to_owned(), qpn.to_string());
        per_flow.entry(k).or_default().push((ns, f[4].parse().unwrap()));
    }
    per_flow
        .into_iter()
        .map(|(k, pkts)| {
            let mut out: Vec<(u64, u64, u64, u64)> = Vec::new(); // start, end, packets, bytes
            for (t, len) in pkts {
                match out.last_mut() {
                    Some(tx) if t <= tx.1 + 1_000_000 => {
                        tx.1 = t;
                        tx.2 += 1;
                        tx.3 += len;
                    }
                    _ => out.push((t, t, 1, len)),
                }
            }
            (k, out)
        })
        .collect()
}

#[test]
fn transmissions_and_throughput_agree_with_the_capture_timestamps() {
    let mut compared = 0;
    for name in REAL_CAPTURES {
        let path = capture(name);
        let want = tshark_transmissions(&path);
        // Every transmission, however short (by default those of fewer than four packets
        // are counted per flow).
        let (_, _, rows) = run_with_csv(&[&path], &["--min-transmission-packets", "1"]);
        let mut got: BTreeMap<Key, Vec<&csv::StringRecord>> = BTreeMap::new();
        for r in &rows {
            got.entry(key(r)).or_default().push(r);
        }
        assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{name}: flows");
        for (k, txs) in &want {
            let mut g = got[k].clone();
            g.sort_by(|a, b| a[0].cmp(&b[0]));
            assert_eq!(g.len(), txs.len(), "{name} {k:?}: number of transmissions");
            for (r, &(start, end, packets, bytes)) in g.iter().zip(txs) {
                assert_eq!(&r[0], rfc3339_nanos(start), "{name} {k:?}: start");
                assert_eq!(&r[1], rfc3339_nanos(end), "{name} {k:?}: end");
                assert_eq!((r[8].parse::<u64>().unwrap(), r[9].parse::<u64>().unwrap()), (packets, bytes));
                // D = last - first, at least one packet time (the average frame at 100 Gb/s).
                let d = (end - start).max((bytes * 8).div_ceil(packets * 100).max(1));
                assert_eq!(r[7].parse::<f64>().unwrap(), d as f64 / 1e9, "{name} {k:?}: duration");
                let raw: f64 = r[20].parse().unwrap();
                assert!((raw - bytes as f64 * 8.0 / d as f64).abs() < 5e-6, "{name} {k:?}: raw_gbps {raw}");
                compared += 1;
            }
        }
    }
    assert!(compared >= 40, "{compared} transmissions compared");
}

#[test]
fn csv_deltas_sum_to_the_summary_and_transmissions_cover_every_packet() {
    for (scenario, files, extra) in [
        (
            "rc_loss_split",
            vec!["rc_loss_split_compute.pcap", "rc_loss_split_storage.pcap"],
            vec!["--vantage", "storage=file:1"],
        ),
        (
            "nvme_vlan",
            vec!["nvme_vlan.pcap"],
            vec!["--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"],
        ),
    ] {
        let paths: Vec<_> =
            files.iter().map(|f| fixtures().join("scenarios").join(scenario).join(f)).collect();
        let refs: Vec<&Path> = paths.iter().map(|p| p.as_path()).collect();
        // Short intervals and idle so that there are many rows of each.
        let mut args = extra.clone();
        args.extend(["--interval", "100us", "--flow-idle", "20us", "--min-transmission-packets", "1"]);
        let (s, flows, tx) = run_with_csv(&refs, &args);
        assert!(flows.len() > 20 && tx.len() > 20, "{scenario}: {} / {} rows", flows.len(), tx.len());
        let cols = [
            "packets",
            "bytes",
            "payload_bytes",
            "retx_packets",
            "retx_bytes",
            "gap_psns",
            "nak_seq",
            "nak_rnr",
            "nak_other",
            "cnp",
            "ecn_ce",
        ];
        let header: Vec<&str> = FLOWS_HEADER.split(',').collect();
        let mut sums: BTreeMap<Key, BTreeMap<&str, u64>> = BTreeMap::new();
        for r in &flows {
            let e = sums.entry(key(r)).or_default();
            for c in cols {
                let i = header.iter().position(|h| *h == c).unwrap();
                *e.entry(c).or_insert(0) += r[i].parse::<u64>().unwrap();
            }
        }
        let txh: Vec<&str> = TRANSMISSIONS_HEADER.split(',').collect();
        let mut tx_packets: BTreeMap<Key, u64> = BTreeMap::new();
        for r in &tx {
            *tx_packets.entry(key(r)).or_insert(0) +=
                r[txh.iter().position(|h| *h == "packets").unwrap()].parse::<u64>().unwrap();
            // Effective throughput counts payload less retransmitted payload over D.
            let f = |c: &str| r[txh.iter().position(|h| *h == c).unwrap()].parse::<f64>().unwrap();
            let eff = (f("payload_bytes") - f("retx_bytes")) * 8.0 / (f("duration_s") * 1e9);
            assert!((f("effective_gbps") - eff).abs() < 1e-5, "{scenario}: effective_gbps");
        }
        for f in s["flows"].as_array().unwrap() {
            let k: Key = (
                f["vantage"].as_str().unwrap().into(),
                f["src_ip"].as_str().unwrap().into(),
                f["dst_ip"].as_str().unwrap().into(),
                f["dst_qpn"].to_string(),
            );
            for c in cols {
                assert_eq!(
                    sums[&k][c],
                    f[c].as_u64().unwrap(),
                    "{scenario} {k:?}: {c} summed over intervals"
                );
            }
            assert_eq!(
                tx_packets[&k],
                f["packets"].as_u64().unwrap(),
                "{scenario} {k:?}: packets in transmissions"
            );
            assert_eq!(
                tx.iter().filter(|r| key(r) == k).count() as u64,
                f["transmissions"].as_u64().unwrap(),
                "{scenario} {k:?}"
            );
        }
    }
}

#[test]
fn a_flows_row_is_for_an_interval_with_packets_of_the_flow() {
    // Flow A→B QP 10: three WRITE Only at 0.9995-0.9997 s, a transmission still open when
    // the first one-second interval ends; flow B→A QP 20: a packet at 1.5 s (which moves
    // time past A→B's idle time) and one at 2.5 s. A→B's transmission ends in the second
    // interval, which has none of its packets: it is a transmissions.csv row and counts in
    // the summary, but the second interval's flows.csv rows are B→A's alone.
    use roceprobe::capture::pcap::Writer;
    use roceprobe::wire::bth;
    use roceprobe::wire::build::RoceFrame;
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("idle.pcap");
    let (a, b): (std::net::IpAddr, std::net::IpAddr) =
        ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
    let t0 = 1_800_000_000_000_000_000u64;
    let mut w = Writer::new(std::fs::File::create(&pcap).unwrap()).unwrap();
    let payload = [0u8; 64];
    for (src, dst, qpn, psn, at) in [
        (a, b, 10, 0, 999_500_000),
        (a, b, 10, 1, 999_600_000),
        (a, b, 10, 2, 999_700_000),
        (b, a, 20, 0, 1_500_000_000),
        (b, a, 20, 1, 2_500_000_000),
    ] {
        let mut f =
            RoceFrame::new(src, dst, bth::Repr { opcode: 0x0A, dest_qp: qpn, psn, ..Default::default() });
        f.payload = &payload;
        let f = f.emit();
        w.write(t0 + at, &f, f.len() as u32).unwrap();
    }
    drop(w);
    let (s, flows, tx) = run_with_csv(&[&pcap], &["--min-transmission-packets", "2"]);
    let rows: Vec<(String, String)> = flows.iter().map(|r| (r[0].to_owned(), r[5].to_owned())).collect();
    let second = rfc3339_nanos(t0 + 1_000_000_000);
    let first = rfc3339_nanos(t0);
    let third = rfc3339_nanos(t0 + 2_000_000_000);
    assert_eq!(
        rows,
        [(first, "10".to_owned()), (second, "20".to_owned()), (third, "20".to_owned())],
        "{flows:?}"
    );
    assert_eq!(tx.len(), 1, "A→B's transmission of three packets");
    assert_eq!((&tx[0][5], &tx[0][8]), ("10", "3"));
    let ab = s["flows"].as_array().unwrap().iter().find(|f| f["dst_qpn"] == 10).unwrap();
    assert_eq!((ab["packets"].as_u64(), ab["transmissions"].as_u64()), (Some(3), Some(1)));
}

#[test]
fn short_transmissions_are_counted_per_flow_and_interval() {
    // By default a transmission of fewer than four packets, without a NAK, is not a
    // transmissions.csv row: its flow's flows.csv row counts it (short_transmissions and
    // their packets and bytes) in the interval it ended in. Per flow, rows plus counted ones
    // are the generator's transmissions, and their packets every packet of the flow.
    const MIN: u64 = 4;
    assert_eq!(roceprobe::defaults::MIN_TRANSMISSION_PACKETS, MIN);
    let mut short_seen = 0;
    for scenario in ["misc", "rc_loss_vlan", "nvme_vlan", "collective_vlan"] {
        let t = scenario_truth(scenario);
        let files = scenario_files(scenario, &t);
        let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
        let args = scenario_args(&t);
        let extra: Vec<&str> = args.iter().map(String::as_str).collect();
        let (s, flows, tx) = run_with_csv(&refs, &extra);
        let mut fh: Vec<&str> = FLOWS_HEADER.split(',').collect();
        fh.extend(roceprobe::report::csv::FLOWS_EXTRA.split(','));
        let col = |name: &str| fh.iter().position(|h| *h == name).unwrap();
        let mut txh: Vec<&str> = TRANSMISSIONS_HEADER.split(',').collect();
        txh.extend(roceprobe::report::csv::TRANSMISSIONS_EXTRA.split(','));
        let tcol = |name: &str| txh.iter().position(|h| *h == name).unwrap();
        // Per flow: (transmissions, packets, bytes) from the rows and from the counts.
        let mut got: BTreeMap<Key, (u64, u64, u64)> = BTreeMap::new();
        for r in &tx {
            let e = got.entry(key(r)).or_default();
            let n = |c: &str| r[tcol(c)].parse::<u64>().unwrap();
            let naks = n("nak_seq") + n("nak_rnr") + n("nak_other");
            assert!(n("packets") >= MIN || naks > 0, "{scenario}: a short transmission was written");
            *e = (e.0 + 1, e.1 + n("packets"), e.2 + n("bytes"));
        }
        for r in &flows {
            let e = got.entry(key(r)).or_default();
            let n = |c: &str| r[col(c)].parse::<u64>().unwrap();
            let short = n("short_transmissions");
            let packets = n("short_transmission_packets");
            assert!((short..=short * (MIN - 1)).contains(&packets), "{scenario}: one to three packets each");
            short_seen += short;
            *e = (e.0 + short, e.1 + n("short_transmission_packets"), e.2 + n("short_transmission_bytes"));
        }
        for f in t["flows"].as_array().unwrap() {
            let k: Key = (
                f["vantage"].as_str().unwrap().into(),
                f["src_ip"].as_str().unwrap().into(),
                f["dst_ip"].as_str().unwrap().into(),
                f["dst_qpn"].to_string(),
            );
            let want = (
                f["transmissions"].as_u64().unwrap(),
                f["packets"].as_u64().unwrap(),
                f["bytes"].as_u64().unwrap(),
            );
            assert_eq!(got.get(&k).copied().unwrap_or_default(), want, "{scenario} {k:?}");
        }
        let summed: u64 =
            s["flows"].as_array().unwrap().iter().map(|f| f["transmissions"].as_u64().unwrap()).sum();
        let truth: u64 =
            t["flows"].as_array().unwrap().iter().map(|f| f["transmissions"].as_u64().unwrap()).sum();
        assert_eq!(summed, truth, "{scenario}: the summary's transmissions include the short ones");
    }
    assert!(short_seen >= 5, "{short_seen} short transmissions");
}

#[test]
fn flows_beyond_max_flows_are_counted_as_untracked() {
    let path = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let all = replay_summary(&[&path], &["--vantage", "storage=vlan:20"]);
    assert_eq!(all["flows"].as_array().unwrap().len(), 24);
    let s = replay_summary(&[&path], &["--vantage", "storage=vlan:20", "--max-flows", "5"]);
    let flows = s["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 5, "the table holds what it was sized for");
    let tracked: u64 = flows.iter().map(|f| f["packets"].as_u64().unwrap()).sum();
    let untracked = s["untracked_packets"].as_u64().unwrap();
    assert!(untracked > 0);
    assert_eq!(
        tracked + untracked,
        s["roce_packets"].as_u64().unwrap(),
        "every RoCE packet is accounted for"
    );
    // The five flows that made it are counted exactly as without the bound.
    for f in flows {
        let same = all["flows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|g| {
                g["vantage"] == f["vantage"]
                    && g["src_ip"] == f["src_ip"]
                    && g["dst_ip"] == f["dst_ip"]
                    && g["dst_qpn"] == f["dst_qpn"]
            })
            .unwrap();
        assert_eq!(f["packets"], same["packets"]);
    }
    let o = run(&["replay", "--max-flows", "5", "--vantage", "storage=vlan:20", path.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("in flows beyond --max-flows"), "the table says so");
}

#[test]
fn ports_csv_gives_each_sources_receive_statistics_per_interval() {
    let files: Vec<_> = ["nvme_split_compute.pcap", "nvme_split_storage.pcap"]
        .iter()
        .map(|f| fixtures().join("scenarios/nvme_split").join(f))
        .collect();
    let refs: Vec<&Path> = files.iter().map(|p| p.as_path()).collect();
    for live in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let csv_dir = dir.path().join("csv");
        let mut args: Vec<String> =
            vec!["--interval".into(), "200us".into(), "--csv-dir".into(), csv_dir.display().to_string()];
        let s = if live {
            args.extend(["--vantage".into(), "storage=port:1".into()]);
            let mut a = vec!["live".to_string(), "--idle-exit".into(), "300ms".into()];
            a.extend(args);
            a.push("--".into());
            a.extend(eal_args(&refs));
            summary_of(&a)
        } else {
            args.extend(["--vantage".into(), "storage=file:1".into()]);
            let mut a = vec!["replay".to_string()];
            a.extend(args);
            a.extend(refs.iter().map(|p| p.display().to_string()));
            summary_of(&a)
        };
        let text = std::fs::read_to_string(csv_dir.join("ports.csv")).unwrap();
        let mut r = csv::Reader::from_reader(text.as_bytes());
        assert_eq!(
            r.headers().unwrap().iter().collect::<Vec<_>>(),
            [
                "interval_start",
                "interval_end",
                "source",
                "ipackets",
                "ibytes",
                "imissed",
                "ierrors",
                "rx_nombuf"
            ]
        );
        let mut sums: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for row in r.records() {
            let row = row.unwrap();
            let e = sums.entry(row[2].to_owned()).or_default();
            e.0 += row[3].parse::<u64>().unwrap();
            e.1 += row[5].parse::<u64>().unwrap()
                + row[6].parse::<u64>().unwrap()
                + row[7].parse::<u64>().unwrap();
        }
        assert_eq!(sums.len(), 2, "live {live}: both sources");
        for (source, (packets, drops)) in sums {
            assert_eq!(
                packets,
                s["ports"][&source]["ipackets"].as_u64().unwrap(),
                "live {live}: source {source}"
            );
            assert_eq!(drops, 0);
        }
    }
}
