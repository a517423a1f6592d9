//! The exit report: the NVMe I/O quality per (initiator, target, op) and the slowest I/Os
//! first, then the frame totals and anything lost, the collective jobs' steps and
//! stragglers, then the flows with a problem and the busiest flows (at most `--top` of
//! each; the rest are in the summary and the CSV files).

use super::summary::{FlowSummary, LatencySummary, RunEnd, Summary};
use crate::wire::bth::opcode_name;
use std::fmt::Write;

/// Renders the report, aligned for a terminal, with at most `top` rows per flow table.
pub fn render(s: &Summary, top: usize) -> String {
    let mut out = String::new();
    io_quality(&mut out, s);
    slowest_ios(&mut out, s);
    frame_totals(&mut out, s);
    time_order(&mut out, s);
    report_losses(&mut out, s);
    table_bounds(&mut out, s);
    malformed_kinds(&mut out, s);
    sources(&mut out, s);
    collective_jobs(&mut out, s, top);
    evidence(&mut out, s);
    if s.flows.is_empty() {
        let _ = writeln!(out, "no RoCEv2 flows");
        return out;
    }
    problem_flows(&mut out, &s.flows, top);
    busiest_flows(&mut out, &s.flows, top);
    out
}

/// Microseconds as the summary rounds them.
fn us(v: f64) -> String {
    format!("{v:.3}")
}

/// The latency series of (initiator, target, op, segment), if it has samples.
fn series<'a>(
    s: &'a Summary,
    initiator: &str,
    target: &str,
    op: &str,
    segment: &str,
) -> Option<&'a LatencySummary> {
    s.latency
        .iter()
        .find(|l| l.initiator_ip == initiator && l.target_ip == target && l.op == op && l.segment == segment)
}

const IO_HEADER: [&str; 16] = [
    "initiator",
    "target",
    "op",
    "ios",
    "timed_out",
    "iops",
    "MB/s",
    "mean_size",
    "io_p50_us",
    "io_p99_us",
    "compute_p50",
    "compute_p99",
    "network_p50",
    "network_p99",
    "storage_p50",
    "storage_p99",
];

/// Per (initiator, target, op): I/Os completed and timed out, IOPS and MB/s over the run,
/// the mean I/O size, and p50/p99 of the whole I/O (at the compute vantage, else at the
/// storage one) and of each segment.
fn io_quality(out: &mut String, s: &Summary) {
    if s.ios.by_pair.is_empty() {
        return;
    }
    let secs = s.duration_s;
    let rows: Vec<Vec<String>> = s
        .ios
        .by_pair
        .iter()
        .map(|p| {
            let c = &p.counts;
            let (i, t, op) = (p.initiator_ip.as_str(), p.target_ip.as_str(), p.op.as_str());
            let rate = |n: f64| if secs > 0.0 { format!("{:.1}", n / secs) } else { "-".into() };
            let mut row = vec![
                i.to_owned(),
                t.to_owned(),
                op.to_owned(),
                c.completed.to_string(),
                c.timed_out.to_string(),
                rate(c.completed as f64),
                rate(c.bytes as f64 / 1e6),
                c.bytes.checked_div(c.completed).map_or("-".into(), |m| m.to_string()),
            ];
            let whole = series(s, i, t, op, "io@compute").or_else(|| series(s, i, t, op, "io@storage"));
            for l in [
                whole,
                series(s, i, t, op, "compute"),
                series(s, i, t, op, "network"),
                series(s, i, t, op, "storage"),
            ] {
                row.push(l.map_or("-".into(), |l| us(l.p50_us)));
                row.push(l.map_or("-".into(), |l| us(l.p99_us)));
            }
            row
        })
        .collect();
    // A run shorter than a millisecond in µs, so that its length does not read as zero.
    let over = if secs < 1e-3 { format!("{:.1} µs", secs * 1e6) } else { format!("{secs:.3} s") };
    let _ = writeln!(out, "NVMe I/O quality over {over} of packet time (latencies in µs):");
    table(out, &IO_HEADER, &rows, |i| i >= 3, false);
    // The I/Os the table's counts leave out or hide: still open when the run ended, and
    // those with a packet seen twice at a vantage.
    let c = &s.ios.counts;
    let mut notes = Vec::new();
    if c.unfinished > 0 {
        notes.push(format!("{} still awaiting their completion at the end (ios.unfinished)", c.unfinished));
    }
    if c.retransmitted > 0 {
        notes.push(format!(
            "{} with a packet sent again (ios.retransmitted, among those completed or timed out)",
            c.retransmitted
        ));
    }
    if !notes.is_empty() {
        let _ = writeln!(out, "  I/Os: {}", notes.join("; "));
    }
}

