//! What an operator reads first: the exit report (I/O quality, slowest I/Os, flows with a
//! problem, busiest flows), I/O sizes and bandwidth (io.csv, the summary) and the slowest
//! I/Os (slow_ios.csv, the summary), checked against the generator's truth.

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// Per (initiator, target, op): completed I/Os, bytes, and I/Os per size class.
type Volumes = BTreeMap<(String, String, String), (u64, u64, [u64; 13])>;

/// The truth's I/Os that completed, with their whole latency (command to completion at the
/// compute vantage, else at the storage vantage).
fn truth_ios(t: &Value) -> Vec<(u64, &Value)> {
    t["ios"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|io| io["io_compute_ns"].as_u64().or(io["io_storage_ns"].as_u64()).map(|ns| (ns, io)))
        .collect()
}

/// Under the I/O table, the I/Os its counts do not show: nvme_faults' truth has 3 with a
/// packet sent again, and none still open at the end.
#[test]
fn the_exit_report_names_the_ios_sent_again_and_those_left_open() {
    let t = scenario_truth("nvme_faults");
    let dir = tempfile::tempdir().unwrap();
    let (out, s, _) = replay_scenario("nvme_faults", &[], dir.path());
    let n = t["io_outcomes"]["retransmitted"].as_u64().unwrap();
    assert_eq!(s["ios"]["unfinished"], 0);
    let line = out.lines().find(|l| l.starts_with("  I/Os: ")).unwrap_or_else(|| panic!("{out}"));
    assert_eq!(
        line,
        format!(
            "  I/Os: {n} with a packet sent again (ios.retransmitted, among those completed or timed out)"
        )
    );
}

#[test]
fn the_exit_report_opens_with_the_io_quality_the_summary_holds() {
    let dir = tempfile::tempdir().unwrap();
    let (out, s, _) = replay_scenario("nvme_split", &[], dir.path());
    assert!(out.starts_with("NVMe I/O quality over "), "{out}");
    let secs = s["duration_s"].as_f64().unwrap();
    assert!(secs > 0.0);
    let lat =
        |i: &str, t: &str, op: &str, seg: &str| {
            s["latency"].as_array().unwrap().iter().find(|l| {
                l["initiator_ip"] == i && l["target_ip"] == t && l["op"] == op && l["segment"] == seg
            })
        };
    let pairs = s["ios"]["by_pair"].as_array().unwrap();
    assert_eq!(pairs.len(), 18, "3 hosts × 2 targets × read, write, other");
    for p in pairs {
        let (i, t, op) = (
            p["initiator_ip"].as_str().unwrap(),
            p["target_ip"].as_str().unwrap(),
            p["op"].as_str().unwrap(),
        );
        let line = out
            .lines()
            .find(|l| l.split_whitespace().take(3).collect::<Vec<_>>() == [i, t, op])
            .unwrap_or_else(|| panic!("no row for {i} {t} {op}:\n{out}"));
        let cells: Vec<&str> = line.split_whitespace().collect();
        let (n, bytes) = (p["completed"].as_u64().unwrap(), p["bytes"].as_u64().unwrap());
        assert_eq!(cells[3], n.to_string());
        assert_eq!(cells[4], p["timed_out"].to_string());
        assert_eq!(cells[5], format!("{:.1}", n as f64 / secs));
        assert_eq!(cells[6], format!("{:.1}", bytes as f64 / 1e6 / secs));
        assert_eq!(cells[7], (bytes / n).to_string());
        let whole = lat(i, t, op, "io@compute").unwrap();
        assert_eq!(cells[8], format!("{:.3}", whole["p50_us"].as_f64().unwrap()));
        assert_eq!(cells[9], format!("{:.3}", whole["p99_us"].as_f64().unwrap()));
        for (k, seg) in ["compute", "network", "storage"].iter().enumerate() {
            match lat(i, t, op, seg) {
                Some(l) => {
                    assert_eq!(
                        cells[10 + 2 * k],
                        format!("{:.3}", l["p50_us"].as_f64().unwrap()),
                        "{op} {seg}"
                    );
                    assert_eq!(
                        cells[11 + 2 * k],
                        format!("{:.3}", l["p99_us"].as_f64().unwrap()),
                        "{op} {seg}"
                    );
                }
                None => assert_eq!(cells[10 + 2 * k], "-", "{op} {seg}"),
            }
        }
    }
}

