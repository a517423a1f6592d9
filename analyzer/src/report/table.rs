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
    for (kind, n) in s.decode_errors.iter().filter(|(_, n)| **n > 0) {
        let _ = writeln!(out, "  malformed {kind}: {n}");
    }
    for (id, p) in &s.ports {
        if p.imissed + p.ierrors + p.rx_nombuf > 0 {
            let _ = writeln!(
                out,
                "  source {id}: RECEIVE DROPS imissed {} ierrors {} rx_nombuf {}",
                p.imissed, p.ierrors, p.rx_nombuf
            );
        }
    }
    if s.flows.is_empty() {
        let _ = writeln!(out, "no RoCEv2 flows");
        return out;
    }
    let rows: Vec<[String; 9]> = s
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
                f.packets.to_string(),
                f.bytes.to_string(),
                f.payload_bytes.to_string(),
                ops,
            ]
        })
        .collect();
    let header =
        ["vantage", "src_ip", "dst_ip", "dst_qpn", "transport", "packets", "bytes", "payload_bytes", "opcodes"];
    let mut width = header.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.len());
        }
    }
    let numeric = [false, false, false, false, false, true, true, true, false];
    let line = |cells: &[&str]| {
        let mut l = String::new();
        for (i, c) in cells.iter().enumerate() {
            if i == cells.len() - 1 {
                l.push_str(c);
            } else if numeric[i] {
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
