//! The report path at fabric scale: fabric-like traffic (16,384 RC connections, 32,768 QPs,
//! each QP's packets milliseconds apart, so that under the default `--flow-idle` every
//! packet ends a transmission) analysed as fast as the worker goes, with default options
//! and the CSV reports on, the worker never waiting for the stats side (as in a live
//! capture): no report is dropped, and the reports hold every packet.

mod common;
use common::*;
use roceprobe::capture::pcap::Replay;
use roceprobe::report::csv::{CsvWriter, Rotation};
use roceprobe::report::Reports;
use roceprobe::runtime::{run, PipelineConfig};
use roceprobe::track::VantageMap;
use std::sync::atomic::AtomicBool;

const CONNECTIONS: u32 = 16_384;
const FRAMES: usize = 262_144;

#[test]
fn at_full_speed_with_default_options_no_report_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let (pcap, csv) = (dir.path().join("qps.pcap"), dir.path().join("csv"));
    // 500 ns apart: 131 ms of traffic, each QP's packets about 16 ms apart.
    write_many_qps(&pcap, CONNECTIONS, FRAMES, 500);
    let cfg = PipelineConfig { never_wait: true, ..PipelineConfig::new(VantageMap::default()) };
    let reports =
        Reports { csv: Some(CsvWriter::create(&csv, Rotation::default()).unwrap()), live: Vec::new() };
    let mut capture = Replay::open(&[pcap]).unwrap();
    let r = run(&mut capture, &cfg, &AtomicBool::new(false), reports).unwrap();
    let t = &r.totals;
    assert_eq!((t.dropped_snapshots, t.dropped_batches), (0, 0), "reports dropped");
    assert_eq!(t.counters.packets, FRAMES as u64);
    assert_eq!(r.csv.map(|h| (h.failed_writes, h.rows_lost)), Some((0, 0)));

    // flows.csv holds every packet, and every packet is in one transmission: a row of
    // transmissions.csv or, for short ones (nearly all here), its flow's count.
    let flows = read_csv(&csv.join("flows.csv"));
    let sum = |rows: &[Row], c: &str| rows.iter().map(|r| r[c].parse::<u64>().unwrap()).sum::<u64>();
    assert_eq!(sum(&flows, "packets"), FRAMES as u64);
    let tx = read_csv(&csv.join("transmissions.csv"));
    assert_eq!(sum(&tx, "packets") + sum(&flows, "short_transmission_packets"), FRAMES as u64);
    assert!(sum(&flows, "short_transmissions") > FRAMES as u64 * 9 / 10, "nearly every packet alone");
    let ended: u64 = t.flows.values().map(|f| f.transmissions).sum();
    assert_eq!(ended, tx.len() as u64 + sum(&flows, "short_transmissions"));
    // One row per flow and interval: at most two intervals (131 ms may cross a boundary).
    assert!(flows.len() <= 2 * 2 * CONNECTIONS as usize, "{} rows", flows.len());
}
