//! Every default the command line can change, each once, by the option that sets it. The
//! lower layers read them from here; `cli.rs` shows them in `--help`. A duration is given
//! as the option's text and in nanoseconds (a unit test keeps the two equal).

/// `--interval`: reports close every second of packet time.
pub const INTERVAL: &str = "1s";
pub const INTERVAL_NS: u64 = 1_000_000_000;

/// `--flow-idle`: a transmission ends after 1 ms without a packet. RDMA bursts (a
/// collective step, a checkpoint shard) keep a QP busy with gaps of microseconds between
/// messages; steps of a training job are milliseconds apart.
pub const FLOW_IDLE: &str = "1ms";
pub const FLOW_IDLE_NS: u64 = 1_000_000;

/// `--min-transmission-packets`: a transmission of fewer packets (and no NAK) is counted in
/// its flow's interval (flows.csv, the summary), not written to transmissions.csv. With n
/// packets its rate is n packets' bytes over the n − 1 gaps between them, n/(n − 1) times a
/// steady sender's: twice it for two packets, half as much again for three, within a third
/// from four. And on a fabric whose QPs each send a message every few milliseconds, short
/// runs of them fall within `--flow-idle` of each other by chance, a row each
/// (docs/METRICS.md, "Short transmissions").
pub const MIN_TRANSMISSION_PACKETS: u64 = 4;

/// `--flow-expire`: a flow without a packet for this long (packet time) gives its slot to
/// a new flow when the table is full.
pub const FLOW_EXPIRE: &str = "60s";
pub const FLOW_EXPIRE_NS: u64 = 60_000_000_000;

/// `--reorder-window`: how long (packet time) frames wait for older mirror copies
/// (docs/METRICS.md, "Packet time order").
pub const REORDER_WINDOW: &str = "1ms";
pub const REORDER_WINDOW_NS: u64 = 1_000_000;

/// `--duplicate-window`: how long after a flow's packet its mirror's second copy (TTL one
/// less, from the other mirrored port of a routed hop) may come: a switch's latency
/// including its queueing.
pub const DUPLICATE_WINDOW: &str = "1ms";
pub const DUPLICATE_WINDOW_NS: u64 = 1_000_000;

/// `--io-timeout`: an NVMe I/O without its completion after this long has timed out.
pub const IO_TIMEOUT: &str = "1s";
pub const IO_TIMEOUT_NS: u64 = 1_000_000_000;

/// `--max-flows`: flows tracked at once per worker, about 104 MiB allocated up front with
/// the indexes (`FlowTable::allocated_bytes`; pages are touched as flows arrive).
pub const MAX_FLOWS: usize = 65_536;

/// `--max-announced-flows`: flows CM announced (two per connection) that have not sent
/// their first packet yet.
pub const MAX_ANNOUNCED_FLOWS: usize = 8_192;

/// `--max-ios`: NVMe I/Os awaiting their completion per worker.
pub const MAX_IOS: usize = 65_536;

/// `--max-latency-series`: latency series per worker, each an interval's samples on the
/// worker (8 KiB: 512 values and 256 histogram buckets, grown once if more) and a
/// whole-run histogram on the stats side (1 ns to 1 h at 3 significant digits, 66 KiB).
pub const MAX_LATENCY_SERIES: usize = 1024;

/// `--max-pending-commands`: NVMe commands awaiting their completion per worker.
pub const MAX_PENDING_COMMANDS: usize = 65_536;

/// `--max-cm-requests`: CM ConnectRequests remembered until their reply, per worker.
pub const MAX_CM_REQUESTS: usize = 1024;

/// `--step-gap`: a job's step ends when none of its flows sent for 2 ms. Within a
/// collective step flows pause for microseconds between chunks (and a transmission ends
/// after 1 ms idle); between steps ranks compute for milliseconds.
pub const STEP_GAP: &str = "2ms";
pub const STEP_GAP_NS: u64 = 2_000_000;

/// `--max-jobs`: collective jobs with run totals (the summary's `jobs`, the dashboard's
/// and Prometheus' per-job figures). A job takes a few hundred bytes and its step
/// durations: 8 bytes a step up to 1,024 steps, then a histogram of about 135 KiB; 1,024
/// jobs take at most about 150 MB. A cluster's training jobs are tens to hundreds.
pub const MAX_JOBS: usize = 1024;

/// `--slow-ios`: the slowest NVMe I/Os listed per interval (slow_ios.csv) and kept for the
/// run (the summary).
pub const SLOW_IOS: usize = 10;

/// `--top`: flow rows in each of the exit report's flow tables.
pub const TOP: usize = 20;

/// `--prometheus-max-flows`: flows exported to Prometheus (those with the most bytes).
pub const PROMETHEUS_MAX_FLOWS: usize = 1000;

/// `--csv-retain`: the CSV reports in `--csv-dir` (current and rotated files, compressed or
/// not) take at most 1 GiB; the oldest rotated files are removed first.
pub const CSV_RETAIN: &str = "1G";
pub const CSV_RETAIN_BYTES: u64 = 1 << 30;

