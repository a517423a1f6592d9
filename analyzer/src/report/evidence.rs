//! Evidence on demand (docs/EVIDENCE.md), the stats side's half: each record a worker
//! hands over becomes a pcapng file in `--evidence-dir` (one interface per vantage, packet
//! times in nanoseconds, the original lengths, a comment naming the event, its QP and the
//! verdict), within `--evidence-max-per-minute` files per event kind and
//! `--evidence-max-bytes` on disk (the oldest files removed first). Every event is counted
//! and listed with its file or why it has none. `roceprobe evidence DIR` lists a directory.

use super::time::rfc3339_nanos;
use crate::metrics::evidence::{EventRow, EvidenceTotals, KindCounts, MAX_LISTED};
use crate::metrics::latency::Op;
use crate::track::evidence::{Event, EventKind, EvidenceRecord, Status, Verdict};
use crate::track::Vantage;
use anyhow::{bail, Context, Result};
use std::collections::{HashMap, VecDeque};
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// `--evidence-*`: what the workers keep, and where the files go and how many.
#[derive(Debug, Clone)]
pub struct EvidenceSettings {
    pub track: crate::track::evidence::EvidenceConfig,
    pub output: EvidenceOutput,
}

impl EvidenceSettings {
    /// The command line's defaults, into `dir`.
    pub fn with_defaults(dir: PathBuf) -> Self {
        use crate::defaults as d;
        Self {
            track: crate::track::evidence::EvidenceConfig {
                before: d::EVIDENCE_BEFORE,
                after: crate::track::evidence::After::Packets(d::EVIDENCE_AFTER_PACKETS),
                snaplen: d::EVIDENCE_SNAPLEN,
                slow_io_ns: d::EVIDENCE_SLOW_IO_NS,
                max_per_minute: d::EVIDENCE_MAX_PER_MINUTE,
                burst_gap_ns: d::FLOW_IDLE_NS,
                wait_for_records: false,
            },
            output: EvidenceOutput { dir, max_bytes: d::EVIDENCE_MAX_BYTES_N },
        }
    }
}

/// Where the files go, and how much of the disk they take (the per-minute bound and the
/// snap length are the workers', [`EvidenceSettings::track`]).
#[derive(Debug, Clone)]
pub struct EvidenceOutput {
    pub dir: PathBuf,
    pub max_bytes: u64,
}

impl EvidenceOutput {
    /// Creates the directory if needed and checks it can be written, before any work starts.
    pub fn check(&self) -> Result<()> {
        if super::dangling_link(&self.dir) {
            bail!("--evidence-dir {}: a symbolic link to nothing", self.dir.display());
        }
        std::fs::create_dir_all(&self.dir)
            .with_context(|| format!("--evidence-dir: cannot create {}", self.dir.display()))?;
        super::can_write_in(&self.dir)
            .with_context(|| format!("--evidence-dir: cannot write in {}", self.dir.display()))
    }
}

/// The most one vantage counted of a signal: a packet mirrored at both vantages is one
/// packet, counted at each.
fn most<T: Ord + Default + Copy>(per_vantage: [T; 2]) -> T {
    per_vantage[0].max(per_vantage[1])
}

/// The verdict in words (each count: the most one vantage saw).
pub fn verdict_text(e: &Event) -> String {
    let op = |o: Op| o.as_str();
    match e.verdict {
        Verdict::Loss { psn, gap_psns, naks, retransmitted } => {
            let mut v = format!("loss from PSN {psn}");
            // The most one vantage saw: one lost packet is missing at each vantage
            // downstream of the loss, and one NAK is seen at each, not twice.
            let missing = most(gap_psns);
            if missing > 0 {
                v += &format!(", {missing} PSN(s) missing at a vantage");
            }
            let naks = most(naks);
            if naks > 0 {
                v += &format!(", NAK sequence error x{naks}");
            }
            v += if retransmitted { ", retransmitted (go-back-N)" } else { ", no retransmission seen" };
            v
        }
        Verdict::RnrNak { psn, naks, retransmitted } => format!(
            "receiver not ready at PSN {psn} (RNR NAK x{}){}",
            most(naks),
            if retransmitted { ", sent again after the RNR timer" } else { "" }
        ),
        Verdict::Congestion { cnps, ce } => {
            format!("congestion: {} CNP(s), {} ECN-CE mark(s)", most(cnps), most(ce))
        }
        Verdict::SlowIo { op: o, cid, io_ns, bytes } => {
            format!("slow NVMe {} CID {cid}: {:.3} ms, {bytes} bytes", op(o), io_ns as f64 / 1e6)
        }
        Verdict::IoTimeout { op: o, cid, waited_ns } => {
            format!("NVMe {} CID {cid}: no completion within {:.3} ms", op(o), waited_ns as f64 / 1e6)
        }
        Verdict::IcrcError { packets } => format!("{} packet(s) with a wrong ICRC", most(packets)),
    }
}

fn compact_time(ns: u64) -> String {
    // 2024-01-01T00:00:00.000000000Z -> 20240101T000000.000000000Z
    rfc3339_nanos(ns).replace(['-', ':'], "")
}

fn host(ip: &std::net::IpAddr) -> String {
    ip.to_string().replace(':', "-")
}

/// A QPN in a name or a comment: `unknown` for one no packet told (a CNP whose throttled
/// flow could not be told apart; events.csv and the summary carry 4294967295, above every
/// 24-bit QPN).
fn qpn_text(qpn: u32) -> String {
    if qpn > 0xFF_FFFF {
        "unknown".to_owned()
    } else {
        qpn.to_string()
    }
}