const SLOW_HEADER: [&str; 11] = [
    "completed_at",
    "initiator",
    "target",
    "op",
    "qpn",
    "cid",
    "bytes",
    "io_us",
    "compute_us",
    "network_us",
    "storage_us",
];

/// The run's slowest I/Os (`--slow-ios`), slowest first, with their segments.
fn slowest_ios(out: &mut String, s: &Summary) {
    if s.ios.slowest.is_empty() {
        return;
    }
    let opt = |v: Option<f64>| v.map_or("-".into(), us);
    let rows: Vec<Vec<String>> = s
        .ios
        .slowest
        .iter()
        .map(|io| {
            vec![
                io.completed_at.clone(),
                io.initiator_ip.clone(),
                io.target_ip.clone(),
                io.op.clone(),
                format!("{:#08x}", io.qpn),
                io.cid.to_string(),
                io.bytes.to_string(),
                us(io.io_us),
                opt(io.compute_us),
                opt(io.network_us),
                opt(io.storage_us),
            ]
        })
        .collect();
    let _ = writeln!(out, "slowest I/Os:");
    table(out, &SLOW_HEADER, &rows, |i| i >= 5, false);
}

const JOBS_HEADER: [&str; 7] = [
    "job",
    "hosts",
    "steps",
    "step_p50_us",
    "step_p99_us",
    "step_max_us",
    "held back most (lag_us, steps, reasons)",
];

/// Collective jobs, if any: their steps' durations and the hosts that held them back most,
/// by their lag in all (at most three per job: a step nothing held back still has a
/// slowest flow, a few µs behind, so the hosts last in most steps need not be those that
/// cost the job most; the summary has them all, steps.csv and stragglers.csv every step
/// and interval). At most `top` jobs, those of the most steps.
fn collective_jobs(out: &mut String, s: &Summary, top: usize) {
    if s.step_transmissions_dropped > 0 {
        let _ = writeln!(
            out,
            "STEPS NOT ANALYSED: {} transmissions of hosts beyond the step analysis' {} hosts",
            s.step_transmissions_dropped,
            crate::metrics::steps::MAX_HOSTS
        );
    }
    if s.jobs.is_empty() {
        return;
    }
    let mut jobs: Vec<_> = s.jobs.iter().collect();
    jobs.sort_by_key(|j| std::cmp::Reverse(j.steps));
    let rows: Vec<Vec<String>> = jobs
        .iter()
        .take(top)
        .map(|j| {
            let mut most: Vec<_> = j.stragglers.iter().collect();
            most.sort_by(|a, b| b.lag_us.total_cmp(&a.lag_us).then(b.steps.cmp(&a.steps)));
            let held: Vec<String> = most
                .iter()
                .take(3)
                .map(|h| {
                    let why: Vec<String> = h.reasons.iter().map(|(r, n)| format!("{r} {n}")).collect();
                    format!("{} ({}, {}, {})", h.host, us(h.lag_us), h.steps, why.join(" "))
                })
                .collect();
            // A `--job` rule whose hosts sent nothing: no step, so no duration.
            let step_us = |v: Option<f64>| v.map_or("-".to_owned(), us);
            vec![
                j.name.clone(),
                j.hosts.len().to_string(),
                j.steps.to_string(),
                step_us(j.step_p50_us),
                step_us(j.step_p99_us),
                step_us(j.step_max_us),
                if held.is_empty() { "-".to_owned() } else { held.join("; ") },
            ]
        })
        .collect();
    let _ = writeln!(out, "collective jobs:");
    table(out, &JOBS_HEADER, &rows, |i| (1..6).contains(&i), true);
    if s.jobs.len() > rows.len() {
        let _ = writeln!(out, "  and {} more jobs in the summary and steps.csv", s.jobs.len() - rows.len());
    }
    if s.step_transmissions_outside_jobs > 0 {
        let _ = writeln!(
            out,
            "  {} transmissions between a --job rule's hosts and hosts outside it: in no job's steps",
            s.step_transmissions_outside_jobs
        );
    }
}

