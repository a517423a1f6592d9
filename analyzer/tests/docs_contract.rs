//! The output contract as documented: every CSV column a run writes is named in its file's
//! section of docs/CSV.md, every key of the summary JSON in docs/METRICS.md (docs/EVIDENCE.md
//! for `evidence`), and every Prometheus series in docs/PROMETHEUS.md. The runs cover every
//! report: an NVMe scenario at two vantages with evidence and a bound that loses samples,
//! and a collective scenario (steps, stragglers). A column, key or series added without its
//! definition fails here.

mod common;

use common::{bin, free_port, scenario_args, scenario_files, scenario_truth, Reap};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn doc(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of `## heading` in `text`, up to the next `## ` heading (its `###` parts included).
fn section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start =
        text.find(&format!("\n## {heading}\n")).unwrap_or_else(|| panic!("no section '## {heading}'")) + 1;
    let end = text[start + 3..].find("\n## ").map_or(text.len(), |e| start + 3 + e);
    &text[start..end]
}

/// Whether `text` names `key` as a whole word (letters, digits, `_` and `@` make a word, so
/// `io` is not found in `io@compute_us`).
fn names(text: &str, key: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '@';
    text.match_indices(key).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(word)
            && !text[i + key.len()..].chars().next().is_some_and(word)
    })
}

/// Replays scenario `name` with its own options and `extra`, the CSV reports in `dir/csv`;
/// returns the summary and the CSV folder.
fn replay(name: &str, extra: &[String], dir: &Path) -> (Value, PathBuf) {
    let t = scenario_truth(name);
    let (csv, summary) = (dir.join("csv"), dir.join("summary.json"));
    let mut a: Vec<String> =
        vec!["replay".into(), "-q".into(), "--csv-dir".into(), csv.display().to_string()];
    a.extend(["--summary".into(), summary.display().to_string()]);
    a.extend(scenario_args(&t));
    a.extend(extra.iter().cloned());
    a.extend(scenario_files(name, &t).iter().map(|f| f.display().to_string()));
    let o = Command::new(bin()).args(&a).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap(), csv)
}

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
}

/// The keys of the first element of array `v` that has any.
fn first_keys(v: &Value) -> BTreeSet<String> {
    let first = v.as_array().and_then(|a| a.iter().find(|e| e.is_object()));
    keys(first.unwrap_or_else(|| panic!("no object in {v}")))
}

/// Every key of `keys` is named in `text` (the part of the docs called `where_`).
fn assert_named(text: &str, keys: &BTreeSet<String>, where_: &str) {
    let missing: Vec<_> = keys.iter().filter(|k| !names(text, k)).collect();
    assert!(missing.is_empty(), "not defined in {where_}: {missing:?}");
}