/// `TIME_KIND_SRC_DST_qpQPN.pcapng`: time, event and QP.
pub fn file_name(e: &Event) -> String {
    format!(
        "{}_{}_{}_{}_qp{}.pcapng",
        compact_time(e.ts),
        e.kind.as_str(),
        host(&e.qp.src),
        host(&e.qp.dst),
        qpn_text(e.qp.dst_qpn)
    )
}

/// Whether a file name is one this writer gives (and, to keep within its bound, removes).
pub fn is_evidence_file(name: &str) -> bool {
    name.ends_with(".pcapng")
        && name.split_once('_').is_some_and(|(_, rest)| {
            EventKind::ALL.iter().any(|k| rest.strip_prefix(k.as_str()).is_some_and(|r| r.starts_with('_')))
        })
}

// --- pcapng ----------------------------------------------------------------------------

fn option(out: &mut Vec<u8>, code: u16, value: &[u8]) {
    out.extend_from_slice(&code.to_le_bytes());
    out.extend_from_slice(&(value.len() as u16).to_le_bytes());
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(4), 0);
}

fn block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
    let len = (12 + body.len()) as u32;
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&len.to_le_bytes());
}

/// The comment every file carries (and `roceprobe evidence` reads back).
fn comment(e: &Event, truncated: u32) -> String {
    let mut c = format!(
        "roceprobe evidence\nevent: {}\ntime: {}\nflow: {} -> {} QP {} (first seen at {})\nverdict: {}",
        e.kind.as_str(),
        rfc3339_nanos(e.ts),
        e.qp.src,
        e.qp.dst,
        qpn_text(e.qp.dst_qpn),
        e.vantage,
        verdict_text(e)
    );
    if truncated > 0 {
        c += &format!("\ntruncated: {truncated} packet(s) of the event's flows did not fit");
    }
    c
}

/// The record as a pcapng file: a section header with the comment, an interface per
/// vantage (Ethernet, nanosecond times), a packet block per packet (the event's own with a
/// comment).
/// A pcapng section header block's type, the first word of every pcapng file.
const SECTION_HEADER: u32 = 0x0A0D_0D0A;

pub fn pcapng(rec: &EvidenceRecord, snaplen: u32) -> Vec<u8> {
    let e = &rec.event;
    let mut out = Vec::with_capacity(rec.bytes.len() + 64 * rec.packets.len() + 1024);
    let mut body = Vec::with_capacity(512);
    body.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&0u16.to_le_bytes());
    body.extend_from_slice(&u64::MAX.to_le_bytes());
    option(&mut body, 1, comment(e, rec.truncated).as_bytes());
    option(&mut body, 4, format!("roceprobe {}", env!("CARGO_PKG_VERSION")).as_bytes());
    option(&mut body, 0, &[]);
    block(&mut out, SECTION_HEADER, &body);
    for v in [Vantage::Compute, Vantage::Storage] {
        body.clear();
        body.extend_from_slice(&1u16.to_le_bytes()); // LINKTYPE_ETHERNET
        body.extend_from_slice(&0u16.to_le_bytes());
        body.extend_from_slice(&snaplen.to_le_bytes());
        option(&mut body, 2, v.as_str().as_bytes()); // if_name
        option(&mut body, 9, &[9]); // if_tsresol: nanoseconds
        option(&mut body, 0, &[]);
        block(&mut out, 1, &body);
    }
    let mut at = 0usize;
    for (i, k) in rec.packets.iter().enumerate() {
        let data = &rec.bytes[at..at + k.len as usize];
        at += k.len as usize;
        body.clear();
        body.extend_from_slice(&(k.vantage as u32).to_le_bytes());
        body.extend_from_slice(&((k.ts >> 32) as u32).to_le_bytes());
        body.extend_from_slice(&(k.ts as u32).to_le_bytes());
        body.extend_from_slice(&k.len.to_le_bytes());
        body.extend_from_slice(&k.wire_len.max(k.len).to_le_bytes());
        body.extend_from_slice(data);
        body.resize(body.len().next_multiple_of(4), 0);
        let c = if rec.trigger == Some(i) {
            "the packet that raised this"
        } else if rec.command == Some(i) {
            "the command of this"
        } else {
            ""
        };
        if !c.is_empty() {
            option(&mut body, 1, format!("roceprobe: {c} {} event", e.kind.as_str()).as_bytes());
            option(&mut body, 0, &[]);
        }
        block(&mut out, 6, &body);
    }
    out
}

// --- the writer ------------------------------------------------------------------------

/// Writes the records into files within the bounds, and counts.
pub struct EvidenceWriter {
    out: EvidenceOutput,
    max_per_minute: u32,
    snaplen: u32,
    /// Files in the directory, oldest first, with their sizes and whether removing them
    /// failed: earlier runs' (the first `earlier`), then this run's, each by name (a name
    /// begins with its event's time, whatever order the workers' records come in).
    files: VecDeque<(PathBuf, u64, bool)>,
    earlier: usize,
    on_disk: u64,
    /// The bytes of the files whose removal failed, and why the first failed.
    stuck_bytes: u64,
    stuck_why: Option<String>,
    /// Files per (kind, minute of packet time).
    minutes: HashMap<(EventKind, u64), u32>,
    told: bool,
}