/// With `--evidence-dir`: the events, the files kept for them and why the others have
/// none, the files removed to stay within the disk bound (`roceprobe evidence DIR` lists
/// the files).
fn evidence(out: &mut String, s: &Summary) {
    let Some(e) = &s.evidence else { return };
    let (mut events, mut files, mut capped, mut no_room, mut failed) = (0, 0, 0, 0, 0);
    for k in e.kinds.values() {
        (events, files) = (events + k.events, files + k.files);
        (capped, no_room, failed) =
            (capped + k.capped_per_minute, no_room + k.no_room, failed + k.write_failed);
    }
    let mut why = Vec::new();
    for (n, what) in [(capped, "capped_per_minute"), (no_room, "no_room"), (failed, "write_failed")] {
        if n > 0 {
            why.push(format!("{n} {what}"));
        }
    }
    let _ = writeln!(
        out,
        "evidence: {events} events, {files} files written{}; {} files removed for --evidence-max-bytes; {} files ({} bytes) in {}{}",
        if why.is_empty() { String::new() } else { format!(", without a file: {}", why.join(", ")) },
        e.files_removed,
        e.files_on_disk,
        e.bytes_on_disk,
        e.dir,
        if e.dir_recreated > 0 {
            format!(" (removed while running, made again: {})", e.dir_recreated)
        } else {
            String::new()
        },
    );
}

/// The first line: frames by kind, RoCEv2 packets of untracked flows if any, and the
/// second copies of mirrored frames (counted once in their flows) if any.
fn frame_totals(out: &mut String, s: &Summary) {
    let errors: u64 = s.decode_errors.values().sum();
    let dup = s.mirror_duplicates;
    let _ = writeln!(
        out,
        "{} frames: {} RoCEv2, {} other, {} malformed{}{}",
        s.packets,
        s.roce_packets,
        s.non_roce_packets,
        errors,
        if s.untracked_packets > 0 {
            format!(", {} RoCEv2 in flows beyond --max-flows", s.untracked_packets)
        } else {
            String::new()
        },
        if dup.compute + dup.storage > 0 {
            format!(
                "; mirror duplicates {} compute, {} storage (a packet's second copies, not counted again)",
                dup.compute, dup.storage
            )
        } else {
            String::new()
        }
    );
    // How the run ended, unless it read all of its input (or reached --duration or
    // --idle-exit): the journal of a probe stopped by its service manager says so.
    let ended = match s.ended {
        RunEnd::Complete => return,
        RunEnd::Stopped => {
            "SIGINT, SIGTERM or the dashboard's q came first: these are the frames received until then"
        }
        RunEnd::Failed => {
            "the capture failed partway (the error is on stderr): these are the frames received before it"
        }
        RunEnd::CutShort => {
            "an input file ended at a damaged or cut-short record (told on stderr): read up to it"
        }
    };
    let _ = writeln!(out, "  run {}: {ended}", s.ended.as_str());
}

/// What the reorder window could not put in time order, if anything.
fn time_order(out: &mut String, s: &Summary) {
    let late = s.reorder.late_packets;
    if late.compute + late.storage + s.reorder.released_early > 0 {
        let _ = writeln!(
            out,
            "  out of time order: {} compute and {} storage packets came after the reorder window, {} frames released before it",
            late.compute, late.storage, s.reorder.released_early
        );
    }
    let after = s.reorder.io_copies_after_end;
    if after.compute + after.storage > 0 {
        let _ = writeln!(
            out,
            "  NVMe capsules after their I/O had ended at the other vantage: {} compute, {} storage (an I/O complete at one vantage waits for the other's copies --reorder-window after its completion, and no longer than --io-timeout after its command: those I/Os lack these segments; raise both above the offset between the two mirrors' times)",
            after.compute, after.storage
        );
    }
}

