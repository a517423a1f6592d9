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
