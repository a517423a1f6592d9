//! Mirror copies that reach the probe out of time order (`--reorder-window`): the generator's
//! `_skewed` scenarios are the traffic of another scenario delivered over mirror paths of
//! different delay (50 µs apart) with per-packet jitter (1 % of packets 60-250 µs); their
//! results must be those of the same traffic over equal paths, and the truth. A packet later
//! than the window is counted as late, in its flow, and starts no I/O.

mod common;
use common::scenario_truth as truth;
use common::*;
use roceprobe::capture::pcap::{Replay, Writer};
use roceprobe::capture::{Capture, Poll};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn files(name: &str) -> Vec<PathBuf> {
    common::scenario_files(name, &truth(name))
}

fn args(name: &str) -> Vec<String> {
    common::scenario_args(&truth(name))
}

/// Replays `inputs` with `extra`; the summary and every CSV file's lines.
fn replay(inputs: &[PathBuf], extra: &[String]) -> (Value, Vec<(String, Vec<String>)>) {
    let dir = tempfile::tempdir().unwrap();
    let (summary, csv) = (dir.path().join("s.json"), dir.path().join("csv"));
    let mut a: Vec<String> =
        vec!["replay".into(), "-q".into(), "--summary".into(), summary.display().to_string()];
    a.extend(["--csv-dir".into(), csv.display().to_string()]);
    a.extend(extra.iter().cloned());
    a.extend(inputs.iter().map(|p| p.display().to_string()));
    let out = std::process::Command::new(bin()).args(&a).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut rows = Vec::new();
    for name in ["flows.csv", "latency.csv", "transmissions.csv", "ports.csv"] {
        let text = std::fs::read_to_string(csv.join(name)).unwrap();
        rows.push((name.to_owned(), text.lines().map(str::to_owned).collect()));
    }
    (serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap(), rows)
}