/// What the reports themselves lost: dropped snapshots, CSV writes, Prometheus scrapes.
fn report_losses(out: &mut String, s: &Summary) {
    if s.report_drops > 0 {
        let _ = writeln!(
            out,
            "  REPORTS DROPPED: {} interval snapshots or transmission batches (the reports fell behind; totals are incomplete)",
            s.report_drops
        );
    }
    if let Some(c) = s.csv_output.filter(|c| c.failed_writes + c.files_recreated > 0) {
        let _ = writeln!(
            out,
            "  CSV: {} failed writes ({} rows lost), {} files started again after being removed",
            c.failed_writes, c.rows_lost, c.files_recreated
        );
    }
    if let Some(c) = s.csv_output.filter(|c| c.over_retain > 0) {
        let _ = writeln!(
            out,
            "  CSV: {} writes took the directory past --csv-retain (the current files alone did not fit under it, or a file could not be removed)",
            c.over_retain
        );
    }
    if let Some(p) = s.prometheus.filter(|p| p.failed > 0) {
        let _ = writeln!(
            out,
            "  Prometheus: {} scrapes failed (clients that hung, went away, sent a bad request or came with the connections full), {} served",
            p.failed, p.served
        );
    }
}

/// What the bounded tables left out: latency samples, forgotten entries.
fn table_bounds(out: &mut String, s: &Summary) {
    if s.latency_samples_dropped > 0 {
        let _ = writeln!(
            out,
            "  latency samples not recorded: {} (series beyond --max-latency-series)",
            s.latency_samples_dropped
        );
    }
    for b in &s.bounds {
        let _ = writeln!(out, "  bound reached: {}", b.line());
    }
    let f = s.forgotten;
    if f.total() > 0 {
        let _ = writeln!(
            out,
            "  forgotten to make room: {} NVMe commands, {} CM requests, {} announced flows, {} NVMe connections, {} completions' ACKs, {} RDMA requests awaiting an answer, {} idle flows ({} left this table)",
            f.nvme_commands, f.cm_requests, f.announced_flows, f.io_connections, f.io_acks, f.rdma_requests, f.idle_flows, f.summary_flows
        );
    }
}

/// One line per kind of malformed frame seen.
fn malformed_kinds(out: &mut String, s: &Summary) {
    for (kind, n) in s.decode_errors.iter().filter(|(_, n)| **n > 0) {
        let _ = writeln!(out, "  malformed {kind}: {n}");
    }
}

/// One line per source with its receive drops. A probe that silently loses packets gives
/// wrong answers: receive drops always show.
fn sources(out: &mut String, s: &Summary) {
    for (id, p) in &s.ports {
        let drops = p.imissed + p.ierrors + p.rx_nombuf;
        let _ = writeln!(
            out,
            "  source {id}: {} frames received, {}",
            p.ipackets,
            if drops == 0 {
                "no receive drops".to_owned()
            } else {
                format!(
                    "RECEIVE DROPS: imissed {} ierrors {} rx_nombuf {}",
                    p.imissed, p.ierrors, p.rx_nombuf
                )
            }
        );
    }
}

const FLOW_HEADER: [&str; 14] = [
    "vantage",
    "src_ip",
    "dst_ip",
    "dst_qpn",
    "transport",
    "packets",
    "bytes",
    "payload_bytes",
    "retx",
    "gaps",
    "naks",
    "cnp",
    "ecn_ce",
    "opcodes",
];

/// What went wrong on a flow, as one number to rank by: retransmissions, gaps, NAKs, CNPs,
/// ECN-CE marks, ICRC errors and PSNs out of window.
fn trouble(f: &FlowSummary) -> u64 {
    let c = &f.counts;
    c.retx_packets
        + c.gap_psns
        + c.nak_seq
        + c.nak_rnr
        + c.nak_other
        + c.cnp
        + c.ecn_ce
        + c.icrc_errors
        + c.out_of_window
}

/// The flows with a problem, the most troubled first, at most `top`.
fn problem_flows(out: &mut String, flows: &[FlowSummary], top: usize) {
    let mut bad: Vec<&FlowSummary> = flows.iter().filter(|f| trouble(f) > 0).collect();
    if bad.is_empty() {
        let _ = writeln!(
            out,
            "no flow with retransmissions, gaps, NAKs, CNPs, ECN-CE, ICRC errors or PSNs out of window"
        );
        return;
    }
    bad.sort_by_key(|f| std::cmp::Reverse(trouble(f)));
    let _ = writeln!(
        out,
        "flows with retransmissions, gaps, NAKs, CNPs, ECN-CE, ICRC errors or PSNs out of window:"
    );
    flow_table(out, &bad, top, "with a problem");
}