impl EvidenceWriter {
    /// The evidence files already in the directory count against `--evidence-max-bytes`
    /// (oldest first by their names, which begin with their time); the run's counts start
    /// in the totals returned.
    pub fn new(settings: &EvidenceSettings) -> (Self, EvidenceTotals) {
        let out = settings.output.clone();
        let mut found: Vec<(String, PathBuf, u64)> = std::fs::read_dir(&out.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                // Only a regular file (not a link) under an evidence name that roceprobe
                // wrote is its to count and to remove: anything else a user keeps there is
                // left alone.
                if !is_evidence_file(&name) || !e.file_type().ok()?.is_file() {
                    return None;
                }
                Some((name, e.path(), written_here(&e.path())?))
            })
            .collect();
        found.sort();
        let on_disk = found.iter().map(|f| f.2).sum();
        let mut totals = EvidenceTotals {
            dir: out.dir.display().to_string(),
            kinds: EventKind::ALL.iter().map(|k| (k.as_str().to_owned(), KindCounts::default())).collect(),
            ..EvidenceTotals::default()
        };
        let mut w = Self {
            out,
            max_per_minute: settings.track.max_per_minute,
            snaplen: settings.track.snaplen,
            earlier: found.len(),
            files: found.into_iter().map(|(_, p, s)| (p, s, false)).collect(),
            on_disk,
            stuck_bytes: 0,
            stuck_why: None,
            minutes: HashMap::new(),
            told: false,
        };
        if let Err(err) = w.make_room(0, None, &mut totals) {
            w.tell(&err);
        }
        totals.files_on_disk = w.files.len() as u64;
        totals.bytes_on_disk = w.on_disk;
        (w, totals)
    }

    /// Removes the oldest files until `need` more bytes fit; for a new file named
    /// `before`, of this run's only those older than it (a file a worker hands over late,
    /// after newer ones, displaces none of them). Whether `need` fits then.
    /// A file that cannot be removed stays counted (it is still on disk) and the next
    /// oldest is tried; if that leaves too little room, what needs it is refused.
    /// A file whose removal failed is tried again each time (the cause may pass), but no
    /// other file is removed while those alone leave too little room: that would lose
    /// evidence and still not make room.
    fn make_room(&mut self, need: u64, before: Option<&str>, t: &mut EvidenceTotals) -> Result<bool> {
        let max = self.out.max_bytes;
        let mut i = 0;
        while self.on_disk + need > max && i < self.files.len() {
            let (path, size, was_stuck) = &mut self.files[i];
            let own = i >= self.earlier;
            if own
                && before.is_some_and(|b| path.file_name().is_some_and(|n| n.to_string_lossy().as_ref() > b))
            {
                break;
            }
            if !*was_stuck && self.stuck_bytes + need > max {
                break;
            }
            // A file found gone already (removed by someone else) leaves the count as it
            // is: only what this run removed is `files_removed`.
            let removed = match std::fs::remove_file(&*path) {
                Ok(()) => true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
                Err(e) => {
                    if !*was_stuck {
                        *was_stuck = true;
                        self.stuck_bytes += *size;
                    }
                    let why = || {
                        format!("cannot remove {} to stay within --evidence-max-bytes: {e}", path.display())
                    };
                    self.stuck_why.get_or_insert_with(why);
                    i += 1;
                    continue;
                }
            };
            if *was_stuck {
                self.stuck_bytes -= *size;
                if self.stuck_bytes == 0 {
                    self.stuck_why = None;
                }
            }
            if removed {
                t.files_removed += 1;
                t.bytes_removed += *size;
            }
            self.on_disk -= *size;
            self.files.remove(i);
            if !own {
                self.earlier -= 1;
            }
        }
        match &self.stuck_why {
            Some(why) if self.on_disk + need > max => Err(anyhow::anyhow!("{why}")),
            _ => Ok(self.on_disk + need <= max),
        }
    }

    /// At the end of the run: the files still in the directory as regular files, counted
    /// as they are (`files_on_disk`, `bytes_on_disk`): those removed or replaced under the
    /// run count no more.
    pub fn recount(&mut self, t: &mut EvidenceTotals) {
        let there = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
        self.earlier = self.files.range(..self.earlier).filter(|f| there(&f.0)).count();
        self.files.retain(|(p, ..)| there(p));
        self.on_disk = self.files.iter().map(|f| f.1).sum();
        self.stuck_bytes = self.files.iter().filter(|f| f.2).map(|f| f.1).sum();
        t.files_on_disk = self.files.len() as u64;
        t.bytes_on_disk = self.on_disk;
    }

    /// One record from a worker: its file written (or why not), counted and listed; the
    /// row for events.csv is returned.
    pub fn take(&mut self, rec: &EvidenceRecord, t: &mut EvidenceTotals) -> EventRow {
        let e = &rec.event;
        t.kind_mut(e.kind).events += 1;
        t.packets_truncated += u64::from(rec.truncated);
        let minute = e.ts / 60_000_000_000;
        let mut file = String::new();
        let status = match rec.status {
            Status::CappedPerMinute => {
                t.kind_mut(e.kind).capped_per_minute += 1;
                "capped_per_minute"
            }
            Status::NoRoom => {
                t.kind_mut(e.kind).no_room += 1;
                "no_room"
            }
            Status::Kept
                if self.minutes.get(&(e.kind, minute)).copied().unwrap_or(0) >= self.max_per_minute =>
            {
                t.kind_mut(e.kind).capped_per_minute += 1;
                "capped_per_minute"
            }
            Status::Kept => match self.write(rec, t) {
                Ok((name, size)) => {
                    *self.minutes.entry((e.kind, minute)).or_default() += 1;
                    t.kind_mut(e.kind).files += 1;
                    t.files_written += 1;
                    t.bytes_written += size;
                    file = name;
                    "written"
                }
                Err(err) => {
                    self.tell(&err);
                    t.kind_mut(e.kind).write_failed += 1;
                    "write_failed"
                }
            },
        };
        t.files_on_disk = self.files.len() as u64;
        t.bytes_on_disk = self.on_disk;
        let row = EventRow {
            time: rfc3339_nanos(e.ts),
            ts_ns: e.ts,
            kind: e.kind.as_str().to_owned(),
            vantage: e.vantage.as_str().to_owned(),
            src_ip: e.qp.src.to_string(),
            dst_ip: e.qp.dst.to_string(),
            dst_qpn: e.qp.dst_qpn,
            verdict: verdict_text(e),
            file,
            status: status.to_owned(),
            packets: if status == "written" { rec.packets.len() } else { 0 },
        };
        if t.events.len() < MAX_LISTED {
            t.events.push(row.clone());
        } else {
            t.events_not_listed += 1;
        }
        row
    }

    /// The first failure is told (once a run); the others are counted.
    fn tell(&mut self, err: &anyhow::Error) {
        if !self.told {
            crate::note!(
                "roceprobe: warning: writing evidence in {} failed ({err:#}); capture goes on, failures are counted (summary evidence)",
                self.out.dir.display()
            );
            self.told = true;
        }
    }

    /// An event a worker listed without a file (capped, or no record free), counted and
    /// listed as [`EvidenceWriter::take`] does.
    pub fn take_no_file(&mut self, n: &crate::track::evidence::NoFile, t: &mut EvidenceTotals) -> EventRow {
        let rec = EvidenceRecord {
            event: n.event,
            status: n.status,
            packets: Vec::new(),
            bytes: Vec::new(),
            trigger: None,
            command: None,
            truncated: 0,
            home: None,
        };
        self.take(&rec, t)
    }

    fn write(&mut self, rec: &EvidenceRecord, t: &mut EvidenceTotals) -> Result<(String, u64)> {
        let bytes = pcapng(rec, self.snaplen);
        let size = bytes.len() as u64;
        if size > self.out.max_bytes {
            bail!("a file of {size} bytes is larger than --evidence-max-bytes");
        }
        if !self.out.dir.is_dir() {
            // Removed under the running probe (a clean-up job, say): made again, as the CSV
            // reports' folder is; what was in it went with it (none of it removed here).
            std::fs::create_dir_all(&self.out.dir)
                .with_context(|| format!("cannot create {}", self.out.dir.display()))?;
            self.files.clear();
            (self.on_disk, self.stuck_bytes, self.stuck_why, self.earlier) = (0, 0, None, 0);
            t.dir_recreated += 1;
        }
        let mut name = file_name(&rec.event);
        let mut n = 1;
        // Taken names (a link too, even one that leads nowhere) are left alone.
        while std::fs::symlink_metadata(self.out.dir.join(&name)).is_ok() {
            n += 1;
            name = format!("{}-{n}.pcapng", file_name(&rec.event).trim_end_matches(".pcapng"));
        }
        // Room among the older files; where they leave too little, this file is the
        // oldest of those that would stay: written, then removed first, as it would have
        // been had it come before the newer ones.
        let fits = self.make_room(size, Some(&name), t)?;
        let path = self.out.dir.join(&name);
        let mut made = false;
        let written = super::create_regular(&path, true).and_then(|mut f| {
            made = true;
            f.write_all(&bytes).and_then(|_| f.flush())
        });
        if let Err(e) = written {
            // Only what this run made is removed.
            if made {
                let _ = std::fs::remove_file(&path);
            }
            return Err(e).with_context(|| format!("cannot write {}", path.display()));
        }
        if !fits && std::fs::remove_file(&path).is_ok() {
            t.files_removed += 1;
            t.bytes_removed += size;
            return Ok((name, size));
        }
        let own = self.files.range(self.earlier..);
        let at = self.earlier + own.take_while(|(p, ..)| p.file_name() <= path.file_name()).count();
        self.files.insert(at, (path, size, false));
        self.on_disk += size;
        Ok((name, size))
    }
}

