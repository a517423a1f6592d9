//! Evidence on demand (`--evidence-dir`): one pcapng file per loss episode, RNR NAK,
//! congestion burst and slow I/O of the generated scenarios, whose packets are the original
//! frames with their times, read back by tshark; the caps hold under a flood of events;
//! replay with several workers and live capture keep the same evidence.
//!
//! The truth: the generator's truth files (retransmission episodes, RNR NAKs, I/O
//! latencies and anchor times), tshark's decode of the original captures (NAK PSNs, CNPs
//! and ECN-CE marks), and the original capture files read here by a pcap reader of this
//! test's own.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A frame of a pcap file (nanosecond or microsecond): time in ns, original length, bytes.
type Rec = (u64, u32, Vec<u8>);

/// Reads a little-endian pcap file (this test's own reader, not roceprobe's).
fn read_pcap(path: &Path) -> Vec<Rec> {
    let b = std::fs::read(path).unwrap();
    let magic = u32::from_le_bytes(b[0..4].try_into().unwrap());
    let scale = match magic {
        0xA1B2_3C4D => 1,
        0xA1B2_C3D4 => 1000,
        m => panic!("{}: pcap magic {m:#x}", path.display()),
    };
    let mut out = Vec::new();
    let mut o = 24;
    while o + 16 <= b.len() {
        let w = |i: usize| u32::from_le_bytes(b[o + i..o + i + 4].try_into().unwrap());
        let (sec, frac, incl, orig) = (w(0), w(4), w(8) as usize, w(12));
        out.push((
            u64::from(sec) * 1_000_000_000 + u64::from(frac) * scale,
            orig,
            b[o + 16..o + 16 + incl].to_vec(),
        ));
        o += 16 + incl;
    }
    out
}

