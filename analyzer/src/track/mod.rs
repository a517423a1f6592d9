//! Track: per-flow state owned by one worker. Fed decoded packets, it keeps counters for
//! the current interval and hands them over as a snapshot when the interval closes.

pub mod clock;
pub mod flow;
pub mod nvme;
pub mod vantage;

pub use flow::{FlowKey, FlowTable};
pub use vantage::{Selector, Vantage, VantageMap};
