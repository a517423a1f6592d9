//! What happens while no frame comes is counted in the interval of its own time: a
//! transmission ends in the interval in which it went idle (its last packet plus
//! `--flow-idle`), an I/O times out in the interval of its command's time plus
//! `--io-timeout`, whether or not a frame came in that interval or before its end. The
//! expected intervals are worked out here from tshark's packet times and the documented
//! rules, not from roceprobe.

mod common;
use common::*;
use std::collections::BTreeMap;
use std::path::Path;

fn replay_csv(files: &[&Path], args: &[&str], workers: usize, dir: &Path) -> std::path::PathBuf {
    let csv = dir.join(format!("w{workers}"));
    let mut a = vec!["replay", "-q", "--csv-dir", csv.to_str().unwrap()];
    let w = workers.to_string();
    a.extend(["--workers", &w]);
    a.extend(args);
    a.extend(files.iter().map(|f| f.to_str().unwrap()));
    let o = run(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    csv
}

#[test]
fn a_transmission_ends_in_the_interval_in_which_it_went_idle() {
    // rdma_cm.pcap: the CM MADs (UD, QPN 1) of two hosts, one or two a second apart; each
    // direction's packets more than 1 ms apart are transmissions of their own, and a
    // transmission of fewer packets than the default `--min-transmission-packets` is a
    // short one. The capture's last MAD of an interval goes idle 1 ms later, before the
    // next interval begins and before the next frame comes.
    let file = capture("rdma_cm.pcap");
    let idle = 1_000_000u64;
    let second = 1_000_000_000u64;
    let mut times: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
    for f in
        tshark_fields_where(&file, "infiniband.bth.destqp == 1", &["frame.time_epoch", "ip.src", "ip.dst"])
    {
        times.entry((f[1].clone(), f[2].clone())).or_default().push(epoch_ns(&f[0]));
    }
    // (interval start, src, dst) -> short transmissions ending in it.
    let mut expected: BTreeMap<(u64, String, String), u64> = BTreeMap::new();
    for ((src, dst), ts) in &times {
        let mut run: Vec<u64> = Vec::new();
        for &t in ts.iter().chain(std::iter::once(&u64::MAX)) {
            if let Some(&last) = run.last() {
                if t == u64::MAX || t > last + idle {
                    let ended = last + idle;
                    if (run.len() as u64) < roceprobe::defaults::MIN_TRANSMISSION_PACKETS {
                        *expected.entry((ended - ended % second, src.clone(), dst.clone())).or_default() += 1;
                    }
                    run.clear();
                }
            }
            run.push(t);
        }
    }
    assert!(expected.len() >= 4 && expected.values().sum::<u64>() >= 8, "{expected:?}");
    let dir = tempfile::tempdir().unwrap();
    for workers in [1, 2] {
        let csv = replay_csv(&[&file], &[], workers, dir.path());
        let mut got: BTreeMap<(u64, String, String), u64> = BTreeMap::new();
        for r in read_csv(&csv.join("flows.csv")) {
            let n: u64 = r["short_transmissions"].parse().unwrap();
            if r["dst_qpn"] == "1" && n > 0 {
                *got.entry((rfc3339_ns(&r["interval_start"]), r["src_ip"].clone(), r["dst_ip"].clone()))
                    .or_default() += n;
            }
        }
        assert_eq!(got, expected, "--workers {workers}");
    }
}

#[test]
fn an_io_times_out_in_the_interval_of_its_timeout_though_no_frame_comes_then() {
    // nvme_faults: ten NVMe reads one after the other on one queue pair; the generator's
    // plan (pcap-fixtures/src/scenarios/faults.rs) never completes CIDs 1, 4 and 8, and the
    // scenario's options time I/Os out after 500 us. The commands are the connection's
    // SEND Only packets to QPN 0x401 at the compute tap, the k-th distinct PSN CID k (CID 2's
    // command is sent twice). With 100 us intervals the three timeouts fall in intervals
    // without frames, and the next frame comes milliseconds later.
    let name = "nvme_faults";
    let t = scenario_truth(name);
    let files = scenario_files(name, &t);
    let timeout = 500_000u64;
    let interval = 100_000u64;
    let mut commands: Vec<(String, u64)> = Vec::new();
    for f in tshark_fields_where(
        &files[0],
        "infiniband.bth.opcode == 4 && infiniband.bth.destqp == 0x401",
        &["frame.time_epoch", "infiniband.bth.psn"],
    ) {
        if !commands.iter().any(|(psn, _)| *psn == f[1]) {
            commands.push((f[1].clone(), epoch_ns(&f[0])));
        }
    }
    assert_eq!(commands.len(), 10, "{commands:?}");
    let mut expected: BTreeMap<u64, u64> = BTreeMap::new();
    for cid in [1, 4, 8] {
        let at = commands[cid].1 + timeout;
        *expected.entry(at - at % interval).or_default() += 1;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut args = scenario_args(&t);
    args.extend(["--interval".into(), "100us".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let paths: Vec<&Path> = files.iter().map(|f| f.as_path()).collect();
    for workers in [1, 2] {
        let csv = replay_csv(&paths, &args, workers, dir.path());
        let mut got: BTreeMap<u64, u64> = BTreeMap::new();
        for r in read_csv(&csv.join("io.csv")) {
            let n: u64 = r["timed_out"].parse().unwrap();
            if n > 0 {
                *got.entry(rfc3339_ns(&r["interval_start"])).or_default() += n;
            }
        }
        assert_eq!(got, expected, "--workers {workers}");
    }
}

#[test]
fn ports_csv_counts_a_file_s_frames_in_the_interval_of_their_time() {
    // A file's frames are read 32 at a time; a read that spanned an interval's end was
    // counted in the later interval (collective_vlan: 480 frames in the first millisecond,
    // tshark counts 448; misc: none in the first). Reads now end at each interval's end.
    let interval = 1_000_000u64;
    for name in ["collective_vlan", "misc"] {
        let t = scenario_truth(name);
        let files = scenario_files(name, &t);
        let mut expected: BTreeMap<u64, u64> = BTreeMap::new();
        for f in tshark_fields_where(&files[0], "frame", &["frame.time_epoch"]) {
            let ts = epoch_ns(&f[0]);
            *expected.entry(ts - ts % interval).or_default() += 1;
        }
        assert!(expected.len() >= 2, "{name}: {expected:?}");
        let dir = tempfile::tempdir().unwrap();
        let mut args = scenario_args(&t);
        args.extend(["--interval".into(), "1ms".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        for workers in [1, 2] {
            let csv = replay_csv(&[&files[0]], &args, workers, dir.path());
            let got: BTreeMap<u64, u64> = read_csv(&csv.join("ports.csv"))
                .iter()
                .filter(|r| r["ipackets"] != "0")
                .map(|r| (rfc3339_ns(&r["interval_start"]), r["ipackets"].parse().unwrap()))
                .collect();
            assert_eq!(got, expected, "{name}, --workers {workers}");
        }
    }
}

#[test]
fn ports_csv_counts_a_frame_at_time_zero_in_the_first_interval() {
    // A frame at 0 (a pcap's first record at the epoch, or a pcapng time before 1970, which
    // the probe reads as 0) was taken for no time yet: ports.csv had no 1970 row and
    // counted the frame with the next interval's, where flows.csv had it at 1970.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("zero.pcap");
    let mut first = true;
    copy_capture(&capture("rdma_write_lat.pcap"), &path, |ts, _| {
        Some(if std::mem::take(&mut first) { 0 } else { ts })
    });
    let interval = 1_000_000u64;
    let mut expected: BTreeMap<u64, u64> = BTreeMap::new();
    for f in tshark_fields_where(&path, "frame", &["frame.time_epoch"]) {
        let ts = epoch_ns(&f[0]);
        *expected.entry(ts - ts % interval).or_default() += 1;
    }
    assert_eq!(expected.first_key_value(), Some((&0, &1)));
    for workers in [1, 2] {
        // The 1970 row goes to a file of its own, rotated an hour of packet time on.
        let csv = replay_csv(&[&path], &["--interval", "1ms", "--csv-compress", "none"], workers, dir.path());
        let mut files: Vec<_> = std::fs::read_dir(&csv)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with("ports"))
            .collect();
        files.sort();
        assert_eq!(files.len(), 2, "{files:?}");
        let got: BTreeMap<u64, u64> = files
            .iter()
            .flat_map(|f| read_csv(f))
            .filter(|r| r["ipackets"] != "0")
            .map(|r| (rfc3339_ns(&r["interval_start"]), r["ipackets"].parse().unwrap()))
            .collect();
        assert_eq!(got, expected, "--workers {workers}");
    }
}

#[test]
fn fabric_loss_per_interval_only_for_a_flow_the_other_vantage_has_seen() {
    // rc_loss_split at its two taps: the generator's truth gives each flow's fabric loss
    // (one PSN lost between the taps on 10.0.1.1 -> 10.0.2.1 QPN 2817), which flows.csv's
    // rows add up to. Its storage tap's file with nvme_split's compute file instead: a flow
    // whose (source, destination, QPN) tshark finds in one of the two files only was seen at
    // one vantage, and has no fabric loss (empty in every row, as the summary's is null);
    // before, its gaps were all counted as lost between the taps.
    let flows_in = |file: &Path| -> std::collections::BTreeSet<(String, String, u64)> {
        tshark_fields_where(file, "infiniband", &["ip.src", "ip.dst", "infiniband.bth.destqp"])
            .into_iter()
            .map(|f| {
                (f[0].clone(), f[1].clone(), u64::from_str_radix(f[2].trim_start_matches("0x"), 16).unwrap())
            })
            .collect()
    };
    let key = |r: &Row| (r["src_ip"].clone(), r["dst_ip"].clone(), r["dst_qpn"].parse::<u64>().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let t = scenario_truth("rc_loss_split");
    let split = scenario_files("rc_loss_split", &t);
    let args = ["--interval", "100us", "--vantage", "storage=file:1"];
    let paths: Vec<&Path> = split.iter().map(|f| f.as_path()).collect();
    let mut want: BTreeMap<(String, String, String, u64), u64> = BTreeMap::new();
    for f in t["flows"].as_array().unwrap() {
        let k = (f["vantage"].as_str().unwrap().into(), f["src_ip"].as_str().unwrap().into());
        let k = (k.0, k.1, f["dst_ip"].as_str().unwrap().into(), f["dst_qpn"].as_u64().unwrap());
        want.insert(k, f["fabric_loss_psns"].as_u64().unwrap());
    }
    assert_eq!(want.values().sum::<u64>(), 1, "{want:?}");
    let nvme = scenario_files("nvme_split", &scenario_truth("nvme_split"));
    let (compute, storage) = (flows_in(&nvme[0]), flows_in(&split[1]));
    let one_vantage: Vec<_> = compute.symmetric_difference(&storage).collect();
    assert!(one_vantage.contains(&&("10.0.1.1".into(), "10.0.2.1".into(), 2817)), "{one_vantage:?}");
    for workers in [1, 2] {
        let csv = replay_csv(&paths, &args, workers, &dir.path().join("split"));
        let mut got: BTreeMap<(String, String, String, u64), u64> = BTreeMap::new();
        for r in read_csv(&csv.join("flows.csv")) {
            let (s, d, q) = key(&r);
            *got.entry((r["vantage"].clone(), s, d, q)).or_default() +=
                r["fabric_loss_psns"].parse::<u64>().unwrap();
        }
        assert_eq!(got, want, "--workers {workers}");
        let mixed = replay_csv(&[&nvme[0], &split[1]], &args, workers, &dir.path().join("mixed"));
        let rows = read_csv(&mixed.join("flows.csv"));
        for r in &rows {
            let seen_at_one = one_vantage.contains(&&key(r));
            assert_eq!(r["fabric_loss_psns"].is_empty(), seen_at_one, "--workers {workers}: {r:?}");
        }
        assert!(rows.iter().any(|r| r["fabric_loss_psns"].is_empty() && r["gap_psns"] != "0"), "{rows:?}");
    }
}