fn tshark(args: &[&str]) -> String {
    let o =
        Command::new("tshark").args(args).output().expect("tshark is installed (scripts/test installs it)");
    assert!(o.status.success(), "tshark {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

/// An evidence file's packets as tshark reads them, written back as a nanosecond pcap.
fn packets_of(file: &Path, scratch: &Path) -> Vec<Rec> {
    let out = scratch.join(format!("{}.pcap", file.file_name().unwrap().to_string_lossy()));
    tshark(&["-r", file.to_str().unwrap(), "-F", "nsecpcap", "-w", out.to_str().unwrap()]);
    read_pcap(&out)
}

/// The packets of an evidence file that carry a comment: their time (ns, as tshark reads it)
/// and the comment.
fn commented(file: &Path) -> Vec<(u64, String)> {
    tshark_fields(file, &["frame.time_epoch", "frame.comment"])
        .into_iter()
        .filter(|r| r.len() == 2 && !r[1].is_empty())
        .map(|r| {
            let (s, f) = r[0].split_once('.').unwrap();
            (
                s.parse::<u64>().unwrap() * 1_000_000_000 + format!("{f:0<9}").parse::<u64>().unwrap(),
                r[1].clone(),
            )
        })
        .collect()
}

/// A time in nanoseconds as events.csv writes it (RFC 3339, UTC), by GNU date.
fn rfc3339(ns: u64) -> String {
    let o = Command::new("date")
        .args(["-u", "-d", &format!("@{}", ns / 1_000_000_000), "+%Y-%m-%dT%H:%M:%S"])
        .output()
        .unwrap();
    format!("{}.{:09}Z", String::from_utf8(o.stdout).unwrap().trim(), ns % 1_000_000_000)
}

struct Run {
    dir: tempfile::TempDir,
    events: Vec<Row>,
    summary: serde_json::Value,
}

impl Run {
    fn evidence(&self) -> PathBuf {
        self.dir.path().join("evidence")
    }
}

fn replay(files: &[PathBuf], args: &[String], extra: &[&str]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("evidence");
    let csv = dir.path().join("csv");
    let sum = dir.path().join("summary.json");
    let mut a: Vec<String> =
        vec!["replay".into(), "-q".into(), "--summary".into(), sum.display().to_string()];
    a.extend([
        "--evidence-dir".into(),
        ev.display().to_string(),
        "--csv-dir".into(),
        csv.display().to_string(),
    ]);
    a.extend(args.iter().cloned());
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend(files.iter().map(|f| f.display().to_string()));
    let o = Command::new(bin()).args(&a).output().unwrap();
    assert!(o.status.success(), "roceprobe {a:?}: {}", String::from_utf8_lossy(&o.stderr));
    let summary = serde_json::from_str(&std::fs::read_to_string(&sum).unwrap()).unwrap();
    let events = read_csv(&csv.join("events.csv"));
    Run { dir, events, summary }
}

fn scenario(name: &str) -> (Vec<PathBuf>, Vec<String>, serde_json::Value) {
    let t = scenario_truth(name);
    (scenario_files(name, &t), scenario_args(&t), t)
}

/// Per (requester, responder): the most any vantage counted of a truth flow field, summed
/// over the pair's flows in the direction `forward` (requests) or the other way.
fn per_pair(t: &serde_json::Value, field: &str, forward: bool) -> BTreeMap<(String, String), u64> {
    let mut by: BTreeMap<(String, String, String), u64> = BTreeMap::new();
    for f in t["flows"].as_array().unwrap() {
        let (s, d) = (f["src_ip"].as_str().unwrap().to_owned(), f["dst_ip"].as_str().unwrap().to_owned());
        let key = if forward { (s, d) } else { (d, s) };
        *by.entry((key.0, key.1, f["vantage"].as_str().unwrap().to_owned())).or_default() +=
            f[field].as_u64().unwrap_or(0);
    }
    let mut out = BTreeMap::new();
    for ((s, d, _), n) in by {
        let e = out.entry((s, d)).or_default();
        *e = n.max(*e);
    }
    out.retain(|_, n| *n > 0);
    out
}

/// Events of a kind per (requester, responder), from events.csv.
fn listed(events: &[Row], kind: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for r in events.iter().filter(|r| r["event"] == kind) {
        *out.entry((r["src_ip"].clone(), r["dst_ip"].clone())).or_default() += 1;
    }
    out
}

/// Congestion bursts per host pair (either order) from tshark: CNPs and ECN-CE marked RoCE
/// packets, a burst ending after 1 ms (`--flow-idle`) without one.
fn congestion_bursts(files: &[PathBuf]) -> BTreeMap<(String, String), u64> {
    let mut times: BTreeMap<(String, String), Vec<u64>> = BTreeMap::new();
    for f in files {
        for r in tshark_fields(
            f,
            &["frame.time_epoch", "ip.src", "ip.dst", "infiniband.bth.opcode", "ip.dsfield.ecn"],
        ) {
            if r[3].is_empty() || !(r[3] == "129" || r[4] == "3") {
                continue;
            }
            let mut pair = [r[1].clone(), r[2].clone()];
            pair.sort();
            times.entry((pair[0].clone(), pair[1].clone())).or_default().push(epoch_ns(&r[0]));
        }
    }
    times
        .into_iter()
        .map(|(k, mut t)| {
            t.sort_unstable();
            (k, 1 + t.windows(2).filter(|w| w[1] - w[0] > 1_000_000).count() as u64)
        })
        .collect()
}

fn unordered(m: BTreeMap<(String, String), u64>) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    for ((a, b), n) in m {
        let k = if a < b { (a, b) } else { (b, a) };
        *out.entry(k).or_default() += n;
    }
    out
}

/// Every packet of every evidence file is an original frame (to the snap length), with
/// its time and original length; returns each file's packets.
fn assert_original(run: &Run, originals: &[PathBuf], snaplen: usize) -> HashMap<String, Vec<Rec>> {
    let mut by_time: HashMap<u64, Vec<(u32, Vec<u8>)>> = HashMap::new();
    for f in originals {
        for (ts, orig, data) in read_pcap(f) {
            by_time.entry(ts).or_default().push((orig, data));
        }
    }
    let scratch = tempfile::tempdir().unwrap();
    let mut out = HashMap::new();
    for r in run.events.iter().filter(|r| r["status"] == "written") {
        let file = run.evidence().join(&r["file"]);
        let packets = packets_of(&file, scratch.path());
        assert_eq!(packets.len().to_string(), r["packets"], "{}", r["file"]);
        for (ts, orig, data) in &packets {
            let same = by_time.get(ts).is_some_and(|c| {
                c.iter().any(|(o, d)| {
                    o == orig && d.len().min(snaplen) == data.len() && d[..data.len()] == data[..]
                })
            });
            assert!(same, "{}: a packet at {ts} is not an original frame", r["file"]);
        }
        out.insert(r["file"].clone(), packets);
    }
    out
}

fn losses_naks_and_congestion(name: &str) {
    let (files, args, t) = scenario(name);
    let run = replay(&files, &args, &[]);
    assert!(!run.events.is_empty());
    assert!(run.events.iter().all(|r| r["status"] == "written"), "{:?}", run.events);
    // One file per loss episode: retransmission episodes, but those after an RNR NAK.
    let rnr = per_pair(&t, "nak_rnr", false);
    let mut loss = per_pair(&t, "retx_episodes", true);
    for (k, n) in &rnr {
        if let Some(l) = loss.get_mut(k) {
            *l -= n;
        }
    }
    loss.retain(|_, n| *n > 0);
    assert_eq!(listed(&run.events, "loss"), loss, "{name}: loss episodes");
    assert_eq!(listed(&run.events, "rnr_nak"), rnr, "{name}: RNR NAKs");
    assert_eq!(unordered(listed(&run.events, "congestion")), congestion_bursts(&files), "{name}: bursts");
    assert!(!loss.is_empty() && !rnr.is_empty());

    let packets = assert_original(&run, &files, 256);
    // The NAK sequence errors of the originals (tshark), by the requester they go to.
    let mut naks: BTreeSet<(String, u64)> = BTreeSet::new();
    for f in &files {
        for r in tshark_fields(f, &["ip.dst", "infiniband.bth.psn", "infiniband.aeth.syndrome"]) {
            if r[2] == "96" {
                naks.insert((r[0].clone(), r[1].parse().unwrap()));
            }
        }
    }
    let mut covered = BTreeSet::new();
    for r in &run.events {
        let file = run.evidence().join(&r["file"]);
        let f = tshark_fields(
            &file,
            &["ip.src", "ip.dst", "infiniband.bth.opcode", "infiniband.bth.psn", "infiniband.aeth.syndrome"],
        );
        let num = |s: &str| s.parse::<u64>().unwrap_or(u64::MAX);
        match r["event"].as_str() {
            "loss" => {
                // The NAK of the PSN the loss began at (`--evidence-before` reaches back
                // per flow: the ACKs' flow may hold an earlier episode's), and the requests
                // on either side of the PSN it names.
                let host = &r["src_ip"];
                let from: u64 =
                    r["verdict"]["loss from PSN ".len()..].split(',').next().unwrap().parse().unwrap();
                let nak = f
                    .iter()
                    .find(|x| {
                        x[4] == "96"
                            && &x[1] == host
                            && num(&x[3]) == from
                            && naks.contains(&(host.clone(), from))
                    })
                    .unwrap_or_else(|| panic!("{}: no NAK", r["file"]));
                let psn = num(&nak[3]);
                covered.insert((host.clone(), psn));
                let sent: BTreeSet<u64> = f.iter().filter(|x| &x[0] == host).map(|x| num(&x[3])).collect();
                let (before, after) = ((psn + (1 << 24) - 1) % (1 << 24), (psn + 1) % (1 << 24));
                assert!(sent.contains(&before) && sent.contains(&after), "{}: PSNs around {psn}", r["file"]);
            }
            "rnr_nak" => {
                assert!(f.iter().any(|x| (32..64).contains(&num(&x[4]))), "{}: no RNR NAK", r["file"])
            }
            "congestion" => assert!(f.iter().any(|x| x[2] == "129"), "{}: no CNP", r["file"]),
            k => panic!("unexpected {k} event"),
        }
        assert!(!packets[&r["file"]].is_empty());
        // One packet is marked: the one that raised the event, at the event's time.
        let c = commented(&file);
        assert_eq!(c.len(), 1, "{}: {c:?}", r["file"]);
        assert_eq!(c[0].1, format!("roceprobe: the packet that raised this {} event", r["event"]));
        assert_eq!(rfc3339(c[0].0), r["time"], "{}", r["file"]);
    }
    assert_eq!(covered, naks, "{name}: every NAK sequence error is in a loss file");
    // The summary counts what events.csv lists.
    let e = &run.summary["evidence"];
    assert_eq!(e["files_written"].as_u64().unwrap(), run.events.len() as u64);
    assert_eq!(e["events"].as_array().unwrap().len(), run.events.len());
    assert_eq!(
        e["files_on_disk"].as_u64().unwrap(),
        std::fs::read_dir(run.evidence()).unwrap().count() as u64
    );

    // `roceprobe evidence DIR` lists every file with its event.
    let o = run_cmd(&["evidence", run.evidence().to_str().unwrap()]);
    for r in &run.events {
        let line = o.lines().find(|l| l.ends_with(r["file"].as_str())).unwrap_or_else(|| panic!("{o}"));
        assert!(line.contains(r["event"].as_str()) && line.contains(r["time"].as_str()), "{line}");
    }
}

fn run_cmd(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn each_loss_rnr_and_congestion_episode_gives_one_file_of_the_original_packets() {
    losses_naks_and_congestion("rc_loss_vlan");
    losses_naks_and_congestion("rc_loss_split");
}

#[test]
fn slow_ios_give_one_file_each_with_their_command_and_completion() {
    let (files, args, t) = scenario("nvme_vlan");
    let ios = t["ios"].as_array().unwrap();
    let mut lat: Vec<u64> = ios.iter().map(|i| i["io_compute_ns"].as_u64().unwrap()).collect();
    lat.sort_unstable();
    // A threshold between two distinct latencies, about a fifth of the I/Os above it.
    let k = (lat.len() * 4 / 5..lat.len() - 1).find(|&k| lat[k] < lat[k + 1]).unwrap();
    let threshold = (lat[k] + lat[k + 1]) / 2;
    let slow: Vec<&serde_json::Value> =
        ios.iter().filter(|i| i["io_compute_ns"].as_u64().unwrap() > threshold).collect();
    let run = replay(
        &files,
        &args,
        &[
            "--evidence-slow-io",
            &format!("{threshold}ns"),
            "--evidence-max-per-minute",
            "1000",
            "--evidence-after",
            "4",
        ],
    );
    let rows: Vec<&Row> = run.events.iter().filter(|r| r["event"] == "slow_io").collect();
    assert_eq!(rows.len(), slow.len());
    assert!(rows.iter().all(|r| r["status"] == "written"));
    let packets = assert_original(&run, &files, 256);
    for r in rows {
        // The I/O the verdict names (by CID on its QP), its command and completion at both
        // vantages (the truth's anchor times) in its file.
        let cid: u64 = r["verdict"].split("CID ").nth(1).unwrap().split(':').next().unwrap().parse().unwrap();
        let times: BTreeSet<u64> = packets[&r["file"]].iter().map(|p| p.0).collect();
        let found = slow.iter().any(|io| {
            io["cid"].as_u64() == Some(cid)
                && io["target_qpn"].as_u64().map(|q| q.to_string()).as_deref() == Some(r["dst_qpn"].as_str())
                && ["sqe_first@compute", "cqe@compute", "sqe_first@storage", "cqe@storage"]
                    .iter()
                    .all(|a| io["anchors"][a].as_u64().is_some_and(|t| times.contains(&t)))
        });
        assert!(found, "{}: the I/O's capsules", r["file"]);
        // The completion that raised it and the command are marked, at the compute vantage
        // (the I/O's times there are its latency).
        let io = slow
            .iter()
            .find(|io| {
                io["cid"].as_u64() == Some(cid)
                    && io["target_qpn"].as_u64().map(|q| q.to_string()).as_deref()
                        == Some(r["dst_qpn"].as_str())
                    && io["anchors"]["cqe@compute"].as_u64().is_some_and(|t| rfc3339(t) == r["time"])
            })
            .unwrap_or_else(|| panic!("{}: no I/O of the truth ends at {}", r["file"], r["time"]));
        let at = |a: &str| io["anchors"][a].as_u64().unwrap();
        assert_eq!(
            commented(&run.evidence().join(&r["file"])),
            [
                (at("sqe_first@compute"), "roceprobe: the command of this slow_io event".to_owned()),
                (at("cqe@compute"), "roceprobe: the packet that raised this slow_io event".to_owned()),
            ],
            "{}",
            r["file"]
        );
    }
}

#[test]
fn an_io_timeout_gives_a_file_with_its_command_marked() {
    // nvme_faults: three I/Os never complete within its --io-timeout of 500 us.
    let (files, args, t) = scenario("nvme_faults");
    let run = replay(&files, &args, &[]);
    let rows: Vec<&Row> = run.events.iter().filter(|r| r["event"] == "io_timeout").collect();
    assert_eq!(rows.len() as u64, t["io_outcomes"]["timed_out"].as_u64().unwrap());
    assert_original(&run, &files, 256);
    for r in rows {
        let file = run.evidence().join(&r["file"]);
        // Time raised it, not a packet: only the command is marked, a SEND Only (tshark's
        // opcode 4) sent 500 us before the event.
        let c = commented(&file);
        assert_eq!(c.len(), 1, "{}: {c:?}", r["file"]);
        assert_eq!(c[0].1, "roceprobe: the command of this io_timeout event");
        assert_eq!(rfc3339(c[0].0 + 500_000), r["time"], "{}", r["file"]);
        let sent = tshark_fields(&file, &["frame.time_epoch", "infiniband.bth.opcode", "frame.comment"]);
        let marked = sent.iter().find(|x| x.len() == 3 && !x[2].is_empty()).unwrap();
        assert_eq!(marked[1], "4", "{}", r["file"]);
    }
}

#[test]
fn a_snap_length_past_a_kibibyte_keeps_frames_whole_when_two_vantages_hold_them() {
    // Two vantages: the reorder window holds every frame (a worker's, or behind a
    // dispatcher), and hands on the bytes the snap length asks for, not only those the
    // analysis reads (the first KiB).
    let (files, args, _) = scenario("rc_loss_vlan");
    for w in ["1", "2"] {
        let run = replay(&files, &args, &["--evidence-snaplen", "9216", "--workers", w]);
        assert!(!run.events.is_empty());
        let packets = assert_original(&run, &files, 9216);
        let longest = packets.values().flatten().map(|p| p.2.len()).max().unwrap();
        assert!(longest > 1024, "--workers {w}: the longest frame kept is {longest} bytes");
    }
}

#[test]
fn caps_hold_under_a_flood_of_events_and_the_counts_add_up() {
    let (files, args, _) = scenario("nvme_vlan");
    // Every I/O is slow: 120 events in well under a minute.
    let run = replay(
        &files,
        &args,
        &["--evidence-slow-io", "1us", "--evidence-max-per-minute", "7", "--evidence-max-bytes", "64K"],
    );
    let e = &run.summary["evidence"];
    let k = &e["kinds"]["slow_io"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    assert_eq!(n(&k["events"]), 120);
    assert_eq!(
        n(&k["events"]),
        n(&k["files"]) + n(&k["capped_per_minute"]) + n(&k["no_room"]) + n(&k["write_failed"])
    );
    assert_eq!(n(&k["files"]), 7, "the first seven of the minute");
    assert_eq!(run.events.len(), 120);
    assert_eq!(run.events.iter().filter(|r| r["status"] == "written").count(), 7);
    let on_disk: Vec<u64> =
        std::fs::read_dir(run.evidence()).unwrap().map(|f| f.unwrap().metadata().unwrap().len()).collect();
    assert!(on_disk.iter().sum::<u64>() <= 64 * 1024);
    assert_eq!(on_disk.iter().sum::<u64>(), n(&e["bytes_on_disk"]));
    assert_eq!(n(&e["files_written"]) - n(&e["files_removed"]), on_disk.len() as u64);
    assert!(n(&e["files_removed"]) > 0, "the disk cap removed the oldest");
    assert_eq!(n(&e["bytes_written"]) - n(&e["bytes_removed"]), n(&e["bytes_on_disk"]));

    // Prometheus counts the same (and promtool accepts the page).
    let summary: roceprobe::report::Summary = serde_json::from_value(run.summary.clone()).unwrap();
    let page = roceprobe::report::prometheus::render(&summary, "t", 10);
    // So does the dashboard (its totals box, on a terminal 120 wide).
    let view = roceprobe::report::dashboard::ViewBuilder::over_run(None).build(summary.clone(), None, true);
    let mut term = ratatui::Terminal::new(ratatui::backend::TestBackend::new(120, 30)).unwrap();
    term.draw(|f| roceprobe::report::dashboard::draw(f, Some(&view), &Default::default())).unwrap();
    let buf = term.backend().buffer().clone();
    let screen: String = (0..buf.area.height)
        .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol().to_owned()).collect::<String>() + "\n")
        .collect();
    assert!(screen.contains("evidence 7/120 files, 113 without"), "{screen}");
    for line in [
        "roceprobe_evidence_events_total{probe=\"t\",kind=\"slow_io\"} 120".to_owned(),
        "roceprobe_evidence_files_total{probe=\"t\",kind=\"slow_io\"} 7".to_owned(),
        format!(
            "roceprobe_evidence_not_written_total{{probe=\"t\",kind=\"slow_io\",reason=\"capped_per_minute\"}} {}",
            n(&k["capped_per_minute"])
        ),
        format!("roceprobe_evidence_files_removed_total{{probe=\"t\"}} {}", n(&e["files_removed"])),
        format!("roceprobe_evidence_bytes_on_disk{{probe=\"t\"}} {}", n(&e["bytes_on_disk"])),
    ] {
        assert!(page.lines().any(|l| l == line), "{line} not in\n{page}");
    }
    let mut check = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("promtool is installed (scripts/setup)");
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), page.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && said.trim().is_empty(), "promtool: {said}");
}

