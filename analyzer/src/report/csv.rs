//! Periodic CSV reports in `--csv-dir` (SPEC §5): `flows.csv` (one row per flow active in
//! an interval, deltas for the interval), `transmissions.csv` (one row per ended
//! transmission) and `latency.csv` (one row per latency series with samples in an interval). RFC 4180: CRLF line ends, a header row, fields quoted when they hold a
//! comma, quote or line break. Times are RFC 3339 UTC with nanoseconds, rates Gbit/s.
//! The contract's columns come first, in the SPEC's order; more are only appended.

use super::time::rfc3339_nanos;
use crate::capture::SourceStats;
use crate::metrics::latency::stats;
use crate::metrics::totals::{fabric_loss, other_vantage};
use crate::metrics::IntervalSnapshot;
use crate::track::{FlowCounts, FlowKey, Transmission};
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub const FLOWS_HEADER: &str = "interval_start,interval_end,vantage,src_ip,dst_ip,dst_qpn,transport,packets,bytes,payload_bytes,retx_packets,retx_bytes,gap_psns,nak_seq,nak_rnr,nak_other,cnp,ecn_ce,throughput_gbps";
/// Appended after the contract's columns.
pub const FLOWS_EXTRA: &str = "fabric_loss_psns,messages,retx_episodes,out_of_window,cnp_unattributed,icrc_errors,nvme_commands,nvme_completions";
pub const TRANSMISSIONS_HEADER: &str = "start,end,vantage,src_ip,dst_ip,dst_qpn,transport,duration_s,packets,bytes,payload_bytes,retx_packets,retx_bytes,retx_rate,gap_psns,nak_seq,nak_rnr,cnp,ecn_ce,effective_gbps,raw_gbps";
pub const TRANSMISSIONS_EXTRA: &str = "messages,nak_other,icrc_errors";
pub const PORTS_HEADER: &str = "interval_start,interval_end,source,ipackets,ibytes,imissed,ierrors,rx_nombuf";
pub const LATENCY_HEADER: &str =
    "interval_start,interval_end,initiator_ip,target_ip,op,segment,count,min_us,mean_us,p50_us,p90_us,p99_us,p999_us,max_us";

/// The link speed that turns one packet into time, for a transmission's minimum duration.
pub const PACKET_TIME_GBPS: u64 = 100;

/// A transmission's duration D (SPEC §4): last − first packet time, and at least one packet
/// time (its average frame at 100 Gb/s), so a one-packet burst has a finite rate.
pub fn duration_ns(start_ns: u64, end_ns: u64, c: &FlowCounts) -> u64 {
    let packet_time = (c.bytes * 8).div_ceil(c.packets.max(1) * PACKET_TIME_GBPS).max(1);
    end_ns.saturating_sub(start_ns).max(packet_time)
}

/// Bits per nanosecond is Gbit/s.
pub fn gbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        (bytes as f64 * 8.0) / ns as f64
    }
}

/// Effective throughput: payload not counting retransmitted payload, over D.
pub fn effective_gbps(c: &FlowCounts, d_ns: u64) -> f64 {
    gbps(c.payload_bytes.saturating_sub(c.retx_bytes), d_ns)
}

fn field(out: &mut String, s: &str) {
    if s.contains([',', '"', '\r', '\n']) {
        out.push('"');
        out.push_str(&s.replace('"', "\"\""));
        out.push('"');
    } else {
        out.push_str(s);
    }
}

fn key_fields(out: &mut String, k: &FlowKey, transport: &str) {
    for s in [k.vantage.as_str(), &k.src.to_string(), &k.dst.to_string(), &k.dst_qpn.to_string(), transport] {
        field(out, s);
        out.push(',');
    }
}

pub struct CsvWriter {
    dir: PathBuf,
    flows: BufWriter<File>,
    transmissions: BufWriter<File>,
    latency: BufWriter<File>,
    ports: BufWriter<File>,
    line: String,
}

