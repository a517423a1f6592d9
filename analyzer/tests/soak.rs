//! A minute of `roceprobe live` writing CSV reports under a small `--csv-retain`: the
//! directory never holds more than the bound, rotated files are compressed and the oldest
//! removed (counted in the summary), every file left is whole, `roceprobe plot` draws from
//! the compressed files, and the probe's resident memory stays flat (docs/RELIABILITY.md,
//! "Running for months").
//!
//! The capture: 4,096 RC connections (8,192 QPs, 8,192 flows) between 256 hosts, 138-byte
//! RDMA WRITE Only and their ACKs, QPs interleaved at random, looped by a net_pcap vdev as
//! fast as the probe takes it.

mod common;
use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CONNECTIONS: u32 = 4096;
const FRAMES: usize = 65_536;
const SECONDS: u64 = 62;
/// `--csv-retain`.
const RETAIN: u64 = 4 << 20;
/// What resident memory may grow by from 15 s on, leaving out its largest step: a leak
/// of a quarter of a MiB a second or more shows.
const RSS_MARGIN_KIB: u64 = 8 << 10;
/// A step it may take once, within `RSS_STEP_SECONDS`: buffers the worker allocates while
/// the stats side is behind for a moment (a busy machine) are kept by its pools, and
/// reused from then on. Seen on CI: 37 MB at about 22 s; 24 MB over the last five seconds.
const RSS_STEP_KIB: u64 = 64 << 10;
const RSS_STEP_SECONDS: u64 = 6;

/// The resident memory of process `pid`, in KiB (None once it has exited).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The bytes of every file in `dir` (a file removed while being listed counts nothing).
fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries.flatten().filter_map(|e| e.metadata().ok()).filter(|m| m.is_file()).map(|m| m.len()).sum()
}

/// A report file's text, decompressed as its name says.
fn text_of(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let name = path.to_str().unwrap();
    let mut text = String::new();
    if name.ends_with(".csv.zst") {
        zstd::stream::read::Decoder::new(&bytes[..]).unwrap().read_to_string(&mut text).unwrap();
    } else {
        assert!(name.ends_with(".csv"), "{name}: not a report file");
        text = String::from_utf8(bytes).unwrap();
    }
    text
}

/// Checks that a file is whole (ends with a row's CRLF, every row has the header's fields);
/// returns its rows' first column.
fn whole(path: &Path) -> Vec<String> {
    let text = text_of(path);
    assert!(text.ends_with("\r\n"), "{} ends mid-row", path.display());
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let width = r.headers().unwrap().len();
    r.records()
        .map(|rec| {
            let rec = rec.unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(rec.len(), width, "{}: a row without the header's fields", path.display());
            rec[0].to_owned()
        })
        .collect()
}

fn reports_in(dir: &Path, stem: &str) -> Vec<PathBuf> {
    roceprobe::report::csv::report_files(dir, stem).unwrap()
}

