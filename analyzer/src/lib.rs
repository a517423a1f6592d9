//! roceprobe: a line-rate RoCEv2 telemetry probe.
//!
//! The modules follow the packet: [`capture`] (DPDK ports or capture files) → [`wire`]
//! (decoding) → [`track`] (per-flow state) → [`metrics`] (interval snapshots, totals) →
//! [`report`] (summary, tables). [`runtime`] wires them into one pipeline and [`cli`] is the
//! command line.

/// Writes a line to standard error as `eprintln!` does, but a standard error that cannot
/// be written (closed by the reader of a pipe, `2>/dev/full`) loses the line, never the
/// run: `eprintln!` panics there, after the outputs were opened and before they were
/// written.
#[macro_export]
macro_rules! note {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

pub mod capture;
pub mod cli;
pub mod defaults;
/// The bodies of the fuzz targets (feature `fuzzing`: not in the probe).
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
pub mod metrics;
pub mod report;
pub mod runtime;
pub mod track;
pub mod wire;

/// Path of one of the committed real captures (unit tests).
#[cfg(test)]
pub(crate) fn test_capture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcap-fixtures/captures").join(name)
}