/// The flows that moved the most bytes, at most `top`.
fn busiest_flows(out: &mut String, flows: &[FlowSummary], top: usize) {
    let mut busy: Vec<&FlowSummary> = flows.iter().collect();
    busy.sort_by_key(|f| std::cmp::Reverse(f.counts.bytes));
    let _ = writeln!(out, "busiest flows:");
    flow_table(out, &busy, top, "");
}

/// One of a flow's counts.
type Count = fn(&FlowSummary) -> u64;

/// Counts a flow can have that the table shows only when a flow listed has some: ICRC
/// errors (with `--check-icrc`) and requests beyond the PSN window, each counted in
/// [`trouble`], so that a flow listed for them shows why.
const RARE: [(&str, Count); 2] =
    [("icrc", |f| f.counts.icrc_errors), ("out_of_window", |f| f.counts.out_of_window)];

/// The header and a row for each of the first `top` flows, then how many more there are.
fn flow_table(out: &mut String, flows: &[&FlowSummary], top: usize, kind: &str) {
    let listed = &flows[..flows.len().min(top)];
    let rare: Vec<_> = RARE.iter().filter(|(_, n)| listed.iter().any(|f| n(f) > 0)).collect();
    let mut header: Vec<&str> = FLOW_HEADER[..FLOW_HEADER.len() - 1].to_vec();
    header.extend(rare.iter().map(|(name, _)| *name));
    header.push(FLOW_HEADER[FLOW_HEADER.len() - 1]);
    let rows: Vec<Vec<String>> = listed
        .iter()
        .map(|f| {
            let mut row = flow_row(f);
            let opcodes = row.pop().unwrap_or_default();
            row.extend(rare.iter().map(|(_, n)| n(f).to_string()));
            row.push(opcodes);
            row
        })
        .collect();
    table(out, &header, &rows, |i| (5..header.len() - 1).contains(&i), true);
    if flows.len() > top {
        let kind = if kind.is_empty() { String::new() } else { format!(" {kind}") };
        let _ = writeln!(
            out,
            "… and {} more flows{kind} (--top {top}): every flow is in the summary (--summary) and flows.csv (--csv-dir)",
            flows.len() - top
        );
    }
}

/// A flow's cells, in the order of [`FLOW_HEADER`].
fn flow_row(f: &FlowSummary) -> Vec<String> {
    vec![
        f.vantage.clone(),
        f.src_ip.clone(),
        f.dst_ip.clone(),
        format!("{:#08x}", f.dst_qpn),
        f.transport.clone(),
        f.counts.packets.to_string(),
        f.counts.bytes.to_string(),
        f.counts.payload_bytes.to_string(),
        f.counts.retx_packets.to_string(),
        f.counts.gap_psns.to_string(),
        (f.counts.nak_seq + f.counts.nak_rnr + f.counts.nak_other).to_string(),
        f.counts.cnp.to_string(),
        f.counts.ecn_ce.to_string(),
        opcode_mix(f),
    ]
}

/// The flow's opcodes as `NAME:count`, most frequent first; ties in opcode order (FIRST,
/// MIDDLE, LAST).
fn opcode_mix(f: &FlowSummary) -> String {
    let mut ops: Vec<(u64, &str, u16)> = f
        .opcodes
        .iter()
        .map(|(op, n)| match op.parse::<u8>() {
            Ok(op) => (*n, opcode_name(op), u16::from(op)),
            Err(_) => (*n, "other", 256),
        })
        .collect();
    ops.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
    ops.iter().map(|(n, name, _)| format!("{name}:{n}")).collect::<Vec<_>>().join(" ")
}

