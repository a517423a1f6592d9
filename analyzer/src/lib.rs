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
        $crate::note_line(format!($($arg)*));
    }};
}

/// Notes held while the dashboard has the terminal (written over its screen they would
/// garble it), written when it lets go; `None` when notes go straight to stderr.
static HELD_NOTES: std::sync::Mutex<Option<Vec<String>>> = std::sync::Mutex::new(None);
/// Notes held at most (each is told once; beyond, they are counted in one last line).
const MAX_HELD_NOTES: usize = 256;

/// Writes one note on stderr, or holds it while the dashboard has the terminal. Never on
/// the per-packet path: notes are told once, at start-up or as a bound is first reached.
pub fn note_line(line: String) {
    use std::io::Write as _;
    let mut held = HELD_NOTES.lock().unwrap_or_else(|e| e.into_inner());
    match held.as_mut() {
        Some(v) if v.len() < MAX_HELD_NOTES => v.push(line),
        Some(v) => {
            if v.len() == MAX_HELD_NOTES {
                v.push("roceprobe: more notes were not kept while the dashboard was on".to_owned());
            }
        }
        None => {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
    }
}

/// From now on notes wait for [`release_notes`] (the dashboard takes the terminal).
pub fn hold_notes() {
    let mut held = HELD_NOTES.lock().unwrap_or_else(|e| e.into_inner());
    held.get_or_insert_with(Vec::new);
}

/// Writes the notes held, in order, and sends notes to stderr again (the dashboard gave the
/// terminal back). Does nothing when none are held.
pub fn release_notes() {
    use std::io::Write as _;
    let held = HELD_NOTES.lock().unwrap_or_else(|e| e.into_inner()).take();
    let mut err = std::io::stderr().lock();
    for line in held.into_iter().flatten() {
        let _ = writeln!(err, "{line}");
    }
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
