//! `--workers N` (software dispatch by IP pair) gives the same results as one worker on
//! every generated scenario and every real capture: the same summary, and the same CSV rows
//! (in another order: workers report independently).

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run_with(files: &[PathBuf], args: &[String], workers: usize) -> (Value, Vec<Vec<String>>) {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("csv");
    let summary = dir.path().join("s.json");
    let mut a: Vec<String> =
        vec!["replay".into(), "-q".into(), "--check-icrc".into(), "--workers".into(), workers.to_string()];
    a.extend([
        "--summary".into(),
        summary.display().to_string(),
        "--csv-dir".into(),
        csv.display().to_string(),
    ]);
    a.extend(args.iter().cloned());
    a.extend(files.iter().map(|f| f.display().to_string()));
    let o = Command::new(bin()).args(&a).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut rows = Vec::new();
    for name in [
        "flows.csv",
        "transmissions.csv",
        "latency.csv",
        "io.csv",
        "slow_ios.csv",
        "steps.csv",
        "stragglers.csv",
    ] {
        let mut r: Vec<String> =
            std::fs::read_to_string(csv.join(name)).unwrap().lines().map(str::to_owned).collect();
        r.sort();
        rows.push(r);
    }
    (serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap(), rows)
}

fn cases() -> Vec<(String, Vec<PathBuf>, Vec<String>)> {
    let mut out = Vec::new();
    let dir = fixtures().join("scenarios");
    let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for d in names {
        let t: Value = serde_json::from_str(&std::fs::read_to_string(d.join("truth.json")).unwrap()).unwrap();
        let files = t["files"].as_array().unwrap().iter().map(|f| d.join(f.as_str().unwrap())).collect();
        let args = scenario_args(&t);
        out.push((d.file_name().unwrap().to_string_lossy().into_owned(), files, args));
    }
    for c in REAL_CAPTURES {
        out.push((c.to_owned(), vec![capture(c)], vec![]));
    }
    out
}

#[test]
fn two_and_four_workers_give_what_one_gives_on_every_fixture_and_capture() {
    let all = cases();
    assert!(all.len() >= 19);
    for (name, files, args) in all {
        let (one, one_rows) = run_with(&files, &args, 1);
        for n in [2, 4] {
            let (many, many_rows) = run_with(&files, &args, n);
            assert_eq!(many, one, "{name}: summary with --workers {n}");
            assert_eq!(many_rows, one_rows, "{name}: CSV rows with --workers {n}");
        }
    }
}

#[test]
fn frames_out_of_time_order_are_judged_alike_with_any_number_of_workers() {
    // A real capture (the QP setup's TCP, then RDMA WRITE and its ACKs), every fifth frame
    // stamped 0.6 ms early (within the 1 ms window: put back in order) and every seventh
    // 1.5 ms early (past it: late). Whichever worker a frame goes to, the first frame out
    // of order arms every worker's window, and a frame is late as it is with one worker.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("early.pcap");
    retimed(&capture("rdma_write_bw.pcap"), &path, |i, ts| {
        let early = if i % 7 == 6 {
            1_500_000
        } else if i % 5 == 4 {
            600_000
        } else {
            0
        };
        ts - early
    });
    let (one, one_rows) = run_with(std::slice::from_ref(&path), &[], 1);
    let late = &one["reorder"]["late_packets"]["compute"];
    assert!(late.as_u64().unwrap() > 0, "{}", one["reorder"]);
    for n in [2, 4] {
        let (many, many_rows) = run_with(std::slice::from_ref(&path), &[], n);
        assert_eq!(many, one, "summary with --workers {n}");
        assert_eq!(many_rows, one_rows, "CSV rows with --workers {n}");
    }
}

/// The frames of `path` in its order: time, bytes, length on the wire.
fn frames(path: &Path) -> Vec<(u64, Vec<u8>, u32)> {
    use roceprobe::capture::pcap::Replay;
    use roceprobe::capture::{Capture, Poll};
    let mut all = Vec::new();
    let mut r = Replay::open(&[path.to_path_buf()]).unwrap();
    while let Poll::Frames(_) = r.poll(|f| all.push((f.ts_ns, f.data.to_vec(), f.wire_len))).unwrap() {}
    all
}