#[test]
fn the_exit_report_names_each_jobs_steps_and_who_held_them_back() {
    // collective_vlan: two jobs; per job its hosts, its steps and the three hosts that
    // held its steps back by the most lag in all (then finished last most often), from
    // the truth's steps.
    let t = scenario_truth("collective_vlan");
    let dir = tempfile::tempdir().unwrap();
    let (out, _, _) = replay_scenario("collective_vlan", &[], dir.path());
    let section: Vec<&str> = out
        .lines()
        .skip_while(|l| *l != "collective jobs:")
        .skip(2)
        .take_while(|l| !l.ends_with(':'))
        .collect();
    let jobs = t["jobs"].as_array().unwrap();
    assert_eq!(section.len(), jobs.len(), "{out}");
    for j in jobs {
        let name = j["name"].as_str().unwrap();
        let row =
            section.iter().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("{out}"));
        let cols: Vec<&str> = row.split_whitespace().collect();
        let steps = j["steps"].as_array().unwrap();
        assert_eq!(cols[1], j["hosts"].as_array().unwrap().len().to_string(), "{row}");
        assert_eq!(cols[2], steps.len().to_string(), "{row}");
        let mut by: BTreeMap<&str, (u64, u64, BTreeMap<&str, u64>)> = BTreeMap::new();
        for s in steps {
            let e = by.entry(s["straggler_host"].as_str().unwrap()).or_default();
            e.0 += 1;
            e.1 += s["lag_ns"].as_u64().unwrap();
            *e.2.entry(s["reason"].as_str().unwrap()).or_default() += 1;
        }
        let mut ranked: Vec<_> = by.into_iter().collect();
        ranked.sort_by_key(|(_, (n, lag, _))| std::cmp::Reverse((*lag, *n)));
        let held: Vec<String> = ranked
            .iter()
            .take(3)
            .map(|(host, (n, lag, why))| {
                let why: Vec<String> = why.iter().map(|(r, k)| format!("{r} {k}")).collect();
                format!("{host} ({:.3}, {n}, {})", *lag as f64 / 1e3, why.join(" "))
            })
            .collect();
        assert!(row.ends_with(&held.join("; ")), "{row}\nexpected {}", held.join("; "));
    }
}

#[test]
fn the_exit_report_counts_the_mirrors_second_copies() {
    // rc_loss_routed: both ports of a routed hop mirrored, every packet twice; its flows
    // count each once (the truth's flows hold half of its frames).
    let t = scenario_truth("rc_loss_routed");
    let in_flows: u64 = t["flows"].as_array().unwrap().iter().map(|f| f["packets"].as_u64().unwrap()).sum();
    let frames = t["packets"].as_u64().unwrap();
    assert!(in_flows < frames);
    let dir = tempfile::tempdir().unwrap();
    let (out, _, _) = replay_scenario("rc_loss_routed", &[], dir.path());
    let first = out.lines().find(|l| l.contains(" frames: ")).unwrap();
    assert!(first.starts_with(&format!("{frames} frames: {frames} RoCEv2")), "{first}");
    assert!(
        first.contains(&format!("; mirror duplicates {} compute, 0 storage", frames - in_flows)),
        "{first}"
    );
}

