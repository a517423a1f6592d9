//! Metrics: what the worker hands to the stats side every interval ([`IntervalSnapshot`]),
//! the latency histograms ([`latency`]), and the stats side's whole-run totals built from
//! those snapshots ([`Totals`]).

pub mod evidence;
pub mod latency;
pub mod snapshot;
pub mod steps;
pub mod totals;

pub use snapshot::{GlobalCounters, IntervalSnapshot};
pub use totals::{FlowTotals, Totals};

/// The link speed that turns one packet into time, for a burst's shortest duration.
pub const PACKET_TIME_GBPS: u64 = 100;

/// One packet's time: the average frame of `packets` frames of `bytes` in all, at
/// [`PACKET_TIME_GBPS`], at least 1 ns. The shortest a transmission (or a flow's part of a
/// collective step) lasts, so that a one-packet burst has a finite rate.
pub fn packet_time_ns(bytes: u64, packets: u64) -> u64 {
    (bytes * 8).div_ceil(packets.max(1) * PACKET_TIME_GBPS).max(1)
}