/// Hand-set frames: 50 loss episodes, one every 0.5 s, on eight QPs (eight host pairs,
/// so that several workers share them) in turn: four requests acknowledged, one lost, four
/// more, a NAK sequence error, the five sent again and acknowledged, forty more. Returns
/// the capture and each episode's time (its first request after the lost one).
fn loss_flood(dir: &Path) -> (PathBuf, Vec<u64>) {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders};
    use std::net::IpAddr;
    let ip = |s: String| -> IpAddr { s.parse().unwrap() };
    let aeth = |a: Aeth| ExtHeaders { aeth: Some(a), ..Default::default() };
    let mut frames: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut psn = [1_000u32; 8];
    let mut times = Vec::new();
    for e in 0..50u64 {
        let q = (e % 8) as usize;
        let (a, b) = (ip(format!("10.0.1.{}", q + 1)), ip(format!("10.0.2.{}", q + 1)));
        let (qa, qb) = (0x100 + q as u32, 0x200 + q as u32);
        let req = |p: u32| roce(a, b, op::SEND_ONLY, qb, p, ExtHeaders::default(), &[0x5A; 256]);
        let ack = |p: u32, x| roce(b, a, op::ACKNOWLEDGE, qa, p, aeth(x), &[]);
        let mut t = 30_000_000_000 + e * 500_000_000;
        let mut p = psn[q];
        for _ in 0..4 {
            frames.push((t, req(p)));
            frames.push((t + 1_000, ack(p, Aeth::ack(31, p))));
            (t, p) = (t + 2_000, p + 1);
        }
        let lost = p;
        p += 1;
        times.push(t);
        for _ in 0..4 {
            frames.push((t, req(p)));
            (t, p) = (t + 100, p + 1);
        }
        frames.push((t, ack(lost, Aeth::nak(0, lost))));
        t += 2_000;
        for r in lost..p {
            frames.push((t, req(r)));
            t += 100;
        }
        frames.push((t, ack(p - 1, Aeth::ack(31, p))));
        t += 1_000;
        for _ in 0..40 {
            frames.push((t, req(p)));
            frames.push((t + 500, ack(p, Aeth::ack(31, p))));
            (t, p) = (t + 1_000, p + 1);
        }
        psn[q] = p;
    }
    frames.sort_by_key(|f| f.0);
    (write_pcap(dir, "flood.pcap", &frames), times.iter().map(|t| PCAP_BASE_NS + t).collect())
}