/// NVMe latency sample counts per series in a summary.
fn segment_counts(s: &Value) -> BTreeMap<Series, u64> {
    let text = |v: &Value| v.as_str().unwrap().to_owned();
    s["latency"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| text(&l["op"]).starts_with("nvme"))
        .map(|l| {
            (
                (text(&l["initiator_ip"]), text(&l["target_ip"]), text(&l["op"]), text(&l["segment"])),
                l["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Latency sample counts per series in the truth's I/Os.
fn truth_segment_counts(t: &Value) -> BTreeMap<Series, u64> {
    let all: Vec<&str> = SEGMENTS.iter().map(|(s, _)| *s).collect();
    truth_series(t, &all).into_iter().map(|(k, v)| (k, v.len() as u64)).collect()
}

/// Each `_skewed` scenario and the scenario of the same traffic over equal, jitter-free
/// paths; whether the packet times are a free-running ERSPAN III counter's.
const PAIRS: [(&str, &str, bool); 4] = [
    ("nvme_split_skewed", "nvme_split", false),
    ("nvme_erspan3_skewed", "nvme_erspan3", true),
    ("rc_loss_split_skewed", "rc_loss_split", false),
    ("nvme_faults_skewed", "nvme_faults", false),
];

#[test]
fn skewed_and_jittery_mirror_paths_give_the_results_of_equal_ones() {
    for (skewed, base, free_running) in PAIRS {
        let (mut a, a_rows) = replay(&files(base), &args(base));
        let (mut b, b_rows) = replay(&files(skewed), &args(skewed));
        // Nothing was late or released early: the default window covers these paths.
        assert_eq!(
            b["reorder"],
            serde_json::json!({
                "late_packets": {"compute": 0, "storage": 0},
                "io_copies_after_end": {"compute": 0, "storage": 0},
                "released_early": 0
            }),
            "{skewed}"
        );
        if free_running {
            // A free-running switch counter is anchored to its session's first frame's
            // arrival, so absolute times move with that frame's mirror path; every
            // difference (latency, duration) and every count stays.
            for s in [&mut a, &mut b] {
                let o = s.as_object_mut().unwrap();
                o.remove("first_packet");
                o.remove("last_packet");
                // From the first frame of one session to the last of the other.
                o.remove("duration_s");
                for io in o["ios"]["slowest"].as_array_mut().unwrap() {
                    io.as_object_mut().unwrap().remove("completed_at");
                }
            }
        }
        assert_eq!(a, b, "{skewed}: the summary differs from {base}'s");
        for ((name, x), (_, y)) in a_rows.iter().zip(&b_rows) {
            if free_running && name == "transmissions.csv" {
                // start,end are absolute times (see above), and rows are in the order
                // transmissions ended: compare the rest of each row, as a set.
                let strip = |rows: &Vec<String>| -> Vec<String> {
                    let mut v: Vec<String> =
                        rows.iter().map(|r| r.splitn(3, ',').nth(2).unwrap_or("").to_owned()).collect();
                    v.sort();
                    v
                };
                assert_eq!(strip(x), strip(y), "{skewed}: {name}");
            } else {
                assert_eq!(x, y, "{skewed}: {name} differs from {base}'s");
            }
        }
        // And both are the truth: the I/Os and every segment's sample count.
        let t = truth(skewed);
        let ios = t["ios"].as_array().unwrap().len() as u64;
        if let Some(o) = t["io_outcomes"].as_object() {
            assert_eq!(b["ios"]["completed"], o["completed"], "{skewed}");
            assert_eq!(b["ios"]["timed_out"], o["timed_out"], "{skewed}");
        } else if ios > 0 {
            assert_eq!(b["ios"]["completed"].as_u64(), Some(ios), "{skewed}: I/Os");
            assert_eq!(b["ios"]["timed_out"].as_u64(), Some(0), "{skewed}: I/Os timed out");
            assert_eq!(segment_counts(&b), truth_segment_counts(&t), "{skewed}: segment sample counts");
        }
    }
}

#[test]
fn without_the_window_skewed_paths_are_wrong() {
    // The same replays in arrival order: what the window is for (and proof that the
    // scenarios are out of order at all). (Split files reached over queues are merged by
    // time as they are read: the window is for what arrives in one file or port.)
    let (s, _) = replay(
        &files("nvme_erspan3_skewed"),
        &[args("nvme_erspan3_skewed"), vec!["--reorder-window".into(), "0".into()]].concat(),
    );
    // The storage mirror's copies, on the slower path, come after their I/Os had ended at
    // the compute vantage: counted as such, and each I/O counted once all the same (the
    // truth's 120), without the segments those copies would have given.
    let after = &s["reorder"]["io_copies_after_end"];
    assert_eq!(after["compute"], 0, "{}", s["reorder"]);
    assert!(after["storage"].as_u64().unwrap() > 0, "{}", s["reorder"]);
    let t = truth("nvme_erspan3_skewed");
    let done = s["ios"]["completed"].as_u64().unwrap() + s["ios"]["timed_out"].as_u64().unwrap();
    assert_eq!(Some(done), t["ios"].as_array().map(|a| a.len() as u64), "{}", s["ios"]);
    assert_ne!(segment_counts(&s), truth_segment_counts(&t));
    let (s, _) = replay(
        &files("rc_loss_split_skewed"),
        &[args("rc_loss_split_skewed"), vec!["--reorder-window".into(), "0".into()]].concat(),
    );
    let (base, _) = replay(&files("rc_loss_split"), &args("rc_loss_split"));
    let retx = |s: &Value| {
        s["flows"].as_array().unwrap().iter().map(|f| f["retx_packets"].as_u64().unwrap()).sum::<u64>()
    };
    assert!(retx(&s) > retx(&base), "{} vs {}", retx(&s), retx(&base));
}

type Rows = Vec<(String, Vec<String>)>;

/// The run's results with one worker are kept in `first`; any later run's summary and CSV
/// rows must be the same (rows in any order: workers report independently).
fn same_as_first(first: &mut Option<(Value, Rows)>, s: Value, mut rows: Rows, case: &str) {
    rows.iter_mut().for_each(|(_, r)| r.sort());
    match first {
        None => *first = Some((s, rows)),
        Some((one, one_rows)) => {
            assert_eq!(&s, one, "{case}: summary");
            assert_eq!(&rows, one_rows, "{case}: CSV rows");
        }
    }
}

/// Frames of a capture file with their times, in file order.
fn frames(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut r = Replay::open(&[path.to_path_buf()]).unwrap();
    let mut out = Vec::new();
    while let Poll::Frames(_) = r.poll(|f| out.push((f.ts_ns, f.data.to_vec()))).unwrap() {}
    out
}

fn write(path: &Path, frames: &[(u64, Vec<u8>)]) {
    let mut w = Writer::new(std::io::BufWriter::new(std::fs::File::create(path).unwrap())).unwrap();
    for (ts, f) in frames {
        w.write(*ts, f, f.len() as u32).unwrap();
    }
    use std::io::Write;
    w.into_inner().flush().unwrap();
}

#[test]
fn a_packet_later_than_the_window_is_counted_late_in_its_flow_and_starts_no_io() {
    // nvme_split's storage file with its first command capsule moved to the end: it keeps
    // its time, so it arrives ~400 µs late, past a 50 µs window.
    let dir = tempfile::tempdir().unwrap();
    let fs = files("nvme_split");
    let mut storage = frames(&fs[1]);
    let first_sqe = storage
        .iter()
        .position(|(_, f)| {
            // A SEND Only (opcode 4) on UDP 4791 from a host (10.0.1.x): a command capsule.
            f.len() > 42 + 64
                && f[23] == 17
                && f[36..38] == [0x12, 0xB7]
                && f[42] == 4
                && f[26..29] == [10, 0, 1]
        })
        .unwrap();
    let moved = storage.remove(first_sqe);
    storage.push(moved);
    let late_file = dir.path().join("storage.pcap");
    write(&late_file, &storage);
    let inputs = vec![fs[0].clone(), late_file];
    let window = vec!["--reorder-window".to_string(), "50us".into()];
    let (s, rows) = replay(&inputs, &[args("nvme_split"), window].concat());
    let t = truth("nvme_split");

    assert_eq!(s["reorder"]["late_packets"], serde_json::json!({"compute": 0, "storage": 1}));
    // Counted in its flow: every flow's packets and commands are the truth's.
    let flow_field = |s: &Value, field: &str, vantage: &str| vantage_sum(s, vantage, field);
    for v in ["compute", "storage"] {
        assert_eq!(flow_field(&s, "packets", v), flow_field(&t, "packets", v), "{v}: packets");
        assert_eq!(flow_field(&s, "bytes", v), flow_field(&t, "bytes", v), "{v}: bytes");
    }
    assert_eq!(flow_field(&s, "late_packets", "storage"), 1);
    let header = &rows[0].1[0];
    let col = header.split(',').position(|c| c == "late_packets").unwrap();
    let late_in_csv: u64 =
        rows[0].1[1..].iter().map(|r| r.split(',').nth(col).unwrap().parse::<u64>().unwrap()).sum();
    assert_eq!(late_in_csv, 1, "flows.csv late_packets");
    // No I/O more than the 120: the late copy joined none and started none. Its I/O was
    // measured at the compute vantage only, so the storage segments miss one sample.
    assert_eq!(s["ios"]["completed"].as_u64(), Some(120), "{}", s["ios"]);
    assert_eq!(s["ios"]["timed_out"].as_u64(), Some(0));
    assert_eq!(s["ios"]["unfinished"].as_u64(), Some(0));
    let total = |s: &BTreeMap<Series, u64>, seg: &str| -> u64 {
        s.iter().filter(|(k, _)| k.3 == seg).map(|(_, n)| n).sum()
    };
    let (got, want) = (segment_counts(&s), truth_segment_counts(&t));
    assert_eq!(total(&got, "io@compute"), total(&want, "io@compute"));
    assert_eq!(total(&got, "io@storage"), total(&want, "io@storage") - 1);
}

#[test]
fn one_frame_stamped_seconds_off_in_one_vantages_file_keeps_the_files_merged() {
    // nvme_split's storage file with its middle frame stamped 2 s ahead. Merged by that
    // time, the storage file would wait behind it until the compute file reached it: every
    // later storage copy would come after all of the compute file's frames, and the I/Os
    // of the second half (39 of them) would be counted twice, once at each vantage, never
    // joined. Analysed at that time, it would move time on by 2 s: the I/Os in flight
    // would time out (31, 20 and 16 of them with 1, 2 and 4 workers before the frame was
    // retimed). Replayed at the time of the frame before it, every I/O completes once,
    // whatever the number of workers. The same for the file's second frame stamped 2 s
    // behind (its first frame, then 2 s after it, is not taken for the wrong one), its
    // last frame 2 s behind, and its first frame 2 s ahead (replayed at the time of the
    // frame after it). (A first frame 2 s behind the rest cannot be told from one before a
    // silence: it keeps its time, see `capture::pcap`'s tests.)
    let dir = tempfile::tempdir().unwrap();
    let fs = files("nvme_split");
    let t = truth("nvme_split");
    assert_eq!(t["ios"].as_array().unwrap().len(), 120);
    let (compute, storage) = (frames(&fs[0]), frames(&fs[1]));
    let two_s = 2_000_000_000i64;
    for (which, at, by) in [
        ("middle", storage.len() / 2, two_s),
        ("second", 1, -two_s),
        ("last", storage.len() - 1, -two_s),
        ("first", 0, two_s),
    ] {
        let mut wrong = storage.clone();
        wrong[at].0 = wrong[at].0.checked_add_signed(by).unwrap();
        let stepped = dir.path().join(format!("storage-{which}.pcap"));
        write(&stepped, &wrong);
        let mut first = None;
        for workers in ["1", "2", "4"] {
            let case = format!("{which} frame, {workers} workers");
            let extra = [args("nvme_split"), vec!["--workers".into(), workers.into()]].concat();
            let (s, rows) = replay(&[fs[0].clone(), stepped.clone()], &extra);
            let flow_field = |s: &Value, field: &str, vantage: &str| vantage_sum(s, vantage, field);
            for v in ["compute", "storage"] {
                assert_eq!(
                    flow_field(&s, "packets", v),
                    flow_field(&t, "packets", v),
                    "{case}, {v}: packets"
                );
                assert_eq!(flow_field(&s, "bytes", v), flow_field(&t, "bytes", v), "{case}, {v}: bytes");
            }
            assert_eq!(
                s["reorder"]["late_packets"],
                serde_json::json!({"compute": 0, "storage": 0}),
                "{case}"
            );
            assert_eq!(s["ports"]["0"]["retimed"].as_u64(), Some(0), "{case}");
            assert_eq!(s["ports"]["1"]["retimed"].as_u64(), Some(1), "{case}");
            // The run's first and last packet times are the right frames' of the files.
            let right = storage.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, f)| f.0);
            let first_ts = right.clone().chain([compute[0].0]).min().unwrap();
            let last_ts = right.chain([compute.last().unwrap().0]).max().unwrap();
            assert_eq!(s["first_packet"], roceprobe::report::time::rfc3339_nanos(first_ts), "{case}");
            assert_eq!(s["last_packet"], roceprobe::report::time::rfc3339_nanos(last_ts), "{case}");
            // The truth's 120 I/Os, each once, each measured at both vantages.
            let ios = &s["ios"];
            assert_eq!(ios["completed"].as_u64(), Some(120), "{case}: {ios}");
            assert_eq!(ios["timed_out"].as_u64(), Some(0), "{case}: {ios}");
            assert_eq!(segment_counts(&s), truth_segment_counts(&t), "{case}");
            same_as_first(&mut first, s, rows, &case);
        }
    }
}

/// The real RDMA WRITE run's request flow to QP 27, as tshark reads it.
fn write_run_qp27() -> Value {
    pinned_truth()["captures"]["rdma_write_bw.pcap"]["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["dst_qpn"] == 27)
        .unwrap()
        .clone()
}

/// Whether frame `f` (untagged Ethernet, IPv4) is a RoCEv2 (UDP 4791) request to QP 27 of
/// one of `opcodes`.
fn to_qp27(f: &[u8], opcodes: std::ops::RangeInclusive<u8>) -> bool {
    f.len() > 54
        && f[23] == 17
        && f[36..38] == [0x12, 0xB7]
        && opcodes.contains(&f[42])
        && f[47..50] == [0, 0, 27]
}

#[test]
fn a_late_request_in_sequence_is_no_gap() {
    // A real RDMA WRITE bandwidth run (tshark: 5 WRITE First, Middle and Last each on QP
    // 27, no PSN missing or repeated), one of its requests at a time stamped 1 µs before
    // the frame before it, as a capture written from several queues does now and then;
    // the file's order is kept. With one source nothing is held until a frame comes out of
    // time order, so that request is late: counted in its flow, and, its PSN being the one
    // expected, in sequence. Before, it was left out of the PSN analysis and the request
    // after it read as a gap of one PSN (a loss event with evidence on).
    let dir = tempfile::tempdir().unwrap();
    let want = write_run_qp27();
    assert_eq!(want["opcodes"], serde_json::json!({"6": 5, "7": 5, "8": 5}));
    let fs = frames(&capture("rdma_write_bw.pcap"));
    // WRITE First, Middle or Last (opcodes 6-8) to QP 27.
    let requests: Vec<usize> = (1..fs.len()).filter(|&i| to_qp27(&fs[i].1, 6..=8)).collect();
    assert_eq!(requests.len(), 15);
    for k in requests {
        let mut moved = fs.clone();
        moved[k].0 = fs[k - 1].0 - 1_000;
        let path = dir.path().join(format!("late-{k}.pcap"));
        write(&path, &moved);
        let (s, _) = replay(std::slice::from_ref(&path), &[]);
        let flow = s["flows"].as_array().unwrap().iter().find(|f| f["dst_qpn"] == 27).unwrap();
        let got = |field: &str| flow[field].as_u64().unwrap();
        let case = format!("frame {k}: {flow}");
        assert_eq!(got("late_packets"), 1, "{case}");
        assert_eq!((got("gap_psns"), got("retx_packets"), got("out_of_window")), (0, 0, 0), "{case}");
        assert_eq!(got("messages"), 5, "{case}");
        assert_eq!(got("packets"), want["packets"].as_u64().unwrap(), "{case}");
    }
}

#[test]
fn a_late_mirror_copy_is_a_duplicate_only_when_its_first_copy_came_before_it() {
    // A real RDMA WRITE bandwidth run (tshark: QP 27's 15 requests, none repeated), one
    // WRITE Middle given a second copy with the TTL one lower (a mirror's copy after a
    // router), stamped between it and the frame that follows it but written after that
    // frame: with one source that copy is late. A second copy after its first is a mirror
    // duplicate, late or not; a first copy (the higher TTL) late after its second counts
    // as a packet, as the second did.
    let dir = tempfile::tempdir().unwrap();
    let packets = write_run_qp27()["packets"].as_u64().unwrap();
    let fs = frames(&capture("rdma_write_bw.pcap"));
    // A WRITE Middle (opcode 7) to QP 27, the first with a later frame after it (the
    // copy's time goes between them).
    let k = (0..fs.len() - 1).find(|&i| to_qp27(&fs[i].1, 7..=7) && fs[i + 1].0 > fs[i].0 + 1).unwrap();
    let at = fs[k].0 + (fs[k + 1].0 - fs[k].0) / 2;
    let lower = |f: &[u8]| {
        let mut f = f.to_vec();
        f[22] -= 1; // IPv4 TTL
        f
    };
    // (case, the frames, mirror duplicates, the flow's packets and late packets)
    let second_late = {
        let mut v = fs.clone();
        v.insert(k + 2, (at, lower(&fs[k].1)));
        v
    };
    let first_late = {
        let mut v = fs.clone();
        v[k].1 = lower(&fs[k].1);
        v.insert(k + 2, (at, fs[k].1.clone()));
        v
    };
    for (case, v, dups, packets, late) in
        [("second copy late", second_late, 1, packets, 0), ("first copy late", first_late, 0, packets + 1, 1)]
    {
        let path = dir.path().join("copy.pcap");
        write(&path, &v);
        let (s, _) = replay(std::slice::from_ref(&path), &[]);
        let flow = s["flows"].as_array().unwrap().iter().find(|f| f["dst_qpn"] == 27).unwrap();
        let got = |field: &str| flow[field].as_u64().unwrap();
        assert_eq!(
            (got("mirror_duplicates"), got("packets"), got("late_packets")),
            (dups, packets, late),
            "{case}: {flow}"
        );
        assert_eq!(s["reorder"]["late_packets"]["compute"].as_u64(), Some(1), "{case}");
        assert_eq!((got("gap_psns"), got("retx_packets")), (0, 0), "{case}: {flow}");
    }
}

#[test]
fn a_late_nak_or_cnp_is_counted_as_one_in_order() {
    // rc_loss_vlan (two vantages, so every frame is held for the window, here 10 µs: the
    // capture spans 214 µs), one CNP, one NAK (sequence error) and one RNR NAK of each
    // vantage in turn made late: written after the first frame 20 µs later than it, its
    // time kept. Counting a NAK or a CNP does
    // not depend on the order frames come in: the flows' `cnp` (on the flow the CNP
    // throttles), `nak_seq`, `nak_rnr` and `nak_other` are the truth's as when in order,
    // the frame counted late in its flow. Before, a late NAK or CNP counted in none.
    let name = "rc_loss_vlan";
    let t = truth(name);
    let fs = files(name);
    let mut args = scenario_args(&t);
    args.extend(["--reorder-window".into(), "10us".into()]);
    let out = Command::new("tshark")
        .args(["-r", fs[0].to_str().unwrap(), "-T", "fields", "-E", "separator=,"])
        .args(["-e", "vlan.id", "-e", "infiniband.bth.opcode", "-e", "infiniband.aeth.syndrome"])
        .output()
        .expect("tshark");
    // (frame index, vlan, kind): CNP (opcode 129), RNR NAK (AETH syndrome 001xxxxx) and
    // NAK (011xxxxx) on ACKs (opcode 17).
    let mut picked: Vec<(usize, String, &str)> = Vec::new();
    for (i, l) in String::from_utf8(out.stdout).unwrap().lines().enumerate() {
        let f: Vec<&str> = l.split(',').collect();
        let syndrome: u32 = f.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
        let kind = match (f.get(1).copied(), syndrome >> 5) {
            (Some("129"), _) => "cnp",
            (Some("17"), 1) => "rnr",
            (Some("17"), 3) => "nak",
            _ => continue,
        };
        if !picked.iter().any(|p| p.1 == f[0] && p.2 == kind) {
            picked.push((i, f[0].to_owned(), kind));
        }
    }
    assert_eq!(picked.len(), 6, "a CNP, a NAK and an RNR NAK at each vantage: {picked:?}");
    let frames = frames(&fs[0]);
    let view = |flows: &Value| -> BTreeMap<String, Vec<u64>> {
        flows
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let key = format!("{} {} {} {}", f["vantage"], f["src_ip"], f["dst_ip"], f["dst_qpn"]);
                let n = |k: &str| f[k].as_u64().unwrap();
                (
                    key,
                    vec![
                        n("packets"),
                        n("cnp"),
                        n("cnp_unattributed"),
                        n("nak_seq"),
                        n("nak_rnr"),
                        n("nak_other"),
                    ],
                )
            })
            .collect()
    };
    let want = view(&t["flows"]);
    let dir = tempfile::tempdir().unwrap();
    for (k, vlan, kind) in picked {
        let mut moved = frames.clone();
        let f = moved.remove(k);
        let at = moved.iter().position(|g| g.0 > f.0 + 20_000).expect("a frame 20 µs later");
        moved.insert(at + 1, f);
        let path = dir.path().join("late.pcap");
        write(&path, &moved);
        let (s, _) = replay(std::slice::from_ref(&path), &args);
        let case = format!("the {kind} of VLAN {vlan} (frame {})", k + 1);
        let late = &s["reorder"]["late_packets"];
        assert_eq!(late["compute"].as_u64().unwrap() + late["storage"].as_u64().unwrap(), 1, "{case}");
        let late_flows: u64 =
            s["flows"].as_array().unwrap().iter().map(|f| f["late_packets"].as_u64().unwrap()).sum();
        assert_eq!(late_flows, 1, "{case}");
        assert_eq!(view(&s["flows"]), want, "{case}");
    }
}

#[test]
fn a_late_first_copy_of_a_nak_or_cnp_counts_it_once() {
    // Every packet mirrored twice, the copy after a router with the TTL one lower 0.5 µs
    // later (hand-set frames): two WRITEs and their ACK, a NAK (sequence error) of the
    // other direction 2 ms later and a CNP 2 ms after it, then a WRITE at 7 ms. The NAK's
    // and the CNP's second copies (TTL 63) come in order, their first copies (TTL 64)
    // after the last WRITE: late. One NAK and one CNP were sent: each counts once (the
    // late copies count as packets, and late), with 1 and 4 workers. Before, the late
    // first copies counted them a second time. The same frames with the NAK's and CNP's
    // first copies only, late, after a path change (the flows' other packets at TTL 62,
    // one copy each): no flow sees packets twice, and the late NAK and CNP count. And with
    // the ACK at 12 µs at TTL 64 and another ACK 0.7 µs after it at 62: a path two hops
    // shorter, no mirror's copy (before, the second ACK was taken for a mirror duplicate).
    use roceprobe::wire::bth::{self, opcode as op};
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders};
    let (a, b): (std::net::IpAddr, std::net::IpAddr) =
        ("10.20.0.1".parse().unwrap(), "10.20.0.2".parse().unwrap());
    let payload = [0u8; 64];
    let frame = |src, dst, opcode, qp, psn, aeth: Option<Aeth>, ttl| {
        let repr = bth::Repr { opcode, dest_qp: qp, psn, ..Default::default() };
        let mut f = roceprobe::wire::build::RoceFrame::new(src, dst, repr);
        f.ext = ExtHeaders { aeth, ..Default::default() };
        f.ttl = ttl;
        if opcode == op::WRITE_ONLY {
            f.payload = &payload;
        }
        f.emit()
    };
    let us = 1_000u64;
    let nak = Some(Aeth::nak(0, 1));
    let mut frames = Vec::new();
    // (time, src, dst, opcode, QP, PSN, AETH, both copies in order)
    for (t, src, dst, opcode, qp, psn, aeth, both) in [
        (10 * us, a, b, op::WRITE_ONLY, 0x51, 100, None, true),
        (11 * us, a, b, op::WRITE_ONLY, 0x51, 102, None, true),
        (12 * us, b, a, op::ACKNOWLEDGE, 0x61, 100, Some(Aeth::ack(31, 1)), true),
        (2_000 * us, b, a, op::ACKNOWLEDGE, 0x61, 101, nak, false),
        (4_000 * us, b, a, op::CNP, 0x61, 0, None, false),
        (7_000 * us, a, b, op::WRITE_ONLY, 0x51, 101, None, true),
    ] {
        if both {
            frames.push((t, frame(src, dst, opcode, qp, psn, aeth, 64)));
        }
        frames.push((t + 500, frame(src, dst, opcode, qp, psn, aeth, 63)));
    }
    frames.push((2_000 * us, frame(b, a, op::ACKNOWLEDGE, 0x61, 101, nak, 64)));
    frames.push((4_000 * us, frame(b, a, op::CNP, 0x61, 0, None, 64)));
    // One copy of each packet, the path's TTL 62 but for the late NAK's and CNP's (64).
    let single: Vec<(u64, Vec<u8>)> = frames
        .iter()
        .filter(|(_, f)| f[22] == 63)
        .map(|(t, f)| {
            let mut f = f.clone();
            f[22] = 62;
            (*t, f)
        })
        .filter(|(t, _)| *t != 2_000 * us + 500 && *t != 4_000 * us + 500)
        .chain(frames[frames.len() - 2..].iter().cloned())
        .collect();
    // The ACK at 12 µs at TTL 64, the one after it (0.7 µs later) and the rest at 62.
    let mut path_change = single[..single.len() - 2].to_vec();
    let at = path_change.iter().position(|(t, _)| *t == 12 * us + 500).expect("the ACK");
    path_change[at].1[22] = 64;
    let next = frame(b, a, op::ACKNOWLEDGE, 0x61, 102, Some(Aeth::ack(31, 2)), 62);
    path_change.insert(at + 1, (12 * us + 1_200, next));
    path_change.extend(frames[frames.len() - 2..].iter().cloned());
    let dir = tempfile::tempdir().unwrap();
    for (case, frames, dups) in [
        ("two copies", &frames, true),
        ("one copy, a path change", &single, false),
        ("one copy, the path two hops shorter after an ACK", &path_change, false),
    ] {
        let path = dir.path().join("copies.pcap");
        write(&path, frames);
        for workers in ["1", "4"] {
            let (s, _) = replay(std::slice::from_ref(&path), &["--workers".into(), workers.into()]);
            let flows = s["flows"].as_array().unwrap();
            let sum = |k: &str| -> u64 { flows.iter().map(|f| f[k].as_u64().unwrap()).sum() };
            let counted = (sum("nak_seq"), sum("cnp") + sum("cnp_unattributed"), sum("late_packets"));
            assert_eq!(counted, (1, 1, 2), "{case}, {workers} workers: {}", s["flows"]);
            assert_eq!(sum("mirror_duplicates") > 0, dups, "{case}");
        }
    }
}

#[test]
fn psns_reordered_within_the_window_are_no_retransmission_and_no_gap() {
    // A real RDMA WRITE bandwidth run (no loss, tshark: no retransmission), its frames
    // swapped pairwise in arrival order where less than the 1 ms window apart, each keeping
    // its time (frames of equal time keep their order: nothing could tell which came
    // first). One file, one vantage: the window holds frames from the first that comes out
    // of order (here the QP setup's TCP, before any RoCE packet), so no RoCE packet is late.
    let dir = tempfile::tempdir().unwrap();
    let mut fs = frames(&capture("rdma_write_bw.pcap"));
    for pair in fs.chunks_mut(2) {
        if pair.len() == 2 && pair[0].0 != pair[1].0 && pair[1].0 - pair[0].0 < 1_000_000 {
            pair.reverse();
        }
    }
    let swapped = dir.path().join("swapped.pcap");
    write(&swapped, &fs);
    let sum = |s: &Value, field: &str| -> u64 {
        s["flows"].as_array().unwrap().iter().map(|f| f[field].as_u64().unwrap()).sum()
    };
    let (s, _) = replay(std::slice::from_ref(&swapped), &[]);
    for field in ["retx_packets", "gap_psns", "out_of_window", "late_packets"] {
        assert_eq!(sum(&s, field), 0, "{field}");
    }
    assert_eq!(s["packets"].as_u64(), Some(fs.len() as u64));
    // In arrival order they would be: the swap is real.
    let (s, _) = replay(&[swapped], &["--reorder-window".into(), "0".into()]);
    assert!(sum(&s, "retx_packets") > 0 && sum(&s, "gap_psns") > 0);
}

#[test]
fn live_with_one_port_per_vantage_gives_the_truths_ios_and_segments() {
    // Two net_pcap ports, one per vantage's file, polled a burst at a time: one port's
    // copies are handled before the other's older ones unless put in order.
    let name = "nvme_split_skewed";
    let (t, fs) = (truth(name), files(name));
    let refs: Vec<&Path> = fs.iter().map(PathBuf::as_path).collect();
    let extra: Vec<String> = args(name).iter().map(|a| a.replace("file:", "port:")).collect();
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let s = live_summary(&refs, &extra);
    assert_eq!(s["packets"], t["packets"]);
    assert_eq!(s["reorder"]["late_packets"], serde_json::json!({"compute": 0, "storage": 0}));
    assert_eq!(s["ios"]["completed"].as_u64(), Some(120), "{}", s["ios"]);
    assert_eq!(s["ios"]["timed_out"].as_u64(), Some(0));
    assert_eq!(segment_counts(&s), truth_segment_counts(&t), "segment sample counts");
    for f in ["retx_packets", "gap_psns"] {
        let n: u64 = s["flows"].as_array().unwrap().iter().map(|x| x[f].as_u64().unwrap()).sum();
        assert_eq!(n, 0, "{f}");
    }
}

#[test]
fn a_frame_cut_where_the_window_cuts_it_decodes_to_the_same_packet() {
    // Held frames keep their first KEPT_BYTES: every frame of every fixture and real
    // capture, cut there, gives the same headers, lengths, capsule and CM message.
    use roceprobe::runtime::reorder::KEPT_BYTES;
    use roceprobe::wire::cm::CmMessage;
    use roceprobe::wire::nvme::classify;
    use roceprobe::wire::{decode_frame, Decoded};
    let mut inputs: Vec<PathBuf> = REAL_CAPTURES.iter().map(|c| capture(c)).collect();
    for e in std::fs::read_dir(fixtures().join("scenarios")).unwrap() {
        for f in std::fs::read_dir(e.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|x| x == "pcap") {
                inputs.push(p);
            }
        }
    }
    let (mut cut, mut seen) = (0, 0);
    for path in inputs {
        for (_, f) in frames(&path) {
            seen += 1;
            let short = &f[..f.len().min(KEPT_BYTES)];
            cut += usize::from(short.len() < f.len());
            match (decode_frame(&f), decode_frame(short)) {
                (Decoded::Roce(a), Decoded::Roce(b)) => {
                    // A copy's headers say it was cut: it counts as long as the frame (`link_len`).
                    fn view(p: &roceprobe::wire::RocePacket<'_>, frame: &[u8], wire_len: u32) -> String {
                        let o = p.bth.opcode();
                        format!(
                            "{:?}",
                            (
                                (
                                    p.vlans,
                                    p.vlan_count,
                                    p.mirror,
                                    p.link_len(frame, wire_len),
                                    p.ip,
                                    p.ecn,
                                    p.udp_src_port
                                ),
                                (o, p.bth.dest_qp(), p.bth.psn(), p.ext, p.exts, p.payload_len),
                                classify(o, p.payload, p.payload_len),
                                CmMessage::parse(p.payload),
                            )
                        )
                    }
                    let wire_len = f.len() as u32;
                    assert_eq!(view(&a, &f, wire_len), view(&b, short, wire_len), "{}", path.display());
                }
                (a, b) => assert_eq!(format!("{a:?}"), format!("{b:?}"), "{}", path.display()),
            }
        }
    }
    assert!(cut > 100 && seen > 5_000, "{cut} of {seen} frames cut");
}