impl CsvWriter {
    /// Creates the directory if needed and both files with their headers (replacing files
    /// of an earlier run), so an unwritable place is an error before any work starts.
    pub fn create(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--csv-dir: cannot create {}", dir.display()))?;
        let open = |name: &str, header: &str| -> Result<BufWriter<File>> {
            let path = dir.join(name);
            let f =
                File::create(&path).with_context(|| format!("--csv-dir: cannot write {}", path.display()))?;
            let mut w = BufWriter::new(f);
            write!(w, "{header}\r\n")
                .with_context(|| format!("--csv-dir: cannot write {}", path.display()))?;
            Ok(w)
        };
        Ok(Self {
            dir: dir.to_owned(),
            flows: open("flows.csv", &format!("{FLOWS_HEADER},{FLOWS_EXTRA}"))?,
            transmissions: open(
                "transmissions.csv",
                &format!("{TRANSMISSIONS_HEADER},{TRANSMISSIONS_EXTRA}"),
            )?,
            latency: open("latency.csv", LATENCY_HEADER)?,
            ports: open("ports.csv", PORTS_HEADER)?,
            line: String::with_capacity(512),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// One row per flow active in the interval. Fabric loss compares the flow's gaps with
    /// the same flow's at the other vantage in the same interval (empty with one vantage).
    pub fn write_interval(&mut self, s: &IntervalSnapshot, two_vantages: bool) -> Result<()> {
        let gaps: HashMap<FlowKey, u64> = s.flows.iter().map(|d| (d.key, d.counts.gap_psns)).collect();
        let (start, end) = (rfc3339_nanos(s.start_ns), rfc3339_nanos(s.end_ns));
        let mut rows: Vec<_> = s.flows.iter().collect();
        rows.sort_by_key(|d| d.key);
        for d in rows {
            let c = &d.counts;
            let l = &mut self.line;
            l.clear();
            let _ = write!(l, "{start},{end},");
            key_fields(l, &d.key, d.transport.as_str());
            let _ = write!(
                l,
                "{},{},{},{},{},{},{},{},{},{},{},{:.6},",
                c.packets,
                c.bytes,
                c.payload_bytes,
                c.retx_packets,
                c.retx_bytes,
                c.gap_psns,
                c.nak_seq,
                c.nak_rnr,
                c.nak_other,
                c.cnp,
                c.ecn_ce,
                gbps(c.bytes, s.end_ns - s.start_ns)
            );
            let other = two_vantages.then(|| gaps.get(&other_vantage(&d.key)).copied().unwrap_or(0));
            if let Some(f) = fabric_loss(c.gap_psns, other) {
                let _ = write!(l, "{f}");
            }
            let _ = write!(
                l,
                ",{},{},{},{},{},{},{}\r\n",
                c.messages,
                c.retx_episodes,
                c.out_of_window,
                c.cnp_unattributed,
                c.icrc_errors,
                c.nvme_commands,
                c.nvme_completions
            );
            self.flows.write_all(l.as_bytes())?;
        }
        self.flows.flush()?;
        let mut series: Vec<_> = s.latency.iter().collect();
        series.sort_by_key(|(k, _)| *k);
        for (k, h) in series {
            let st = stats(h);
            let l = &mut self.line;
            l.clear();
            let _ = write!(l, "{start},{end},");
            for f in
                [k.initiator.to_string().as_str(), &k.target.to_string(), k.op.as_str(), k.segment.as_str()]
            {
                field(l, f);
                l.push(',');
            }
            let _ = write!(
                l,
                "{},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3}\r\n",
                st.count, st.min_us, st.mean_us, st.p50_us, st.p90_us, st.p99_us, st.p999_us, st.max_us
            );
            self.latency.write_all(l.as_bytes())?;
        }
        self.latency.flush()?;
        Ok(())
    }

    /// Receive statistics of each source (DPDK port id / input file index) over an interval.
    pub fn write_ports(&mut self, start_ns: u64, end_ns: u64, sources: &[SourceStats]) -> Result<()> {
        let (start, end) = (rfc3339_nanos(start_ns), rfc3339_nanos(end_ns));
        for (i, s) in sources.iter().enumerate() {
            write!(
                self.ports,
                "{start},{end},{i},{},{},{},{},{}\r\n",
                s.ipackets, s.ibytes, s.imissed, s.ierrors, s.rx_nombuf
            )?;
        }
        self.ports.flush()?;
        Ok(())
    }

    pub fn write_transmissions(&mut self, ts: &[Transmission]) -> Result<()> {
        for t in ts {
            let c = &t.counts;
            let d = duration_ns(t.start_ns, t.end_ns, c);
            let l = &mut self.line;
            l.clear();
            let _ = write!(l, "{},{},", rfc3339_nanos(t.start_ns), rfc3339_nanos(t.end_ns));
            key_fields(l, &t.key, t.transport.as_str());
            let retx_rate = if c.packets == 0 { 0.0 } else { c.retx_packets as f64 / c.packets as f64 };
            let _ = write!(
                l,
                "{}.{:09},{},{},{},{},{},{:.6},{},{},{},{},{},{:.6},{:.6},{},{},{}\r\n",
                d / 1_000_000_000,
                d % 1_000_000_000,
                c.packets,
                c.bytes,
                c.payload_bytes,
                c.retx_packets,
                c.retx_bytes,
                retx_rate,
                c.gap_psns,
                c.nak_seq,
                c.nak_rnr,
                c.cnp,
                c.ecn_ce,
                effective_gbps(c, d),
                gbps(c.bytes, d),
                c.messages,
                c.nak_other,
                c.icrc_errors
            );
            self.transmissions.write_all(l.as_bytes())?;
        }
        self.transmissions.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_rates() {
        let c = FlowCounts { packets: 1, bytes: 1250, payload_bytes: 1000, ..Default::default() };
        // One packet: at least one packet time, 1250 B at 100 Gb/s = 100 ns.
        assert_eq!(duration_ns(5, 5, &c), 100);
        assert!((gbps(1250, 100) - 100.0).abs() < 1e-9);
        let c = FlowCounts {
            packets: 10,
            bytes: 10_000,
            payload_bytes: 8_000,
            retx_bytes: 2_000,
            ..Default::default()
        };
        assert_eq!(duration_ns(0, 1_000_000, &c), 1_000_000);
        assert!((effective_gbps(&c, 1_000_000) - 0.048).abs() < 1e-12);
    }

    #[test]
    fn headers_are_the_contract() {
        assert_eq!(FLOWS_HEADER.split(',').count(), 19);
        assert_eq!(TRANSMISSIONS_HEADER.split(',').count(), 21);
        let mut s = String::new();
        field(&mut s, "a,\"b\"");
        assert_eq!(s, "\"a,\"\"b\"\"\"");
    }
}