/// A table: each column as wide as its widest cell, header included; the columns
/// `numeric` says align right, the others left; with `last_free`, the last column is
/// written as it is (not padded).
fn table(
    out: &mut String,
    header: &[&str],
    rows: &[Vec<String>],
    numeric: impl Fn(usize) -> bool,
    last_free: bool,
) {
    let mut width: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut l = String::new();
        for (i, c) in cells.enumerate() {
            if last_free && i == header.len() - 1 {
                l.push_str(c);
            } else if numeric(i) {
                let _ = write!(l, "{:>w$}  ", c, w = width[i]);
            } else {
                let _ = write!(l, "{:<w$}  ", c, w = width[i]);
            }
        }
        l.trim_end().to_owned()
    };
    let _ = writeln!(out, "{}", line(&mut header.iter().copied()));
    for r in rows {
        let _ = writeln!(out, "{}", line(&mut r.iter().map(String::as_str)));
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::capture::SourceStats;

    /// A small run's summary, with these ports.
    pub(crate) fn summary(ports: Vec<SourceStats>) -> Summary {
        Summary {
            packets: 10,
            roce_packets: 7,
            non_roce_packets: 2,
            decode_errors: [("udp_truncated".to_owned(), 1)].into_iter().collect(),
            first_packet: None,
            last_packet: None,
            ended: Default::default(),
            untracked_packets: 0,
            report_drops: 0,
            latency_samples_dropped: 0,
            reorder: Default::default(),
            erspan_untimed_packets: 0,
            erspan_packets: 0,
            mirror_duplicates: Default::default(),
            forgotten: Default::default(),
            bounds: Vec::new(),
            csv_output: None,
            prometheus: None,
            flows: vec![],
            latency: vec![],
            ios: crate::report::summary::IosSummary {
                counts: Default::default(),
                by_pair: vec![],
                slowest: vec![],
                latest_interval_slowest: vec![],
            },
            duration_s: 0.0,
            jobs: vec![],
            step_transmissions_dropped: 0,
            step_transmissions_outside_jobs: 0,
            evidence: None,
            time_sources: Default::default(),
            ports: ports.into_iter().enumerate().map(|(i, p)| (i.to_string(), p)).collect(),
        }
    }

    #[test]
    fn totals_errors_and_drops_are_always_shown() {
        let ok = SourceStats { ipackets: 10, ..Default::default() };
        let lossy = SourceStats { ipackets: 5, imissed: 3, rx_nombuf: 1, ..Default::default() };
        let t = render(&summary(vec![ok, lossy]), 20);
        assert!(t.starts_with("10 frames: 7 RoCEv2, 2 other, 1 malformed\n"), "{t}");
        assert!(t.contains("  malformed udp_truncated: 1\n"), "{t}");
        assert!(t.contains("  source 0: 10 frames received, no receive drops\n"), "{t}");
        assert!(
            t.contains("  source 1: 5 frames received, RECEIVE DROPS: imissed 3 ierrors 0 rx_nombuf 1\n"),
            "{t}"
        );
        assert!(t.ends_with("no RoCEv2 flows\n"), "{t}");
        assert!(!t.contains("  run "), "a complete run says nothing of its end: {t}");
    }

    /// A run that did not read all of its input says how it ended, under the first line,
    /// by the name the summary JSON gives it.
    #[test]
    fn a_run_that_did_not_end_complete_says_how() {
        for (ended, json, says) in [
            (
                RunEnd::Stopped,
                "\"stopped\"",
                "  run stopped: SIGINT, SIGTERM or the dashboard's q came first",
            ),
            (RunEnd::Failed, "\"failed\"", "  run failed: the capture failed partway"),
            (RunEnd::CutShort, "\"cut_short\"", "  run cut_short: an input file ended at a damaged"),
        ] {
            assert_eq!(serde_json::to_string(&ended).unwrap(), json);
            let t = render(&Summary { ended, ..summary(vec![]) }, 20);
            let second = t.lines().nth(1).unwrap();
            assert!(second.starts_with(says), "{t}");
        }
    }

    #[test]
    fn at_most_top_jobs_those_of_most_steps_and_the_steps_not_analysed() {
        // 32,768 host pairs listed every job: a report of 32,768 lines.
        let mut s = summary(Vec::new());
        let job = |name: &str, steps| crate::report::summary::JobSummary {
            name: name.into(),
            hosts: vec![],
            steps,
            step_p50_us: Some(1.0),
            step_p99_us: Some(1.0),
            step_max_us: Some(1.0),
            stragglers: vec![],
            last_step: None,
        };
        s.jobs = vec![job("a", 1), job("b", 7), job("c", 3), job("d", 2)];
        s.step_transmissions_dropped = 12;
        let t = render(&s, 2);
        let names: Vec<&str> = t
            .lines()
            .skip_while(|l| !l.starts_with("job "))
            .skip(1)
            .take_while(|l| !l.starts_with("  and"))
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(names, ["b", "c"], "{t}");
        assert!(t.contains("  and 2 more jobs in the summary and steps.csv\n"), "{t}");
        assert!(
            t.contains(
                "STEPS NOT ANALYSED: 12 transmissions of hosts beyond the step analysis' 65536 hosts\n"
            ),
            "{t}"
        );
    }
}