// --- roceprobe evidence DIR ------------------------------------------------------------

/// The most of a file's start read for its section header (its comment names the event);
/// a longer header is read as far as this.
const SECTION_HEADER_READ: u64 = 64 << 10;

/// The comment of a pcapng section header block `b` (as far as it was read), empty if
/// none. A file cut short (a run killed while writing it) claims more than it holds.
fn section_comment(b: &[u8]) -> String {
    let shb_len = b.get(4..8).map_or(0, |l| u32::from_le_bytes(l.try_into().unwrap()) as usize).min(b.len());
    let mut comment = String::new();
    let mut o = 24;
    while o + 4 <= shb_len.saturating_sub(4) {
        let code = u16::from_le_bytes([b[o], b[o + 1]]);
        let len = u16::from_le_bytes([b[o + 2], b[o + 3]]) as usize;
        if code == 0 {
            break;
        }
        if code == 1 {
            comment = String::from_utf8_lossy(b.get(o + 4..o + 4 + len).unwrap_or_default()).into_owned();
        }
        o += 4 + len.next_multiple_of(4);
    }
    comment
}

/// The value of the comment's line `name: value`, empty if it has none.
fn comment_field<'c>(comment: &'c str, name: &str) -> &'c str {
    comment.lines().find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(": "))).unwrap_or("")
}

