//! The CSV reports on disk (docs/CSV.md, "Files, rotation, compression and retention"): the
//! `roceprobe-csv` thread that writes the rows the stats thread formatted, rotates a file
//! that grew too large or too old, compresses the rotated one and keeps the directory under
//! `--csv-retain`; and reading a report's files back, compressed or not.
//!
//! The stats thread never touches a file: it hands each batch of rows over a bounded
//! channel (waiting when the writer is that far behind) and takes an emptied buffer back
//! from a pool, so that in a steady state no interval allocates.

use super::csv::CsvHealth;
use super::time::rfc3339_nanos;
use anyhow::{bail, Context, Result};
use crossbeam_channel::{Receiver, Sender};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Batches of rows waiting for the writer thread; beyond this the stats thread waits.
pub(super) const QUEUE: usize = 64;
/// Emptied buffers waiting to be filled again: room for every batch in the queue and every
/// report's pending rows.
pub(super) const POOL: usize = QUEUE + 16;

/// What a rotated file becomes (`--csv-compress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum Compression {
    /// Stays `<report>-<time>.csv`.
    None,
    /// `<report>-<time>.csv.gz`.
    Gzip,
    /// `<report>-<time>.csv.zst` (level 3).
    #[default]
    Zstd,
}

impl Compression {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Self::None),
            "gzip" => Some(Self::Gzip),
            "zstd" => Some(Self::Zstd),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
        }
    }

    /// What follows `.csv` in a compressed file's name.
    fn suffix(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Gzip => ".gz",
            Self::Zstd => ".zst",
        }
    }
}

/// When a CSV file is closed and a new one started (`--csv-rotate-size`, `--csv-rotate-age`),
/// what the closed one becomes (`--csv-compress`) and how much the directory keeps
/// (`--csv-retain`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Rotation {
    /// A file that would grow past this many bytes is rotated first (a file holds at least
    /// one write, however large).
    pub max_bytes: Option<u64>,
    /// A file whose first row is this much packet time older than the rows to come is
    /// rotated first.
    pub max_age_ns: Option<u64>,
    /// How a rotated file is compressed.
    pub compression: Compression,
    /// The report files in the directory (current and rotated, of any report) take at most
    /// this many bytes: the oldest rotated files are removed to make room. None: no bound.
    pub retain_bytes: Option<u64>,
}

/// A size as the options take it: `64M`, `1G`, `512K`, or bytes.
pub fn size_text(bytes: u64) -> String {
    for (unit, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if bytes >= 1 << shift && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// A duration as the options take it: `1h`, `10m`, `30s`, `250ms`, ...
pub fn duration_text(ns: u64) -> String {
    for (unit, per) in [
        ("h", 3_600_000_000_000u64),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns >= per && ns.is_multiple_of(per) {
            return format!("{}{unit}", ns / per);
        }
    }
    format!("{ns}ns")
}

impl Rotation {
    /// One line for the operator: where the reports go and what keeps them bounded.
    pub fn describe(&self, dir: &Path) -> String {
        let mut when = Vec::new();
        if let Some(b) = self.max_bytes {
            when.push(format!("at {}", size_text(b)));
        }
        if let Some(a) = self.max_age_ns {
            when.push(format!("after {} of packet time", duration_text(a)));
        }
        let rotation = if when.is_empty() {
            "no rotation".to_owned()
        } else {
            format!("a new file {}", when.join(" or "))
        };
        let compression = match self.compression {
            Compression::None => "rotated files not compressed".to_owned(),
            c => format!("rotated files compressed with {}", c.as_str()),
        };
        let retained = match self.retain_bytes {
            Some(r) => {
                format!("at most {} kept in all (the oldest rotated files removed first)", size_text(r))
            }
            None => "no bound on the total".to_owned(),
        };
        format!("roceprobe: CSV reports in {}: {rotation}, {compression}, {retained}", dir.display())
    }
}

/// What the stats thread hands the writer thread.
pub(super) enum Job {
    /// The rows of report `id` (a whole number of rows), belonging to packet time `ts_ns`.
    Rows { id: usize, ts_ns: u64, rows: String },
    /// Everything before this was written: report the health and end.
    Finish,
}

/// The stats thread's end of the writer thread: a batch of rows goes, an empty buffer comes
/// back.
#[derive(Clone)]
pub(super) struct Link {
    jobs: Sender<Job>,
    pool: Receiver<String>,
}

impl Link {
    /// Hands `rows` (taken, an emptied buffer left in their place) to the writer thread,
    /// waiting while its queue is full. Err: the writer thread is gone, with the rows.
    pub(super) fn send(&self, id: usize, ts_ns: u64, rows: &mut String) -> Result<(), String> {
        let spare = self.pool.try_recv().unwrap_or_default();
        let rows = std::mem::replace(rows, spare);
        match self.jobs.send(Job::Rows { id, ts_ns, rows }) {
            Ok(()) => Ok(()),
            Err(crossbeam_channel::SendError(Job::Rows { rows, .. })) => Err(rows),
            Err(_) => Err(String::new()),
        }
    }

    pub(super) fn control(&self, job: Job) {
        let _ = self.jobs.send(job);
    }
}

/// One report's current file, `<stem>.csv`.
struct Report {
    stem: &'static str,
    header: String,
    file: File,
    /// Bytes in the current file, and the packet time of its first row.
    bytes: u64,
    first_ns: Option<u64>,
    /// `file` is not the current file: a rotation renamed it, and the new one could not be
    /// started (a full disk). The next rows start it first; none go to the renamed file.
    unstarted: bool,
    /// This run has written no row of the report yet: before its first, the rotated files
    /// an earlier run left of it from that row's time on are removed ([`Writer::write`]).
    fresh: bool,
    /// The open file's device and inode: a file at the report's name that is another (one
    /// renamed over it, a second run's) is not the one the rows go to.
    inode: (u64, u64),
}

impl Report {
    /// Creates (or replaces) `<stem>.csv` with its header.
    fn create(dir: &Path, stem: &'static str, header: String) -> Result<Self> {
        let Started { file, bytes, inode } = start(dir, stem, &header)?;
        Ok(Self { stem, header, file, bytes, first_ns: None, unstarted: false, fresh: true, inode })
    }

    /// Writes on into `s`, a file just started.
    fn started(&mut self, s: Started) {
        (self.file, self.bytes, self.inode) = (s.file, s.bytes, s.inode);
        self.first_ns = None;
    }
}

/// A report file just started: its header written.
struct Started {
    file: File,
    bytes: u64,
    inode: (u64, u64),
}

/// Creates (or replaces) `<stem>.csv` with its header. A header that cannot be written
/// whole (a full disk) leaves no file: every report file starts with its header.
fn start(dir: &Path, stem: &str, header: &str) -> Result<Started> {
    use std::os::unix::fs::MetadataExt;
    let path = dir.join(format!("{stem}.csv"));
    let mut f = super::create_regular(&path, false)
        .with_context(|| format!("--csv-dir: cannot write {}", path.display()))?;
    let head = format!("{header}\r\n");
    match f.write_all(head.as_bytes()).and_then(|()| f.metadata()) {
        Ok(m) => Ok(Started { file: f, bytes: head.len() as u64, inode: (m.dev(), m.ino()) }),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            Err(e).with_context(|| format!("--csv-dir: cannot write {}", path.display()))
        }
    }
}

/// A live probe started again: the current file of `stem` that an earlier run left with
/// rows in it becomes a rotated file (named by the time of its first row, else by when it
/// was last written, which is after every row in it), so that a restart loses none of its
/// rows; it is compressed no further and counts towards `--csv-retain`. A file with its
/// header only is replaced, as before.
fn set_aside(dir: &Path, stem: &str) -> Result<()> {
    use std::io::BufRead;
    let path = dir.join(format!("{stem}.csv"));
    let Ok(f) = File::open(&path) else { return Ok(()) };
    let mut lines = io::BufReader::new(f.take(4096)).lines();
    let (Some(Ok(_header)), Some(Ok(row))) = (lines.next(), lines.next()) else { return Ok(()) };
    let first = row.split(',').next().unwrap_or_default();
    let stamp = if is_rfc3339_nanos(first) {
        first.replace(':', "")
    } else {
        let written = std::fs::metadata(&path)?.modified()?;
        let ns = written.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        rfc3339_nanos(ns).replace(':', "")
    };
    let name = Rotated::unused(dir, stamp, stem);
    std::fs::rename(&path, dir.join(name.file_name(Compression::None)))?;
    Ok(())
}

/// Whether `s` is a time as the reports write it (RFC 3339, UTC, nanoseconds: fixed width).
fn is_rfc3339_nanos(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 30
        && b.iter().enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            19 => c == b'.',
            29 => c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

/// Whether the file at `path` is still the one a report writes into (`inode`) and holds
/// what was written to it (`bytes`): not when it was removed, another file was renamed over
/// it or made in its place, or it was cut short under the probe (`truncate`, logrotate's
/// `copytruncate`), whose rows written on at the old offset would follow a hole of zero
/// bytes and no header.
fn is_current(path: &Path, inode: (u64, u64), bytes: u64) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_file() && (m.dev(), m.ino()) == inode && m.len() >= bytes)
}