#[test]
fn a_minute_under_a_small_csv_retain_stays_bounded_whole_and_flat() {
    let dir = tempfile::tempdir().unwrap();
    let (pcap, csv, summary) =
        (dir.path().join("qps.pcap"), dir.path().join("csv"), dir.path().join("s.json"));
    write_many_qps(&pcap, CONNECTIONS, FRAMES, 20);
    let mbufs = ((FRAMES + 4096) / 1024 * 1024 + 1023).to_string();
    let duration = format!("{SECONDS}s");
    let retain = format!("{}M", RETAIN >> 20);
    let mut args: Vec<String> = [
        "live",
        "-q",
        "--duration",
        &duration,
        // The file loops: the probe's clock keeps time going on.
        "--probe-clock",
        // Two intervals a second: rows enough to fill the directory several times over in
        // the minute (from its second loop on, each request is its first loop's copy sent
        // again, which gives no rc_ack sample of its own).
        "--interval",
        "500ms",
        // Transmissions of many packets each (the default 1 ms ends one at nearly every
        // packet here: the short ones are counted per flow, the others go to the
        // collective step analysis, whose bounded queue of transmissions then fills and
        // empties, and resident memory moves by tens of MB).
        "--flow-idle",
        "100ms",
        "--mbufs",
        &mbufs,
        "--csv-retain",
        &retain,
        "--csv-dir",
        csv.to_str().unwrap(),
        "--summary",
        summary.to_str().unwrap(),
        "--",
        "-l",
        "0",
        "--no-huge",
        "-m",
        "512",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "--log-level=lib.eal:warning",
        "--vdev",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.push(format!("net_pcap0,rx_pcap={},infinite_rx=1", pcap.display()));
    let mut child =
        Command::new(bin()).args(&args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    // Every second: (seconds since start, resident KiB, bytes in the CSV directory).
    let start = Instant::now();
    let mut samples: Vec<(u64, u64, u64)> = Vec::new();
    let mut second = 1;
    while child.try_wait().unwrap().is_none() {
        // A listing is not one instant: a file counted just before the probe removed it to
        // make room, then one it grew, can add up to more than was ever there at once. A
        // reading over the bound is taken again; the probe is over only if it stays over.
        let bytes = (0..3).map(|_| dir_bytes(&csv)).find(|b| *b <= RETAIN).unwrap_or_else(|| dir_bytes(&csv));
        assert!(bytes <= RETAIN, "{}s: {bytes} bytes in the CSV directory, over {RETAIN}", second - 1);
        if let Some(rss) = rss_kib(pid) {
            samples.push((start.elapsed().as_secs(), rss, bytes));
        }
        let at = start + Duration::from_secs(second);
        second += 1;
        while Instant::now() < at && child.try_wait().unwrap().is_none() {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(dir_bytes(&csv) <= RETAIN);
    println!("samples (s, VmRSS KiB, CSV bytes): {samples:?}");

    // Resident memory: flat from 15 s on, but for one bounded step (see RSS_STEP_KIB). A
    // step is growth within a few seconds; a leak is growth spread over the run, which is
    // what is left once the largest step is taken out.
    assert!(samples.len() as u64 >= SECONDS - 2, "only {} samples", samples.len());
    let steady: Vec<(u64, u64)> = samples.iter().filter(|s| s.0 >= 15).map(|s| (s.0, s.1)).collect();
    let at15 = steady[0].1;
    // Highest resident memory up to each sample.
    let highest: Vec<(u64, u64)> = steady
        .iter()
        .scan(0, |top, &(t, rss)| {
            *top = rss.max(*top);
            Some((t, *top))
        })
        .collect();
    let peak = highest.last().unwrap().1;
    let step = highest
        .iter()
        .map(|&(t, low)| {
            let high = highest.iter().take_while(|h| h.0 <= t + RSS_STEP_SECONDS).last().unwrap().1;
            high - low
        })
        .max()
        .unwrap();
    let spread = peak - at15 - step;
    println!(
        "VmRSS at 15 s {at15} KiB, highest after {peak} KiB, largest step {step} KiB, the rest {spread} KiB, at the end {} KiB",
        samples.last().unwrap().1
    );
    assert!(peak < at15 + RSS_STEP_KIB, "resident memory grew from {at15} KiB to {peak} KiB");
    assert!(
        spread < RSS_MARGIN_KIB,
        "resident memory grew by {spread} KiB over the run besides its largest step ({step} KiB in {RSS_STEP_SECONDS} s)"
    );
    // The directory filled up to the bound and stayed there.
    assert!(samples.iter().any(|s| s.2 > RETAIN * 3 / 4), "{samples:?}");

    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let c = &s["csv_output"];
    println!("csv_output {c}, report_drops {}, packets {}", s["report_drops"], s["packets"]);
    assert!(
        c["files_removed"].as_u64().unwrap() > 10 && c["bytes_removed"].as_u64().unwrap() > RETAIN,
        "{c}"
    );
    assert_eq!((c["failed_writes"].as_u64(), c["rows_lost"].as_u64()), (Some(0), Some(0)), "{c}");
    // The worker at full speed: the reports keep up.
    assert_eq!(s["report_drops"], 0, "the stats side fell behind");
    assert!(s["packets"].as_u64().unwrap() > 10_000_000, "{}", s["packets"]);

    // Every file left is whole; the rotated ones are compressed, oldest removed first.
    let mut flows_intervals = BTreeSet::new();
    let mut current_intervals = BTreeSet::new();
    for stem in ["flows", "transmissions", "latency", "io", "slow_ios", "steps", "stragglers", "ports"] {
        for p in reports_in(&csv, stem) {
            let name = p.file_name().unwrap().to_str().unwrap().to_owned();
            assert!(name == format!("{stem}.csv") || name.ends_with(".csv.zst"), "{name} is not compressed");
            let firsts = whole(&p);
            if stem == "flows" {
                flows_intervals.extend(firsts.iter().cloned());
                if name == "flows.csv" {
                    current_intervals.extend(firsts);
                }
            }
        }
    }
    let rotated_flows = reports_in(&csv, "flows").len() - 1;
    assert!(rotated_flows >= 2, "{rotated_flows} rotated flows files left");

    // The plot draws from the compressed files: a point for every interval they hold.
    let plots = dir.path().join("plots");
    let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", plots.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let svg = std::fs::read_to_string(plots.join("flow_throughput.svg")).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    let points: Vec<usize> = doc
        .descendants()
        .filter(|n| n.attribute("class") == Some("series"))
        .map(|n| n.attribute("data-x").unwrap().split_whitespace().count())
        .collect();
    assert!(!points.is_empty());
    assert!(
        points.iter().all(|n| *n == flows_intervals.len()) && flows_intervals.len() > current_intervals.len(),
        "{points:?} points per flow; {} intervals in the files, {} in flows.csv",
        flows_intervals.len(),
        current_intervals.len()
    );
}
