//! CSV rotation by size and by age: every file starts with its header and ends with a whole
//! row, and the files together hold exactly the rows of an unrotated run, in order.

mod common;
use common::*;
use std::path::{Path, PathBuf};

const REPORTS: [&str; 4] = ["flows", "latency", "ports", "transmissions"];

fn replay_into(dir: &Path, extra: &[&str]) {
    let pcap = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let mut args = vec!["replay", "-q", "--interval", "20us", "--csv-dir", dir.to_str().unwrap()];
    args.extend_from_slice(&["--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"]);
    args.extend_from_slice(extra);
    args.push(pcap.to_str().unwrap());
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A report's files, oldest first: `<stem>-<time>.csv` by name, then `<stem>.csv`.
fn files(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let mut rotated: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(&format!("{stem}-")))
        .collect();
    rotated.sort();
    rotated.push(dir.join(format!("{stem}.csv")));
    rotated
}

/// (header, rows) of one file, checking that it ends with a whole row.
fn read(path: &Path) -> (String, Vec<String>) {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with("\r\n"), "{} ends mid-row", path.display());
    let mut lines = text.split("\r\n").map(str::to_owned);
    let header = lines.next().unwrap();
    let mut rows: Vec<String> = lines.collect();
    assert_eq!(rows.pop().as_deref(), Some(""));
    (header, rows)
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
            check(stem, p, std::fs::metadata(p).unwrap().len(), &rows);
            got.extend(rows);
        }
        assert_eq!(got, want, "{stem}: the rotated files hold the rows of one file");
    }
    most
}

#[test]
fn rotation_by_size_and_by_age_keeps_every_row_once_and_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (one, by_size, by_age) = (dir.path().join("one"), dir.path().join("size"), dir.path().join("age"));
    replay_into(&one, &[]);
    assert_eq!(files(&one, "flows").len(), 1);

    replay_into(&by_size, &["--csv-rotate-size", "8K"]);
    let n = same_rows_as(&one, &by_size, |stem, p, len, rows| {
        // Over the limit only when a single interval's rows (one write) are.
        let intervals: std::collections::BTreeSet<&str> =
            rows.iter().map(|r| r.split(',').next().unwrap()).collect();
        assert!(
            len <= 8192 || (stem != "transmissions" && intervals.len() == 1),
            "{}: {len} bytes",
            p.display()
        );
    });
    assert!(n >= 5, "only {n} files for one report");

    replay_into(&by_age, &["--csv-rotate-age", "100us"]);
    let n = same_rows_as(&one, &by_age, |stem, p, _, rows| {
        if stem != "transmissions" && !rows.is_empty() {
            let t = first_column_ns(rows);
            let (lo, hi) = (t.iter().min().unwrap(), t.iter().max().unwrap());
            assert!(hi - lo < 100_000, "{}: rows {lo}..{hi} span 100us or more", p.display());
        }
    });
    assert!(n >= 3, "only {n} files for one report");

    // Plots read rotated reports as one.
    let plot = |csv: &Path, out: &Path| {
        let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let (p1, p2) = (dir.path().join("p1"), dir.path().join("p2"));
    plot(&one, &p1);
    plot(&by_size, &p2);
    for e in std::fs::read_dir(&p1).unwrap() {
        let name = e.unwrap().file_name();
        assert!(std::fs::read(p1.join(&name)).unwrap() == std::fs::read(p2.join(&name)).unwrap(), "{name:?}");
    }
}