/// Frames of `path` written to `out` in the order given, each `(index in the file,
/// nanoseconds moved)`.
fn picked(path: &Path, out: &Path, which: &[(usize, i64)]) {
    let all = frames(path);
    let mut w = roceprobe::capture::pcap::Writer::new(std::fs::File::create(out).unwrap()).unwrap();
    for &(i, by) in which {
        let (ts, data, wire_len) = &all[i];
        w.write(ts.checked_add_signed(by).unwrap(), data, *wire_len).unwrap();
    }
}

/// `path` rewritten to `out` with each frame's time moved by `shift(i, ts)` (frame `i`, in
/// the file's order, which is kept).
fn retimed(path: &Path, out: &Path, mut shift: impl FnMut(usize, u64) -> u64) {
    let mut w = roceprobe::capture::pcap::Writer::new(std::fs::File::create(out).unwrap()).unwrap();
    for (i, (ts, data, wire_len)) in frames(path).iter().enumerate() {
        w.write(shift(i, *ts), data, *wire_len).unwrap();
    }
}

#[test]
fn late_frames_and_clock_steps_are_judged_alike_with_any_number_of_workers() {
    // Frames moved up to 2 ms either way (many of them late, past the 1 ms window), and a
    // run of frames 60 s back that then returns (a clock that stepped back and forward).
    // Found by comparing one worker with several on such captures: a late frame followed a
    // transmission's end by the time of frames another worker held (with several workers
    // it joined a transmission it ends with one, or the reverse); a worker told the time
    // before its first frame took frames still held elsewhere as analysed; a worker that
    // saw no frame of a clock step judged its next frame by the times before the step
    // (late with several workers, on time with one) and opened its interval there.
    let dir = tempfile::tempdir().unwrap();
    let mut cases = 0;
    for (name, file) in [
        ("rc_loss_vlan", "rc_loss_vlan.pcap"),
        ("rc_loss_routed", "rc_loss_routed.pcap"),
        ("misc", "misc.pcap"),
        ("corrupted", "corrupted.pcap"),
        ("collective_vlan", "collective_vlan.pcap"),
    ] {
        let src = fixtures().join("scenarios").join(name).join(file);
        let out = dir.path().join(file);
        // A fixed pattern, not a random one: frame i moves by one of 2 ms back, 1.2 ms back,
        // 0.6 ms forward, 1.9 ms forward, or not at all; frames 40-44 go 60 s back.
        retimed(&src, &out, |i, ts| {
            let ts = match (i * 7) % 11 {
                0 => ts - 2_000_000,
                3 => ts - 1_200_000,
                5 => ts + 600_000,
                8 => ts + 1_900_000,
                _ => ts,
            };
            if (40..45).contains(&i) {
                ts - 60_000_000_000
            } else {
                ts
            }
        });
        for args in [
            &[][..],
            &["--flow-idle", "1us", "--min-transmission-packets", "1", "--interval", "1ms"][..],
            &["--vantage", "storage=vlan:20", "--flow-idle", "1us", "--min-transmission-packets", "1"][..],
        ] {
            let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
            let (one, one_rows) = run_with(std::slice::from_ref(&out), &args, 1);
            assert!(
                one["reorder"]["late_packets"]["compute"].as_u64().unwrap() > 0,
                "{name}: {}",
                one["reorder"]
            );
            for n in [2, 4] {
                let (many, many_rows) = run_with(std::slice::from_ref(&out), &args, n);
                assert_eq!(many, one, "{name} {args:?}: summary with --workers {n}");
                assert_eq!(many_rows, one_rows, "{name} {args:?}: CSV rows with --workers {n}");
            }
            cases += 1;
        }
    }
    assert_eq!(cases, 15);
}

