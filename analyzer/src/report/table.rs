//! The per-flow table printed at exit.

use super::summary::{FlowSummary, Summary};
use crate::wire::bth::opcode_name;
use std::fmt::Write;

/// Renders the totals and one row per flow, aligned for a terminal.
pub fn render(s: &Summary) -> String {
    let mut out = String::new();
    frame_totals(&mut out, s);
    time_order(&mut out, s);
    report_losses(&mut out, s);
    table_bounds(&mut out, s);
    malformed_kinds(&mut out, s);
    sources(&mut out, s);
    if s.flows.is_empty() {
        let _ = writeln!(out, "no RoCEv2 flows");
        return out;
    }
    flow_table(&mut out, &s.flows);
    out
}

/// The first line: frames by kind, and RoCEv2 packets of untracked flows if any.
fn frame_totals(out: &mut String, s: &Summary) {
    let errors: u64 = s.decode_errors.values().sum();
    let _ = writeln!(
        out,
        "{} frames: {} RoCEv2, {} other, {} malformed{}",
        s.packets,
        s.roce_packets,
        s.non_roce_packets,
        errors,
        if s.untracked_packets > 0 {
            format!(", {} RoCEv2 in flows beyond --max-flows", s.untracked_packets)
        } else {
            String::new()
        }
    );
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
    if let Some(p) = s.prometheus.filter(|p| p.failed > 0) {
        let _ = writeln!(
            out,
            "  Prometheus: {} scrapes failed (clients that hung or went away), {} served",
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
    let f = s.forgotten;
    if f.total() > 0 {
        let _ = writeln!(
            out,
            "  forgotten to make room: {} NVMe commands, {} CM requests, {} announced flows, {} NVMe connections, {} idle flows ({} left this table)",
            f.nvme_commands, f.cm_requests, f.announced_flows, f.io_connections, f.idle_flows, f.summary_flows
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

const COLUMNS: usize = 14;
const HEADER: [&str; COLUMNS] = [
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

/// The header and one row per flow, each column as wide as its widest cell.
fn flow_table(out: &mut String, flows: &[FlowSummary]) {
    let rows: Vec<[String; COLUMNS]> = flows.iter().map(flow_row).collect();
    let width = column_widths(&rows);
    let _ = writeln!(out, "{}", aligned(&HEADER, &width));
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        let _ = writeln!(out, "{}", aligned(&cells, &width));
    }
}

/// A flow's cells, in the order of [`HEADER`].
fn flow_row(f: &FlowSummary) -> [String; COLUMNS] {
    [
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

/// Each column's width: its widest cell, header included.
fn column_widths(rows: &[[String; COLUMNS]]) -> [usize; COLUMNS] {
    let mut width = HEADER.map(str::len);
    for r in rows {
        for (w, c) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.len());
        }
    }
    width
}

/// One line of the table: counters (between the key columns and the opcodes) align right,
/// the rest left, the last column as it is.
fn aligned(cells: &[&str], width: &[usize; COLUMNS]) -> String {
    let numeric = |i: usize| (5..HEADER.len() - 1).contains(&i);
    let mut l = String::new();
    for (i, c) in cells.iter().enumerate() {
        if i == cells.len() - 1 {
            l.push_str(c);
        } else if numeric(i) {
            let _ = write!(l, "{:>w$}  ", c, w = width[i]);
        } else {
            let _ = write!(l, "{:<w$}  ", c, w = width[i]);
        }
    }
    l.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::SourceStats;

    fn summary(ports: Vec<SourceStats>) -> Summary {
        Summary {
            packets: 10,
            roce_packets: 7,
            non_roce_packets: 2,
            decode_errors: [("udp_truncated".to_owned(), 1)].into_iter().collect(),
            first_packet: None,
            last_packet: None,
            untracked_packets: 0,
            report_drops: 0,
            latency_samples_dropped: 0,
            reorder: Default::default(),
            forgotten: Default::default(),
            csv_output: None,
            prometheus: None,
            flows: vec![],
            latency: vec![],
            ios: crate::report::summary::IosSummary { counts: Default::default(), by_pair: vec![] },
            time_sources: Default::default(),
            ports: ports.into_iter().enumerate().map(|(i, p)| (i.to_string(), p)).collect(),
        }
    }

    #[test]
    fn totals_errors_and_drops_are_always_shown() {
        let ok = SourceStats { ipackets: 10, ..Default::default() };
        let lossy = SourceStats { ipackets: 5, imissed: 3, rx_nombuf: 1, ..Default::default() };
        let t = render(&summary(vec![ok, lossy]));
        assert!(t.starts_with("10 frames: 7 RoCEv2, 2 other, 1 malformed\n"), "{t}");
        assert!(t.contains("  malformed udp_truncated: 1\n"), "{t}");
        assert!(t.contains("  source 0: 10 frames received, no receive drops\n"), "{t}");
        assert!(
            t.contains("  source 1: 5 frames received, RECEIVE DROPS: imissed 3 ierrors 0 rx_nombuf 1\n"),
            "{t}"
        );
        assert!(t.ends_with("no RoCEv2 flows\n"), "{t}");
    }
}
