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
    for name in ["flows.csv", "transmissions.csv", "latency.csv"] {
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
        let args = t["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect();
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
fn live_dispatch_through_dpdk_matches_one_worker() {
    let path = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let p: &Path = &path;
    let args = ["--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"];
    let one = live_summary(&[p], &args);
    let mut with = args.to_vec();
    with.extend(["--workers", "3"]);
    assert_eq!(live_summary(&[p], &with), one);
}