#[test]
fn nvme_ios_across_clock_steps_end_alike_with_any_number_of_workers() {
    // Frames 400-459 10 s back, or 400-429 10 s and 430-459 20 s back, then the clock
    // forward again: I/Os begun before a step back are still awaited when I/Os begin after
    // it, at earlier times. One worker kept its I/Os in the order they began and looked
    // only at the first for a timeout, so an I/O begun after a step back, behind one begun
    // before it, did not time out when time came back past it. nvme_vlan's truth anchors
    // are its frames' times: an I/O whose command copies were all moved back and whose
    // completions all came after the moved frames has waited 10 s (or 20 s) by then, and
    // times out; every other I/O completes (those whose completion was moved back before
    // their command, with negative segments counted as such).
    let dir = tempfile::tempdir().unwrap();
    let mut cases = 0;
    for name in ["nvme_vlan", "nvme_erspan3_ns", "nvme_erspan3"] {
        let t = scenario_truth(name);
        let files = scenario_files(name, &t);
        assert_eq!(files.len(), 1, "{name}");
        let expected = (name == "nvme_vlan").then(|| moved_out(&t, &files[0], 400..460));
        assert!(expected.is_none_or(|e| e > 0));
        for (k, back) in
            [&[(400..460, 10)][..], &[(400..430, 10), (430..460, 20)][..]].into_iter().enumerate()
        {
            let out = dir.path().join(format!("{name}-{k}.pcap"));
            retimed(&files[0], &out, |i, ts| {
                back.iter().find(|(r, _)| r.contains(&i)).map_or(ts, |&(_, s)| ts - s * 1_000_000_000)
            });
            for args in [scenario_args(&t), vec![]] {
                let (one, one_rows) = run_with(std::slice::from_ref(&out), &args, 1);
                for n in [2, 4] {
                    let (many, many_rows) = run_with(std::slice::from_ref(&out), &args, n);
                    assert_eq!(many, one, "{name} {k} {args:?}: summary with --workers {n}");
                    assert_eq!(many_rows, one_rows, "{name} {k} {args:?}: CSV rows with --workers {n}");
                }
                let ended: u64 =
                    ["timed_out", "unfinished"].iter().map(|k| one["ios"][k].as_u64().unwrap()).sum();
                assert!(ended > 0, "{name} {k} {args:?}: {}", one["ios"]);
                if let Some(e) = expected.filter(|_| !args.is_empty()) {
                    let ios = &one["ios"];
                    assert_eq!(
                        [&ios["completed"], &ios["timed_out"], &ios["unfinished"]],
                        [120 - e, e, 0],
                        "{k}: {ios}"
                    );
                }
                cases += 1;
            }
        }
    }
    assert_eq!(cases, 12);
}

/// The I/Os of a scenario's truth whose command copies are all among the frames `moved`
/// (indices into `file`) and whose completions all come after them.
fn moved_out(t: &Value, file: &Path, moved: std::ops::Range<usize>) -> u64 {
    let times: Vec<u64> = frames(file).into_iter().map(|(ts, ..)| ts).collect();
    let frame = |v: &Value| times.iter().position(|&ts| ts == v.as_u64().unwrap()).unwrap();
    let ios = t["ios"].as_array().unwrap();
    let all = |io: &Value, of: &str, f: &dyn Fn(usize) -> bool| {
        io["anchors"].as_object().unwrap().iter().filter(|(k, _)| k.starts_with(of)).all(|(_, v)| f(frame(v)))
    };
    ios.iter()
        .filter(|io| all(io, "sqe_first@", &|i| moved.contains(&i)) && all(io, "cqe@", &|i| i >= moved.end))
        .count() as u64
}

