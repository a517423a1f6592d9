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

/// Creates (or empties) a file the probe names in a directory it writes into (the CSV
/// reports, the evidence files), refusing whatever is not a regular file there: a symbolic
/// link would send the output wherever it points (a probe often runs as root), a FIFO would
/// block the run, a device would take the rows. With `new`, only a file not there yet.
pub fn create_regular(path: &std::path::Path, new: bool) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    refuse_irregular(path)?;
    let mut open = std::fs::OpenOptions::new();
    open.write(true);
    if new {
        open.create_new(true);
    } else {
        open.create(true);
    }
    // The same checks where they cannot race: no link followed, no wait on a FIFO.
    let f = open.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    if !f.metadata()?.is_file() {
        return Err(irregular("a FIFO, socket, device or directory"));
    }
    // Written as any file is: the flag was for the open only.
    crate::capture::dpdk::set_blocking(&f)?;
    f.set_len(0)?;
    Ok(f)
}

fn irregular(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("it is {what}, not a regular file"))
}

/// [`create_regular`]'s refusal, without creating anything: checked for every file of a
/// set before the first is made, so that a refused name leaves the others as they were.
pub fn refuse_irregular(path: &std::path::Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(irregular("a symbolic link")),
        Ok(m) if !m.is_file() => Err(irregular("a FIFO, socket, device or directory")),
        _ => Ok(()),
    }
}

/// An existing file the probe would empty and write (a report of an earlier run), opened
/// for writing without emptying it: a file this process may not write (its permissions, an
/// immutable file, a read-only mount) is refused before any of a set is emptied. Nothing
/// there is fine.
pub fn check_writable(path: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    refuse_irregular(path)?;
    match std::fs::OpenOptions::new().write(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)
    {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r.map(drop),
    }
}

/// The lock that keeps two runs from writing their reports into one folder at once (an
/// advisory `flock` on the folder, held until the returned lock is dropped): `None` if
/// another holds it.
pub fn lock_dir(dir: &std::path::Path) -> std::io::Result<Option<DirLock>> {
    let f = std::fs::File::open(dir)?;
    Ok(crate::capture::dpdk::try_lock(&f)?.then_some(DirLock(f)))
}

/// A folder locked by [`lock_dir`]. Released when dropped, explicitly: a process forked
/// meanwhile (to run a command) holds a copy of the descriptor until it execs, and closing
/// this one alone would leave the folder locked until then.
pub struct DirLock(std::fs::File);

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = crate::capture::dpdk::unlock(&self.0);
    }
}

/// Whether `path` is a symbolic link to nothing (creating a folder there fails with "File
/// exists", which names no problem).
pub fn dangling_link(path: &std::path::Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink()) && !path.exists()
}

/// The name of the probe's own beside `path`, where a file is written whole before it is
/// renamed into place: this process's own (two runs writing the same `--summary` each
/// write their own file whole, and the one that ends last puts its own in place).
pub fn part_path(path: &std::path::Path) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.roceprobe-part", std::process::id()))
}

/// A live output (the dashboard, the Prometheus page): the stats side publishes to it once
/// per interval what the run has measured so far. It must not block: the workers' reports
/// queue behind it.
pub trait Subscriber: Send {
    /// The run so far, as the interval from packet time `interval.0` to `interval.1`
    /// closes.
    fn update(&mut self, summary: Summary, interval: (u64, u64));
}

/// Where the stats side's reports go: the CSV files, and the live outputs that subscribed.
#[derive(Default)]
pub struct Reports {
    pub csv: Option<csv::CsvWriter>,
    pub live: Vec<Box<dyn Subscriber>>,
}

impl Reports {
    /// Gives every live output the summary (a copy to each but the last).
    pub fn publish(&mut self, summary: Summary, interval: (u64, u64)) {
        if let Some((last, rest)) = self.live.split_last_mut() {
            for s in rest {
                s.update(summary.clone(), interval);
            }
            last.update(summary, interval);
        }
    }
}