/// The length of the regular file at `path` if roceprobe wrote it (an evidence file of
/// this run or an earlier one): its section header's comment names an event, or it is cut
/// short before that comment could be read (empty, or a pcapng section header longer than
/// the file: a run killed while writing it). Only the section header is read (a few
/// hundred bytes).
fn written_here(path: &Path) -> Option<u64> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut b = Vec::new();
    (&mut file).take(8).read_to_end(&mut b).ok()?;
    let word = |b: &[u8], o: usize| b.get(o..o + 4).map(|w| u32::from_le_bytes(w.try_into().unwrap()));
    let ours = match (len, word(&b, 0), word(&b, 4)) {
        (0, ..) => true,
        (_, Some(SECTION_HEADER), None) => true,
        (_, Some(SECTION_HEADER), Some(shb)) if u64::from(shb) > len => true,
        (_, Some(SECTION_HEADER), Some(shb)) => {
            // The rest of the section header, as far as a listing reads it.
            let rest = u64::from(shb).min(SECTION_HEADER_READ).saturating_sub(8);
            (&mut file).take(rest).read_to_end(&mut b).is_ok()
                && !comment_field(&section_comment(&b), "event").is_empty()
        }
        // Cut within its first 4 bytes, or not a pcapng file.
        (_, None, _) => SECTION_HEADER.to_le_bytes().starts_with(&b),
        _ => false,
    };
    ours.then_some(len)
}

/// What a file says of itself: (time, event, flow, verdict) from its comment, and its
/// packets.
pub fn describe_file(path: &Path) -> Result<(String, String, String, String, String)> {
    use std::io::{BufReader, Read};
    let what = || format!("cannot read {}", path.display());
    // Only what the listing needs is read: the section header (its comment), then the
    // length of each block; a FIFO or a device under an evidence file's name is not read.
    let meta = std::fs::metadata(path).with_context(what)?;
    if !meta.is_file() {
        bail!("{}: not a regular file", path.display());
    }
    let mut file = BufReader::new(std::fs::File::open(path).with_context(what)?);
    let mut b = Vec::new();
    (&mut file).take(SECTION_HEADER_READ).read_to_end(&mut b).with_context(what)?;
    let u32_at = |o: usize| -> Option<u32> { Some(u32::from_le_bytes(b.get(o..o + 4)?.try_into().ok()?)) };
    if u32_at(0) != Some(SECTION_HEADER) || u32_at(8) != Some(0x1A2B_3C4D) {
        bail!("{}: not a pcapng file written little-endian", path.display());
    }
    if b.get(12..14) != Some(&[1, 0][..]) {
        bail!("{}: not pcapng version 1", path.display());
    }
    let comment = section_comment(&b);
    let field = |name: &str| comment_field(&comment, name).to_owned();
    let mut packets = 0;
    // The blocks start where the section header says it ends (past what was read, if it
    // says so; a file cut short ends the count).
    let mut at = u64::from(u32_at(4).unwrap_or(0));
    // A block's type and length, and for a packet its interface and captured length.
    let mut block = [0u8; 24];
    let (mut interfaces, mut damage) = (0u32, None);
    // Where the file is read up to (moving within the reader's buffer asks the system for
    // nothing: a file of many small blocks is read in large reads).
    let mut pos = b.len() as u64;
    while file.seek_relative(at as i64 - pos as i64).is_ok() && file.read_exact(&mut block[..8]).is_ok() {
        let word = |b: &[u8; 24], k: usize| u32::from_le_bytes([b[k], b[k + 1], b[k + 2], b[k + 3]]);
        let (kind, len) = (word(&block, 0), word(&block, 4));
        if len < 12 || len % 4 != 0 {
            damage = Some("a block's length is wrong");
            break;
        }
        // A block ends with its length again: one that does not was cut or overwritten.
        let mut end = [0u8; 4];
        let ends = file.seek_relative(i64::from(len) - 12).is_ok() && file.read_exact(&mut end).is_ok();
        if !ends {
            break;
        }
        pos = at + u64::from(len);
        if u32::from_le_bytes(end) != len {
            damage = Some("a block's two lengths differ");
            break;
        }
        match kind {
            1 => interfaces += 1,
            6 => {
                // An enhanced packet block: interface, time, captured and original length.
                if len < 32 {
                    damage = Some("a packet block too short");
                    break;
                }
                // Back to the block's body, just past its type and length.
                file.seek_relative(8 - i64::from(len)).with_context(what)?;
                if file.read_exact(&mut block[8..24]).is_err() {
                    break;
                }
                pos = at + 24;
                if word(&block, 8) >= interfaces {
                    damage = Some("a packet of an interface never described");
                    break;
                }
                if u64::from(word(&block, 20)) > u64::from(len) - 32 {
                    damage = Some("a packet longer than its block");
                    break;
                }
                packets += 1;
            }
            _ => {}
        }
        at += u64::from(len);
    }
    // A whole file ends where its last block does.
    let packets = match (damage, at == meta.len()) {
        (Some(why), _) => format!("{packets} (damaged after them: {why})"),
        (None, true) => packets.to_string(),
        (None, false) => format!("{packets} (file cut short)"),
    };
    // A pcapng file whose comment names no event: cut short within its header (before the
    // comment), or one roceprobe did not write; told as such, with what it holds.
    if field("event").is_empty() {
        let why = match u64::from(u32_at(4).unwrap_or(0)) > meta.len() {
            true => "cut short within its header, its event comment lost",
            false => "a pcapng file without roceprobe's event comment (not an evidence file)",
        };
        return Ok((String::new(), "?".into(), String::new(), why.into(), packets));
    }
    Ok((field("time"), field("event"), field("flow"), field("verdict"), packets))
}