#[test]
fn io_bytes_and_sizes_match_the_truth_in_the_summary_and_io_csv() {
    for name in ["nvme_vlan", "nvme_erspan3_skewed"] {
        let t = scenario_truth(name);
        // Per (initiator, target, op): completed I/Os, bytes, and I/Os per size class (up to
        // 512 B, 1 KiB, ... 1 MiB, more), from the commands the generator sent.
        let mut want = Volumes::new();
        for (_, io) in truth_ios(&t) {
            let k = (
                io["initiator_ip"].as_str().unwrap().into(),
                io["target_ip"].as_str().unwrap().into(),
                io["op"].as_str().unwrap().into(),
            );
            let e = want.entry(k).or_insert((0, 0, [0; 13]));
            let b = io["bytes"].as_u64().unwrap();
            e.0 += 1;
            e.1 += b;
            if b > 0 {
                let class = (0..12).find(|&c| b <= 512 << c).unwrap_or(12);
                e.2[class] += 1;
            }
        }
        assert_eq!(want.values().map(|w| w.0).sum::<u64>(), 120, "{name}");
        let dir = tempfile::tempdir().unwrap();
        let (_, s, csv) = replay_scenario(name, &["--interval", "50us"], dir.path());
        let mut summary = Volumes::new();
        for p in s["ios"]["by_pair"].as_array().unwrap() {
            let k = (
                p["initiator_ip"].as_str().unwrap().into(),
                p["target_ip"].as_str().unwrap().into(),
                p["op"].as_str().unwrap().into(),
            );
            let sizes: Vec<u64> =
                p["size_classes"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
            summary.insert(
                k,
                (
                    p["completed"].as_u64().unwrap(),
                    p["bytes"].as_u64().unwrap(),
                    <[u64; 13]>::try_from(sizes).unwrap(),
                ),
            );
        }
        assert_eq!(summary, want, "{name}: summary ios.by_pair");
        // The generator's nvme_other I/Os are its Flushes (opcode 0x00 on I/O queues):
        // counted by command as io.flush, every one.
        let mut flushes = 0;
        for p in s["ios"]["by_pair"].as_array().unwrap() {
            let k = (
                p["initiator_ip"].as_str().unwrap().into(),
                p["target_ip"].as_str().unwrap().into(),
                p["op"].as_str().unwrap().into(),
            );
            if k.2 == "nvme_other" {
                assert_eq!(p["opcodes"], serde_json::json!({ "io.flush": want[&k].0 }), "{name}: {p}");
                flushes += want[&k].0;
            } else {
                assert!(p.get("opcodes").is_none(), "{name}: {p}");
            }
        }
        assert!(flushes > 0, "{name}: the scenario has flushes");
        let rows = read_csv(&csv.join("io.csv"));
        let intervals: std::collections::BTreeSet<&String> =
            rows.iter().map(|r| &r["interval_start"]).collect();
        assert!(intervals.len() > 3, "{name}: I/Os over several intervals");
        let mut from_csv = Volumes::new();
        let cols: Vec<String> = {
            let mut r = csv::Reader::from_path(csv.join("io.csv")).unwrap();
            r.headers().unwrap().iter().filter(|h| h.starts_with("size_")).map(str::to_owned).collect()
        };
        assert_eq!(cols.first().map(String::as_str), Some("size_le_512"));
        assert_eq!(cols.last().map(String::as_str), Some("size_gt_1m"));
        for r in &rows {
            let k = (r["initiator_ip"].clone(), r["target_ip"].clone(), r["op"].clone());
            let e = from_csv.entry(k).or_insert((0, 0, [0; 13]));
            let n: u64 = r["completed"].parse().unwrap();
            let b: u64 = r["bytes"].parse().unwrap();
            e.0 += n;
            e.1 += b;
            for (c, col) in cols.iter().enumerate() {
                e.2[c] += r[col].parse::<u64>().unwrap();
            }
            // The interval's rates: I/Os and MB over its length.
            assert!((r["iops"].parse::<f64>().unwrap() - n as f64 / 50e-6).abs() < 0.01, "{r:?}");
            assert!((r["mb_per_s"].parse::<f64>().unwrap() - b as f64 / 1e6 / 50e-6).abs() < 1e-5, "{r:?}");
        }
        from_csv.retain(|_, v| v.0 > 0);
        assert_eq!(from_csv, want, "{name}: io.csv summed over the intervals");
    }
}

/// A slowest I/O of roceprobe's (summary or CSV) in the truth's terms.
fn slow_key(initiator: &str, target: &str, op: &str, qpn: u64, cid: u64, bytes: u64, io_us: f64) -> String {
    format!("{initiator} {target} {op} qpn {qpn} cid {cid} {bytes} B {io_us:.3} µs")
}

/// The key of an I/O of the truth's or of the summary's (whose QP field is `qpn_field`).
fn slow_key_of(io: &Value, qpn_field: &str, io_us: f64) -> String {
    let text = |f: &str| io[f].as_str().unwrap().to_owned();
    let num = |f: &str| io[f].as_u64().unwrap();
    slow_key(
        &text("initiator_ip"),
        &text("target_ip"),
        &text("op"),
        num(qpn_field),
        num("cid"),
        num("bytes"),
        io_us,
    )
}

#[test]
fn the_slowest_ios_are_the_truths_slowest() {
    for name in ["nvme_vlan", "nvme_split"] {
        let t = scenario_truth(name);
        let mut ios = truth_ios(&t);
        ios.sort_by_key(|(ns, _)| std::cmp::Reverse(*ns));
        let truth_key = |ns: u64, io: &Value| slow_key_of(io, "target_qpn", ns as f64 / 1e3);
        let all: std::collections::HashMap<String, &Value> =
            ios.iter().map(|(ns, io)| (truth_key(*ns, io), *io)).collect();
        let want: Vec<String> = ios.iter().take(10).map(|(ns, io)| truth_key(*ns, io)).collect();
        let dir = tempfile::tempdir().unwrap();
        let (out, s, csv) = replay_scenario(name, &["--interval", "50us"], dir.path());
        let slowest = s["ios"]["slowest"].as_array().unwrap();
        let got: Vec<String> =
            slowest.iter().map(|io| slow_key_of(io, "qpn", io["io_us"].as_f64().unwrap())).collect();
        assert_eq!(got, want, "{name}: the run's 10 slowest, slowest first");
        // Each one's segments are the truth's.
        for (io, k) in slowest.iter().zip(&got) {
            let tr = all[k];
            for (ours, theirs) in [
                ("io@compute_us", "io_compute_ns"),
                ("io@storage_us", "io_storage_ns"),
                ("compute_us", "compute_ns"),
                ("storage_us", "storage_ns"),
                ("network_us", "network_ns"),
            ] {
                let want = tr[theirs].as_i64().map(|ns| ns.max(0) as f64 / 1e3);
                assert_eq!(io[ours].as_f64(), want, "{name} {k}: {ours}");
            }
        }
        assert!(out.contains("slowest I/Os:"), "{out}");
        // slow_ios.csv: per interval at most 10, slowest first, each one of the truth's I/Os
        // with its segments; together they hold the run's 10 slowest.
        let rows = read_csv(&csv.join("slow_ios.csv"));
        let mut by_interval: BTreeMap<&String, Vec<&Row>> = BTreeMap::new();
        for r in &rows {
            by_interval.entry(&r["interval_start"]).or_default().push(r);
        }
        assert!(by_interval.len() > 3, "{name}: several intervals");
        let mut csv_keys = Vec::new();
        for (start, list) in by_interval {
            assert!(list.len() <= 10, "{name} {start}");
            let io: Vec<f64> = list.iter().map(|r| r["io_us"].parse().unwrap()).collect();
            assert!(io.windows(2).all(|w| w[0] >= w[1]), "{name} {start}: slowest first");
            for (rank, r) in list.iter().enumerate() {
                assert_eq!(r["rank"], (rank + 1).to_string());
                let k = slow_key(
                    &r["initiator_ip"],
                    &r["target_ip"],
                    &r["op"],
                    r["qpn"].parse().unwrap(),
                    r["cid"].parse().unwrap(),
                    r["bytes"].parse().unwrap(),
                    r["io_us"].parse().unwrap(),
                );
                let tr = all.get(&k).unwrap_or_else(|| panic!("{name}: {k} is no I/O of the truth"));
                let storage =
                    tr["storage_ns"].as_u64().map(|ns| format!("{:.3}", ns as f64 / 1e3)).unwrap_or_default();
                assert_eq!(r["storage_us"], storage, "{name} {k}");
                csv_keys.push((r["io_us"].parse::<f64>().unwrap(), k));
            }
        }
        csv_keys.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap());
        let top: Vec<String> = csv_keys.into_iter().take(10).map(|(_, k)| k).collect();
        assert_eq!(top, want, "{name}: slow_ios.csv's slowest over the run");
    }
}

