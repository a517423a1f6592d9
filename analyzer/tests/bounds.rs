//! Bounds that explain themselves: when a bounded table loses something, stderr (once), the
//! summary's `bounds` and the exit report name the option and the value that would have
//! lost nothing; run again with that value, nothing is lost.

mod common;
use common::*;
use serde_json::Value;

/// (stderr, stdout, summary) of a replay of the NVMe scenario with `extra`.
fn replay_nvme(extra: &[&str]) -> (String, String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("s.json");
    let t = scenario_truth("nvme_vlan");
    let mut args: Vec<String> = vec!["replay".into(), "--summary".into(), summary.display().to_string()];
    args.extend(scenario_args(&t));
    args.extend(extra.iter().map(|s| s.to_string()));
    args.extend(scenario_files("nvme_vlan", &t).iter().map(|p| p.display().to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&refs);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
    (String::from_utf8_lossy(&o.stderr).into_owned(), String::from_utf8_lossy(&o.stdout).into_owned(), s)
}

/// Runs with `option` at `small`; checks that the loss is told once on stderr, in the
/// summary and in the exit report with the value that would have sufficed; returns it.
fn advised(option: &str, small: u64, lost_field: impl Fn(&Value) -> u64) -> u64 {
    let (stderr, stdout, s) = replay_nvme(&[option, &small.to_string()]);
    let b = s["bounds"].as_array().unwrap();
    assert_eq!(b.len(), 1, "{option}: {b:?}");
    let b = &b[0];
    assert_eq!((b["option"].as_str(), b["limit"].as_u64()), (Some(option), Some(small)));
    assert_eq!(b["lost"].as_u64().unwrap(), lost_field(&s), "{option}: what was lost");
    assert!(lost_field(&s) > 0);
    let needed = b["needed"].as_u64().expect("a value that would have sufficed");
    assert!(needed > small);
    let told = format!("{option} {small}: ");
    let advice = format!("{option} {needed} would have kept them");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains(&told)).collect();
    assert_eq!(warnings.len(), 1, "told once: {stderr}");
    assert!(warnings[0].starts_with("roceprobe: warning: ") && warnings[0].contains(&advice), "{stderr}");
    assert!(
        stdout.lines().any(|l| l.contains("bound reached") && l.contains(&advice)),
        "exit report: {stdout}"
    );
    // With the advised value nothing is lost.
    let (stderr, _, s) = replay_nvme(&[option, &needed.to_string()]);
    assert_eq!(s["bounds"], serde_json::json!([]), "{option} {needed}: {stderr}");
    assert_eq!(lost_field(&s), 0);
    assert!(!stderr.contains("warning"), "{stderr}");
    needed
}

#[test]
fn a_bound_that_drops_data_names_its_option_and_the_value_that_would_have_sufficed() {
    // Flows: turned away, so every one is known: exactly the scenario's flows.
    let flows = scenario_truth("nvme_vlan")["flows"].as_array().unwrap().len() as u64;
    assert_eq!(advised("--max-flows", 5, |s| s["untracked_packets"].as_u64().unwrap()), flows);
    // Latency series: likewise exactly those of a run without the bound.
    let (_, _, all) = replay_nvme(&[]);
    let series = all["latency"].as_array().unwrap().len() as u64;
    assert_eq!(
        advised("--max-latency-series", 3, |s| s["latency_samples_dropped"].as_u64().unwrap()),
        series
    );
    // NVMe commands awaiting their completion: forgotten ones whose completion came. An
    // estimate from above; running with it forgets none.
    advised("--max-pending-commands", 10, |s| s["forgotten"]["nvme_commands"].as_u64().unwrap());
    // I/Os followed at once: the commands turned away, counted by stretches of packet time
    // (the whole scenario is shorter than one --io-timeout: every one of them).
    let overflowed = |s: &Value| s["ios"]["overflowed"].as_u64().unwrap();
    let (_, _, small) = replay_nvme(&["--max-ios", "8"]);
    assert_eq!(advised("--max-ios", 8, overflowed), 8 + overflowed(&small));
}

#[test]
fn pending_commands_forgotten_lose_no_completion_the_io_tracker_answers() {
    // nvme_vlan with room for 10 pending commands: commands are forgotten, but the I/O
    // tracker (`--max-ios`, the default) follows every I/O, so each completion still
    // answers a command seen, and is counted: every flow's `nvme_completions` is the
    // truth's (240, each of the 120 completions at both vantages), and the 120 I/Os
    // complete. Before, only the completions whose command the pending table still held
    // counted.
    let t = scenario_truth("nvme_vlan");
    let (_, _, s) = replay_nvme(&["--max-pending-commands", "10"]);
    assert!(s["forgotten"]["nvme_commands"].as_u64().unwrap() > 0, "commands forgotten");
    let view = |flows: &Value| -> Vec<(String, u64)> {
        let mut v: Vec<(String, u64)> = flows
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                let key = format!("{} {} {} {}", f["vantage"], f["src_ip"], f["dst_ip"], f["dst_qpn"]);
                (key, f["nvme_completions"].as_u64().unwrap())
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(view(&s["flows"]), view(&t["flows"]));
    assert_eq!(s["ios"]["completed"].as_u64(), Some(t["ios"].as_array().unwrap().len() as u64));
}
