//! The generated scenarios (pcap-fixtures/scenarios): roceprobe's summary equals the truth
//! the generator computed from the packets each tap emitted.

mod common;
use common::*;
use common::{scenario_args as args, scenario_files as files};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Fields of a flow that roceprobe reports and the truth holds.
const FLOW_FIELDS: [&str; 21] = [
    "transport",
    "packets",
    "bytes",
    "payload_bytes",
    "opcodes",
    "messages",
    "icrc_errors",
    "nvme_commands",
    "nvme_completions",
    "retx_packets",
    "retx_bytes",
    "retx_episodes",
    "gap_psns",
    "nak_seq",
    "nak_rnr",
    "nak_other",
    "cnp",
    "cnp_unattributed",
    "ecn_ce",
    "fabric_loss_psns",
    "transmissions",
];

fn scenarios() -> Vec<(String, Value)> {
    let dir = fixtures().join("scenarios");
    let mut v: Vec<(String, Value)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("truth.json").exists())
        .map(|p| {
            let t: Value =
                serde_json::from_str(&std::fs::read_to_string(p.join("truth.json")).unwrap()).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), t)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(v.len() >= 8, "scenarios missing from {}", dir.display());
    v
}

type FlowKey = (String, String, String, u64);

fn by_key(flows: &Value) -> BTreeMap<FlowKey, Value> {
    flows
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let k = (
                f["vantage"].as_str().unwrap().to_owned(),
                f["src_ip"].as_str().unwrap().to_owned(),
                f["dst_ip"].as_str().unwrap().to_owned(),
                f["dst_qpn"].as_u64().unwrap(),
            );
            (k, f.clone())
        })
        .collect()
}

fn assert_matches_truth(name: &str, s: &Value, t: &Value) {
    for g in ["packets", "roce_packets", "non_roce_packets"] {
        assert_eq!(s[g], t[g], "{name}: {g}");
    }
    let errors: BTreeMap<String, u64> = s["decode_errors"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, v)| v.as_u64() != Some(0))
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    let expected: BTreeMap<String, u64> = t["decode_errors"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    assert_eq!(errors, expected, "{name}: decode errors by kind");
    let (got, want) = (by_key(&s["flows"]), by_key(&t["flows"]));
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{name}: the set of flows");
    for (k, w) in &want {
        for field in FLOW_FIELDS {
            assert_eq!(got[k][field], w[field], "{name}: flow {k:?}: {field}");
        }
        // The truth names mirror duplicates only where a scenario has them.
        let dups = w["mirror_duplicates"].as_u64().unwrap_or(0);
        assert_eq!(got[k]["mirror_duplicates"].as_u64(), Some(dups), "{name}: flow {k:?}: mirror_duplicates");
    }
}

#[test]
fn replay_equals_truth_on_every_scenario() {
    for (name, t) in scenarios() {
        let fs = files(&name, &t);
        let refs: Vec<&std::path::Path> = fs.iter().map(PathBuf::as_path).collect();
        let mut extra = args(&t);
        extra.push("--check-icrc".into());
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let s = replay_summary(&refs, &extra);
        assert_matches_truth(&name, &s, &t);
    }
}

#[test]
fn live_through_dpdk_equals_truth_on_split_files_and_corrupted_frames() {
    // One net_pcap port per file; port N carries file N, so file:N becomes port:N.
    for name in ["nvme_split", "corrupted", "rc_loss_vlan"] {
        let t = scenarios().into_iter().find(|(n, _)| n == name).unwrap().1;
        let fs = files(name, &t);
        let refs: Vec<&std::path::Path> = fs.iter().map(PathBuf::as_path).collect();
        let mut extra: Vec<String> = args(&t).iter().map(|a| a.replace("file:", "port:")).collect();
        extra.push("--check-icrc".into());
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let s = live_summary(&refs, &extra);
        assert_matches_truth(name, &s, &t);
    }
}

#[test]
fn nvme_recognition_finds_every_command_and_completion_at_both_vantages() {
    // No CM handshake in these captures: recognition is mid-stream.
    for name in ["nvme_vlan", "nvme_split", "nvme_erspan3"] {
        let t = scenarios().into_iter().find(|(n, _)| n == name).unwrap().1;
        let ios = t["ios"].as_array().unwrap().len() as u64;
        assert_eq!(ios, 120);
        let fs = files(name, &t);
        let refs: Vec<&std::path::Path> = fs.iter().map(PathBuf::as_path).collect();
        let a = args(&t);
        let extra: Vec<&str> = a.iter().map(String::as_str).collect();
        let s = replay_summary(&refs, &extra);
        for vantage in ["compute", "storage"] {
            let sum = |field: &str| vantage_sum(&s, vantage, field);
            assert_eq!(sum("nvme_commands"), ios, "{name} {vantage}: commands");
            assert_eq!(sum("nvme_completions"), ios, "{name} {vantage}: completions");
        }
    }
}