#[test]
fn an_nvme_command_times_out_by_its_own_clock_across_clock_steps_with_any_number_of_workers() {
    // Frames picked from the fixtures (index, seconds moved), each the least of a capture
    // that one worker and several judged apart (the differential check, minimized).
    let opts = ["--vantage", "storage=erspan:2", "--flow-idle", "1us", "--min-transmission-packets", "1"];
    let dir = tempfile::tempdir().unwrap();
    // nvme_erspan3_ns, in this order at their own (switch) times: an ACK and a completion
    // at 210 s, a Write command (frame 192, 10.0.1.1 to 10.0.2.1) and an ACK at 200 s, two
    // ACKs at 210 s, a WRITE and a completion at 200 s. The command waited while packet
    // time went on to 210 s, past its 1 s timeout: timed out. With two workers the
    // command's worker saw no frame of 210 s after it and timed out nothing.
    let stepped_forward = [(1518, 0), (1296, 0), (192, 0), (193, 0), (782, 0), (1443, 0), (606, 0), (612, 0)];
    // nvme_split_skewed's storage file: an ACK moved 147 s ahead, a Read command (frame
    // 310, 10.0.1.1 to 10.0.2.1) where it is, and an ACK twice, 155 s back (the second
    // 986 ns earlier): the clock steps back twice, and the command's time plus 1 s never
    // comes on the clock it began on: unfinished. With two workers, the command's worker
    // timed it out by the time before the first step.
    let stepped_back_twice =
        [(108, 147_000_000_000), (310, 0), (361, -155_000_000_000), (361, -155_000_000_986)];
    // nvme_split's storage file: an ACK of 10.0.2.1 to 10.0.1.1 (frame 17) moved 200 s
    // ahead, a Read command (frame 16, 10.0.1.1 to 10.0.2.1) where it is, then an ACK of
    // another host pair (10.0.2.1 to 10.0.1.2, frame 5) 50 s ahead, 100 s back and 3 us
    // ahead, and the first ACK where it is. The clock steps back at the command, forward at
    // 50 s (past the command's 1 s timeout: timed out), back, and forward again. With two
    // workers the command's worker saw no frame between those steps: told of all three at
    // once, with the time since the last one only, it kept the command unfinished.
    let peak_between_steps =
        [(17, 200_000_000_000), (16, 0), (5, 50_000_000_000), (5, -100_000_000_000), (5, 3_000), (17, 0)];
    for (src, frames, op, timed_out, unfinished) in [
        ("nvme_erspan3_ns/nvme_erspan3_ns.pcap", &stepped_forward[..], "nvme_write", 1, 0),
        ("nvme_split_skewed/nvme_split_skewed_storage.pcap", &stepped_back_twice[..], "nvme_read", 0, 1),
        ("nvme_split/nvme_split_storage.pcap", &peak_between_steps[..], "nvme_read", 1, 0),
    ] {
        let out = dir.path().join("picked.pcap");
        picked(&fixtures().join("scenarios").join(src), &out, frames);
        let args: Vec<String> = opts.iter().map(|a| a.to_string()).collect();
        for n in [1, 2, 4] {
            let (s, rows) = run_with(std::slice::from_ref(&out), &args, n);
            let ios = &s["ios"];
            assert_eq!(
                [&ios["completed"], &ios["timed_out"], &ios["unfinished"]],
                [0, timed_out, unfinished],
                "{src} with --workers {n}: {ios}"
            );
            // io.csv: the row of 10.0.1.1 to 10.0.2.1 says the same.
            let row = rows[3].iter().find(|r| r.contains(",10.0.1.1,10.0.2.1,")).unwrap();
            let f: Vec<&str> = row.split(',').collect();
            assert_eq!(
                (f[4], f[6], f[9]),
                (op, &*timed_out.to_string(), &*unfinished.to_string()),
                "{src}: {row}"
            );
        }
    }
}

#[test]
fn collective_steps_close_alike_with_any_number_of_workers_across_clock_steps() {
    // Six frames of nvme_erspan3_ns at their own (switch) times: an NVMe command and a
    // completion at 200 s, two completions at 210 s, a READ Request and an ACK at 200 s
    // again. One worker's stats side closed the first request flow's step at the interval
    // in which the command timed out (201 s), before the READ Request came; with two
    // workers no worker whose report was awaited had reported that interval, and the two
    // transmissions, 2 us apart, made one step. Steps now close at every interval any
    // worker reported, in order.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("picked.pcap");
    let frames = [(226, 0), (227, 0), (1319, 0), (948, 0), (240, 0), (242, 0)];
    picked(&fixtures().join("scenarios/nvme_erspan3_ns/nvme_erspan3_ns.pcap"), &out, &frames);
    let args: Vec<String> = ["--flow-idle", "1us", "--min-transmission-packets", "1", "--interval", "1ms"]
        .iter()
        .map(|a| a.to_string())
        .collect();
    let (one, one_rows) = run_with(std::slice::from_ref(&out), &args, 1);
    // steps.csv: a header and the steps.
    assert!(one_rows[5].len() > 2, "{:?}", one_rows[5]);
    for n in [2, 4] {
        let (many, many_rows) = run_with(std::slice::from_ref(&out), &args, n);
        assert_eq!(many, one, "summary with --workers {n}");
        assert_eq!(many_rows, one_rows, "CSV rows with --workers {n}");
    }
}

