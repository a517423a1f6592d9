//! Track: per-flow state owned by one worker. Fed decoded packets ([`Analyzer`]), it keeps
//! each flow's counters, PSN analysis and transmissions, pairs the two directions of a QP,
//! recognises NVMe/RDMA capsules, follows I/Os and CM handshakes and ERSPAN switch clocks.

pub mod analyzer;
pub mod bounded;
pub mod clock;
pub mod counts;
pub mod evidence;
pub mod flow;
pub mod index;
pub mod io;
pub mod list;
pub mod memory;
pub mod nvme;
pub mod psn;
pub mod recent;
pub mod vantage;

pub use analyzer::{Analyzer, AnalyzerConfig, Seen};
pub use counts::{FlowCounts, ShortTransmissions};
pub use flow::{FlowKey, FlowTable, Transmission};
pub use vantage::{Selector, Vantage, VantageMap};