/// A rotated file's name: `<stem>-<time of its first row>[-<n>].csv[.gz|.zst]`, the time
/// RFC 3339 without colons (fixed width, so names sort by time).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Rotated {
    stamp: String,
    /// 1 for the first file of that time, 2... for later ones.
    n: u32,
    stem: String,
    compression: Compression,
}

impl Rotated {
    /// The rotated file of one of `stems` that `name` names, if it does (not a temporary
    /// file, not a current one).
    fn parse<'a>(name: &str, stems: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        let (base, compression) = if let Some(b) = name.strip_suffix(".csv.zst") {
            (b, Compression::Zstd)
        } else if let Some(b) = name.strip_suffix(".csv.gz") {
            (b, Compression::Gzip)
        } else {
            (name.strip_suffix(".csv")?, Compression::None)
        };
        stems.into_iter().find_map(|stem| {
            let rest = base.strip_prefix(stem)?.strip_prefix('-')?;
            let (stamp, tail) = rest.split_at(rest.find('Z')? + 1);
            let n = match tail {
                "" => 1,
                t => t.strip_prefix('-')?.parse().ok().filter(|n| *n >= 2)?,
            };
            // YYYY-MM-DDTHHMMSS.nnnnnnnnnZ
            let b = stamp.as_bytes();
            let digits = |r: std::ops::Range<usize>| b[r].iter().all(u8::is_ascii_digit);
            let shape = b.len() == 28 && b[10] == b'T' && b[17] == b'.' && digits(0..4) && digits(18..27);
            shape.then(|| Self { stamp: stamp.to_owned(), n, stem: stem.to_owned(), compression })
        })
    }

    /// The name for a file of `stem` rotated in `dir` with its first row at `stamp` that no
    /// file there has, compressed or not (`-2`, `-3`... after the first of that time).
    fn unused(dir: &Path, stamp: String, stem: &str) -> Self {
        let mut name = Self { stamp, n: 1, stem: stem.to_owned(), compression: Compression::None };
        while [Compression::None, Compression::Gzip, Compression::Zstd]
            .iter()
            .any(|c| dir.join(name.file_name(*c)).exists())
        {
            name.n += 1;
        }
        name
    }

    fn file_name(&self, compression: Compression) -> String {
        let n = if self.n > 1 { format!("-{}", self.n) } else { String::new() };
        format!("{}-{}{n}.csv{}", self.stem, self.stamp, compression.suffix())
    }
}

/// Whether `name` is a file the writer makes for one of `stems`: its current `<stem>.csv`
/// or a rotated one, compressed or not.
pub fn is_report_file<'a>(name: &str, stems: impl IntoIterator<Item = &'a str> + Clone) -> bool {
    stems.clone().into_iter().any(|s| name.strip_suffix(".csv") == Some(s))
        || Rotated::parse(name, stems).is_some()
}

/// The rotated files of `stems` in `dir`, oldest first (one name per file: where a plain
/// file and its compressed copy are both there, as for a moment during compression, the
/// compressed one).
fn rotated_in(dir: &Path, stems: &[&str]) -> io::Result<Vec<(Rotated, PathBuf)>> {
    let mut found: BTreeMap<Rotated, PathBuf> = BTreeMap::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let Some(r) = e.file_name().to_str().and_then(|n| Rotated::parse(n, stems.iter().copied())) else {
            continue;
        };
        found.insert(r, e.path());
    }
    // The same file under two compressions: keep the most compressed (sorted last).
    let mut out: Vec<(Rotated, PathBuf)> = Vec::new();
    for (r, p) in found {
        match out.last_mut() {
            Some((last, lp)) if (&last.stamp, last.n, &last.stem) == (&r.stamp, r.n, &r.stem) => {
                *last = r;
                *lp = p;
            }
            _ => out.push((r, p)),
        }
    }
    Ok(out)
}