#[test]
fn two_vantage_nvme_jittered_by_up_to_900_us_is_judged_alike_with_any_number_of_workers() {
    // nvme_vlan (compute and storage mirrors, four host pairs), every frame moved by up to
    // 900 us either way, the file's order kept: what the I/O tracker makes of the early and
    // late data phases and resent packets must not depend on which other host pairs a
    // worker holds. It did: a data phase that named no live I/O's buffer was looked at
    // only while the worker held some live I/O (of any host pair), and remembered only on
    // a flow whose hint of its connection had been set (by whatever packet the tracker
    // looked at before); and a hint that recorded the absence of one key (an ACK looked
    // up with its sender as the host) was taken for the absence of the flow's connection
    // until the worker's next new connection. Each made one I/O retransmitted or not with
    // one worker and with four.
    let t = scenario_truth("nvme_vlan");
    let files = scenario_files("nvme_vlan", &t);
    let args = scenario_args(&t);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("jittered.pcap");
    for seed in 1..=SEEDS {
        let mut rng = Rng(seed);
        retimed(&files[0], &out, |_, ts| (ts + rng.below(1_800_001) as u64).checked_sub(900_000).unwrap());
        let (one, one_rows) = run_with(std::slice::from_ref(&out), &args, 1);
        assert!(one["ios"]["completed"].as_u64().unwrap() > 0, "seed {seed}: {}", one["ios"]);
        for n in [2, 4] {
            let (many, many_rows) = run_with(std::slice::from_ref(&out), &args, n);
            assert_eq!(many, one, "seed {seed}: summary with --workers {n}");
            assert_eq!(many_rows, one_rows, "seed {seed}: CSV rows with --workers {n}");
        }
    }
}

/// Jitters tried by the test above (with the build before, seed 33 differed by the hint of
/// absence, seed 60 by the data phases).
const SEEDS: u64 = 64;

#[test]
fn intervals_shorter_than_the_traffic_s_gaps_give_the_same_rows_with_any_number_of_workers() {
    // Transmissions that go idle and I/Os that time out while no frame comes (in an interval
    // without frames, or before the frame that closes theirs): one worker learns that time
    // passed from its next frame, several from the dispatcher's clock, and each counts the
    // event in the interval of its own time. With two vantages the reorder window holds
    // frames; these scenarios differed here before. At the end, what is still open ends
    // in the interval of the run's last time, which a worker whose own frames ended earlier
    // is told (at the default `--min-transmission-packets` misc_erspan1's three-packet
    // transmissions are counted in their flows' rows of that interval: with two vantages,
    // a worker once counted them in the interval of its own last frame).
    for (name, interval, more) in [
        ("misc_erspan1", "100us", &["--min-transmission-packets", "2"][..]),
        ("misc_erspan1", "100us", &[]),
        ("misc_erspan2", "1ms", &[]),
        ("nvme_faults", "100us", &[]),
        ("nvme_faults_skewed", "1ms", &[]),
    ] {
        let t = scenario_truth(name);
        let files = scenario_files(name, &t);
        let mut args = scenario_args(&t);
        args.extend(["--interval".to_string(), interval.to_string()]);
        args.extend(more.iter().map(|a| a.to_string()));
        let (one, one_rows) = run_with(&files, &args, 1);
        for n in [2, 4] {
            let (many, many_rows) = run_with(&files, &args, n);
            assert_eq!(many, one, "{name} at {interval}: summary with --workers {n}");
            assert_eq!(many_rows, one_rows, "{name} at {interval}: CSV rows with --workers {n}");
        }
    }
}

