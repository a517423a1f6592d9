//! Collective steps and their stragglers on the generator's ring all-reduce scenario
//! (pcap-fixtures/scenarios/collective_vlan): every step of both jobs, its straggler, lag
//! and reason are the truth's; naming the jobs changes nothing else; the storage vantage's
//! copies change nothing; the dashboard shows the jobs.

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Replays `files` with `args`; returns the summary and steps.csv's rows.
fn replay(files: &[PathBuf], args: &[String]) -> (Value, Vec<Row>) {
    let dir = tempfile::tempdir().unwrap();
    let (csv, summary) = (dir.path().join("csv"), dir.path().join("s.json"));
    let mut a: Vec<String> =
        vec!["replay".into(), "-q".into(), "--csv-dir".into(), csv.display().to_string()];
    a.extend(["--summary".into(), summary.display().to_string()]);
    a.extend(args.iter().cloned());
    a.extend(files.iter().map(|f| f.display().to_string()));
    let o = Command::new(bin()).args(&a).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (s, read_csv(&csv.join("steps.csv")))
}

/// Each step of the truth as a line to compare: job, start, end, flows, bytes, straggler
/// flow and host, lag (ns) and reason.
fn truth_steps(t: &Value, rename: &BTreeMap<&str, &str>) -> Vec<String> {
    let mut out = Vec::new();
    for j in t["jobs"].as_array().unwrap() {
        let name = j["name"].as_str().unwrap();
        for s in j["steps"].as_array().unwrap() {
            let f = &s["straggler"];
            out.push(format!(
                "{} {} {} {} {} {}>{} {} {} {} {}",
                rename.get(name).unwrap_or(&name),
                s["start_ns"],
                s["end_ns"],
                s["flows"],
                s["bytes"],
                f["src_ip"].as_str().unwrap(),
                f["dst_ip"].as_str().unwrap(),
                f["dst_qpn"],
                s["straggler_host"].as_str().unwrap(),
                s["lag_ns"],
                s["reason"].as_str().unwrap()
            ));
        }
    }
    out.sort();
    out
}

