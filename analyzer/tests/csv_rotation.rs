//! CSV rotation by size and by age: every file starts with its header and ends with a whole
//! row, and the files together hold exactly the rows of an unrotated run, in order. Rotated
//! files are compressed (gzip, zstd) without changing a byte of their rows; `--csv-retain`
//! keeps the directory under its bound by removing the oldest rotated files, counted in the
//! summary, and what remains is the newest rows, whole.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

const REPORTS: [&str; 8] =
    ["flows", "latency", "ports", "transmissions", "io", "slow_ios", "steps", "stragglers"];

fn replay_into(dir: &Path, extra: &[&str]) {
    let pcap = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let mut args = vec!["replay", "-q", "--interval", "20us", "--csv-dir", dir.to_str().unwrap()];
    args.extend_from_slice(&["--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"]);
    args.extend_from_slice(extra);
    args.push(pcap.to_str().unwrap());
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The same, with the summary.
fn replay_summary_into(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let summary = dir.with_extension("json");
    let mut args = extra.to_vec();
    args.extend_from_slice(&["--summary", summary.to_str().unwrap()]);
    replay_into(dir, &args);
    serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap()
}

/// A report's rotated files, oldest first: `<stem>-<time>.csv[.gz|.zst]` by name.
fn rotated(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let mut rotated: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(&format!("{stem}-")))
        .collect();
    rotated.sort();
    rotated
}

/// A report's files, oldest first: the rotated ones, then `<stem>.csv`.
fn files(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let mut files = rotated(dir, stem);
    files.push(dir.join(format!("{stem}.csv")));
    files
}

/// A file's text, decompressed (with the compression crates themselves) as its name says.
fn text_of(path: &Path) -> String {
    let bytes = std::fs::read(path).unwrap();
    let name = path.to_str().unwrap();
    if name.ends_with(".csv.zst") {
        assert_eq!(bytes[..4], [0x28, 0xb5, 0x2f, 0xfd], "{name}: a zstd frame");
        String::from_utf8(zstd::stream::decode_all(&bytes[..]).unwrap()).unwrap()
    } else if name.ends_with(".csv.gz") {
        assert_eq!(bytes[..2], [0x1f, 0x8b], "{name}: a gzip member");
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..]).read_to_string(&mut s).unwrap();
        s
    } else {
        assert!(name.ends_with(".csv"), "{name}: not a report file");
        String::from_utf8(bytes).unwrap()
    }
}

/// (header, rows) of one file, checking that it ends with a whole row.
fn read(path: &Path) -> (String, Vec<String>) {
    let text = text_of(path);
    assert!(text.ends_with("\r\n"), "{} ends mid-row", path.display());
    let mut lines = text.split("\r\n").map(str::to_owned);
    let header = lines.next().unwrap();
    let mut rows: Vec<String> = lines.collect();
    assert_eq!(rows.pop().as_deref(), Some(""));
    (header, rows)
}

/// The rows of a file, as a CSV reader parses them: every one with the header's fields.
fn parse_whole(path: &Path) -> usize {
    let text = text_of(path);
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let width = r.headers().unwrap().len();
    let rows: Vec<csv::StringRecord> = r.records().map(|rec| rec.unwrap()).collect();
    assert!(
        rows.iter().all(|rec| rec.len() == width),
        "{}: a row without the header's fields",
        path.display()
    );
    rows.len()
}

fn first_column_ns(rows: &[String]) -> Vec<u64> {
    rows.iter()
        .map(|r| roceprobe::report::plot::parse_rfc3339(r.split(',').next().unwrap()).unwrap())
        .collect()
}

/// Checks every report against the unrotated one; returns the files per report.
fn same_rows_as(reference: &Path, rotated: &Path, check: impl Fn(&str, &Path, u64, &[String])) -> usize {
    let mut most = 0;
    for stem in REPORTS {
        let (header, want) = read(&reference.join(format!("{stem}.csv")));
        let parts = files(rotated, stem);
        most = most.max(parts.len());
        let mut got = Vec::new();
        for p in &parts {
            let (h, rows) = read(p);
            assert_eq!(h, header, "{} starts with its header", p.display());
            let plain_len = (h.len() + 2 + rows.iter().map(|r| r.len() + 2).sum::<usize>()) as u64;
            check(stem, p, plain_len, &rows);
            got.extend(rows);
        }
        assert_eq!(got, want, "{stem}: the rotated files hold the rows of one file");
    }
    most
}

