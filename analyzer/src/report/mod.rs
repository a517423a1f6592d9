//! Report: what the operator reads. The CSV files and the summary JSON (docs/CSV.md, docs/METRICS.md), the
//! per-flow table printed at exit, and the time format they share.

pub mod csv;
pub mod csv_files;
pub mod dashboard;
pub mod evidence;
pub mod plot;
pub mod prometheus;
pub mod summary;
pub mod table;
pub mod text;
pub mod time;

pub use summary::Summary;

/// Whether this process can make files in folder `dir` (one is made there and removed),
/// or why not.
pub fn can_write_in(dir: &std::path::Path) -> std::io::Result<()> {
    let probe = dir.join(".roceprobe-write-test");
    let made = std::fs::write(&probe, b"");
    let _ = std::fs::remove_file(&probe);
    made
}

/// A live output (the dashboard, the Prometheus page): the stats side publishes to it once
/// per interval what the run has measured so far. It must not block: the workers' reports
/// queue behind it.
pub trait Subscriber: Send {
    /// The run so far, up to packet time `now_ns`.
    fn update(&mut self, summary: Summary, now_ns: Option<u64>);
}

/// Where the stats side's reports go: the CSV files, and the live outputs that subscribed.
#[derive(Default)]
pub struct Reports {
    pub csv: Option<csv::CsvWriter>,
    pub live: Vec<Box<dyn Subscriber>>,
}

impl Reports {
    /// Gives every live output the summary (a copy to each but the last).
    pub fn publish(&mut self, summary: Summary, now_ns: Option<u64>) {
        if let Some((last, rest)) = self.live.split_last_mut() {
            for s in rest {
                s.update(summary.clone(), now_ns);
            }
            last.update(summary, now_ns);
        }
    }
}