fn our_steps(rows: &[Row]) -> Vec<String> {
    let mut out: Vec<String> = rows
        .iter()
        .map(|r| {
            let lag_ns = (r["lag_us"].parse::<f64>().unwrap() * 1e3).round() as u64;
            format!(
                "{} {} {} {} {} {}>{} {} {} {} {}",
                r["job"],
                rfc3339_ns(&r["start"]),
                rfc3339_ns(&r["end"]),
                r["flows"],
                r["bytes"],
                r["straggler_src_ip"],
                r["straggler_dst_ip"],
                r["straggler_dst_qpn"],
                r["straggler_host"],
                lag_ns,
                r["reason"]
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_step_its_straggler_lag_and_reason_are_the_truths() {
    let t = scenario_truth("collective_vlan");
    let files = scenario_files("collective_vlan", &t);
    let (s, rows) = replay(&files, &scenario_args(&t));
    let want = truth_steps(&t, &BTreeMap::new());
    assert_eq!(want.len(), 66, "30 steps of the 8-host ring, 36 of the 4-host one");
    assert_eq!(our_steps(&rows), want);
    // The summary: each job's hosts and steps, and its stragglers as the truth counts them.
    for j in t["jobs"].as_array().unwrap() {
        let ours = s["jobs"].as_array().unwrap().iter().find(|o| o["name"] == j["name"]).unwrap();
        assert_eq!(ours["hosts"], j["hosts"]);
        assert_eq!(ours["steps"], j["steps"].as_array().unwrap().len());
        let mut held: BTreeMap<(String, String), u64> = BTreeMap::new();
        for st in j["steps"].as_array().unwrap() {
            *held
                .entry((st["straggler_host"].as_str().unwrap().into(), st["reason"].as_str().unwrap().into()))
                .or_default() += 1;
        }
        let mut got: BTreeMap<(String, String), u64> = BTreeMap::new();
        for h in ours["stragglers"].as_array().unwrap() {
            for (reason, n) in h["reasons"].as_object().unwrap() {
                got.insert((h["host"].as_str().unwrap().into(), reason.clone()), n.as_u64().unwrap());
            }
        }
        assert_eq!(got, held, "{}", j["name"]);
        let last = j["steps"].as_array().unwrap().last().unwrap();
        assert_eq!(ours["last_step"]["straggler_host"], last["straggler_host"]);
    }
    // Every cause the scenario injects is found on the host it held back.
    let reasons: std::collections::BTreeSet<&str> = rows.iter().map(|r| r["reason"].as_str()).collect();
    assert!(reasons.is_superset(&["loss", "congestion", "none"].into()), "{reasons:?}");
}

/// Each flow's finish at the compute vantage (VLAN 10) between `from` and `to`, as tshark
/// reads the capture: its last packet that ends an RDMA WRITE message (Last or Only, sent
/// again or not), by (source, destination); the eight-host ring's flows only.
fn tshark_write_finishes(pcap: &Path, from: u64, to: u64) -> BTreeMap<(String, String), u64> {
    let o = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap()])
        .args(["-Y", "vlan.id == 10 && ip.src == 10.1.0.0/24 && infiniband.bth.opcode in {8..11}"])
        .args(["-T", "fields", "-e", "frame.time_epoch", "-e", "ip.src", "-e", "ip.dst"])
        .output()
        .expect("tshark (scripts/setup installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut out = BTreeMap::new();
    for line in String::from_utf8(o.stdout).unwrap().lines() {
        let c: Vec<&str> = line.split('\t').collect();
        let t = epoch_ns(c[0]);
        if (from..to).contains(&t) {
            let f: &mut u64 = out.entry((c[1].to_string(), c[2].to_string())).or_default();
            *f = (*f).max(t);
        }
    }
    out
}

#[test]
fn a_message_end_sent_again_is_its_flows_finish() {
    // The eight-host ring's first step, in which the truth holds no one back: rank 3's last
    // WRITE of it (10.1.0.4 to 10.1.0.5, both its copies: the compute tap's and the storage
    // tap's 2 µs later) sent again 300 µs after the step's end, as a sender does when its
    // tail was lost and its retransmission timer fires. That flow now finishes last, at its
    // copy sent again: the step ends there, the flow is its straggler, held back by loss
    // (a PSN sent again), its lag behind the lower middle of the eight flows' finishes, as
    // tshark times them in the edited capture. Every other step stays the truth's.
    let t = scenario_truth("collective_vlan");
    let files = scenario_files("collective_vlan", &t);
    let steps = t["jobs"][0]["steps"].as_array().unwrap();
    let (start, end, next) = (
        steps[0]["start_ns"].as_u64().unwrap(),
        steps[0]["end_ns"].as_u64().unwrap(),
        steps[1]["start_ns"].as_u64().unwrap(),
    );
    // The frames of rank 3's last WRITE Last/Only of the step, from tshark.
    let o = Command::new("tshark")
        .args(["-r", files[0].to_str().unwrap()])
        .args(["-Y", "ip.src == 10.1.0.4 && ip.dst == 10.1.0.5 && infiniband.bth.opcode in {8..11}"])
        .args(["-T", "fields", "-e", "frame.number", "-e", "frame.time_epoch", "-e", "vlan.id"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let mut last: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for line in text.lines() {
        let c: Vec<&str> = line.split('\t').collect();
        let ts = epoch_ns(c[1]);
        if ts < next {
            last.insert(c[2].to_string(), (c[0].parse().unwrap(), ts));
        }
    }
    assert_eq!(last.len(), 2, "{last:?}");
    let mut records = roceprobe::capture::pcap::read_all_records(&files[0]).unwrap();
    let resend_at = end + 300_000;
    for (frame, ts) in last.values() {
        let (_, len, f) = records[frame - 1].clone();
        records.push((resend_at + (ts - last["10"].1), len, f));
    }
    records.sort_by_key(|r| r.0);
    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("resent.pcap");
    write_records(&edited, &records);

    let finishes = tshark_write_finishes(&edited, start, next);
    assert_eq!(finishes.len(), 8);
    let mut sorted: Vec<u64> = finishes.values().copied().collect();
    sorted.sort_unstable();
    let ((src, dst), finish) = finishes.iter().max_by_key(|(_, t)| **t).unwrap();
    assert_eq!((src.as_str(), dst.as_str(), *finish), ("10.1.0.4", "10.1.0.5", resend_at));
    let (_, rows) = replay(&[edited], &scenario_args(&t));
    let first = rows.iter().find(|r| r["job"] == "10.1.0.1" && rfc3339_ns(&r["start"]) == start).unwrap();
    let lag_ns = (first["lag_us"].parse::<f64>().unwrap() * 1e3).round() as u64;
    assert_eq!(
        (rfc3339_ns(&first["end"]), first["straggler_src_ip"].as_str(), first["straggler_dst_ip"].as_str()),
        (resend_at, "10.1.0.4", "10.1.0.5")
    );
    assert_eq!((lag_ns, first["reason"].as_str()), (resend_at - sorted[3], "loss"));
    // The other 65 steps are the truth's.
    let ours: Vec<String> =
        our_steps(&rows).into_iter().filter(|l| !l.starts_with(&format!("10.1.0.1 {start} "))).collect();
    let want: Vec<String> = truth_steps(&t, &BTreeMap::new())
        .into_iter()
        .filter(|l| !l.starts_with(&format!("10.1.0.1 {start} ")))
        .collect();
    assert_eq!((ours.len(), &ours), (65, &want));
}

#[test]
fn named_jobs_are_the_same_steps_under_their_names() {
    let t = scenario_truth("collective_vlan");
    let files = scenario_files("collective_vlan", &t);
    let mut args = scenario_args(&t);
    args.extend(["--job", "ring8=10.1.0.0/24", "--job", "ring4=10.2.0.0/29"].map(String::from));
    let (s, rows) = replay(&files, &args);
    let rename: BTreeMap<&str, &str> = [("10.1.0.1", "ring8"), ("10.2.0.1", "ring4")].into();
    assert_eq!(our_steps(&rows), truth_steps(&t, &rename));
    let names: Vec<&str> =
        s["jobs"].as_array().unwrap().iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ring4", "ring8"]);
}

/// `--max-jobs 1`: one of the two rings has run totals (the one whose first step closed
/// first), the other none; steps.csv still has every step of both, and the summary's bounds
/// count the other's steps and say that 2 would have kept them.
#[test]
fn beyond_max_jobs_a_job_has_no_totals_but_every_step_is_written() {
    let t = scenario_truth("collective_vlan");
    let files = scenario_files("collective_vlan", &t);
    let mut args = scenario_args(&t);
    args.extend(["--max-jobs", "1"].map(String::from));
    let (s, rows) = replay(&files, &args);
    assert_eq!(our_steps(&rows), truth_steps(&t, &BTreeMap::new()));
    let jobs = s["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 1);
    let steps_of = |name: &Value| {
        let j = t["jobs"].as_array().unwrap().iter().find(|j| j["name"] == *name).unwrap();
        j["steps"].as_array().unwrap().len() as u64
    };
    assert_eq!(jobs[0]["steps"], steps_of(&jobs[0]["name"]));
    let other = if jobs[0]["name"] == "10.1.0.1" { "10.2.0.1" } else { "10.1.0.1" };
    let bounds = s["bounds"].as_array().unwrap();
    assert_eq!(bounds.len(), 1, "{bounds:?}");
    assert_eq!(bounds[0]["option"], "--max-jobs");
    assert_eq!(bounds[0]["lost"], steps_of(&Value::from(other)));
    assert_eq!(bounds[0]["needed"], 2);
}

#[test]
fn a_rule_short_of_its_ring_keeps_to_its_hosts() {
    // 10.1.0.0/29 names seven of the eight-host ring (10.1.0.8 is outside it); a second
    // rule matches no host. The job of the rule is its hosts' flows: each step without the
    // two ring flows to and from 10.1.0.8, which are in no job (not one of 10.1.0.8's own).
    let t = scenario_truth("collective_vlan");
    let files = scenario_files("collective_vlan", &t);
    let mut args = scenario_args(&t);
    args.extend(["--job", "part=10.1.0.0/29", "--job", "idle=10.9.0.0/16"].map(String::from));
    let (s, rows) = replay(&files, &args);
    let ring = &t["jobs"].as_array().unwrap().iter().find(|j| j["name"] == "10.1.0.1").unwrap();
    let truth_steps = ring["steps"].as_array().unwrap();
    let jobs: BTreeMap<&str, &Value> =
        s["jobs"].as_array().unwrap().iter().map(|j| (j["name"].as_str().unwrap(), j)).collect();
    assert_eq!(jobs.keys().copied().collect::<Vec<_>>(), ["10.2.0.1", "idle", "part"]);
    let hosts: Vec<&Value> = ring["hosts"].as_array().unwrap().iter().filter(|h| *h != "10.1.0.8").collect();
    assert_eq!(jobs["part"]["hosts"].as_array().unwrap().iter().collect::<Vec<_>>(), hosts);
    let part: Vec<&Row> = rows.iter().filter(|r| r["job"] == "part").collect();
    assert_eq!(part.len(), truth_steps.len());
    for (r, t) in part.iter().zip(truth_steps) {
        assert_eq!(r["flows"], (t["flows"].as_u64().unwrap() - 2).to_string(), "{r:?}");
    }
    assert_eq!(s["step_transmissions_outside_jobs"], 2 * truth_steps.len() as u64);
    assert_eq!(
        (&jobs["idle"]["steps"], jobs["idle"]["hosts"].as_array().unwrap().len()),
        (&Value::from(0), 0)
    );
    assert!(jobs["idle"]["last_step"].is_null());
}

#[test]
fn steps_csv_is_the_same_file_whatever_the_workers_and_interval() {
    // Rows by end, one order: with several workers they came in the order the workers'
    // reports happened to close them (four runs of --workers 4, three orders).
    let t = scenario_truth("collective_vlan");
    let files = scenario_files("collective_vlan", &t);
    let mut seen = Vec::new();
    for (workers, interval) in [("1", "1s"), ("1", "1ms"), ("4", "1ms"), ("4", "1ms"), ("2", "100us")] {
        let args = [
            scenario_args(&t),
            vec!["--workers".into(), workers.into(), "--interval".into(), interval.into()],
        ]
        .concat();
        let (_, rows) = replay(&files, &args);
        let ends: Vec<u64> = rows.iter().map(|r| rfc3339_ns(&r["end"])).collect();
        assert!(ends.windows(2).all(|w| w[0] <= w[1]), "--workers {workers} --interval {interval}: by end");
        seen.push(rows);
    }
    assert_eq!(seen[0].len(), 66);
    assert!(seen.iter().all(|r| *r == seen[0]), "one file");
}

#[test]
fn a_step_the_input_ends_in_is_marked_so() {
    // The capture cut at its 2,500th frame, in the middle of the ring's fifth step (by the
    // truth's times): that step is written as closed by the input's end, every other step as
    // closed by a pause. Uncut, the truth's last step of each job ends less than 2 ms (the
    // default --step-gap) before the capture's last frame: those two.
    let t = scenario_truth("collective_vlan");
    let files = scenario_files("collective_vlan", &t);
    let dir = tempfile::tempdir().unwrap();
    let cut = dir.path().join("cut.pcap");
    let mut n = 0;
    let mut cut_at = 0;
    copy_capture(&files[0], &cut, |ts, _| {
        n += 1;
        cut_at = if n <= 2_500 { ts } else { cut_at };
        (n <= 2_500).then_some(ts)
    });
    let steps = |job: &str| -> Vec<(u64, u64)> {
        let j = t["jobs"].as_array().unwrap().iter().find(|j| j["name"] == job).unwrap();
        j["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s["start_ns"].as_u64().unwrap(), s["end_ns"].as_u64().unwrap()))
            .collect()
    };
    let (ring8, ring4) = (steps("10.1.0.1"), steps("10.2.0.1"));
    // The cut falls inside the ring's fifth step, long after the other job's last before it.
    assert!(ring8[4].0 < cut_at && cut_at < ring8[4].1, "{cut_at} in {:?}", ring8[4]);
    let before: Vec<_> = ring4.iter().filter(|s| s.1 < cut_at).collect();
    assert!(before.last().unwrap().1 + 2_000_000 < cut_at);
    let last = *ring8.iter().chain(&ring4).map(|(_, e)| e).max().unwrap();
    assert!(ring4.last().unwrap().1 + 2_000_000 > last);
    let cases = [
        (cut, vec![("10.1.0.1", ring8[4].0)]),
        (
            files[0].clone(),
            vec![("10.1.0.1", ring8.last().unwrap().0), ("10.2.0.1", ring4.last().unwrap().0)],
        ),
    ];
    for (file, at_end) in cases {
        let (s, rows) = replay(std::slice::from_ref(&file), &scenario_args(&t));
        for r in &rows {
            let here = at_end.contains(&(r["job"].as_str(), rfc3339_ns(&r["start"])));
            assert_eq!(r["closed_by"], if here { "input_end" } else { "pause" }, "{r:?}");
        }
        assert_eq!(rows.iter().filter(|r| r["closed_by"] == "input_end").count(), at_end.len());
        // The summary's last step of each job says the same as its last row.
        for j in s["jobs"].as_array().unwrap() {
            let last = rows.iter().rfind(|r| r["job"] == j["name"].as_str().unwrap()).unwrap();
            assert_eq!(j["last_step"]["closed_by"], last["closed_by"].as_str(), "{}", j["name"]);
        }
    }
}

#[test]
fn nvme_between_the_rings_hosts_on_other_qps_changes_no_step() {
    // The NVMe scenario's five hosts renamed to five of the ring's (its initiators to
    // 10.1.0.1, .3 and .5, its targets to .2 and .4, the ring's neighbours), its QPNs but
    // CM's moved up by 4,096 and its times by 25.3 ms, into the ring's fifth step: the ring's
    // WRITEs run on other QPs, so its steps are still the collective truth's, and the I/Os
    // still the NVMe truth's.
    let t = scenario_truth("collective_vlan");
    let nvme = scenario_truth("nvme_vlan");
    let dir = tempfile::tempdir().unwrap();
    let moved = dir.path().join("nvme.pcap");
    let rename = |a: [u8; 4]| match a {
        [10, 0, 1, h] => [10, 1, 0, 2 * h - 1],
        [10, 0, 2, h] => [10, 1, 0, 2 * h],
        a => a,
    };
    let records = roceprobe::capture::pcap::read_all_records(&scenario_files("nvme_vlan", &nvme)[0]).unwrap();
    let mut w = roceprobe::capture::pcap::Writer::new(std::fs::File::create(&moved).unwrap()).unwrap();
    for (ts, len, f) in &records {
        let mut f = f.clone();
        // Ethernet with one 802.1Q tag (the scenario's), IPv4 without options, UDP.
        assert_eq!((&f[12..14], &f[16..18], f[18]), (&[0x81, 0x00][..], &[0x08, 0x00][..], 0x45));
        let ip = 18;
        for at in [ip + 12, ip + 16] {
            let a: [u8; 4] = f[at..at + 4].try_into().unwrap();
            f[at..at + 4].copy_from_slice(&rename(a));
        }
        // BTH's destination QP (bytes 5..8), but CM's (QP1).
        let bth = ip + 20 + 8;
        let qpn = u32::from_be_bytes([0, f[bth + 5], f[bth + 6], f[bth + 7]]);
        if qpn != 1 {
            f[bth + 5..bth + 8].copy_from_slice(&(qpn + 4096).to_be_bytes()[1..]);
        }
        // The IPv4 header checksum again (the ICRC is not checked by default).
        f[ip + 10..ip + 12].fill(0);
        let sum: u32 = f[ip..ip + 20].chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], c[1]]))).sum();
        let sum = (sum & 0xFFFF) + (sum >> 16);
        f[ip + 10..ip + 12].copy_from_slice(&(!((sum & 0xFFFF) + (sum >> 16)) as u16).to_be_bytes());
        w.write(ts + 25_300_000, &f, *len).unwrap();
    }
    drop(w);
    let mut files = scenario_files("collective_vlan", &t);
    files.push(moved);
    for interval in ["1s", "1ms"] {
        let mut args = scenario_args(&t);
        args.extend(["--interval".into(), interval.into()]);
        let (s, rows) = replay(&files, &args);
        assert_eq!(our_steps(&rows), truth_steps(&t, &BTreeMap::new()), "--interval {interval}");
        assert_eq!(s["step_transmissions_outside_jobs"], 0);
        let ios = nvme["ios"].as_array().unwrap().len();
        assert_eq!((s["ios"]["completed"].as_u64(), ios), (Some(120), 120));
    }
}

/// An NVMe read on a queue that carries nothing else (hand-set frames): its command, its
/// 8 KiB of data as eight WRITEs 1 µs apart from 100 µs after the command, and its
/// completion 20 ms after the command, each capsule a transmission of its own, shorter than
/// the default `--min-transmission-packets` (4), so not reported. The data is storage
/// traffic all the same: no job, no step. A ring of four hosts writing beside it in the
/// same 20 ms (one step, 8 WRITEs a flow) is a job.
#[test]
fn an_nvme_read_whose_capsules_come_alone_is_no_step() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use roceprobe::wire::nvme::opcode;
    use std::net::IpAddr;
    let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    let (host, target) = (ip("10.9.0.1"), ip("10.9.0.2"));
    let (host_qp, target_qp, us) = (0x301, 0x302, 1_000u64);
    let ack = |psn| ExtHeaders { aeth: Some(Aeth::ack(31, psn)), ..Default::default() };
    let (va, key) = (0x7f00_0000u64, 0x1234u32);
    let capsule = keyed_sqe(opcode::READ, 7, va, 8192, key);
    let cqe = completion_capsule(7, 1, 1);
    let mut frames = vec![
        (0, roce(host, target, op::SEND_ONLY, target_qp, 100, ExtHeaders::default(), &capsule)),
        (2 * us, roce(target, host, op::ACKNOWLEDGE, host_qp, 100, ack(1), &[])),
    ];
    for k in 0..8u32 {
        let (opc, ext) = match k {
            0 => (
                op::WRITE_FIRST,
                ExtHeaders { reth: Some(Reth { va, rkey: key, dma_len: 8192 }), ..Default::default() },
            ),
            7 => (op::WRITE_LAST, ExtHeaders::default()),
            _ => (op::WRITE_MIDDLE, ExtHeaders::default()),
        };
        frames.push((
            100 * us + u64::from(k) * us,
            roce(target, host, opc, host_qp, 500 + k, ext, &[0u8; 1024]),
        ));
    }
    frames.push((110 * us, roce(host, target, op::ACKNOWLEDGE, target_qp, 507, ack(2), &[])));
    frames.push((20_000 * us, roce(target, host, op::SEND_ONLY, host_qp, 508, ExtHeaders::default(), &cqe)));
    frames.push((20_002 * us, roce(host, target, op::ACKNOWLEDGE, target_qp, 508, ack(3), &[])));
    // The ring: host i writes 8 KiB to host i + 1 (mod 4) at 5 ms, 1 µs a WRITE, each
    // flow's last WRITE acknowledged.
    let ring: Vec<IpAddr> = (1..=4).map(|h| ip(&format!("10.4.0.{h}"))).collect();
    for i in 0..4usize {
        let (a, b) = (ring[i], ring[(i + 1) % 4]);
        let (qp_b, qp_a) = (0x100 + (i as u32 + 1) % 4, 0x100 + i as u32);
        for k in 0..8u32 {
            let t = 5_000 * us + u64::from(k) * us + i as u64 * 250;
            frames.push((
                t,
                roce(
                    a,
                    b,
                    op::WRITE_ONLY,
                    qp_b,
                    1000 + k,
                    ExtHeaders {
                        reth: Some(Reth { va: 0x10_0000, rkey: 9, dma_len: 1024 }),
                        ..Default::default()
                    },
                    &[0u8; 1024],
                ),
            ));
        }
        frames.push((5_010 * us + i as u64 * 250, roce(b, a, op::ACKNOWLEDGE, qp_a, 1007, ack(4), &[])));
    }
    frames.sort_by_key(|f| f.0);
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "read.pcap", &frames);
    for workers in ["1", "4"] {
        let args = ["--workers".to_string(), workers.to_string()];
        let (s, rows) = replay(std::slice::from_ref(&pcap), &args);
        assert_eq!(s["ios"]["completed"], 1, "{workers} workers");
        let jobs: Vec<&str> =
            s["jobs"].as_array().unwrap().iter().map(|j| j["name"].as_str().unwrap()).collect();
        assert_eq!(jobs, ["10.4.0.1"], "{workers} workers");
        assert_eq!((rows.len(), rows[0]["job"].as_str(), rows[0]["flows"].as_str()), (1, "10.4.0.1", "4"));
    }
}

