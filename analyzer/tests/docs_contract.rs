//! The output contract as documented: every CSV column a run writes is named in its file's
//! section of docs/CSV.md, and every key of the summary JSON in docs/METRICS.md
//! (docs/EVIDENCE.md for `evidence`). The runs cover every report: an NVMe scenario at two
//! vantages with evidence and a bound that loses samples, and a collective scenario (steps,
//! stragglers). A column or key added without its definition fails here. (Prometheus
//! series: `prometheus.rs`.)

mod common;

use common::{assert_defined, capture, defines, doc, doc_section, replay_scenario, run};
use serde_json::Value;
use std::collections::BTreeSet;

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default()
}

/// The keys of the first element of array `v` that has any.
fn first_keys(v: &Value) -> BTreeSet<String> {
    let first = v.as_array().and_then(|a| a.iter().find(|e| e.is_object()));
    keys(first.unwrap_or_else(|| panic!("no object in {v}")))
}

#[test]
fn every_csv_column_and_summary_key_is_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let (nvme_dir, steps_dir) = (tmp.path().join("nvme"), tmp.path().join("steps"));
    let evidence = nvme_dir.join("evidence").display().to_string();
    let extra = ["--evidence-dir", &evidence, "--evidence-slow-io", "1us", "--max-latency-series", "2"];
    let (_, nvme, nvme_csv) = replay_scenario("nvme_faults", &extra, &nvme_dir);
    let (_, steps, steps_csv) = replay_scenario("collective_vlan", &[], &steps_dir);

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
            let s = doc_section(&csv_doc, &name);
            undocumented.extend(header.split(',').filter(|c| !defines(s, c)).map(|c| format!("{name}: {c}")));
            files.insert(name);
        }
    }
    let every =
        ["flows", "transmissions", "latency", "io", "slow_ios", "steps", "stragglers", "ports", "events"];
    assert_eq!(files, every.iter().map(|f| format!("{f}.csv")).collect(), "the runs write every report");
    assert!(undocumented.is_empty(), "CSV columns not in docs/CSV.md: {undocumented:?}");

    // The summary: the top-level keys and the objects the list in "The summary JSON" names.
    let metrics = doc("METRICS.md");
    let listed = doc_section(&metrics, "The summary JSON");
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
    assert_defined(listed, &top, "docs/METRICS.md, 'The summary JSON'");
    assert_defined(listed, &inner, "docs/METRICS.md, 'The summary JSON'");

    // A flow's fields in "Per flow"; the frame counters' parts in "Frame counters (summary)".
    let mut flow = first_keys(&nvme["flows"]);
    flow.extend(first_keys(&steps["flows"]));
    assert_defined(doc_section(&metrics, "Per flow"), &flow, "docs/METRICS.md, 'Per flow'");
    let mut counters = keys(&nvme["forgotten"]);
    for part in ["reorder", "mirror_duplicates", "decode_errors"] {
        counters.extend(keys(&nvme[part]));
    }
    counters.extend(keys(&nvme["reorder"]["late_packets"]));
    counters.extend(first_keys(&nvme["bounds"]));
    counters.extend(keys(&nvme["ports"]["0"]));
    assert!(counters.contains("needed"), "the bound on latency series lost samples: {}", nvme["bounds"]);
    let frame_counters = doc_section(&metrics, "Frame counters (summary)");
    assert_defined(frame_counters, &counters, "docs/METRICS.md, 'Frame counters (summary)'");

    // Evidence in docs/EVIDENCE.md, "Where it is reported".
    let ev = &nvme["evidence"];
    let mut evidence_keys = keys(ev);
    evidence_keys.extend(first_keys(&ev["events"]));
    let kinds = ev["kinds"].as_object().expect("evidence kinds");
    evidence_keys.extend(kinds.values().flat_map(keys));
    let evidence_doc = doc("EVIDENCE.md");
    let reported = doc_section(&evidence_doc, "Where it is reported");
    assert_defined(reported, &evidence_keys, "docs/EVIDENCE.md, 'Where it is reported'");
}

#[test]
fn defines_finds_whole_words_only() {
    assert!(defines("| `io@compute_us` |", "io@compute_us"));
    assert!(!defines("| `io@compute_us` |", "io"));
    assert!(defines("messages, retx_episodes, out_of_window", "retx_episodes"));
    assert!(!defines("retx_episodes", "retx"));
    assert!(!defines("short_transmissions", "transmissions"));
}

/// The README's example of the demo's exit report is the program's: every line of it is a
/// line of the report on the same capture (a replay prints what the demo's live run does).
#[test]
fn the_readmes_demo_report_is_the_programs() {
    let readme = doc("../README.md");
    let block = readme
        .split("```")
        .nth(3)
        .expect("the README's second code block: the demo's exit report")
        .trim_matches('\n');
    assert!(block.starts_with("96 frames:"), "{block}");
    let o = run(&["replay", capture("rdma_cm.pcap").to_str().unwrap()]);
    assert!(o.status.success());
    let report = String::from_utf8_lossy(&o.stdout);
    let lines: BTreeSet<&str> = report.lines().collect();
    for l in block.lines() {
        assert!(lines.contains(l), "README line not in the report:\n{l}\n--- report:\n{report}");
    }
}