#[test]
fn the_disk_cap_keeps_the_newest_files_whatever_order_the_workers_hand_them_in() {
    // 50 loss events, each file some 13 KB, against a 64 KiB cap: the files left are the
    // newest events', whichever worker's record came first. Before, the oldest *written*
    // were removed first: with 4 workers some newer files went and older ones stayed.
    let dir = tempfile::tempdir().unwrap();
    let (pcap, times) = loss_flood(dir.path());
    let mut kept_by = Vec::new();
    for workers in ["1", "4"] {
        let cap = ["--evidence-max-per-minute", "1000", "--evidence-max-bytes", "64K", "--workers", workers];
        let run = replay(std::slice::from_ref(&pcap), &[], &cap);
        let mut listed: Vec<(String, String)> =
            run.events.iter().map(|r| (r["time"].clone(), r["file"].clone())).collect();
        listed.sort();
        let want: Vec<String> = times.iter().map(|&t| rfc3339(t)).collect();
        assert_eq!(listed.iter().map(|l| l.0.clone()).collect::<Vec<_>>(), want, "{workers} workers");
        assert!(run.events.iter().all(|r| r["status"] == "written"), "{workers} workers");
        let mut on_disk: Vec<String> = std::fs::read_dir(run.evidence())
            .unwrap()
            .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        assert!(on_disk.len() >= 3, "{on_disk:?}");
        let newest: Vec<String> =
            listed[listed.len() - on_disk.len()..].iter().map(|l| l.1.clone()).collect();
        assert_eq!(on_disk, newest, "{workers} workers");
        let e = &run.summary["evidence"];
        assert_eq!(
            e["files_written"].as_u64().unwrap() - e["files_removed"].as_u64().unwrap(),
            on_disk.len() as u64
        );
        kept_by.push(on_disk);
    }
    assert_eq!(kept_by[0], kept_by[1]);
}

