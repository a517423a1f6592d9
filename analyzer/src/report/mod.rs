//! Report: what the operator reads. The CSV files and the summary JSON (docs/CSV.md, docs/METRICS.md), the
//! per-flow table printed at exit, and the time format they share.

pub mod csv;
pub mod dashboard;
pub mod plot;
pub mod prometheus;
pub mod summary;
pub mod table;
pub mod time;

pub use summary::Summary;