/// The files of one report in `dir`, oldest first: the rotated `<stem>-<time>.csv`,
/// `.csv.gz` and `.csv.zst` by the time in their names, then `<stem>.csv`. Read them with
/// [`open_report`].
pub fn report_files(dir: &Path, stem: &str) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = rotated_in(dir, &[stem])
        .with_context(|| format!("cannot read {}", dir.display()))?
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    let current = dir.join(format!("{stem}.csv"));
    if current.is_file() {
        files.push(current);
    }
    Ok(files)
}

/// A report file's text, decompressed as its name says (`.csv.gz`, `.csv.zst`, or plain).
pub fn open_report(path: &Path) -> io::Result<Box<dyn Read>> {
    let f = io::BufReader::new(File::open(path)?);
    let name = path.to_string_lossy();
    Ok(if name.ends_with(".zst") {
        Box::new(zstd::stream::read::Decoder::with_buffer(f)?)
    } else if name.ends_with(".gz") {
        Box::new(flate2::bufread::MultiGzDecoder::new(f))
    } else {
        Box::new(f)
    })
}

/// The rotated files that may be removed to stay under `--csv-retain`, oldest first, and
/// their bytes. The current files, a file being compressed and a compression's temporary
/// file are never in it.
#[derive(Default)]
struct Retained {
    files: BTreeMap<Rotated, (PathBuf, u64)>,
    bytes: u64,
}

impl Retained {
    fn add(&mut self, r: Rotated, path: PathBuf, size: u64) {
        if let Some((_, old)) = self.files.insert(r, (path, size)) {
            self.bytes -= old;
        }
        self.bytes += size;
    }

    /// Removes the rotated files of report `stem` whose first row is at `stamp` or later
    /// (an earlier run's, which this run's rows from `stamp` on replace), counting them in
    /// `files_replaced`. Returns how many were removed.
    fn replace_from(&mut self, stem: &str, stamp: &str, health: &mut CsvHealth) -> u64 {
        let gone: Vec<Rotated> =
            self.files.keys().filter(|r| r.stem == stem && r.stamp.as_str() >= stamp).cloned().collect();
        let mut removed = 0;
        for r in gone {
            let Some((path, size)) = self.files.remove(&r) else { continue };
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    self.bytes -= size;
                    health.files_replaced += 1;
                    removed += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => self.bytes -= size,
                // Cannot be removed: it stays, and counts towards the bound.
                Err(_) => {
                    self.files.insert(r, (path, size));
                }
            }
        }
        removed
    }

    /// Removes the oldest rotated files until `need` more bytes fit under `limit` with the
    /// `outside` bytes of files not listed here (the current files, a file being compressed
    /// and its temporary). False when they do not fit even with none left.
    fn make_room(&mut self, limit: Option<u64>, outside: u64, need: u64, health: &mut CsvHealth) -> bool {
        let Some(limit) = limit else { return true };
        while self.bytes + outside + need > limit {
            let Some((r, (path, size))) = self.files.pop_first() else { return false };
            self.bytes -= size;
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    health.files_removed += 1;
                    health.bytes_removed += size;
                }
                // Removed by someone else: its bytes are gone all the same.
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(_) => {
                    // Cannot be removed (permissions?): keep counting it, try again later.
                    self.files.insert(r, (path, size));
                    self.bytes += size;
                    return false;
                }
            }
        }
        true
    }
}

/// The compressed file's bytes go through here: each write first makes room for itself
/// under `--csv-retain`, so the directory stays under it while a file is compressed.
struct Budgeted<'a> {
    file: File,
    written: u64,
    retained: &'a mut Retained,
    limit: Option<u64>,
    /// Bytes of the current files and of the file being compressed.
    outside: u64,
    health: &'a mut CsvHealth,
}

impl Write for Budgeted<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let need = buf.len() as u64;
        if !self.retained.make_room(self.limit, self.outside + self.written, need, self.health) {
            return Err(io::Error::other("no room under --csv-retain"));
        }
        let n = self.file.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// The `roceprobe-csv` thread's state: every report's current file, the rotated files kept,
/// and how writing went.
pub(super) struct Writer {
    dir: PathBuf,
    rotation: Rotation,
    reports: Vec<Report>,
    /// The stems of every report a run may write (this run's and others', such as events
    /// without `--evidence-dir`): their rotated files in the directory count towards
    /// `--csv-retain`, whichever run wrote them.
    known: &'static [&'static str],
    retained: Retained,
    health: CsvHealth,
    /// A failure was told (once per run; every one is counted).
    told: bool,
    /// Rotated files of an earlier run were replaced, and told (once per run).
    told_replaced: bool,
    /// This run replaces an earlier run's rotated files from its first rows on (a replay).
    replace_earlier: bool,
    pool: Sender<String>,
    /// The folder's lock (see [`super::lock_dir`]), released as the writer ends.
    _lock: super::DirLock,
}

/// The refusal of a folder another run writes its reports into.
pub fn in_use(dir: &Path) -> String {
    format!(
        "--csv-dir: another roceprobe run is writing its reports in {} (two runs would empty and interleave each other's files)",
        dir.display()
    )
}

/// Before any work: that the reports `stems` can all be written in `dir` if it exists (no
/// other run writes there, and no report file there is one this process may not write),
/// so that a run refused for one of them empties none of an earlier run's.
pub fn check_dir<'a>(dir: &Path, stems: impl IntoIterator<Item = &'a str>) -> Result<()> {
    if dir.is_dir() {
        lock_for(dir, stems)?;
    }
    Ok(())
}

/// The folder's lock for this run, taken once every report of `stems` there is known to
/// be writable (none is emptied yet): see [`check_dir`].
fn lock_for<'a>(dir: &Path, stems: impl IntoIterator<Item = &'a str>) -> Result<super::DirLock> {
    let lock = match super::lock_dir(dir) {
        Ok(Some(lock)) => lock,
        Ok(None) => bail!("{}", in_use(dir)),
        Err(e) => return Err(e).with_context(|| format!("--csv-dir: cannot lock {}", dir.display())),
    };
    for stem in stems {
        let path = dir.join(format!("{stem}.csv"));
        super::check_writable(&path)
            .with_context(|| format!("--csv-dir: cannot write {}", path.display()))?;
    }
    Ok(lock)
}