/// The events a run listed: (kind, requester, responder, time, file).
fn event_set(run: &Run) -> BTreeSet<(String, String, String, String, String)> {
    run.events
        .iter()
        .map(|r| {
            (
                r["event"].clone(),
                r["src_ip"].clone(),
                r["dst_ip"].clone(),
                r["time"].clone(),
                r["file"].clone(),
            )
        })
        .collect()
}

/// An event's row without its file and status: time, kind, vantage, QP and verdict.
fn verdicts(run: &Run) -> Vec<[String; 7]> {
    let mut v: Vec<[String; 7]> = run
        .events
        .iter()
        .map(|r| ["time", "event", "vantage", "src_ip", "dst_ip", "dst_qpn", "verdict"].map(|c| r[c].clone()))
        .collect();
    v.sort();
    v
}

#[test]
fn an_event_without_a_file_has_the_verdict_its_file_would_have() {
    // rc_loss_vlan's events, every one written by default (their verdicts checked against
    // tshark above), then every one capped (`--evidence-max-per-minute 0`) with one and
    // four workers: the same events with the same verdicts. Before, a capped event's
    // verdict was its first signal's ("0 CNP(s), 1 ECN-CE mark(s)", "no retransmission
    // seen"), and with several workers (each caps its own events too) it depended on
    // which worker capped it.
    let (files, args, _) = scenario("rc_loss_vlan");
    let written = replay(&files, &args, &[]);
    assert!(written.events.len() >= 5 && written.events.iter().all(|r| r["status"] == "written"));
    assert!(written.events.iter().any(|r| r["verdict"].contains("retransmitted")));
    for workers in ["1", "4"] {
        let capped = replay(&files, &args, &["--evidence-max-per-minute", "0", "--workers", workers]);
        assert!(capped.events.iter().all(|r| r["status"] == "capped_per_minute"), "{workers} workers");
        assert_eq!(verdicts(&capped), verdicts(&written), "{workers} workers");
    }
}

