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

/// `--flow-expire`: a flow without a packet for this long (packet time) gives its slot to
/// a new flow when the table is full.
pub const FLOW_EXPIRE: &str = "60s";
pub const FLOW_EXPIRE_NS: u64 = 60_000_000_000;

/// `--reorder-window`: how long (packet time) frames wait for older mirror copies
/// (docs/METRICS.md, "Packet time order").
pub const REORDER_WINDOW: &str = "1ms";
pub const REORDER_WINDOW_NS: u64 = 1_000_000;

/// `--io-timeout`: an NVMe I/O without its completion after this long has timed out.
pub const IO_TIMEOUT: &str = "1s";
pub const IO_TIMEOUT_NS: u64 = 1_000_000_000;

/// `--max-flows`: flows tracked at once per worker, about 94 MiB allocated up front with
/// the indexes (`FlowTable::allocated_bytes`; pages are touched as flows arrive).
pub const MAX_FLOWS: usize = 65_536;

/// `--max-announced-flows`: flows CM announced (two per connection) that have not sent
/// their first packet yet.
pub const MAX_ANNOUNCED_FLOWS: usize = 8_192;

/// `--max-ios`: NVMe I/Os awaiting their completion per worker.
pub const MAX_IOS: usize = 65_536;

/// `--max-latency-series`: latency series per worker, each a ~135 KiB histogram (1 ns to
/// 1 h at 3 significant digits, 32-bit counts).
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

/// `--slow-ios`: the slowest NVMe I/Os listed per interval (slow_ios.csv) and kept for the
/// run (the summary).
pub const SLOW_IOS: usize = 10;

/// `--top`: flow rows in each of the exit report's flow tables.
pub const TOP: usize = 20;

/// `--prometheus-max-flows`: flows exported to Prometheus (those with the most bytes).
pub const PROMETHEUS_MAX_FLOWS: usize = 1000;

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
            (IO_TIMEOUT, IO_TIMEOUT_NS),
            (STEP_GAP, STEP_GAP_NS),
        ] {
            assert_eq!(crate::cli::parse_duration(text).unwrap().as_nanos() as u64, ns, "{text}");
        }
    }
}