/// Every file in `dir` and its size.
fn sizes(dir: &Path) -> BTreeMap<String, u64> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| (e.file_name().into_string().unwrap(), e.metadata().unwrap().len()))
        .collect()
}

/// Draws the plots of `csv` into `out`; returns each plot file's bytes.
fn plot(csv: &Path, out: &Path) -> BTreeMap<String, Vec<u8>> {
    let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| (p.file_name().unwrap().to_str().unwrap().to_owned(), std::fs::read(&p).unwrap()))
        .collect()
}

#[test]
fn rotation_by_size_and_by_age_keeps_every_row_once_and_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (one, by_size, by_age) = (dir.path().join("one"), dir.path().join("size"), dir.path().join("age"));
    replay_into(&one, &[]);
    assert_eq!(files(&one, "flows").len(), 1);

    replay_into(&by_size, &["--csv-rotate-size", "8K", "--csv-compress", "none"]);
    let n = same_rows_as(&one, &by_size, |stem, p, len, rows| {
        assert_eq!(len, std::fs::metadata(p).unwrap().len(), "{}: plain", p.display());
        // Over the limit only when a single interval's rows (one write) are.
        let intervals: BTreeSet<&str> = rows.iter().map(|r| r.split(',').next().unwrap()).collect();
        assert!(
            len <= 8192 || (stem != "transmissions" && intervals.len() == 1),
            "{}: {len} bytes",
            p.display()
        );
    });
    assert!(n >= 5, "only {n} files for one report");

    replay_into(&by_age, &["--csv-rotate-age", "100us", "--csv-compress", "none"]);
    let n = same_rows_as(&one, &by_age, |stem, p, _, rows| {
        if !["transmissions", "steps"].contains(&stem) && !rows.is_empty() {
            let t = first_column_ns(rows);
            let (lo, hi) = (t.iter().min().unwrap(), t.iter().max().unwrap());
            assert!(hi - lo < 100_000, "{}: rows {lo}..{hi} span 100us or more", p.display());
        }
    });
    assert!(n >= 3, "only {n} files for one report");

    // Plots read rotated reports as one.
    let p1 = plot(&one, &dir.path().join("p1"));
    assert!(p1.len() >= 4, "{:?}", p1.keys());
    assert!(p1 == plot(&by_size, &dir.path().join("p2")), "the rotated reports plot as the single ones");
}

/// With several workers each reports its own rows of an interval; the interval's rows are
/// written together once every worker has reported it: no rotation splits them, the files
/// follow one another in time, and together they hold one worker's rows.
#[test]
fn with_two_workers_an_intervals_rows_stay_in_one_file_and_the_files_follow_in_time() {
    let dir = tempfile::tempdir().unwrap();
    let (one, two) = (dir.path().join("one"), dir.path().join("two"));
    replay_into(&one, &[]);
    replay_into(&two, &["--workers", "2", "--csv-rotate-age", "100us", "--csv-compress", "none"]);
    for stem in ["flows", "latency", "io", "slow_ios"] {
        let parts = files(&two, stem);
        assert!(parts.len() >= 3, "{stem}: only {} files", parts.len());
        let (mut file_of, mut last, mut got) = (BTreeMap::new(), 0, Vec::new());
        for (k, p) in parts.iter().enumerate() {
            let (_, rows) = read(p);
            let t = first_column_ns(&rows);
            if let (Some(&lo), Some(&hi)) = (t.iter().min(), t.iter().max()) {
                assert!(lo >= last, "{}: rows older than the file before", p.display());
                assert!(hi - lo < 100_000, "{}: rows {lo}..{hi} span 100us or more", p.display());
                last = hi;
            }
            for r in &rows {
                let start = r.split(',').next().unwrap().to_owned();
                assert_eq!(
                    *file_of.entry(start.clone()).or_insert(k),
                    k,
                    "{stem}: the interval {start} split"
                );
            }
            got.extend(rows);
        }
        let (_, mut want) = read(&one.join(format!("{stem}.csv")));
        got.sort();
        want.sort();
        assert_eq!(got, want, "{stem}: the rows one worker writes");
    }
}