#[test]
fn several_workers_and_live_capture_keep_the_same_evidence() {
    let (files, args, _) = scenario("rc_loss_vlan");
    let one = replay(&files, &args, &[]);
    for w in ["2", "4"] {
        let many = replay(&files, &args, &["--workers", w]);
        assert_eq!(event_set(&many), event_set(&one), "--workers {w}");
        // The summary's list, by time: the same list (it came as the workers' events were
        // done with).
        assert_eq!(many.summary["evidence"]["events"], one.summary["evidence"]["events"], "--workers {w}");
        let times: Vec<&str> = one.summary["evidence"]["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["time"].as_str().unwrap())
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
        // Two files, one a vantage each (a review found the lists apart there).
        let (split, split_args, _) = scenario("rc_loss_split");
        let (a, b) = (replay(&split, &split_args, &[]), replay(&split, &split_args, &["--workers", w]));
        assert_eq!(
            a.summary["evidence"]["events"], b.summary["evidence"]["events"],
            "rc_loss_split --workers {w}"
        );
        for r in &one.events {
            let a = std::fs::read(one.evidence().join(&r["file"])).unwrap();
            let b = std::fs::read(many.evidence().join(&r["file"])).unwrap();
            assert_eq!(a, b, "--workers {w}: {}", r["file"]);
        }
    }
    // Live through a net_pcap port: packet times are the probe's clock, so the events are
    // compared by kind and QP.
    let dir = tempfile::tempdir().unwrap();
    let ev = dir.path().join("ev");
    let mut extra: Vec<&str> = args.iter().map(String::as_str).collect();
    extra.extend(["--evidence-dir", ev.to_str().unwrap()]);
    let paths: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let s = live_summary(&paths, &extra);
    let kinds = |rows: Vec<(String, String, String)>| {
        let mut m: BTreeMap<(String, String, String), u64> = BTreeMap::new();
        for r in rows {
            *m.entry(r).or_default() += 1;
        }
        m
    };
    let live = kinds(
        s["evidence"]["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                assert_eq!(e["status"], "written");
                (
                    e["kind"].as_str().unwrap().into(),
                    e["src_ip"].as_str().unwrap().into(),
                    e["dst_ip"].as_str().unwrap().into(),
                )
            })
            .collect(),
    );
    let replayed = kinds(
        one.events.iter().map(|r| (r["event"].clone(), r["src_ip"].clone(), r["dst_ip"].clone())).collect(),
    );
    assert_eq!(live, replayed);
    assert_eq!(
        std::fs::read_dir(&ev).unwrap().count() as u64,
        s["evidence"]["files_written"].as_u64().unwrap()
    );
}

#[test]
fn a_uc_qps_congestion_file_holds_the_cnp_that_raised_it() {
    // misc: a UC QP (no ACKs, so its two directions are never paired) throttled by a CNP.
    // The file held only the QP's WRITEs, its comment on a WRITE before the CNP, and the
    // CNP went to another event's file. The CNP by tshark: the first BTH opcode 129 from
    // 10.0.2.9 to 10.0.1.9 (truth: the flow 10.0.1.9 -> 10.0.2.9 QP 4865 has cnp 1).
    let (files, args, t) = scenario("misc");
    let cnp_flow = t["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["dst_qpn"] == 4865 && f["src_ip"] == "10.0.1.9")
        .expect("the truth's UC flow");
    assert_eq!(cnp_flow["cnp"], 1);
    let cnps: Vec<Vec<String>> = files
        .iter()
        .flat_map(|f| tshark_fields(f, &["frame.time_epoch", "ip.src", "ip.dst", "infiniband.bth.opcode"]))
        .filter(|r| r[1] == "10.0.2.9" && r[2] == "10.0.1.9" && r[3] == "129")
        .collect();
    let cnp_time = &cnps[0][0];
    let run = replay(&files, &args, &[]);
    let file = std::fs::read_dir(run.evidence())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("congestion_10.0.1.9_10.0.2.9_qp4865"))
        .expect("the QP's congestion file");
    let rows = tshark_fields(&file, &["frame.time_epoch", "infiniband.bth.opcode", "frame.comment"]);
    let cnp = rows.iter().find(|r| &r[0] == cnp_time).expect("the CNP is in the file");
    assert_eq!(cnp[1], "129");
    assert!(cnp[2].contains("raised this congestion event"), "the comment is on the CNP: {rows:?}");
    assert_eq!(rows.iter().filter(|r| !r[2].is_empty()).count(), 1, "{rows:?}");
    // No verdict counts a CNP its file does not hold (tshark's CNPs in each file).
    for e in std::fs::read_dir(run.evidence()).unwrap() {
        let p = e.unwrap().path();
        let held = tshark_fields(&p, &["infiniband.bth.opcode"]).iter().filter(|r| r[0] == "129").count();
        let listed = run_cmd(&["evidence", run.evidence().to_str().unwrap()]);
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        let line = listed.lines().find(|l| l.ends_with(&name)).unwrap().to_owned();
        if let Some((_, rest)) = line.split_once("congestion: ") {
            let said: usize = rest.split(' ').next().unwrap().parse().unwrap();
            assert!(said <= held, "{name}: the verdict says {said} CNPs, the file holds {held}");
        }
    }
}