/// A capture of `n` RDMA WRITE Only packets, each to its own QP: a real packet with its
/// BTH destination QP rewritten.
fn many_qps(path: &Path, n: u32) {
    let frames = roceprobe::capture::pcap::read_all_frames(&capture("rdma_write_lat.pcap")).unwrap();
    let roce = frames.iter().find(|f| f.len() > 50 && f[36..38] == 4791u16.to_be_bytes()).unwrap();
    let f = std::fs::File::create(path).unwrap();
    let mut w = roceprobe::capture::pcap::Writer::new(std::io::BufWriter::new(f)).unwrap();
    for q in 0..n {
        let mut frame = roce.clone();
        // Ethernet 14 + IPv4 20 + UDP 8: BTH at 42, its destination QP in bytes 5..8.
        frame[47..50].copy_from_slice(&(q + 1).to_be_bytes()[1..]);
        w.write(1_700_000_000_000_000_000 + u64::from(q) * 100, &frame, frame.len() as u32).unwrap();
    }
}

#[test]
fn on_tens_of_thousands_of_qps_the_report_stays_short() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("many.pcap");
    many_qps(&pcap, 65_536);
    let summary = dir.path().join("s.json");
    let o = Command::new(bin())
        .args(["replay", "--top", "15", "--summary", summary.to_str().unwrap(), pcap.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["flows"].as_array().unwrap().len(), 65_536, "every flow in the summary");
    let out = String::from_utf8(o.stdout).unwrap();
    let busiest = out.split("busiest flows:\n").nth(1).expect("a busiest-flows table");
    let rows = busiest.lines().skip(1).take_while(|l| !l.starts_with('…')).count();
    assert_eq!(rows, 15, "{out}");
    assert!(busiest.contains("… and 65521 more flows (--top 15)"), "{out}");
    assert!(out.lines().count() < 40, "{out}");
}