/// Each compression: the rotated files are the uncompressed run's, compressed (same names
/// with `.gz` / `.zst`, the same rows in the same order), the current files plain, no
/// temporary file left; the plots drawn from them are the uncompressed run's, byte for byte.
#[test]
fn rotated_files_are_compressed_with_every_row_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let (one, plain) = (dir.path().join("one"), dir.path().join("plain"));
    replay_into(&one, &[]);
    replay_into(&plain, &["--csv-rotate-size", "8K", "--csv-compress", "none"]);
    let plain_names: BTreeSet<String> = sizes(&plain).into_keys().collect();
    let reference_plots = plot(&plain, &dir.path().join("plain-plots"));
    for (mode, suffix) in [("gzip", ".gz"), ("zstd", ".zst")] {
        let d = dir.path().join(mode);
        replay_into(&d, &["--csv-rotate-size", "8K", "--csv-compress", mode]);
        let names = sizes(&d);
        let rotated: Vec<&String> = names.keys().filter(|n| n.contains('-')).collect();
        assert!(rotated.len() >= 20, "{mode}: only {} rotated files", rotated.len());
        for n in &rotated {
            assert!(n.ends_with(&format!(".csv{suffix}")), "{mode}: {n} is not compressed");
        }
        let unsuffixed: BTreeSet<String> =
            names.keys().map(|n| n.trim_end_matches(suffix).to_owned()).collect();
        assert_eq!(unsuffixed, plain_names, "{mode}: the files of the uncompressed run, compressed");
        let compressed: u64 = rotated.iter().map(|n| names[*n]).sum();
        let uncompressed: u64 = rotated.iter().map(|n| sizes(&plain)[n.trim_end_matches(suffix)]).sum();
        assert!(compressed * 2 < uncompressed, "{mode}: {compressed} bytes from {uncompressed}");
        same_rows_as(&one, &d, |stem, p, len, rows| {
            let intervals: BTreeSet<&str> = rows.iter().map(|r| r.split(',').next().unwrap()).collect();
            assert!(
                len <= 8192 || (stem != "transmissions" && intervals.len() == 1),
                "{}: {len} bytes decompressed",
                p.display()
            );
        });
        assert!(
            plot(&d, &dir.path().join(format!("{mode}-plots"))) == reference_plots,
            "{mode}: the plots of the compressed files are those of the plain ones"
        );
    }
}

/// `--csv-retain` with small files: the directory ends under it, the files removed are the
/// oldest (by the time in their names, across reports) and exactly those the summary counts,
/// and what remains of each report is the newest rows of the unbounded run, every file
/// whole.
#[test]
fn retention_keeps_the_newest_rows_under_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one");
    replay_into(&one, &[]);
    for (mode, rotate, retain) in
        [("none", "8K", 64u64 << 10), ("gzip", "3K", 24 << 10), ("zstd", "3K", 24 << 10)]
    {
        let retain_opt = format!("{}K", retain >> 10);
        let (all, kept) = (dir.path().join(format!("{mode}-all")), dir.path().join(format!("{mode}-kept")));
        let common = ["--csv-rotate-size", rotate, "--csv-compress", mode];
        replay_into(&all, &common);
        let s = replay_summary_into(&kept, &[&common[..], &["--csv-retain", &retain_opt]].concat());
        let (everything, left) = (sizes(&all), sizes(&kept));
        let total: u64 = left.values().sum();
        let written: u64 = everything.values().sum();
        assert!(
            written > retain + retain / 4,
            "{mode}: the run writes {written} bytes, enough to need removals"
        );
        assert!(total <= retain, "{mode}: {total} bytes kept, more than {retain}");
        // Removed: the oldest rotated files, as many and as large as the summary says.
        let removed: Vec<&String> = everything.keys().filter(|n| !left.contains_key(*n)).collect();
        assert!(left.keys().all(|n| everything.contains_key(n)), "{mode}: {left:?}");
        let c = &s["csv_output"];
        assert_eq!(c["files_removed"].as_u64().unwrap(), removed.len() as u64, "{mode}: {c}");
        let removed_bytes: u64 = removed.iter().map(|n| everything[*n]).sum();
        assert_eq!(c["bytes_removed"].as_u64().unwrap(), removed_bytes, "{mode}: {c}");
        assert!(removed.len() >= 5, "{mode}: only {} files removed", removed.len());
        assert_eq!((c["failed_writes"].as_u64(), c["rows_lost"].as_u64()), (Some(0), Some(0)), "{c}");
        assert_eq!(c["over_retain"].as_u64(), Some(0), "{mode}: the bound held");
        let stamp = |n: &str| n.split_once('-').unwrap().1.split(".csv").next().unwrap().to_owned();
        let newest_removed = removed.iter().map(|n| stamp(n)).max().unwrap();
        for n in left.keys().filter(|n| n.contains('-')) {
            assert!(stamp(n) >= newest_removed, "{mode}: {n} kept, a newer file removed");
        }
        // What remains is each report's newest rows, in whole files.
        for stem in REPORTS {
            let (_, want) = read(&one.join(format!("{stem}.csv")));
            let mut got = Vec::new();
            for p in files(&kept, stem) {
                assert!(parse_whole(&p) == read(&p).1.len());
                got.extend(read(&p).1);
            }
            assert!(got.len() <= want.len() && want.ends_with(&got), "{mode} {stem}: not the newest rows");
            if stem == "flows" {
                assert!(
                    !got.is_empty() && got.len() < want.len(),
                    "{mode}: {} of {} flows rows",
                    got.len(),
                    want.len()
                );
            }
        }
        // The plots draw what is left.
        assert!(plot(&kept, &dir.path().join(format!("{mode}-plots"))).contains_key("flow_throughput.svg"));
    }
}