#[test]
fn a_packet_seen_at_both_vantages_counts_once_in_a_verdict() {
    // rc_loss_vlan mirrors every packet at both vantages (VLANs 10 and 20). By tshark, each
    // NAK (sequence error and RNR) is one per VLAN, one PSN is missing per VLAN in each
    // loss, and each CNP one per VLAN: the verdicts said x2 and "2 PSN(s)" for one.
    let (files, args, _) = scenario("rc_loss_vlan");
    let naks = tshark_fields(&files[0], &["vlan.id", "infiniband.bth.psn", "infiniband.aeth.syndrome"]);
    let mut per_vlan: BTreeMap<(String, String), usize> = BTreeMap::new();
    for r in naks.iter().filter(|r| r[2].parse::<u8>().is_ok_and(|s| s >> 5 == 1 || s >> 5 == 3)) {
        *per_vlan.entry((r[1].clone(), r[0].clone())).or_default() += 1;
    }
    assert!(per_vlan.len() >= 8 && per_vlan.values().all(|&n| n == 1), "{per_vlan:?}");
    let run = replay(&files, &args, &[]);
    let listed = run_cmd(&["evidence", run.evidence().to_str().unwrap()]);
    let verdicts: Vec<&str> =
        listed.lines().filter(|l| l.contains(" loss ") || l.contains("rnr_nak")).collect();
    assert_eq!(verdicts.len(), 4, "{listed}");
    for v in verdicts {
        assert!(
            v.contains("(RNR NAK x1)") || v.contains("1 PSN(s) missing at a vantage, NAK sequence error x1"),
            "{v}"
        );
    }
}

/// Hand-set frames: QP X's first SEND (PSN 100, to QP 0x205) answered first by an RNR NAK,
/// the responder's first packet on the QP, sent again 300 µs later and acknowledged; QP Y's
/// WRITEs 200, 202 and 203 (201 lost, to QP 0x206), whose responder's first packet is a
/// NAK sequence error for 201, then 201-203 sent again and acknowledged. By EVIDENCE.md:
/// one `rnr_nak` event on QP X joined by the copy sent again, and one `loss` event on QP
/// Y holding the gap, the NAK and the copies sent again. Before, the NAKs came before the
/// responder's direction was paired, so their events named no QP: a second `loss` event
/// for QP Y, and QP X's RNR NAK under `qpunknown`, without its resend.
#[test]
fn a_nak_that_is_the_responders_first_packet_names_its_qp() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use std::net::IpAddr;
    let ip = |s: &str| -> IpAddr { s.parse().unwrap() };
    let aeth = |a: Aeth| ExtHeaders { aeth: Some(a), ..Default::default() };
    let us = 1_000u64;
    let (xa, xb, ya, yb) = (ip("10.0.1.5"), ip("10.0.2.5"), ip("10.0.1.6"), ip("10.0.2.6"));
    let send = |psn| roce(xa, xb, op::SEND_ONLY, 0x205, psn, ExtHeaders::default(), &[0xCD; 500]);
    let reth = ExtHeaders { reth: Some(Reth { va: 0x1000, rkey: 7, dma_len: 512 }), ..Default::default() };
    let write = |psn| roce(ya, yb, op::WRITE_ONLY, 0x206, psn, reth, &[0xAB; 512]);
    let mut frames = vec![
        (10 * us, send(100)),
        (15 * us, roce(xb, xa, op::ACKNOWLEDGE, 0x105, 100, aeth(Aeth::rnr_nak(14, 0)), &[])),
        (310 * us, send(100)),
        (315 * us, roce(xb, xa, op::ACKNOWLEDGE, 0x105, 100, aeth(Aeth::ack(31, 1)), &[])),
        (2_000 * us, write(200)),
        (2_002 * us, write(202)),
        (2_004 * us, write(203)),
        (2_008 * us, roce(yb, ya, op::ACKNOWLEDGE, 0x106, 201, aeth(Aeth::nak(0, 1)), &[])),
        (2_020 * us, write(201)),
        (2_021 * us, write(202)),
        (2_022 * us, write(203)),
        (2_030 * us, roce(yb, ya, op::ACKNOWLEDGE, 0x106, 203, aeth(Aeth::ack(31, 4)), &[])),
    ];
    // Each QP goes on sending and being acknowledged, one message every 10 µs.
    for k in 0..40u32 {
        let t = 400 * us + u64::from(k) * 10 * us;
        frames.push((t, send(101 + k)));
        frames.push((
            t + 5 * us,
            roce(xb, xa, op::ACKNOWLEDGE, 0x105, 101 + k, aeth(Aeth::ack(31, 2 + k)), &[]),
        ));
        let t = 2_040 * us + u64::from(k) * 10 * us;
        frames.push((t, write(204 + k)));
        frames.push((
            t + 5 * us,
            roce(yb, ya, op::ACKNOWLEDGE, 0x106, 204 + k, aeth(Aeth::ack(31, 5 + k)), &[]),
        ));
    }
    frames.sort_by_key(|f| f.0);
    let dir = tempfile::tempdir().unwrap();
    let pcap = write_pcap(dir.path(), "first.pcap", &frames);
    for workers in ["1", "4"] {
        let mut run = replay(std::slice::from_ref(&pcap), &[], &["--workers", workers]);
        // In the order they were done with, which with several workers need not be time's.
        run.events.sort_by(|a, b| a["time"].cmp(&b["time"]));
        let events: Vec<(&str, &str, &str)> = run
            .events
            .iter()
            .map(|e| (e["event"].as_str(), e["src_ip"].as_str(), e["dst_qpn"].as_str()))
            .collect();
        assert_eq!(
            events,
            [("rnr_nak", "10.0.1.5", "517"), ("loss", "10.0.1.6", "518")],
            "{workers} workers"
        );
        let (rnr, loss) = (&run.events[0], &run.events[1]);
        assert!(rnr["verdict"].contains("sent again after the RNR timer"), "{rnr:?}");
        assert!(rnr["file"].ends_with("_rnr_nak_10.0.1.5_10.0.2.5_qp517.pcapng"), "{rnr:?}");
        assert!(loss["verdict"].contains("NAK sequence error x1, retransmitted"), "{loss:?}");
    }
}

