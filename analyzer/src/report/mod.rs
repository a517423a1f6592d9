//! Report: what the operator reads. The summary JSON of SPEC §5 and the per-flow table
//! printed at exit.

pub mod summary;
pub mod table;

pub use summary::Summary;