/// The writer thread's state before the thread runs (see [`prepare_writer`]).
pub(super) struct Unstarted {
    writer: Writer,
    jobs: Receiver<Job>,
}

impl Unstarted {
    /// Whether this run replaces an earlier run's rotated files from its first rows on (a
    /// replay; see [`Writer::replace_earlier`]). Not by default.
    pub(super) fn replace_earlier(&mut self, on: bool) {
        self.writer.replace_earlier = on;
    }

    /// Starts the writer thread. It inherits the CPUs of the thread that starts it (the
    /// stats thread, already on the control CPUs: never on a capture lcore, not even for
    /// its first moments).
    pub(super) fn spawn(self) -> Result<std::thread::JoinHandle<CsvHealth>> {
        let Unstarted { mut writer, jobs } = self;
        std::thread::Builder::new()
            .name("roceprobe-csv".into())
            .spawn(move || writer.run(jobs))
            .context("starting the CSV writer thread")
    }
}

/// Creates the reports' files (replacing those of an earlier run), and the writer thread's
/// state: the stats thread's end of it, and what [`Unstarted::spawn`] starts; the thread
/// returns the health of the writing once it has written everything handed to it before
/// [`Job::Finish`]. Rows handed over before it starts wait in the queue.
pub(super) fn prepare_writer(
    dir: &Path,
    rotation: Rotation,
    reports: Vec<(&'static str, String)>,
    known: &'static [&'static str],
    keep_earlier: bool,
) -> Result<(Link, Unstarted)> {
    // The folder is this run's alone while it writes (the lock goes with the writer), and
    // every name is checked before the first file is emptied: a refused one empties none.
    let lock = lock_for(dir, reports.iter().map(|(stem, _)| *stem))?;
    if keep_earlier {
        for (stem, _) in &reports {
            set_aside(dir, stem).with_context(|| {
                format!("--csv-dir: cannot keep {}", dir.join(format!("{stem}.csv")).display())
            })?;
        }
    }
    let reports =
        reports.into_iter().map(|(stem, header)| Report::create(dir, stem, header)).collect::<Result<_>>()?;
    let (jobs_tx, jobs_rx) = crossbeam_channel::bounded(QUEUE);
    let (pool_tx, pool_rx) = crossbeam_channel::bounded(POOL);
    let writer = Writer {
        dir: dir.to_owned(),
        rotation,
        reports,
        known,
        retained: Retained::default(),
        health: CsvHealth::default(),
        told: false,
        told_replaced: false,
        replace_earlier: false,
        pool: pool_tx,
        _lock: lock,
    };
    Ok((Link { jobs: jobs_tx, pool: pool_rx }, Unstarted { writer, jobs: jobs_rx }))
}

impl Writer {
    fn run(&mut self, jobs: Receiver<Job>) -> CsvHealth {
        self.scan(true);
        for job in jobs {
            match job {
                Job::Rows { id, ts_ns, mut rows } => {
                    if let Err(e) = self.write(id, ts_ns, &rows) {
                        self.health.failed_writes += 1;
                        self.health.rows_lost += rows.matches("\r\n").count() as u64;
                        if !self.told {
                            // Measuring goes on; the summary still gets everything, and
                            // writing is tried again with the next rows.
                            crate::note!(
                                "roceprobe: warning: writing CSV reports in {} failed ({e:#}); lost rows are counted (summary csv_output) and writing is retried",
                                self.dir.display()
                            );
                            self.told = true;
                        }
                    }
                    rows.clear();
                    let _ = self.pool.try_send(rows);
                }
                Job::Finish => break,
            }
        }
        self.health
    }

    /// Bytes of the current files.
    fn current_bytes(&self) -> u64 {
        self.reports.iter().map(|r| r.bytes).sum()
    }