#[test]
fn after_a_clock_step_back_frames_are_put_in_order_with_any_number_of_workers() {
    // Eight IP pairs, one QP each, RDMA WRITE Only requests with PSNs in order, 1 µs apart;
    // after 400 frames the capture clock steps 10 s back and stays there, and from then on
    // every two frames arrive swapped, each with its time. Within the reorder window (1 ms)
    // they are put back in order: no retransmission, no gap, nothing late, whatever the
    // number of workers. (Behind a dispatcher, its latest time used to stay 10 s ahead, and
    // every frame then restarted its worker's window: the swapped frames were analysed as
    // they came, as retransmissions.)
    use roceprobe::wire::bth;
    use roceprobe::wire::build::RoceFrame;
    let t0 = 1_800_000_000_000_000_000u64;
    let mut fs: Vec<(u64, Vec<u8>)> = Vec::new();
    for k in 0..800u32 {
        let pair = k % 8;
        let (src, dst) = (format!("10.9.{pair}.1"), format!("10.9.{pair}.2"));
        let repr = bth::Repr { opcode: 0x0a, dest_qp: 0x100 + pair, psn: k / 8, ..Default::default() };
        let f = RoceFrame::new(src.parse().unwrap(), dst.parse().unwrap(), repr).emit();
        let us = u64::from(k) * 1_000;
        fs.push((if k < 400 { t0 + 10_000_000_000 + us } else { t0 + us }, f));
    }
    for pair in fs[400..].chunks_mut(16) {
        // Each pair's two frames of a block of 16 (PSNs n and n + 1) swapped.
        for i in 0..8 {
            pair.swap(i, i + 8);
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("step_back.pcap");
    write(&path, &fs);
    let sum = |s: &Value, field: &str| -> u64 {
        s["flows"].as_array().unwrap().iter().map(|f| f[field].as_u64().unwrap()).sum()
    };
    let mut first = None;
    for workers in ["1", "2", "4"] {
        let (s, rows) = replay(std::slice::from_ref(&path), &["--workers".into(), workers.into()]);
        assert_eq!(sum(&s, "packets"), 800, "{workers} workers");
        assert_eq!(sum(&s, "messages"), 800, "{workers} workers");
        for field in ["retx_packets", "gap_psns", "out_of_window", "late_packets"] {
            assert_eq!(sum(&s, field), 0, "{workers} workers: {field}");
        }
        same_as_first(&mut first, s, rows, &format!("{workers} workers"));
    }
    // In arrival order they would not be in order: the swap is real.
    let (s, _) = replay(&[path], &["--reorder-window".into(), "0".into()]);
    assert!(sum(&s, "retx_packets") > 0);
}

#[test]
fn after_a_clock_step_several_workers_give_what_one_gives() {
    // nvme_vlan stretched 1,000 times (I/Os of milliseconds), with `--io-timeout 50ms`:
    // - "back": its middle frame 200 ms ahead and every frame after it 3 s back; one host
    //   pair sends nothing soon after the step while the others go on for 200 ms, four
    //   times the timeout. Behind a dispatcher, the worker of that pair learns the highest
    //   time only from the others' frames, and with four workers it has a few frames after
    //   the step and then none: it must still reach the highest time, and time out the
    //   I/Os those frames began by the time since the step (an I/O is unfinished only if
    //   the capture ends before its timeout; here none is).
    // - "ahead": two frames in the middle 100 s ahead (a clock step, not a lone wrong
    //   frame): every worker's analysis must reach that time, not only the one whose
    //   frames they are.
    // With the reorder window and without, the same summary and CSV rows with 1, 2 and 4
    // workers.
    let t = truth("nvme_vlan");
    let fs = common::scenario_files("nvme_vlan", &t);
    let all = frames(&fs[0]);
    let (n, t0) = (all.len(), all[0].0);
    let pair_of = |f: &[u8]| -> Option<[[u8; 4]; 2]> {
        let mut at = 12;
        while f.get(at..at + 2)? == [0x81, 0x00] {
            at += 4;
        }
        let ip = f.get(at + 2..at + 22)?;
        let (a, b) = (<[u8; 4]>::try_from(&ip[12..16]).ok()?, <[u8; 4]>::try_from(&ip[16..20]).ok()?);
        Some(if a <= b { [a, b] } else { [b, a] })
    };
    let silent = [[10, 0, 1, 1], [10, 0, 2, 1]];
    let (mut back, mut ahead) = (Vec::new(), Vec::new());
    let mut seen_of_pair = BTreeMap::new();
    for (i, (ts, f)) in all.into_iter().enumerate() {
        let at = t0 + (ts - t0) * 1_000;
        ahead.push((if i == n / 2 || i == n / 2 + 1 { at + 100_000_000_000 } else { at }, f.clone()));
        let pair = pair_of(&f);
        let k = seen_of_pair.entry(pair).or_insert(0u32);
        *k += 1;
        if pair == Some(silent) && i > n / 2 && *k > 141 {
            continue;
        }
        let at = match i {
            _ if i == n / 2 => at + 200_000_000,
            _ if i > n / 2 => at - 3_000_000_000,
            _ => at,
        };
        back.push((at, f));
    }
    let dir = tempfile::tempdir().unwrap();
    for (name, stepped) in [("back", back), ("ahead", ahead)] {
        let path = dir.path().join(format!("{name}.pcap"));
        write(&path, &stepped);
        for window in ["1ms", "0"] {
            let mut first = None;
            for workers in ["1", "2", "4"] {
                let case = format!("{name}, window {window}, {workers} workers");
                let opts = ["--io-timeout", "50ms", "--reorder-window", window, "--workers", workers];
                let extra = [args("nvme_vlan"), opts.map(String::from).to_vec()].concat();
                let (s, rows) = replay(std::slice::from_ref(&path), &extra);
                let ios = &s["ios"];
                assert_eq!(ios["unfinished"].as_u64(), Some(0), "{case}: {ios}");
                assert!(ios["timed_out"].as_u64().unwrap() > 0, "{case}: {ios}");
                same_as_first(&mut first, s, rows, &case);
            }
        }
    }
}