#[test]
fn the_listing_marks_files_tshark_cannot_read_and_fails() {
    // A good evidence file patched four ways that tshark rejects: each was listed as a
    // clean file of 83 packets, and the listing exited 0.
    let (files, args, _) = scenario("rc_loss_vlan");
    let kept = replay(&files, &args, &[]);
    let good = std::fs::read_dir(kept.evidence()).unwrap().map(|e| e.unwrap().path()).min().unwrap();
    let b = std::fs::read(&good).unwrap();
    let word = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
    // The blocks after the section header: (offset, type).
    let mut blocks = Vec::new();
    let mut o = word(&b, 4);
    while o < b.len() {
        blocks.push((o, word(&b, o)));
        o += word(&b, o + 4);
    }
    let first_packet = blocks.iter().find(|x| x.1 == 6).unwrap().0;
    let mut other_interface = b.clone();
    other_interface[first_packet + 8..first_packet + 12].copy_from_slice(&7u32.to_le_bytes());
    let mut long_packet = b.clone();
    long_packet[first_packet + 20..first_packet + 24].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
    let mut version_2 = b.clone();
    version_2[12] = 2;
    let mut lengths_differ = b.clone();
    let end = first_packet + word(&b, first_packet + 4) - 4;
    lengths_differ[end] ^= 0x40;
    let mut no_interfaces = b[..word(&b, 4)].to_vec();
    for &(at, kind) in &blocks {
        if kind != 1 {
            no_interfaces.extend_from_slice(&b[at..at + word(&b, at + 4)]);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let name = good.file_name().unwrap().to_string_lossy().to_string();
    for (k, bytes) in
        [other_interface, long_packet, version_2, no_interfaces, lengths_differ].iter().enumerate()
    {
        let sub = dir.path().join(k.to_string());
        std::fs::create_dir(&sub).unwrap();
        let f = sub.join(&name);
        std::fs::write(&f, bytes).unwrap();
        let t = Command::new("tshark").args(["-r", f.to_str().unwrap()]).output().unwrap();
        assert!(!t.status.success() || !t.stderr.is_empty(), "{k}: tshark rejects it");
        let o = run(&["evidence", sub.to_str().unwrap()]);
        let (out, err) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(o.status.code(), Some(1), "{k}: {out}{err}");
        assert!(err.contains("1 file(s) in") && err.contains("could not be read whole"), "{k}: {err}");
        let row = out.lines().find(|l| l.ends_with(&name)).unwrap();
        assert!(row.contains("damaged") || row.contains("not pcapng version 1"), "{k}: {row}");
    }
    // Another tool's whole pcapng under an evidence file's name: listed as not one of
    // roceprobe's, and read whole (exit 0).
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    let f = other.join(&name);
    tshark(&["-r", files[0].to_str().unwrap(), "-F", "pcapng", "-c", "5", "-w", f.to_str().unwrap()]);
    let out = run_cmd(&["evidence", other.to_str().unwrap()]);
    assert!(out.contains("a pcapng file without roceprobe's event comment (not an evidence file)"), "{out}");
}

#[test]
fn bad_evidence_options_are_one_line_errors_before_any_work() {
    let pcap = fixtures().join("scenarios/rc_loss_vlan/rc_loss_vlan.pcap");
    let file = tempfile::NamedTempFile::new().unwrap();
    let not_dir = file.path().join("sub");
    let links = tempfile::tempdir().unwrap();
    let dangling = links.path().join("ev");
    std::os::unix::fs::symlink(links.path().join("nowhere"), &dangling).unwrap();
    for (args, says) in [
        (vec!["--evidence-dir", not_dir.to_str().unwrap()], "--evidence-dir"),
        // It said "File exists".
        (vec!["--evidence-dir", dangling.to_str().unwrap()], "ev: a symbolic link to nothing"),
        (vec!["--evidence-dir", "/tmp", "--evidence-after", "0"], "--evidence-after"),
        (vec!["--evidence-dir", "/tmp", "--evidence-snaplen", "32"], "--evidence-snaplen"),
        (vec!["--evidence-dir", "/tmp", "--evidence-max-bytes", "8K"], "--evidence-max-bytes"),
        // events.csv is a ninth report whose current file must fit in --csv-retain.
        (
            vec![
                "--evidence-dir",
                "/tmp",
                "--csv-dir",
                "/tmp",
                "--csv-retain",
                "1M",
                "--csv-rotate-size",
                "120K",
            ],
            "larger than a ninth of --csv-retain 1M",
        ),
    ] {
        let mut a = vec!["replay", "-q"];
        a.extend(args);
        a.push(pcap.to_str().unwrap());
        let o = run(&a);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{a:?}");
        assert!(err.contains(says), "{a:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    // Without --evidence-dir there is no events.csv.
    let d = tempfile::tempdir().unwrap();
    run_cmd(&["replay", "-q", "--csv-dir", d.path().to_str().unwrap(), pcap.to_str().unwrap()]);
    assert!(d.path().join("flows.csv").exists() && !d.path().join("events.csv").exists());
    let o = run(&["evidence", not_dir.to_str().unwrap()]);
    assert!(!o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stderr).trim_end().lines().count(), 1);
}