#[test]
fn live_dispatch_through_dpdk_matches_one_worker() {
    let path = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let p: &Path = &path;
    let args = ["--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"];
    let one = live_summary(&[p], &args);
    let mut with = args.to_vec();
    with.extend(["--workers", "3"]);
    assert_eq!(live_summary(&[p], &with), one);
}

#[test]
fn a_dedicated_receive_lcore_gives_what_one_lcore_gives() {
    // --rx-core: receive (and dispatch, to the one worker) on one lcore, analysis on the
    // other. Plain frames go to the worker undecoded, ERSPAN III mirrors timed by the
    // receiving lcore: both kinds are in these captures.
    for (scenario, args) in [
        ("nvme_vlan/nvme_vlan.pcap", &["--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"][..]),
        (
            "nvme_erspan3/nvme_erspan3.pcap",
            &["--vantage", "compute=erspan:101", "--vantage", "storage=erspan:202"][..],
        ),
    ] {
        let path = fixtures().join("scenarios").join(scenario);
        let one = live_summary(&[&path], args);
        let mut a = vec!["live".to_string(), "--idle-exit".into(), "300ms".into(), "--rx-core".into()];
        a.extend(args.iter().map(|s| s.to_string()));
        a.push("--".into());
        a.extend(with_lcores(eal_args(&[&path]), 2));
        assert_eq!(summary_of(&a), one, "{scenario} with --rx-core");
        assert!(one["packets"].as_u64().unwrap() > 100, "{scenario}: {}", one["packets"]);
    }
}

/// Splits a capture into `n` files by the unordered inner IP pair, as a NIC's symmetric RSS
/// would spread it over `n` RX queues (frames that are not RoCE go to the first).
fn split_by_ip_pair(path: &Path, n: usize, dir: &Path) -> Vec<PathBuf> {
    use roceprobe::capture::pcap::{Replay, Writer};
    use roceprobe::capture::{Capture, Poll};
    use roceprobe::wire::{decode_frame, Decoded};
    let outs: Vec<PathBuf> = (0..n).map(|i| dir.join(format!("queue{i}.pcap"))).collect();
    let mut writers: Vec<_> =
        outs.iter().map(|p| Writer::new(std::fs::File::create(p).unwrap()).unwrap()).collect();
    let mut replay = Replay::open(&[path.to_path_buf()]).unwrap();
    let mut per_queue = vec![0usize; n];
    while let Ok(Poll::Frames(_)) = replay.poll(|f| {
        let q = match decode_frame(f.data) {
            Decoded::Roce(p) => {
                let (a, b) = if p.ip.src <= p.ip.dst { (p.ip.src, p.ip.dst) } else { (p.ip.dst, p.ip.src) };
                format!("{a}{b}").bytes().map(usize::from).sum::<usize>() % n
            }
            _ => 0,
        };
        per_queue[q] += 1;
        writers[q].write(f.ts_ns, f.data, f.wire_len).unwrap();
    }) {}
    // Both queues carry host pairs, or the test would not test anything.
    assert!(per_queue.iter().all(|&c| c > 0), "frames per queue: {per_queue:?}");
    outs
}

#[test]
fn live_rss_queues_per_worker_match_one_worker() {
    // Port 0 gets two RX queues, one rx_pcap file each, split by IP pair as symmetric RSS
    // splits a mirror: worker q polls queue q.
    let path = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let dir = tempfile::tempdir().unwrap();
    let queues = split_by_ip_pair(&path, 2, dir.path());
    let args = ["--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"];
    let one = live_summary(&[&path], &args);
    let mut a: Vec<String> = ["live", "--idle-exit", "300ms", "--workers", "2", "--rss"]
        .iter()
        .chain(args.iter())
        .map(|s| s.to_string())
        .collect();
    a.push("--".into());
    let mut eal = with_lcores(eal_args(&[]), 3);
    eal.push("--vdev".into());
    eal.push(format!("net_pcap0,rx_pcap={},rx_pcap={}", queues[0].display(), queues[1].display()));
    a.extend(eal);
    assert_eq!(summary_of(&a), one);
}