    /// Lists the rotated files of every report in the directory (at start: of earlier runs
    /// too, and of reports this run does not write), and makes room under `--csv-retain` at
    /// once. At start, a compression's temporary file left by
    /// a probe that was killed is removed, and so is a plain rotated file whose compressed
    /// copy is whole (the copy is renamed into place only once written).
    fn scan(&mut self, at_start: bool) {
        self.retained = Retained::default();
        let stems = self.known;
        let Ok(entries) = std::fs::read_dir(&self.dir) else { return };
        let mut plain = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if at_start {
                if let Some(r) =
                    name.strip_suffix(".tmp").and_then(|n| Rotated::parse(n, stems.iter().copied()))
                {
                    if r.compression != Compression::None {
                        let _ = std::fs::remove_file(e.path());
                    }
                    continue;
                }
            }
            let Some(r) = Rotated::parse(&name, stems.iter().copied()) else { continue };
            let size = e.metadata().map(|m| m.len()).unwrap_or(0);
            if r.compression == Compression::None {
                plain.push((r, e.path(), size));
            } else {
                self.retained.add(r, e.path(), size);
            }
        }
        for (r, path, size) in plain {
            let copied = [Compression::Gzip, Compression::Zstd]
                .into_iter()
                .any(|c| self.retained.files.contains_key(&Rotated { compression: c, ..r.clone() }));
            if copied && at_start {
                let _ = std::fs::remove_file(&path);
            } else {
                self.retained.add(r, path, size);
            }
        }
        let outside = self.current_bytes();
        self.retained.make_room(self.rotation.retain_bytes, outside, 0, &mut self.health);
    }

    /// Writes `rows` of report `id`, which belong to packet time `ts_ns`: rotating first if
    /// due, making room under `--csv-retain`, in one write. A write that fails is cut back to
    /// the last whole row; a file removed while open is started again.
    fn write(&mut self, id: usize, ts_ns: u64, rows: &str) -> Result<()> {
        let rot = self.rotation;
        let path = self.dir.join(format!("{}.csv", self.reports[id].stem));
        // A report whose rotation could not start its new file has none: it is started
        // below, not taken for one removed.
        let r = &self.reports[id];
        if !r.unstarted && !is_current(&path, r.inode, r.bytes) {
            // Removed (with its folder, perhaps), replaced or cut short while open: rows
            // written to the open file would vanish with it, or follow a hole, so start the
            // report again, and with it every other report that went with the folder (one
            // without rows since would otherwise stay away until its next row).
            std::fs::create_dir_all(&self.dir)
                .with_context(|| format!("cannot create {}", self.dir.display()))?;
            for (k, r) in self.reports.iter_mut().enumerate() {
                if k == id || !self.dir.join(format!("{}.csv", r.stem)).exists() {
                    r.started(start(&self.dir, r.stem, &r.header)?);
                    if !std::mem::take(&mut r.unstarted) {
                        self.health.files_recreated += 1;
                    }
                }
            }
            // What was kept may have gone with the folder.
            self.scan(false);
        }
        if self.reports[id].unstarted {
            let r = &mut self.reports[id];
            r.started(start(&self.dir, r.stem, &r.header)?);
            r.unstarted = false;
        }
        if std::mem::take(&mut self.reports[id].fresh) && self.replace_earlier {
            self.replace_earlier(id, ts_ns);
        }
        let r = &self.reports[id];
        if let Some(first) = r.first_ns {
            let too_big = rot.max_bytes.is_some_and(|m| r.bytes + rows.len() as u64 > m);
            let too_old = rot.max_age_ns.is_some_and(|m| ts_ns.saturating_sub(first) >= m);
            if too_big || too_old {
                self.rotate(id, first)?;
            }
        }
        let outside = self.current_bytes();
        if !self.retained.make_room(rot.retain_bytes, outside, rows.len() as u64, &mut self.health) {
            self.health.over_retain += 1;
        }
        let r = &mut self.reports[id];
        if let Err(e) = r.file.write_all(rows.as_bytes()) {
            // A short write (disk full) would leave half a row: cut the file back to its
            // last whole row, and write on from there (not from where the short write
            // stopped, which would leave a hole of zero bytes).
            let _ = r.file.set_len(r.bytes);
            let _ = std::io::Seek::seek(&mut r.file, std::io::SeekFrom::Start(r.bytes));
            return Err(e.into());
        }
        r.bytes += rows.len() as u64;
        r.first_ns.get_or_insert(ts_ns);
        Ok(())
    }

    /// Renames the current file `<stem>-<time of its first row>.csv`, starts a new one with
    /// the header, and compresses the full one. Until it is compressed, the full file is not
    /// one retention may remove.
    fn rotate(&mut self, id: usize, first_ns: u64) -> Result<()> {
        let stem = self.reports[id].stem;
        let name = Rotated::unused(&self.dir, rfc3339_nanos(first_ns).replace(':', ""), stem);
        let (from, to) =
            (self.dir.join(format!("{stem}.csv")), self.dir.join(name.file_name(Compression::None)));
        std::fs::rename(&from, &to)
            .with_context(|| format!("rotating {} to {}", from.display(), to.display()))?;
        let full = std::mem::take(&mut self.reports[id].bytes);
        let header = self.reports[id].header.len() as u64 + 2;
        let outside = self.current_bytes() + full;
        self.retained.make_room(self.rotation.retain_bytes, outside, header, &mut self.health);
        let started = start(&self.dir, stem, &self.reports[id].header);
        let r = &mut self.reports[id];
        r.first_ns = None;
        // Not started (the header did not fit): the open file is the one just renamed,
        // which must get no more rows; the next rows start the report again. Started, its
        // header counts as the current file's while the full one is compressed.
        let started = match started {
            Ok(s) => {
                r.started(s);
                r.unstarted = false;
                Ok(())
            }
            Err(e) => {
                r.unstarted = true;
                Err(e)
            }
        };
        self.compress(name, to, full);
        started
    }

    /// Before this run's first row of report `id`, at `ts_ns`: the rotated files an earlier
    /// run left of it whose first row is at that time or later are removed (told once per
    /// run), as its current file was: a capture replayed again into the same directory
    /// would otherwise leave two runs' rows of the same intervals side by side, which
    /// readers take as one report. Earlier times stay (a probe started again goes on after
    /// them).
    fn replace_earlier(&mut self, id: usize, ts_ns: u64) {
        let stamp = rfc3339_nanos(ts_ns).replace(':', "");
        let stem = self.reports[id].stem;
        let removed = self.retained.replace_from(stem, &stamp, &mut self.health);
        if removed > 0 && !self.told_replaced {
            crate::note!(
                "roceprobe: warning: {}: an earlier run's rotated files from the time this run's rows begin are replaced ({} of {stem}.csv so far, those of the other reports likewise; all counted in the summary's csv_output.files_replaced)",
                self.dir.display(),
                removed
            );
            self.told_replaced = true;
        }
    }

    /// Compresses a rotated file into `<name>.csv.zst` (or `.gz`) through a temporary file
    /// renamed into place once whole, then removes the plain one; the file kept joins those
    /// retention may remove. A file that cannot be compressed (no room, a failing disk)
    /// stays plain: readers and retention take it as it is.
    fn compress(&mut self, name: Rotated, plain: PathBuf, plain_bytes: u64) {
        let c = self.rotation.compression;
        if c == Compression::None {
            self.retained.add(name, plain, plain_bytes);
            return;
        }
        let done = self.dir.join(name.file_name(c));
        let tmp = self.dir.join(format!("{}.tmp", name.file_name(c)));
        let outside = self.current_bytes() + plain_bytes;
        let compressed = (|| -> io::Result<u64> {
            let mut input = File::open(&plain)?;
            let out = Budgeted {
                file: super::create_regular(&tmp, false)?,
                written: 0,
                retained: &mut self.retained,
                limit: self.rotation.retain_bytes,
                outside,
                health: &mut self.health,
            };
            let out = match c {
                Compression::Gzip => {
                    let mut e = flate2::write::GzEncoder::new(out, flate2::Compression::default());
                    io::copy(&mut input, &mut e)?;
                    e.finish()?
                }
                _ => {
                    let mut e = zstd::stream::write::Encoder::new(out, 3)?;
                    io::copy(&mut input, &mut e)?;
                    e.finish()?
                }
            };
            let written = out.written;
            drop(out);
            std::fs::rename(&tmp, &done)?;
            Ok(written)
        })();
        match compressed {
            Ok(size) => {
                let _ = std::fs::remove_file(&plain);
                self.retained.add(Rotated { compression: c, ..name }, done, size);
            }
            Err(_) => {
                let _ = std::fs::remove_file(&tmp);
                self.retained.add(name, plain, plain_bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rotated_names_parse_and_sort_by_time() {
        let stems = ["io", "slow_ios", "flows"];
        let p = |n: &str| Rotated::parse(n, stems);
        let a = p("io-2026-11-29T080000.000000000Z.csv").unwrap();
        assert_eq!((a.stem.as_str(), a.n, a.compression), ("io", 1, Compression::None));
        let b = p("slow_ios-2026-11-29T080000.000000000Z-2.csv.zst").unwrap();
        assert_eq!((b.stem.as_str(), b.n, b.compression), ("slow_ios", 2, Compression::Zstd));
        let c = p("flows-2026-11-29T075959.999999999Z-10.csv.gz").unwrap();
        assert_eq!(c.file_name(Compression::Gzip), "flows-2026-11-29T075959.999999999Z-10.csv.gz");
        assert!(c < a && a < b, "by time, then number");
        for not in [
            "io.csv",
            "io-2026-11-29T080000.000000000Z.csv.zst.tmp",
            "io-2026-11-29T080000.000000000Z.csv.br",
            "io-yesterday.csv",
            "io-2026-11-29T080000.000000000Z-1.csv",
            "steps-2026-11-29T080000.000000000Z.csv",
        ] {
            assert_eq!(p(not), None, "{not}");
        }
    }

    /// Rows reach the file in order, whole, and the stats side's buffers come back: once
    /// the writer has caught up, every buffer handed back already has room (no allocation).
    #[test]
    fn rows_go_to_the_writer_thread_and_their_buffers_come_back() {
        let dir = tempfile::tempdir().unwrap();
        let (link, writer) =
            prepare_writer(dir.path(), Rotation::default(), vec![("r", "a,b".into())], &["r"], false)
                .unwrap();
        let writer = writer.spawn().unwrap();
        let mut rows = String::new();
        let mut want = String::from("a,b\r\n");
        for i in 0..200u64 {
            if i >= 2 {
                // The writer has handed a used buffer back.
                let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                while link.pool.is_empty() {
                    assert!(std::time::Instant::now() < deadline, "no buffer came back");
                    std::thread::yield_now();
                }
            }
            let row = format!("{i:05},{}\r\n", "x".repeat(100));
            want.push_str(&row);
            let had_room = rows.capacity() >= row.len();
            rows.push_str(&row);
            link.send(0, i, &mut rows).unwrap();
            assert!(rows.is_empty());
            assert!(i < 3 || had_room, "batch {i}: a new buffer was allocated");
        }
        link.control(Job::Finish);
        assert_eq!(writer.join().unwrap(), CsvHealth::default());
        assert_eq!(std::fs::read_to_string(dir.path().join("r.csv")).unwrap(), want);
        // The writer has ended: rows handed over now come back as lost.
        rows.push_str("1,2\r\n");
        assert_eq!(link.send(0, 0, &mut rows).unwrap_err(), "1,2\r\n");
    }

    #[test]
    fn sizes_and_durations_read_as_the_options_take_them() {
        assert_eq!(size_text(64 << 20), "64M");
        assert_eq!(size_text(1 << 30), "1G");
        assert_eq!(size_text(1536), "1536");
        assert_eq!(size_text(512 << 10), "512K");
        assert_eq!(duration_text(3_600_000_000_000), "1h");
        assert_eq!(duration_text(90_000_000_000), "90s");
        assert_eq!(duration_text(100_000), "100us");
    }

    /// A tmpfs of `options` mounted in a new temporary folder, unmounted when dropped.
    /// Mounting needs root, as CI runs: as another user the test says it is skipped and
    /// passes (`None`).
    struct Tmpfs(tempfile::TempDir);

    impl Tmpfs {
        fn mount(options: &str) -> Option<Self> {
            // /proc/self belongs to the process's effective user.
            let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
            if !root {
                eprintln!("skipped: mounting a tmpfs needs root (CI runs as root)");
                return None;
            }
            let dir = tempfile::tempdir().unwrap();
            let mounted = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", options, "tmpfs"])
                .arg(dir.path())
                .status()
                .is_ok_and(|s| s.success());
            assert!(mounted, "mounting a tmpfs failed");
            Some(Self(dir))
        }

        fn path(&self) -> &Path {
            self.0.path()
        }
    }

    impl Drop for Tmpfs {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(self.0.path()).status();
        }
    }

    /// Row `i` of report `r`: 100 bytes.
    fn row(i: u64) -> String {
        format!("{i:05},{}\r\n", "x".repeat(92))
    }

    /// A writer of one report `r` (header `a,b`) into `dir`, rotated at 1,000 bytes.
    fn small_files(dir: &Path) -> Writer {
        let rotation = Rotation {
            max_bytes: Some(1000),
            max_age_ns: None,
            compression: Compression::None,
            retain_bytes: None,
        };
        prepare_writer(dir, rotation, vec![("r", "a,b".into())], &["r"], false).unwrap().1.writer
    }

    /// A report file replaced under the probe (another file renamed over it) or cut short
    /// (logrotate's `copytruncate`) is started again, header first, and counted: rows
    /// written on into the old file would be lost with it, or follow a hole of zero bytes.
    #[test]
    fn a_report_replaced_or_cut_short_under_the_probe_starts_again_with_its_header() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = small_files(dir.path());
        let path = dir.path().join("r.csv");
        w.write(0, 1, &row(1)).unwrap();
        let other = dir.path().join("other");
        std::fs::write(&other, "x\r\n").unwrap();
        std::fs::rename(&other, &path).unwrap();
        w.write(0, 2, &row(2)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("a,b\r\n{}", row(2)));
        assert_eq!(w.health.files_recreated, 1);
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(0).unwrap();
        w.write(0, 3, &row(3)).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("a,b\r\n{}", row(3)));
        assert_eq!(w.health.files_recreated, 2);
    }

    /// A live probe started again keeps the current file an earlier run left with rows in
    /// it, as a rotated file named by its first row's time (a second of that time gets
    /// `-2`); one with its header only is replaced. A replay replaces it.
    #[test]
    fn a_live_probe_started_again_keeps_the_earlier_runs_current_rows() {
        let dir = tempfile::tempdir().unwrap();
        let rows = "a,b\r\n2026-12-01T00:00:00.500000000Z,1\r\n2026-12-01T00:00:01.000000000Z,2\r\n";
        let taken = dir.path().join("r-2026-12-01T000000.500000000Z.csv");
        std::fs::write(&taken, "a,b\r\n").unwrap();
        std::fs::write(dir.path().join("r.csv"), rows).unwrap();
        std::fs::write(dir.path().join("s.csv"), "a,b\r\n").unwrap();
        let reports = || vec![("r", "a,b".to_owned()), ("s", "a,b".to_owned())];
        let w = prepare_writer(dir.path(), Rotation::default(), reports(), &["r", "s"], true).unwrap();
        drop(w);
        let kept = dir.path().join("r-2026-12-01T000000.500000000Z-2.csv");
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), rows);
        assert_eq!(std::fs::read_to_string(&taken).unwrap(), "a,b\r\n");
        for stem in ["r", "s"] {
            assert_eq!(std::fs::read_to_string(dir.path().join(format!("{stem}.csv"))).unwrap(), "a,b\r\n");
        }
        let names = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(names, 4, "r.csv, s.csv and two rotated files of r");
        // A replay into it replaces the current file as it is.
        std::fs::write(dir.path().join("r.csv"), rows).unwrap();
        drop(prepare_writer(dir.path(), Rotation::default(), reports(), &["r", "s"], false).unwrap());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 4);
        assert_eq!(std::fs::read_to_string(dir.path().join("r.csv")).unwrap(), "a,b\r\n");
    }

    /// While a run writes its reports in a folder, another run is refused there before it
    /// empties anything; once the first has ended, the folder is free again.
    #[test]
    fn a_second_run_is_refused_the_folder_the_first_writes_in() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = small_files(dir.path());
        w.write(0, 1, &row(1)).unwrap();
        let refused = check_dir(dir.path(), ["r"]).unwrap_err().to_string();
        assert_eq!(refused, in_use(dir.path()));
        let again = prepare_writer(dir.path(), Rotation::default(), vec![("r", "a,b".into())], &["r"], false);
        assert_eq!(again.err().unwrap().to_string(), in_use(dir.path()));
        assert_eq!(std::fs::read_to_string(dir.path().join("r.csv")).unwrap(), format!("a,b\r\n{}", row(1)));
        drop(w);
        check_dir(dir.path(), ["r"]).unwrap();
    }

    /// An earlier run's report this process may not write (here a file bind-mounted
    /// read-only over itself; the permissions would not stop root, as CI runs) refuses the
    /// run before any report is emptied: the one before it in the order too. (Before, the
    /// reports were emptied one by one until the one that could not be opened.)
    #[test]
    fn a_report_that_cannot_be_written_refuses_the_run_before_any_is_emptied() {
        let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
        if !root {
            eprintln!("skipped: a read-only bind mount needs root (CI runs as root)");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (r, s) = (dir.path().join("r.csv"), dir.path().join("s.csv"));
        for p in [&r, &s] {
            std::fs::write(p, "a,b\r\n1,2\r\n").unwrap();
        }
        let mount = |args: &[&str]| {
            std::process::Command::new("mount").args(args).arg(&s).arg(&s).status().is_ok_and(|x| x.success())
        };
        assert!(mount(&["--bind"]) && mount(&["-o", "remount,bind,ro"]), "a read-only bind mount");
        let e = check_dir(dir.path(), ["r", "s"]).unwrap_err();
        let e2 = prepare_writer(
            dir.path(),
            Rotation::default(),
            vec![("r", "a,b".into()), ("s", "a,b".into())],
            &["r", "s"],
            false,
        )
        .err()
        .map(|e| format!("{e:#}"));
        let (r_now, s_now) = (std::fs::read_to_string(&r).unwrap(), std::fs::read_to_string(&s).unwrap());
        let _ = std::process::Command::new("umount").arg(&s).status();
        assert!(format!("{e:#}").contains("cannot write"), "{e:#}");
        assert!(e2.is_some_and(|e| e.contains("s.csv")));
        assert_eq!((r_now.as_str(), s_now.as_str()), ("a,b\r\n1,2\r\n", "a,b\r\n1,2\r\n"));
    }

    /// A --csv-dir this run makes, on a disk with room for the folder and two files: the
    /// third report cannot be made, the run is refused, and the folder is not left behind
    /// with reports cut short in it.
    #[test]
    fn reports_that_cannot_all_be_started_leave_no_folder_behind() {
        // The root, the folder, two reports.
        let Some(tmpfs) = Tmpfs::mount("size=64k,nr_inodes=4") else { return };
        let dir = tmpfs.path().join("csv");
        let rotation = Rotation {
            max_bytes: None,
            max_age_ns: None,
            compression: Compression::None,
            retain_bytes: None,
        };
        let Err(e) = crate::report::csv::CsvWriter::create_with_events(&dir, rotation, false, false) else {
            panic!("the reports were all made");
        };
        let e = format!("{e:#}");
        assert!(e.contains("--csv-dir: cannot write") && e.contains("latency.csv"), "{e}");
        assert!(!dir.exists(), "the folder was left: {:?}", std::fs::read_dir(&dir).map(|d| d.count()));
    }

    /// A rotation whose new file cannot be started (the disk fills between the rename and
    /// the header) loses the rows of that write only: the renamed file keeps exactly what it
    /// had, and the next rows, once there is room, start the report again with its header
    /// (they went to the renamed file's handle before, and a failure there cut it to
    /// nothing). Mounts a tmpfs: needs root, as CI runs.
    #[test]
    fn a_rotation_that_cannot_start_the_new_file_leaves_the_renamed_one_whole() {
        let Some(tmpfs) = Tmpfs::mount("size=64k") else { return };
        let disk = tmpfs.path();
        let mut w = small_files(disk);
        // 100 bytes a row: the header (5) and nine rows fill the first file to 905.
        let mut first = String::from("a,b\r\n");
        for i in 0..9 {
            w.write(0, i, &row(i)).unwrap();
            first.push_str(&row(i));
        }
        // The disk full: the tenth row rotates the file (a rename takes no room), and the
        // new file's header finds none.
        let ballast = disk.join("ballast");
        let mut f = File::create(&ballast).unwrap();
        while f.write_all(&[0u8; 4096]).is_ok() {}
        drop(f);
        assert!(w.write(0, 9, &row(9)).is_err());
        // No current file without its header (`roceprobe plot` refuses one).
        assert!(!disk.join("r.csv").exists(), "an empty r.csv was left");
        std::fs::remove_file(&ballast).unwrap();
        // Its room comes back once no process holds the ballast: a child that another test
        // forks meanwhile holds its files until it execs (once, under the full suite, the
        // next write found the disk still full). Wait for a page of it.
        let probe = disk.join("probe");
        for _ in 0..200 {
            if std::fs::write(&probe, [0u8; 4096]).is_ok() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        std::fs::remove_file(&probe).unwrap();
        w.write(0, 10, &row(10)).unwrap();
        w.write(0, 11, &row(11)).unwrap();
        let rotated: Vec<PathBuf> = std::fs::read_dir(disk)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("r-"))
            .collect();
        assert_eq!(rotated.len(), 1, "{rotated:?}");
        assert_eq!(std::fs::read_to_string(&rotated[0]).unwrap(), first);
        let now = std::fs::read_to_string(disk.join("r.csv")).unwrap();
        assert_eq!(now, format!("a,b\r\n{}{}", row(10), row(11)));
    }

    /// The same when the new file cannot even be created (no inode left): the report is
    /// started again with the next rows, which is no file recreated (one removed while open,
    /// which the health counts).
    #[test]
    fn a_rotation_without_an_inode_is_not_a_file_removed() {
        let Some(tmpfs) = Tmpfs::mount("size=64k,nr_inodes=16") else { return };
        let disk = tmpfs.path();
        let mut w = small_files(disk);
        for i in 0..9 {
            w.write(0, i, &row(i)).unwrap();
        }
        // Every inode taken: the tenth row's rotation renames the file, and finds no inode
        // for the new one.
        let fillers: Vec<PathBuf> =
            (0..).map(|k| disk.join(format!("filler-{k}"))).take_while(|p| File::create(p).is_ok()).collect();
        assert!(w.write(0, 9, &row(9)).is_err());
        assert!(!disk.join("r.csv").exists());
        std::fs::remove_file(&fillers[0]).unwrap();
        w.write(0, 10, &row(10)).unwrap();
        assert_eq!(std::fs::read_to_string(disk.join("r.csv")).unwrap(), format!("a,b\r\n{}", row(10)));
        assert_eq!(w.health.files_recreated, 0);
    }

    /// A capture replayed again into the same directory: before this run's first row of a
    /// report, the rotated files an earlier run left of it from that row's time on are
    /// removed (and counted); earlier ones, and other reports', stay; this run's own
    /// rotations after are not taken for an earlier run's.
    #[test]
    fn an_earlier_runs_rotated_files_from_this_runs_first_row_on_are_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let t = 1_764_547_200_000_000_000u64; // 2025-12-01T00:00:00Z
        let path = |n: &str| dir.path().join(n);
        let earlier = path("r-2025-11-30T230000.000000000Z.csv");
        let same = path("r-2025-12-01T000000.000000000Z.csv.zst");
        let later = path("r-2025-12-01T000000.000000500Z-2.csv");
        let other = path("s-2025-12-01T000001.000000000Z.csv");
        for p in [&earlier, &same, &later, &other] {
            std::fs::write(p, "a,b\r\n").unwrap();
        }
        let rotation = Rotation {
            max_bytes: Some(1000),
            max_age_ns: None,
            compression: Compression::None,
            retain_bytes: None,
        };
        let mut w = prepare_writer(dir.path(), rotation, vec![("r", "a,b".into())], &["r", "s"], false)
            .unwrap()
            .1
            .writer;
        w.replace_earlier = true;
        w.scan(true);
        for i in 0..25 {
            w.write(0, t + i, &row(i)).unwrap();
        }
        assert!(earlier.exists() && other.exists());
        assert!(!same.exists() && !later.exists());
        assert_eq!(w.health.files_replaced, 2);
        // Two rotations of this run, both kept.
        let ours = std::fs::read_dir(dir.path())
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with("r-2025-12-01"))
            .count();
        assert_eq!(ours, 2);
        // That run ends (its folder lock goes with it).
        drop(w);
        // Live (replacing off): a probe started again keeps every earlier file, whatever
        // its first row's time.
        let kept = path("r-2025-12-01T000000.000000300Z.csv");
        std::fs::write(&kept, "a,b\r\n").unwrap();
        let mut w = prepare_writer(dir.path(), rotation, vec![("r", "a,b".into())], &["r", "s"], false)
            .unwrap()
            .1
            .writer;
        w.scan(true);
        w.write(0, t, &row(0)).unwrap();
        assert!(kept.exists());
        assert_eq!(w.health.files_replaced, 0);
    }

    /// An earlier run's rotated files count towards `--csv-retain` and go oldest first, those
    /// of a report this run does not write too (events.csv without `--evidence-dir`): the
    /// probe's own writer knows every report's name.
    #[test]
    fn retention_counts_the_rotated_files_of_reports_this_run_does_not_write() {
        let dir = tempfile::tempdir().unwrap();
        let old = dir.path().join("events-2026-01-01T000001.000000000Z.csv.zst");
        std::fs::write(&old, vec![b'x'; 4000]).unwrap();
        let rotation = Rotation {
            max_bytes: None,
            max_age_ns: None,
            compression: Compression::Zstd,
            retain_bytes: Some(3000),
        };
        let mut csv = super::super::csv::CsvWriter::create(dir.path(), rotation).unwrap();
        assert!(!dir.path().join("events.csv").exists(), "a run without evidence writes no events");
        csv.start_writer().unwrap();
        let health = csv.finish();
        assert!(!old.exists(), "removed to stay under --csv-retain");
        assert_eq!((health.files_removed, health.bytes_removed), (1, 4000));
    }

    #[test]
    fn retention_removes_the_oldest_first_and_counts_them() {
        let dir = tempfile::tempdir().unwrap();
        let mut kept = Retained::default();
        let mut health = CsvHealth::default();
        for (i, stamp) in
            ["2026-01-01T000002.000000000Z", "2026-01-01T000001.000000000Z", "2026-01-01T000003.000000000Z"]
                .iter()
                .enumerate()
        {
            let r = Rotated {
                stamp: stamp.to_string(),
                n: 1,
                stem: format!("s{i}"),
                compression: Compression::None,
            };
            let path = dir.path().join(r.file_name(Compression::None));
            std::fs::write(&path, vec![b'x'; 100]).unwrap();
            kept.add(r, path, 100);
        }
        // 300 kept + 50 outside + 100 more must fit under 400: the oldest (s1) goes.
        assert!(kept.make_room(Some(400), 50, 100, &mut health));
        assert_eq!((health.files_removed, health.bytes_removed), (1, 100));
        assert!(!dir.path().join("s1-2026-01-01T000001.000000000Z.csv").exists());
        assert!(dir.path().join("s0-2026-01-01T000002.000000000Z.csv").exists());
        // Nothing left can make 1000 bytes fit.
        assert!(!kept.make_room(Some(400), 50, 1000, &mut health));
        assert_eq!((health.files_removed, kept.bytes), (3, 0));
    }
}
