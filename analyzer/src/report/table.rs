//! The per-flow table printed at exit.

use super::summary::Summary;
use crate::wire::bth::opcode_name;
use std::fmt::Write;

/// Renders the totals and one row per flow, aligned for a terminal.
pub fn render(s: &Summary) -> String {
    let mut out = String::new();
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
    let late = s.reorder.late_packets;
    if late.compute + late.storage + s.reorder.released_early > 0 {
        let _ = writeln!(
            out,
            "  out of time order: {} compute and {} storage packets came after the reorder window, {} frames released before it",
            late.compute, late.storage, s.reorder.released_early
        );
    }
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
    for (kind, n) in s.decode_errors.iter().filter(|(_, n)| **n > 0) {
        let _ = writeln!(out, "  malformed {kind}: {n}");
    }
    // A probe that silently loses packets gives wrong answers: receive drops always show.
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
    if s.flows.is_empty() {
        let _ = writeln!(out, "no RoCEv2 flows");
        return out;
    }
    let rows: Vec<[String; 14]> = s
        .flows
        .iter()
        .map(|f| {
            // Most frequent first; ties in opcode order (FIRST, MIDDLE, LAST).
            let mut ops: Vec<(u64, &str, u16)> = f
                .opcodes
                .iter()
                .map(|(op, n)| match op.parse::<u8>() {
                    Ok(op) => (*n, opcode_name(op), u16::from(op)),
                    Err(_) => (*n, "other", 256),
                })
                .collect();
            ops.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
            let ops = ops.iter().map(|(n, name, _)| format!("{name}:{n}")).collect::<Vec<_>>().join(" ");
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
                ops,
            ]
        })
        .collect();
    let header: [&str; 14] = [
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
    let mut width = header.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.len());
        }
    }
    // Counters (between the key columns and the opcodes) align right.
    let numeric = |i: usize| (5..header.len() - 1).contains(&i);
    let line = |cells: &[&str]| {
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
    };
    let _ = writeln!(out, "{}", line(&header));
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        let _ = writeln!(out, "{}", line(&cells));
    }
    out
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