/// A bound the current files alone do not fit under (the collective scenario's 1 ms
/// intervals of flows rows beside the smallest `--csv-retain`): the rotated files all go,
/// the directory still ends over the bound, and the writes that took it there are counted
/// and told.
#[test]
fn a_bound_the_current_files_alone_pass_is_counted_and_told() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, summary) = (dir.path().join("csv"), dir.path().join("s.json"));
    let pcap = fixtures().join("scenarios/collective_vlan/collective_vlan.pcap");
    let o = run(&[
        "replay",
        "--interval",
        "1ms",
        "--vantage",
        "compute=vlan:10",
        "--vantage",
        "storage=vlan:20",
        "--csv-compress",
        "none",
        "--csv-retain",
        "16K",
        "--csv-dir",
        csv.to_str().unwrap(),
        "--summary",
        summary.to_str().unwrap(),
        pcap.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let total: u64 = sizes(&csv).values().sum();
    assert!(total > 16 << 10, "{total} bytes: the current files alone pass the bound");
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let c = &s["csv_output"];
    assert!(c["over_retain"].as_u64().unwrap() > 0, "{c}");
    assert!(c["files_removed"].as_u64().unwrap() > 0, "{c}");
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("writes took the directory past --csv-retain"), "{out}");
}

/// Rotated files of an earlier run count towards the bound, oldest removed first; a
/// compression's temporary file left by a killed probe is cleared away.
#[test]
fn files_of_an_earlier_run_count_towards_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().join("csv");
    std::fs::create_dir_all(&d).unwrap();
    let old = "flows-2020-01-01T000000.000000000Z.csv";
    std::fs::write(d.join(old), vec![b'x'; 200 << 10]).unwrap();
    let tmp = "flows-2020-01-01T000001.000000000Z.csv.zst.tmp";
    std::fs::write(d.join(tmp), b"half").unwrap();
    let mine = "notes.txt";
    std::fs::write(d.join(mine), b"not a report").unwrap();
    // 128K: a new file at 8K; the run's own files, compressed, take less than half of it.
    let s = replay_summary_into(&d, &["--csv-retain", "128K"]);
    let left = sizes(&d);
    assert!(!left.contains_key(old) && !left.contains_key(tmp), "{left:?}");
    assert!(left.contains_key(mine), "only report files are touched");
    assert_eq!(s["csv_output"]["files_removed"], 1);
    assert_eq!(s["csv_output"]["bytes_removed"], 200 << 10);
    assert!(left.values().sum::<u64>() <= 128 << 10);
}