#[test]
fn every_csv_column_and_summary_key_is_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let (nvme_dir, steps_dir) = (tmp.path().join("nvme"), tmp.path().join("steps"));
    let evidence = nvme_dir.join("evidence").display().to_string();
    let extra: Vec<String> =
        ["--evidence-dir", &evidence, "--evidence-slow-io", "1us", "--max-latency-series", "2"]
            .map(String::from)
            .into();
    let (nvme, nvme_csv) = replay("nvme_faults", &extra, &nvme_dir);
    let (steps, steps_csv) = replay("collective_vlan", &[], &steps_dir);

    // CSV: every column of every file written, in that file's section of CSV.md.
    let csv_doc = doc("CSV.md");
    let mut files = BTreeSet::new();
    let mut undocumented = Vec::new();
    for dir in [&nvme_csv, &steps_csv] {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".csv") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let header = text.lines().next().unwrap_or_default();
            let s = section(&csv_doc, &name);
            undocumented.extend(header.split(',').filter(|c| !names(s, c)).map(|c| format!("{name}: {c}")));
            files.insert(name);
        }
    }
    let every =
        ["flows", "transmissions", "latency", "io", "slow_ios", "steps", "stragglers", "ports", "events"];
    assert_eq!(files, every.iter().map(|f| format!("{f}.csv")).collect(), "the runs write every report");
    assert!(undocumented.is_empty(), "CSV columns not in docs/CSV.md: {undocumented:?}");

    // The summary: the top-level keys and the objects the list in "The summary JSON" names.
    let metrics = doc("METRICS.md");
    let listed = section(&metrics, "The summary JSON");
    let mut top = keys(&nvme);
    top.extend(keys(&steps));
    let mut inner = first_keys(&nvme["latency"]);
    inner.extend(keys(&nvme["ios"]));
    inner.extend(first_keys(&nvme["ios"]["by_pair"]));
    inner.extend(first_keys(&nvme["ios"]["slowest"]));
    inner.extend(first_keys(&steps["jobs"]));
    inner.extend(first_keys(&steps["jobs"][0]["stragglers"]));
    inner.extend(keys(&steps["jobs"][0]["last_step"]));
    assert!(
        inner.contains("io@compute_us") && inner.contains("straggler_host"),
        "the runs fill every list: {inner:?}"
    );
    assert_named(listed, &top, "docs/METRICS.md, 'The summary JSON'");
    assert_named(listed, &inner, "docs/METRICS.md, 'The summary JSON'");

    // A flow's fields in "Per flow"; the frame counters' parts in "Frame counters (summary)".
    let mut flow = first_keys(&nvme["flows"]);
    flow.extend(first_keys(&steps["flows"]));
    assert_named(section(&metrics, "Per flow"), &flow, "docs/METRICS.md, 'Per flow'");
    let mut counters = keys(&nvme["forgotten"]);
    for part in ["reorder", "mirror_duplicates", "decode_errors"] {
        counters.extend(keys(&nvme[part]));
    }
    counters.extend(keys(&nvme["reorder"]["late_packets"]));
    counters.extend(first_keys(&nvme["bounds"]));
    counters.extend(keys(&nvme["ports"]["0"]));
    assert!(counters.contains("needed"), "the bound on latency series lost samples: {}", nvme["bounds"]);
    let frame_counters = section(&metrics, "Frame counters (summary)");
    assert_named(frame_counters, &counters, "docs/METRICS.md, 'Frame counters (summary)'");

    // Evidence in docs/EVIDENCE.md, "Where it is reported".
    let ev = &nvme["evidence"];
    let mut evidence_keys = keys(ev);
    evidence_keys.extend(first_keys(&ev["events"]));
    let kinds = ev["kinds"].as_object().expect("evidence kinds");
    evidence_keys.extend(kinds.values().flat_map(keys));
    let evidence_doc = doc("EVIDENCE.md");
    let reported = section(&evidence_doc, "Where it is reported");
    assert_named(reported, &evidence_keys, "docs/EVIDENCE.md, 'Where it is reported'");
}

/// The metrics page at `port`, if it answers.
fn metrics_page(port: u16) -> Option<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(c, "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").ok()?;
    let mut r = String::new();
    c.read_to_string(&mut r).ok()?;
    Some(r.split_once("\r\n\r\n")?.1.to_owned())
}

#[test]
fn every_prometheus_series_is_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let port = free_port();
    let (nvme, steps) = (scenario_truth("nvme_faults"), scenario_truth("collective_vlan"));
    let probe = Command::new(bin())
        .args(["replay", "-q", "--prometheus", &format!("127.0.0.1:{port}")])
        .args(["--evidence-dir", &tmp.path().join("evidence").display().to_string()])
        .args(scenario_args(&nvme))
        .args(scenario_files("nvme_faults", &nvme))
        .args(scenario_files("collective_vlan", &steps))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _probe = Reap(probe);
    // A replay keeps serving its final page until it is stopped; every family is on it by then.
    let families =
        ["roceprobe_io_latency_seconds", "roceprobe_step_duration_seconds", "roceprobe_flow_bytes_total"];
    let deadline = Instant::now() + Duration::from_secs(60);
    let page = loop {
        match metrics_page(port) {
            Some(p) if families.iter().all(|f| p.contains(&format!("# HELP {f} "))) => break p,
            _ if Instant::now() > deadline => panic!("the page never had every family"),
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    let series: BTreeSet<String> =
        page.lines().filter_map(|l| l.strip_prefix("# HELP ")?.split(' ').next().map(String::from)).collect();
    assert!(series.contains("roceprobe_evidence_events_total"), "{series:?}");
    let doc = doc("PROMETHEUS.md");
    assert_named(section(&doc, "Series"), &series, "docs/PROMETHEUS.md, 'Series'");
}

#[test]
fn names_finds_whole_words_only() {
    assert!(names("| `io@compute_us` |", "io@compute_us"));
    assert!(!names("| `io@compute_us` |", "io"));
    assert!(names("messages, retx_episodes, out_of_window", "retx_episodes"));
    assert!(!names("retx_episodes", "retx"));
    assert!(!names("short_transmissions", "transmissions"));
}