/// `roceprobe evidence DIR`: a table of the evidence files, oldest first, and how many of
/// them could not be read whole (marked in the table: `?`, cut short or damaged).
pub fn list(dir: &Path) -> Result<(String, usize)> {
    let entries =
        std::fs::read_dir(dir).with_context(|| format!("evidence: cannot read {}", dir.display()))?;
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| is_evidence_file(n))
        .collect();
    names.sort();
    let mut rows = vec![[
        "TIME".to_owned(),
        "EVENT".to_owned(),
        "FLOW".to_owned(),
        "PACKETS".to_owned(),
        "VERDICT".to_owned(),
        "FILE".to_owned(),
    ]];
    let mut unreadable = 0;
    for n in &names {
        match describe_file(&dir.join(n)) {
            Ok((time, event, flow, verdict, packets)) => {
                // Not read whole: cut short or damaged (a whole pcapng file of another's,
                // `?` for want of roceprobe's comment, was read whole).
                unreadable += usize::from(packets.contains('(') || verdict.starts_with("cut short"));
                rows.push([time, event, flow, packets, verdict, n.clone()])
            }
            Err(e) => {
                unreadable += 1;
                rows.push([
                    String::new(),
                    "?".into(),
                    String::new(),
                    String::new(),
                    format!("{e:#}"),
                    n.clone(),
                ])
            }
        }
    }
    let widths: Vec<usize> =
        (0..6).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = r.iter().zip(&widths).map(|(v, w)| format!("{v:<w$}")).collect();
        out += line.join("  ").trim_end();
        out.push('\n');
    }
    out += &format!("{} evidence file(s) in {}\n", names.len(), dir.display());
    Ok((out, unreadable))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::track::evidence::{Kept, Qp};

    fn record(kind: EventKind, ts: u64, packets: usize) -> EvidenceRecord {
        let mut r = EvidenceRecord {
            event: Event {
                kind,
                ts,
                qp: Qp { src: "10.0.0.1".parse().unwrap(), dst: "10.0.0.2".parse().unwrap(), dst_qpn: 17 },
                vantage: Vantage::Compute,
                verdict: Verdict::Congestion { cnps: [1, 0], ce: [0, 0] },
            },
            status: Status::Kept,
            packets: Vec::new(),
            bytes: Vec::new(),
            trigger: Some(0),
            command: None,
            truncated: 0,
            home: None,
        };
        for i in 0..packets {
            r.packets.push(Kept {
                ts: ts + i as u64,
                wire_len: 100,
                len: 61,
                vantage: Vantage::Storage,
                slot: 0,
            });
            r.bytes.extend(std::iter::repeat_n(i as u8, 61));
        }
        r
    }

    #[test]
    fn blocks_are_whole_and_aligned() {
        let b = pcapng(&record(EventKind::Loss, 1_700_000_000_123_456_789, 3), 256);
        let mut o = 0;
        let mut kinds = Vec::new();
        while o < b.len() {
            let kind = u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
            let len = u32::from_le_bytes(b[o + 4..o + 8].try_into().unwrap()) as usize;
            assert_eq!(len % 4, 0);
            assert_eq!(u32::from_le_bytes(b[o + len - 4..o + len].try_into().unwrap()) as usize, len);
            kinds.push(kind);
            o += len;
        }
        assert_eq!(o, b.len());
        assert_eq!(kinds, [0x0A0D_0D0A, 1, 1, 6, 6, 6]);
    }

    #[test]
    fn the_per_minute_cap_and_the_disk_cap_hold_and_their_counts_add_up() {
        let dir = std::env::temp_dir().join(format!("roceprobe-evidence-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let one = pcapng(&record(EventKind::Loss, 0, 4), 256).len() as u64;
        let mut settings = EvidenceSettings::with_defaults(dir.clone());
        settings.track.max_per_minute = 3;
        settings.track.snaplen = 256;
        settings.output.max_bytes = 2 * one + one / 2;
        let (mut w, mut t) = EvidenceWriter::new(&settings);
        for i in 0..10u64 {
            // Ten losses a second apart (one minute), two congestion events a minute apart.
            w.take(&record(EventKind::Loss, 1_000_000_000 * (i + 1), 4), &mut t);
        }
        w.take(&record(EventKind::Congestion, 0, 4), &mut t);
        w.take(&record(EventKind::Congestion, 60_000_000_000, 4), &mut t);
        let loss = t.kind(EventKind::Loss);
        assert_eq!((loss.events, loss.files, loss.capped_per_minute), (10, 3, 7));
        assert_eq!(t.kind(EventKind::Congestion).files, 2);
        assert_eq!(t.files_written, 5);
        let on_disk = std::fs::read_dir(&dir).unwrap().count() as u64;
        assert_eq!(on_disk, 2, "two files fit");
        assert_eq!(t.files_written - t.files_removed, on_disk);
        let sizes: u64 = std::fs::read_dir(&dir).unwrap().map(|f| f.unwrap().metadata().unwrap().len()).sum();
        assert_eq!(t.bytes_on_disk, sizes);
        assert!(sizes <= 2 * one + one / 2);
        assert_eq!(t.events.iter().filter(|r| r.status == "written").count(), 5);
        // The two left are the newest.
        let (listed, unreadable) = list(&dir).unwrap();
        assert_eq!(unreadable, 0);
        assert!(listed.contains("congestion"), "{listed}");
        assert!(listed.contains("2 evidence file(s)"), "{listed}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_oldest_by_time_go_first_and_files_gone_under_the_run_count_no_more() {
        let dir = std::env::temp_dir().join(format!("roceprobe-evidence-order-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let one = pcapng(&record(EventKind::Loss, 0, 4), 256).len() as u64;
        let mut settings = EvidenceSettings::with_defaults(dir.clone());
        settings.track.snaplen = 256;
        settings.output.max_bytes = 2 * one + one / 2;
        let (mut w, mut t) = EvidenceWriter::new(&settings);
        // Handed over out of time order (several workers): seconds 3, 1, 4, 2.
        for s in [3, 1, 4, 2] {
            w.take(&record(EventKind::Loss, 1_000_000_000 * s, 4), &mut t);
        }
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|f| f.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        let at = |s: u64| file_name(&record(EventKind::Loss, 1_000_000_000 * s, 4).event);
        assert_eq!(names, [at(3), at(4)], "the two newest");
        assert_eq!((t.files_written, t.files_removed, t.files_on_disk), (4, 2, 2));
        // One removed under the run: counted as gone at the end.
        std::fs::remove_file(dir.join(at(3))).unwrap();
        w.recount(&mut t);
        assert_eq!((t.files_on_disk, t.bytes_on_disk), (1, one));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Turns the file `name` in `dir` into a directory under its name, which `remove_file`
    /// refuses even to root (as it would an immutable file, or one on a read-only file
    /// system).
    fn stick(dir: &Path, name: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::remove_file(&p).unwrap();
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("x"), b"x").unwrap();
        p
    }

    #[test]
    fn a_file_that_cannot_be_removed_stays_counted_and_the_bound_holds() {
        // A file of the run that cannot be removed ([`stick`]): it stays counted, the next oldest goes instead, and when none
        // can make room the file that needs it is not written.
        let dir = tempfile::tempdir().unwrap();
        let size = pcapng(&record(EventKind::Loss, 1_000_000_000, 4), 256).len() as u64;
        let mut settings = EvidenceSettings::with_defaults(dir.path().to_owned());
        // Room for two files.
        settings.output.max_bytes = 3 * size - 1;
        let (mut w, mut t) = EvidenceWriter::new(&settings);
        let first = w.take(&record(EventKind::Loss, 1_000_000_000, 4), &mut t);
        let second = w.take(&record(EventKind::Loss, 2_000_000_000, 4), &mut t);
        let stuck = stick(dir.path(), &first.file);
        let third = w.take(&record(EventKind::Loss, 3_000_000_000, 4), &mut t);
        assert_eq!(third.status, "written");
        assert!(stuck.exists() && !dir.path().join(&second.file).exists());
        assert_eq!((t.files_written, t.files_removed), (3, 1));
        assert_eq!((t.files_on_disk, t.bytes_on_disk), (2, 2 * size));

        // Both left stuck, and no room beside them: nothing is written.
        stick(dir.path(), &third.file);
        let row = w.take(&record(EventKind::Loss, 4_000_000_000, 4), &mut t);
        assert_eq!(row.status, "write_failed");
        assert_eq!((t.kind(EventKind::Loss).write_failed, t.files_written, t.files_removed), (1, 3, 1));
        assert_eq!((t.files_on_disk, t.bytes_on_disk), (2, 2 * size));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn no_file_is_removed_for_room_that_the_stuck_ones_leave_too_little_of() {
        let dir = tempfile::tempdir().unwrap();
        let size = pcapng(&record(EventKind::Loss, 1_000_000_000, 4), 256).len() as u64;
        let mut settings = EvidenceSettings::with_defaults(dir.path().to_owned());
        settings.output.max_bytes = 3 * size - 1;
        let (mut w, mut t) = EvidenceWriter::new(&settings);
        let first = w.take(&record(EventKind::Loss, 1_000_000_000, 4), &mut t);
        let second = w.take(&record(EventKind::Loss, 2_000_000_000, 4), &mut t);
        stick(dir.path(), &first.file);
        // Room for one file now: the first, which cannot go, takes it; the second stays.
        w.out.max_bytes = 2 * size - 1;
        let row = w.take(&record(EventKind::Loss, 3_000_000_000, 4), &mut t);
        assert_eq!(row.status, "write_failed");
        assert!(dir.path().join(&second.file).is_file());
        assert_eq!((t.files_removed, t.files_on_disk), (0, 2));
    }

    #[test]
    fn only_roceprobes_own_files_count_and_are_removed() {
        // Under evidence names: an earlier run's file (counted, and removed first to make
        // room), a text file, a capture without roceprobe's event comment, and a link to an
        // earlier file (each left alone, not counted), and two of roceprobe's cut short.
        let dir = tempfile::tempdir().unwrap();
        let name = |s: u32| format!("20261203T00000{s}.000000000Z_loss_10.0.0.1_10.0.0.2_qp1.pcapng");
        let one = pcapng(&record(EventKind::Loss, 1_000_000_000, 4), 256);
        let size = one.len() as u64;
        std::fs::write(dir.path().join(name(0)), &one).unwrap();
        std::fs::write(dir.path().join(name(1)), b"hello").unwrap();
        let mut other = one.clone();
        // The section header's comment names no event.
        let at = one.windows(7).position(|w| w == b"event: ").unwrap();
        other[at..at + 7].copy_from_slice(b"xxxxx: ");
        std::fs::write(dir.path().join(name(2)), &other).unwrap();
        std::os::unix::fs::symlink(dir.path().join(name(0)), dir.path().join(name(3))).unwrap();
        // roceprobe's own, cut short by a run killed while writing them: empty, and within
        // the section header (counted, and removed in their turn).
        std::fs::write(dir.path().join(name(4)), b"").unwrap();
        std::fs::write(dir.path().join(name(5)), &one[..20]).unwrap();
        let mut settings = EvidenceSettings::with_defaults(dir.path().to_owned());
        settings.output.max_bytes = 2 * size - 1;
        let (mut w, mut t) = EvidenceWriter::new(&settings);
        assert_eq!((t.files_on_disk, t.bytes_on_disk), (3, size + 20));
        for i in 0..5 {
            assert_eq!(
                w.take(&record(EventKind::Loss, (i + 2) * 1_000_000_000, 4), &mut t).status,
                "written"
            );
        }
        // The first write removes the earlier run's file; the second the two cut short and
        // the first's; each later one the one before it.
        assert_eq!((t.files_written, t.files_removed, t.files_on_disk), (5, 7, 1));
        for s in [0, 4, 5] {
            assert!(!dir.path().join(name(s)).exists(), "{} removed", name(s));
        }
        for s in 1..=3 {
            assert!(std::fs::symlink_metadata(dir.path().join(name(s))).is_ok(), "{} left alone", name(s));
        }
    }

    #[test]
    fn a_directory_removed_under_the_run_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let ev = dir.path().join("evidence");
        let mut settings = EvidenceSettings::with_defaults(ev.clone());
        // Room for one file: the second would remove the first, had it not gone with the
        // directory (it is not counted as removed).
        settings.output.max_bytes =
            2 * pcapng(&record(EventKind::Loss, 1_000_000_000, 4), 256).len() as u64 - 1;
        settings.output.check().unwrap();
        let (mut w, mut t) = EvidenceWriter::new(&settings);
        assert_eq!(w.take(&record(EventKind::Loss, 1_000_000_000, 4), &mut t).status, "written");
        std::fs::remove_dir_all(&ev).unwrap();
        let row = w.take(&record(EventKind::Loss, 2_000_000_000, 4), &mut t);
        assert_eq!(row.status, "written");
        assert!(ev.join(&row.file).is_file());
        assert_eq!((t.files_written, t.files_removed, t.files_on_disk, t.dir_recreated), (2, 0, 1, 1));
    }

    #[test]
    fn a_file_cut_short_is_listed_not_a_panic() {
        // A section header block that claims 1,000 bytes in a 26-byte file (a run killed
        // while writing it): its first bytes by hand, block type, length, byte-order magic.
        let dir = tempfile::tempdir().unwrap();
        let mut b = Vec::new();
        b.extend_from_slice(&0x0A0D_0D0Au32.to_le_bytes());
        b.extend_from_slice(&1000u32.to_le_bytes());
        b.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
        b.extend_from_slice(&[1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 1, 0]);
        assert_eq!(b.len(), 26);
        std::fs::write(dir.path().join("20261203T000000.000000000Z_loss_10.0.0.1_10.0.0.2_qp1.pcapng"), &b)
            .unwrap();
        let (out, unreadable) = list(dir.path()).unwrap();
        assert_eq!(unreadable, 1);
        assert!(out.contains("_qp1.pcapng"), "{out}");
        assert!(out.contains("0 (file cut short)"), "{out}");
        assert!(out.contains("cut short within its header, its event comment lost"), "{out}");
        assert!(out.ends_with(&format!("1 evidence file(s) in {}\n", dir.path().display())), "{out}");
    }

    #[test]
    fn a_pcapng_file_roceprobe_did_not_write_is_told_as_such() {
        // A whole section header block without options (28 bytes, by the pcapng layout:
        // type, length, byte-order magic, version 1.0, section length -1, length again),
        // then an interface description block (20 bytes): no comment names an event.
        let dir = tempfile::tempdir().unwrap();
        let mut b = Vec::new();
        for w in [0x0A0D_0D0Au32, 28, 0x1A2B_3C4D, 1, u32::MAX, u32::MAX, 28, 1, 20, 1, 0, 20] {
            b.extend_from_slice(&w.to_le_bytes());
        }
        std::fs::write(dir.path().join("20261203T000000.000000000Z_loss_10.0.0.1_10.0.0.2_qp1.pcapng"), &b)
            .unwrap();
        let (out, unreadable) = list(dir.path()).unwrap();
        assert_eq!(unreadable, 0, "read whole, not one of roceprobe's");
        let row = out.lines().nth(1).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[..2], ["?", "0"], "{out}");
        assert!(row.contains("without roceprobe's event comment (not an evidence file)"), "{out}");
    }

    #[test]
    fn a_fifo_or_a_large_file_under_an_evidence_name_is_listed_without_reading_it() {
        // A FIFO would block a reader until a writer came; a sparse 2 GiB file would be
        // read whole. Only a regular file's first bytes and its blocks' lengths are read.
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("20261203T000000.000000000Z_loss_10.0.0.1_10.0.0.2_qp1.pcapng");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let big = std::fs::File::create(
            dir.path().join("20261203T000001.000000000Z_loss_10.0.0.1_10.0.0.2_qp2.pcapng"),
        )
        .unwrap();
        big.set_len(2 << 30).unwrap();
        let (out, unreadable) = list(dir.path()).unwrap();
        assert_eq!(unreadable, 2);
        assert!(out.contains("not a regular file"), "{out}");
        assert!(out.contains("not a pcapng file"), "{out}");
        assert!(out.ends_with(&format!("2 evidence file(s) in {}\n", dir.path().display())), "{out}");
    }
}