/// `--csv-retain`'s least value: room for the reports' current files, eight or nine with
/// events.csv (their headers alone take 1.4 KiB).
pub const CSV_RETAIN_MIN_BYTES: u64 = 16 << 10;

/// `--csv-rotate-size`: a CSV file is rotated before it grows past 64 MiB, or past a
/// sixteenth of `--csv-retain` when that is smaller (so that the reports' current files take
/// about half of it: 8/16, or 9/16 with events.csv). Given, it may be at most an eighth of
/// `--csv-retain` (a ninth with `--evidence-dir`).
pub const CSV_ROTATE_SIZE_MAX: &str = "64M";
pub const CSV_ROTATE_SIZE_MAX_BYTES: u64 = 64 << 20;

/// The default `--csv-rotate-size` for a `--csv-retain` of `retain` bytes.
pub const fn csv_rotate_size(retain: u64) -> u64 {
    let share = retain / 16;
    if share < CSV_ROTATE_SIZE_MAX_BYTES {
        share
    } else {
        CSV_ROTATE_SIZE_MAX_BYTES
    }
}

/// `--csv-rotate-age`: a CSV file is rotated once its first row is an hour of packet time
/// old.
pub const CSV_ROTATE_AGE: &str = "1h";
pub const CSV_ROTATE_AGE_NS: u64 = 3_600_000_000_000;

/// `--csv-compress`: rotated CSV files are compressed with zstd (level 3).
pub const CSV_COMPRESS: &str = "zstd";

/// `--max-frame`: a 4 KiB RoCE frame (4,158 bytes) inside ERSPAN III, and 9 KiB jumbo
/// frames (9,216 bytes, the largest most switches forward).
pub const MAX_FRAME: u32 = 9216;

/// `--evidence-before`: packets of each flow of an event kept from before it: enough to
/// show the traffic that led to a loss (a few messages of a QP).
pub const EVIDENCE_BEFORE: u32 = 16;

/// `--evidence-after`: packets of the event's flows after it: a go-back-N retransmission
/// and the ACKs that end it, a few CNPs' effect on the rate.
pub const EVIDENCE_AFTER: &str = "32";
pub const EVIDENCE_AFTER_PACKETS: u32 = 32;

/// `--evidence-snaplen`: every header up to the NVMe capsule's command (ERSPAN III outer
/// headers, an inner VLAN tag, IPv6, UDP, BTH, RETH, a 64-byte SQE) fits in 256 bytes.
pub const EVIDENCE_SNAPLEN: u32 = 256;

/// `--evidence-slow-io`: an NVMe I/O slower than this is an event (flash reads take a
/// hundred microseconds; 10 ms is a stall an operator asks about).
pub const EVIDENCE_SLOW_IO: &str = "10ms";
pub const EVIDENCE_SLOW_IO_NS: u64 = 10_000_000;

/// `--evidence-max-per-minute`: files per event kind and minute of packet time.
pub const EVIDENCE_MAX_PER_MINUTE: u32 = 10;

/// `--evidence-max-bytes`: the evidence files take at most this much disk.
pub const EVIDENCE_MAX_BYTES: &str = "1G";
pub const EVIDENCE_MAX_BYTES_N: u64 = 1 << 30;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_duration_is_its_text() {
        for (text, ns) in [
            (INTERVAL, INTERVAL_NS),
            (FLOW_IDLE, FLOW_IDLE_NS),
            (FLOW_EXPIRE, FLOW_EXPIRE_NS),
            (REORDER_WINDOW, REORDER_WINDOW_NS),
            (DUPLICATE_WINDOW, DUPLICATE_WINDOW_NS),
            (IO_TIMEOUT, IO_TIMEOUT_NS),
            (STEP_GAP, STEP_GAP_NS),
            (EVIDENCE_SLOW_IO, EVIDENCE_SLOW_IO_NS),
            (CSV_ROTATE_AGE, CSV_ROTATE_AGE_NS),
        ] {
            assert_eq!(crate::cli::parse_duration(text).unwrap().as_nanos() as u64, ns, "{text}");
        }
    }

    #[test]
    fn each_size_is_its_text() {
        for (text, bytes) in [
            (CSV_RETAIN, CSV_RETAIN_BYTES),
            (EVIDENCE_MAX_BYTES, EVIDENCE_MAX_BYTES_N),
            (CSV_ROTATE_SIZE_MAX, CSV_ROTATE_SIZE_MAX_BYTES),
        ] {
            assert_eq!(crate::cli::parse_size(text), Ok(bytes), "{text}");
        }
        assert_eq!(EVIDENCE_AFTER.parse::<u32>(), Ok(EVIDENCE_AFTER_PACKETS));
        assert_eq!(csv_rotate_size(CSV_RETAIN_BYTES), 64 << 20);
        assert_eq!(csv_rotate_size(8 << 20), 512 << 10);
        assert_eq!(
            crate::report::csv::Compression::parse(CSV_COMPRESS),
            Some(crate::report::csv::Compression::Zstd)
        );
    }
}