/// A ring of four hosts (hand-set frames): three write 8 KiB each as eight WRITE Only 1 µs
/// apart, starting 250 ns after one another; the fourth, from 750 ns, one WRITE of 2,001
/// packets 5 µs apart, its Last 10 ms on: its transmission outlasts the time a step waits
/// for its last transmission with `--interval 1ms` (about 6 ms), and never pauses. One
/// step whatever the interval and workers: it ends at the long WRITE's Last, held back by
/// it by its finish less the lower middle of the four finishes (7.25 µs): 9,993.5 µs.
/// Before, with `--interval 1ms` the step closed without the long transmission, which
/// then made a step of its own.
#[test]
fn a_transmission_longer_than_the_wait_for_it_stays_in_its_step() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use std::net::IpAddr;
    let hosts: Vec<IpAddr> = (1..=4).map(|h| format!("10.7.0.{h}").parse().unwrap()).collect();
    let reth =
        ExtHeaders { reth: Some(Reth { va: 0x10_0000, rkey: 9, dma_len: 1024 }), ..Default::default() };
    let ack = |psn| ExtHeaders { aeth: Some(Aeth::ack(31, psn)), ..Default::default() };
    let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
    for i in 0..4usize {
        let (a, b) = (hosts[i], hosts[(i + 1) % 4]);
        let (to_b, to_a) = (0x100 + (i as u32 + 1) % 4, 0x100 + i as u32);
        let (last, psn) = if i < 3 {
            for k in 0..8u32 {
                let t = i as u64 * 250 + u64::from(k) * 1_000;
                frames.push((t, roce(a, b, op::WRITE_ONLY, to_b, 1_000 + k, reth, &[0u8; 1024])));
            }
            (i as u64 * 250 + 7_000, 1_007)
        } else {
            for k in 0..=2_000u32 {
                let (opcode, ext) = match k {
                    0 => (op::WRITE_FIRST, reth),
                    2_000 => (op::WRITE_LAST, ExtHeaders::default()),
                    _ => (op::WRITE_MIDDLE, ExtHeaders::default()),
                };
                frames.push((
                    750 + u64::from(k) * 5_000,
                    roce(a, b, opcode, to_b, 1_000 + k, ext, &[0u8; 1024]),
                ));
            }
            (750 + 2_000 * 5_000, 3_000)
        };
        frames.push((last + 2_000, roce(b, a, op::ACKNOWLEDGE, to_a, psn, ack(1), &[])));
    }
    frames.sort_by_key(|f| f.0);
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "long.pcap", &frames);
    let t0 = PCAP_BASE_NS;
    for (interval, workers) in [("1s", "1"), ("1ms", "1"), ("1ms", "4"), ("100us", "2")] {
        let args = ["--interval", interval, "--workers", workers].map(String::from);
        let (_, rows) = replay(std::slice::from_ref(&pcap), &args);
        let got: Vec<(u64, u64, &str, &str, &str)> = rows
            .iter()
            .map(|r| {
                (
                    rfc3339_ns(&r["start"]),
                    rfc3339_ns(&r["end"]),
                    r["flows"].as_str(),
                    r["straggler_src_ip"].as_str(),
                    r["lag_us"].as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [(t0, t0 + 10_000_750, "4", "10.7.0.4", "9993.500")],
            "--interval {interval} --workers {workers}"
        );
    }
}

#[test]
fn the_storage_vantages_copies_change_nothing() {
    // The same capture without its storage VLAN (20): one vantage, the same steps.
    let t = scenario_truth("collective_vlan");
    let files = scenario_files("collective_vlan", &t);
    let dir = tempfile::tempdir().unwrap();
    let compute_only = dir.path().join("compute.pcap");
    let (kept, _) = copy_capture(&files[0], &compute_only, |ts, f| {
        // 802.1Q: TPID at 12, the VLAN id in the low 12 bits of 14..16.
        let storage = f[12..14] == [0x81, 0x00] && u16::from_be_bytes([f[14], f[15]]) & 0x0FFF == 20;
        (!storage).then_some(ts)
    });
    assert!(kept > 8_000);
    let (_, both) = replay(&files, &scenario_args(&t));
    let (s, one) = replay(&[compute_only], &["--vantage".into(), "compute=vlan:10".into()]);
    assert!(s["flows"].as_array().unwrap().iter().all(|f| f["vantage"] == "compute"));
    assert_eq!(our_steps(&one), our_steps(&both));
    assert_eq!(our_steps(&one).len(), 66);
}

#[test]
fn the_dashboard_shows_the_jobs_in_80x24_and_160x48() {
    for (w, h) in [(80, 24), (160, 48)] {
        dashboard_shows_the_jobs(w, h);
    }
}

fn dashboard_shows_the_jobs(width: u16, height: u16) {
    let t = scenario_truth("collective_vlan");
    let files = scenario_files("collective_vlan", &t);
    let dir = tempfile::tempdir().unwrap();
    let command = format!(
        "{} replay --dashboard -q {} {}; sleep 60",
        bin(),
        scenario_args(&t).join(" "),
        files[0].display()
    );
    let term = Tmux::start_sized(dir.path(), &command, width, height);
    let screen = term.wait_for_still("roceprobe finished", "the dashboard did not finish");
    assert_eq!(screen.lines().count(), usize::from(height), "{screen}");
    assert!(screen.contains("collective jobs"), "{screen}");
    // Each job's row: its name and step count, then the last step's straggler.
    for j in t["jobs"].as_array().unwrap() {
        let steps = j["steps"].as_array().unwrap();
        let last = steps.last().unwrap();
        let row = screen
            .lines()
            .find(|l| l.trim_start_matches('│').split_whitespace().next() == j["name"].as_str())
            .unwrap_or_else(|| panic!("no row for {}:\n{screen}", j["name"]));
        let cells: Vec<&str> = row.trim_matches('│').split_whitespace().collect();
        assert_eq!(cells[1], steps.len().to_string(), "{row}");
        assert_eq!(cells[4], last["straggler_host"].as_str().unwrap(), "{row}");
        assert_eq!(cells[6], last["reason"].as_str().unwrap(), "{row}");
    }
    term.keys("q");
}

/// RC packets by flow (source, destination, BTH destination QP): (time, whether a request,
/// whether a NAK, whether the last packet of a SEND or RDMA WRITE message).
type RcFlows = BTreeMap<(String, String, u64), Vec<(u64, bool, bool, bool)>>;

/// The RC packets' times of a real capture as tshark reads them, per flow, each marked
/// whether it is a request (SEND, RDMA WRITE, READ Request, atomics), whether a NAK, and
/// whether it ends a SEND or RDMA WRITE message (Last or Only).
fn tshark_rc_times(pcap: &Path) -> RcFlows {
    let o = Command::new("tshark")
        .args(["-r", pcap.to_str().unwrap(), "-Y", "infiniband.bth.opcode", "-T", "fields"])
        .args(["-e", "frame.time_epoch", "-e", "ip.src", "-e", "ip.dst", "-e", "infiniband.bth.opcode"])
        .args(["-e", "infiniband.bth.destqp", "-e", "infiniband.aeth.syndrome", "-E", "occurrence=f"])
        .output()
        .expect("tshark (scripts/setup installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut flows = RcFlows::new();
    for line in String::from_utf8(o.stdout).unwrap().lines() {
        let c: Vec<&str> = line.split('\t').collect();
        let op: u64 = c[3].parse().unwrap();
        if op >> 5 != 0 {
            continue;
        }
        let request = matches!(op & 0x1F, 0x00..=0x0C | 0x13 | 0x14 | 0x16 | 0x17);
        let t = epoch_ns(c[0]);
        let qp = u64::from_str_radix(c[4].trim_start_matches("0x"), 16).unwrap();
        // The AETH syndrome's bits 6-5: 01 an RNR NAK, 11 a NAK.
        let nak = c.get(5).and_then(|s| s.parse::<u8>().ok()).is_some_and(|s| matches!(s >> 5 & 3, 1 | 3));
        let ends = matches!(op & 0x1F, 0x02..=0x05 | 0x08..=0x0B | 0x16 | 0x17);
        flows.entry((c[1].into(), c[2].into(), qp)).or_default().push((t, request, nak, ends));
    }
    flows
}

#[test]
fn on_the_real_captures_steps_are_the_bursts_tshark_times() {
    // Each capture is one perftest connection between two hosts: one job. Its steps, from
    // tshark's packet times: each flow's bursts (1 ms idle ends one; a flow's packets are
    // its requests and, in a ping-pong, the ACKs it sends back), those with a request, each
    // finished at its last packet that ends a SEND or WRITE message (the ACKs after it are
    // the other direction's; a burst without one, of READ requests or atomics, at its last
    // packet), joined while they overlap or follow within 2 ms. With `--min-transmission-packets 1`
    // every burst counts; with N (by default 4) a burst of fewer packets and no NAK is
    // counted in its flow, not reported as a transmission, so it takes no part in steps.
    let mut checked = 0;
    for name in REAL_CAPTURES {
        let pcap = capture(name);
        let flows = tshark_rc_times(&pcap);
        // (start, end, packets, whether it carries a NAK) of each burst with a request.
        let mut bursts: Vec<(u64, u64, usize, bool)> = Vec::new();
        for packets in flows.values() {
            let mut at = 0;
            while at < packets.len() {
                let mut end = at + 1;
                while end < packets.len() && packets[end].0 <= packets[end - 1].0 + 1_000_000 {
                    end += 1;
                }
                let burst = &packets[at..end];
                if burst.iter().any(|p| p.1) {
                    let last = burst.last().unwrap().0;
                    let finish = burst.iter().filter(|p| p.3).map(|p| p.0).max().unwrap_or(last);
                    bursts.push((burst[0].0, finish, burst.len(), burst.iter().any(|p| p.2)));
                }
                at = end;
            }
        }
        bursts.sort();
        let at_least = |n: &str| ["--min-transmission-packets".to_string(), n.to_string()];
        for (min_packets, arg) in [(1, &at_least("1")[..]), (2, &at_least("2")[..]), (4, &[])] {
            let mut want: Vec<(u64, u64)> = Vec::new();
            for &(s, e, _, _) in bursts.iter().filter(|b| b.2 >= min_packets || b.3) {
                match want.last_mut() {
                    Some(last) if s <= last.1 + 2_000_000 => last.1 = last.1.max(e),
                    _ => want.push((s, e)),
                }
            }
            let (_, rows) = replay(std::slice::from_ref(&pcap), arg);
            let got: Vec<(u64, u64)> =
                rows.iter().map(|r| (rfc3339_ns(&r["start"]), rfc3339_ns(&r["end"]))).collect();
            assert_eq!(got, want, "{name}, transmissions of at least {min_packets} packets");
            checked += want.len();
        }
    }
    assert!(checked >= 16, "{checked} steps");
}
