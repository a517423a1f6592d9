//! Offline replay of pcap and pcapng files (microsecond and nanosecond pcap, pcapng with
//! any `if_tsoffset` and any decimal or binary `if_tsresol` of at most 64-bit ticks; the
//! frame check sequence a file says its frames end with, left out).
//! Several files are merged in timestamp order, so that two vantages captured into two
//! files are seen as one probe would have seen them.

use super::dpdk::Mapping;
use super::{Capture, Frame, Poll, SourceStats, BURST};
use anyhow::{bail, Context, Result};
use pcap_parser::pcapng::{Block, InterfaceDescriptionBlock};
use pcap_parser::traits::{PcapNGPacketBlock, PcapReaderIterator};
use pcap_parser::{Linktype, PcapBlockOwned, PcapError};
use std::fs::File;
use std::path::{Path, PathBuf};

const READ_BUFFER: usize = 1 << 20;

/// The run's stop flag (SIGINT, SIGTERM), for the inputs read as streams (see
/// [`StreamRead`]); set once, by whoever registers the signals.
static STOP: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> = std::sync::OnceLock::new();

/// Makes `flag` end the reading of every input read as a stream (a pipe, a FIFO) once set.
pub fn stop_streams_with(flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let _ = STOP.set(flag);
}

/// Whether the run was asked to stop (see [`stop_streams_with`]).
fn stop_asked() -> bool {
    STOP.get().is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
}

/// An input that is not a regular file (a pipe, a FIFO), read as a stream. Its writer may go
/// quiet without closing it: a read waits for bytes a tenth of a second at a time, and once
/// the run is asked to stop the stream ends there, as if its writer had closed it, so that
/// the run ends with its reports instead of waiting in the read (or being killed).
struct StreamRead {
    file: File,
    reads: u32,
}

impl std::io::Read for StreamRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        self.reads = self.reads.saturating_add(1);
        // The reader, once it knows the format from the first read, reads a second time to
        // fill its buffer before it reads any packet: a stream whose first bytes hold
        // whole packets must not wait there for more (nothing would be analysed until its
        // writer sent 1 MiB more or closed it), and a short read is no end there.
        let second = self.reads == 2;
        loop {
            if stop_asked() {
                return Ok(0);
            }
            let wait = if second { 0 } else { 100 };
            match super::dpdk::wait_readable(self.file.as_raw_fd(), wait)? {
                false if second => return Ok(0),
                false => continue,
                // Bytes, the writer's end closed, or an error: the read says which (a
                // FIFO no writer has opened yet has nothing to say: waited on again).
                true => match self.file.read(buf) {
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                    // The format is told from the first read: a writer whose first write
                    // is shorter than a file header is waited for until the header is in.
                    Ok(n) if self.reads == 1 && n > 0 && n < header_len(&buf[..n], buf.len()) => {
                        return self.read_on(buf, n);
                    }
                    r => return r,
                },
            }
        }
    }
}

/// The bytes of a file's header, as far as its first bytes `b` tell, at most `room`: a
/// pcapng section header block's length (with its options; 28 bytes until its length is
/// in), or a classic pcap header's 24.
fn header_len(b: &[u8], room: usize) -> usize {
    const SHB: [u8; 4] = [0x0A, 0x0D, 0x0D, 0x0A];
    let len = match b {
        [a, b2, c, d, l0, l1, l2, l3, o0, o1, o2, o3, ..] if [*a, *b2, *c, *d] == SHB => {
            let l = [*l0, *l1, *l2, *l3];
            // The byte-order magic says how the length was written.
            let len = if [*o0, *o1, *o2, *o3] == [0x1A, 0x2B, 0x3C, 0x4D] {
                u32::from_be_bytes(l)
            } else {
                u32::from_le_bytes(l)
            };
            (len as usize).max(28)
        }
        [a, b2, c, d, ..] if [*a, *b2, *c, *d] == SHB => 28,
        _ if b.len() < 4 => 28,
        _ => 24,
    };
    len.min(room)
}

impl StreamRead {
    /// Reads on after the `got` bytes of `buf` already read, until the file's header is in
    /// ([`header_len`]), the writer closes its end, or a stop is asked for.
    fn read_on(&mut self, buf: &mut [u8], mut got: usize) -> std::io::Result<usize> {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        while got < header_len(&buf[..got], buf.len()) && !stop_asked() {
            if !super::dpdk::wait_readable(self.file.as_raw_fd(), 100)? {
                continue;
            }
            match self.file.read(&mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(got)
    }
}

/// One pcapng interface: link type and timestamp units.
#[derive(Debug, Clone, Copy)]
struct Interface {
    /// Timestamp ticks per second.
    resolution: u64,
    offset_s: i64,
    /// Its link type is Ethernet: the packets of any other are skipped (see
    /// [`Format::skipped`]).
    ethernet: bool,
    /// Bytes of frame check sequence ending each packet (`if_fcslen`), left out.
    fcs: usize,
}

/// pcapng's `if_fcslen` option of an interface: the length of the frame check sequence its
/// packets end with (pcap_parser names no constant for it).
const IF_FCSLEN: pcap_parser::OptionCode = pcap_parser::OptionCode(13);
/// The interface option giving the seconds added to every timestamp (signed, 64 bits).
const IF_TSOFFSET: pcap_parser::OptionCode = pcap_parser::OptionCode(14);

/// The bytes of FCS an `if_fcslen` option's value says: the pcapng specification gives it
/// in bits (and Wireshark reads it so), its own example and some writers in bytes; an
/// Ethernet FCS is 16 or 32 bits, so 16 and 32 are bits, 2 and 4 bytes, and any other value
/// says nothing that can be trusted (the frames are read as they are).
fn fcs_len(if_fcslen: u8) -> usize {
    match if_fcslen {
        16 | 32 => usize::from(if_fcslen / 8),
        2 | 4 => usize::from(if_fcslen),
        _ => 0,
    }
}

/// One packet read ahead from a file, copied out of the reader's buffer.
#[derive(Debug, Default)]
struct Pending {
    ts_ns: u64,
    wire_len: u32,
    data: Vec<u8>,
}

/// The most an Ethernet frame can have been on the wire: the largest IP packet, with the
/// Ethernet header and the VLAN tags the decoder walks.
const MAX_WIRE_LEN: u32 = u16::MAX as u32 + 14 + 4 * crate::wire::MAX_VLAN_TAGS as u32;

/// A frame `original` bytes long on the wire, its last `fcs` bytes its frame check sequence,
/// of which `captured` bytes were captured: its length and the bytes captured of it, the FCS
/// left out of both (as much of it as was captured).
#[inline]
fn without_fcs(original: u32, captured: usize, fcs: usize) -> (u32, usize) {
    if fcs == 0 {
        return (original, captured);
    }
    let frame = original.saturating_sub(fcs as u32);
    (frame, captured.min(frame as usize))
}

/// A record's original length as the frame's length on the wire, when it can be one: no
/// shorter than the bytes captured, no longer than an Ethernet frame can be. A record that
/// claims otherwise (a damaged or crafted file) counts as long as what it holds.
#[inline]
fn wire_len(original: u32, captured: usize) -> u32 {
    let captured = u32::try_from(captured).unwrap_or(u32::MAX);
    if (captured..=MAX_WIRE_LEN).contains(&original) {
        original
    } else {
        captured
    }
}

impl Pending {
    /// Copies a packet's length and bytes into the buffer already there.
    #[inline]
    fn copy(&mut self, original_len: u32, data: &[u8]) {
        self.wire_len = wire_len(original_len, data.len());
        self.data.clear();
        self.data.extend_from_slice(data);
    }
}

/// What a file's header blocks so far say about its packet blocks.
#[derive(Debug, Default)]
struct Format {
    /// A classic pcap file with nanosecond timestamps.
    legacy_nanos: bool,
    /// Bytes of frame check sequence at the end of each frame of a classic pcap file whose
    /// header says so (see [`fcs_bytes`]): left out, as other captures leave them out.
    legacy_fcs: usize,
    /// The current pcapng section was written big-endian (for the blocks read by hand).
    big_endian: bool,
    /// The pcapng interfaces of the current section.
    interfaces: Vec<Interface>,
    /// Packets of the file on interfaces that are not Ethernet (a pcapng can describe
    /// several, of several link types), skipped: told on stderr when the file ends.
    skipped: u64,
    /// An Ethernet interface was described (a file of none is refused when opened).
    any_ethernet: bool,
    /// The first interface described that is not Ethernet: its number and link type.
    other: Option<(usize, i32)>,
    /// A pcapng section header was read: blocks follow.
    pcapng: bool,
    /// Blocks that hold no packet (name resolution, statistics, ...) whose contents could
    /// not be read but whose length and trailer agree, skipped (as Wireshark reads on past
    /// them): how many, and the first one's type. Told when the file ends.
    unreadable: u64,
    first_unreadable: u32,
}

/// Why the parser gave no block (see [`FileReader::read_ahead`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failed {
    /// The end of the file.
    End,
    /// More bytes are needed, and the file may have them.
    Incomplete,
    /// More bytes are needed than the buffer holds.
    TooSmall,
    /// The block cannot be read.
    Damaged,
    /// The file ends where more bytes were needed.
    CutShort,
}

/// A reader over one file that yields Ethernet frames with nanosecond timestamps. It reads
/// two packets beyond the next, so that a replay can see where the file's time goes after
/// it (see [`merge_ts`]).
pub struct FileReader {
    path: PathBuf,
    reader: Box<dyn PcapReaderIterator + Send>,
    format: Format,
    next: Pending,
    has_next: bool,
    /// The packet after `next`, and the one after that.
    after: Pending,
    has_after: bool,
    after2: Pending,
    has_after2: bool,
    /// The file failed after the packets held: told when the reader gets there.
    failed: Option<anyhow::Error>,
    /// Packets read so far (into `next`, `after` or `after2`).
    read: u64,
    stats: SourceStats,
    /// Warnings kept instead of told (see [`FileReader::open_holding_warnings`]).
    held: Option<Vec<String>>,
    /// The size of the reader's buffer (see [`FileReader::grow`]).
    buffer: usize,
}

/// Ticks per second of a pcapng interface's `if_tsresol` (6, microseconds, when absent): 10
/// to its value, or 2 to its low seven bits with the top bit set; `None` beyond 64 bits.
/// (pcap-parser 0.17's `ts_resolution` gives `None` for every power of two.)
fn ticks_per_second(if_tsresol: u8) -> Option<u64> {
    if if_tsresol & 0x80 == 0 {
        10u64.checked_pow(u32::from(if_tsresol))
    } else {
        1u64.checked_shl(u32::from(if_tsresol & 0x7F))
    }
}

fn ticks_to_ns(ticks: u64, resolution: u64, offset_s: i64) -> u64 {
    let ns = (u128::from(ticks) * 1_000_000_000 / u128::from(resolution.max(1))) as i128
        + i128::from(offset_s) * 1_000_000_000;
    ns.clamp(0, i128::from(u64::MAX)) as u64
}

impl FileReader {
    /// Opens a file and reads ahead to its first packet, so that a file that is not a
    /// capture, or not of Ethernet frames, is an error here, before any work starts.
    pub fn open(path: &Path) -> Result<Self> {
        let mut r = Self::open_holding_warnings(path)?;
        r.tell_warnings();
        Ok(r)
    }

    /// [`FileReader::open`], keeping what it would warn about (a damaged record among the
    /// packets read ahead) until [`FileReader::tell_warnings`]: a file that is then read
    /// in place instead says it once, from that reader.
    fn open_holding_warnings(path: &Path) -> Result<Self> {
        // Not waiting in the open: a FIFO's open waits for a writer, and signals only
        // restart it; its reads wait instead, a signal ending them (see `StreamRead`).
        let file = {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path)
        }
        .with_context(|| format!("cannot open {}", path.display()))?;
        let meta = file.metadata().ok();
        if meta.as_ref().is_some_and(|m| m.is_dir()) {
            bail!("{} is a directory, not a capture file", path.display());
        }
        let read = if meta.is_some_and(|m| m.is_file()) {
            pcap_parser::create_reader(READ_BUFFER, file)
        } else {
            pcap_parser::create_reader(READ_BUFFER, StreamRead { file, reads: 0 })
        };
        let reader = match read {
            Ok(r) => r,
            Err(PcapError::Eof) if stop_asked() => {
                bail!("{}: stopped before its first bytes came", path.display())
            }
            Err(PcapError::Eof) => bail!("{} is empty, not a pcap or pcapng file", path.display()),
            Err(PcapError::ReadError) => bail!("cannot read {}", path.display()),
            Err(_) => match cut_in_header(path) {
                Some((format, len)) => {
                    bail!("{} is cut short inside its {format} file header ({len} bytes)", path.display())
                }
                None => bail!("{} is not a pcap or pcapng file", path.display()),
            },
        };
        let mut r = Self {
            path: path.to_owned(),
            reader,
            format: Format::default(),
            next: Pending::default(),
            has_next: false,
            after: Pending::default(),
            has_after: false,
            after2: Pending::default(),
            has_after2: false,
            failed: None,
            read: 0,
            stats: SourceStats::default(),
            held: Some(Vec::new()),
            buffer: READ_BUFFER,
        };
        // The first packet (a failure there is the file's), then the two after it.
        r.has_after2 = r.read_ahead()?;
        r.advance()?;
        r.advance()?;
        if let (false, false, Some((i, linktype))) = (r.has_next, r.format.any_ethernet, r.format.other) {
            bail!(
                "{}: interface {i} has link type {linktype}, not Ethernet; roceprobe reads Ethernet captures",
                path.display()
            );
        }
        Ok(r)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tells the warnings held so far, and from now on as they come.
    fn tell_warnings(&mut self) {
        for w in self.held.take().unwrap_or_default() {
            crate::note!("{w}");
        }
    }

    fn warn(&mut self, w: String) {
        match self.held.as_mut() {
            Some(held) => held.push(w),
            None => crate::note!("{w}"),
        }
    }

    /// Moves to the next packet (the one read ahead) and reads the one two after it. At the
    /// end of the file, or at a damaged record (a capture cut short while being written),
    /// `has_next` becomes false; a failure reading ahead is returned when the reader gets
    /// to it, after the packets before it.
    fn advance(&mut self) -> Result<()> {
        std::mem::swap(&mut self.next, &mut self.after);
        std::mem::swap(&mut self.after, &mut self.after2);
        self.has_next = std::mem::take(&mut self.has_after);
        self.has_after = std::mem::take(&mut self.has_after2);
        if !self.has_next {
            if let Some(e) = self.failed.take() {
                return Err(e);
            }
        }
        if self.has_after && self.failed.is_none() {
            match self.read_ahead() {
                Ok(got) => self.has_after2 = got,
                Err(e) => self.failed = Some(e),
            }
        }
        Ok(())
    }

    /// The time of the packet after the one in `next`, if the file has one.
    fn after_ts(&self) -> Option<u64> {
        self.has_after.then_some(self.after.ts_ns)
    }

    /// The time of the packet after that one, if the file has one.
    fn after2_ts(&self) -> Option<u64> {
        self.has_after2.then_some(self.after2.ts_ns)
    }

    /// Reads the next packet of the file into `self.after2`: false at the end of the file
    /// or at a damaged record.
    fn read_ahead(&mut self) -> Result<bool> {
        // A simple packet block has no time of its own: it keeps the packet's before it.
        self.after2.ts_ns = if self.has_after { self.after.ts_ns } else { self.next.ts_ns };
        loop {
            let failed = match self.reader.next() {
                Ok((offset, block)) => {
                    let got = match self.format.take(block, &mut self.after2, &self.path) {
                        Ok(got) => got,
                        // Damage in the file's first blocks: not a capture roceprobe can read.
                        Err(e) if self.read == 0 => return Err(e),
                        // Damage partway: what came before stands, as at a damaged record.
                        Err(e) => {
                            self.warn_damaged_by(&format!("{e:#}"));
                            self.warn_skipped();
                            return Ok(false);
                        }
                    };
                    self.reader.consume(offset);
                    if got {
                        self.read += 1;
                        return Ok(true);
                    }
                    continue;
                }
                Err(PcapError::Eof) => Failed::End,
                Err(PcapError::Incomplete(_)) => Failed::Incomplete,
                Err(PcapError::BufferTooSmall) => Failed::TooSmall,
                Err(PcapError::UnexpectedEof) => Failed::CutShort,
                Err(_) => Failed::Damaged,
            };
            // A block the parser cannot read (it may ask for more bytes than the block has),
            // whole in the buffer, framed right, holding no packet: skipped.
            if failed != Failed::End {
                if let Some(len) = self.format.unreadable_block(self.reader.data()) {
                    self.reader.consume(len);
                    continue;
                }
            }
            // The file ended after a skipped block: nothing cut short.
            let ended = failed == Failed::End || failed == Failed::CutShort && self.reader.data().is_empty();
            match failed {
                _ if ended => {
                    self.warn_skipped();
                    return Ok(false);
                }
                Failed::Incomplete => {
                    if !self.refill()? {
                        // A stream (a pipe) that ended inside a record.
                        if !self.reader.data().is_empty() {
                            self.warn_cut_short();
                        }
                        self.warn_skipped();
                        return Ok(false);
                    }
                }
                Failed::TooSmall => {
                    // Asked for by the length the record claims, before its bytes are
                    // read: the bytes are read first, and the buffer grows only once they
                    // fill it, so a damaged length costs no memory.
                    if self.reader.data().len() < self.buffer && !self.reader.reader_exhausted() {
                        self.refill()?;
                    } else if !self.grow() {
                        self.warn_damaged_by(&format!(
                            "{}: a record larger than {} KiB (no frame is)",
                            self.path.display(),
                            MAX_RECORD >> 10
                        ));
                        self.warn_skipped();
                        return Ok(false);
                    }
                }
                Failed::CutShort => {
                    self.warn_cut_short();
                    self.warn_skipped();
                    return Ok(false);
                }
                Failed::End | Failed::Damaged => {
                    self.warn_damaged();
                    self.warn_skipped();
                    return Ok(false);
                }
            }
        }
    }

    /// Reads more of the file into the reader's buffer; false when there is no more (the
    /// last record is cut short: the capture was still being written).
    fn refill(&mut self) -> Result<bool> {
        if self.reader.reader_exhausted() {
            return Ok(false);
        }
        self.reader.refill().map_err(|_| anyhow::anyhow!("cannot read {}", self.path.display()))?;
        Ok(true)
    }

    /// Doubles the reader's buffer for a block larger than what it has room for, up to
    /// twice a record of [`MAX_RECORD`] (its block's own bytes and options besides); false
    /// past that: damage, no frame is that long. ([`READ_BUFFER`] holds such a block
    /// already.)
    fn grow(&mut self) -> bool {
        let grown = self.buffer * 2;
        if grown > 2 * MAX_RECORD || !self.reader.grow(grown) {
            return false;
        }
        self.buffer = grown;
        true
    }

    /// Packets skipped on interfaces that are not Ethernet, told once, where the file ends
    /// (at its end, at a record cut short or at a damaged one). None in a file of one
    /// interface, as nearly every capture is; a file of no Ethernet interface is refused
    /// instead (see [`FileReader::open`]).
    fn warn_skipped(&mut self) {
        if let n @ 1.. = std::mem::take(&mut self.format.unreadable) {
            self.warn(format!(
                "roceprobe: warning: {}: {n} blocks that hold no packet could not be read (the first: block type {:#x}) and were skipped",
                self.path.display(),
                self.format.first_unreadable
            ));
        }
        let skipped = std::mem::take(&mut self.format.skipped);
        if let (n @ 1.., Some((i, linktype)), true) = (skipped, self.format.other, self.format.any_ethernet) {
            self.warn(format!(
                "roceprobe: warning: {}: {n} packets on interfaces that are not Ethernet (the first: interface {i}, link type {linktype}) skipped",
                self.path.display()
            ));
        }
    }

    /// Damage partway, said by `what` (which names the file): what came before it stands,
    /// the rest of the file is left, the other files go on.
    fn warn_damaged_by(&mut self, what: &str) {
        self.stats.cut_short = true;
        let w = format!("roceprobe: warning: {what}, after {} packets; stopping this file there", self.read);
        self.warn(w);
    }

    /// The file (a stream: a pipe, standard input) ends inside a record: what came before
    /// it stands.
    fn warn_cut_short(&mut self) {
        self.stats.cut_short = true;
        let w = cut_short_warning(&self.path, self.read);
        self.warn(w);
    }

    /// A damaged record: what came before it stands, the rest is unreadable.
    fn warn_damaged(&mut self) {
        self.stats.cut_short = true;
        let w = format!(
            "roceprobe: warning: {}: damaged record after {} packets; stopping this file there",
            self.path.display(),
            self.read
        );
        self.warn(w);
    }
}

impl Format {
    /// Takes in one block of the file at `path`: a header block updates the format, a
    /// packet block is copied into `next` (true).
    #[inline]
    fn take(&mut self, block: PcapBlockOwned<'_>, next: &mut Pending, path: &Path) -> Result<bool> {
        let captured = match &block {
            PcapBlockOwned::Legacy(b) => b.data.len(),
            PcapBlockOwned::NG(Block::EnhancedPacket(b)) => b.data.len(),
            PcapBlockOwned::NG(Block::SimplePacket(b)) => b.data.len(),
            _ => 0,
        };
        if captured > MAX_RECORD {
            bail!("{}: a record larger than {} KiB (no frame is)", path.display(), MAX_RECORD >> 10);
        }
        // A pcapng block carries its length at both ends; the parser compares them for the
        // blocks it reads field by field, not for these. Two that differ are damage (the
        // file is read no further, as Wireshark reads it no further).
        let ends = match &block {
            PcapBlockOwned::NG(Block::Unknown(b)) => Some((b.block_len1, b.block_len2)),
            PcapBlockOwned::NG(Block::SimplePacket(b)) => Some((b.block_len1, b.block_len2)),
            PcapBlockOwned::NG(Block::SectionHeader(b)) => Some((b.block_len1, b.block_len2)),
            _ => None,
        };
        if let Some((first, last)) = ends.filter(|(a, b)| a != b) {
            bail!(
                "{}: a pcapng block whose lengths differ ({first} at its start, {last} at its end)",
                path.display()
            );
        }
        match block {
            PcapBlockOwned::LegacyHeader(h) => {
                let field = h.network.0 as u32;
                if field & LINKTYPE_MASK != LINKTYPE_ETHERNET {
                    bail!(
                        "{}: link type {} is not Ethernet; roceprobe reads Ethernet captures",
                        path.display(),
                        field & LINKTYPE_MASK
                    );
                }
                self.legacy_nanos = h.is_nanosecond_precision();
                self.legacy_fcs = fcs_bytes(field);
                Ok(false)
            }
            PcapBlockOwned::Legacy(b) => {
                let sub = if self.legacy_nanos { 1 } else { 1_000 };
                next.ts_ns = u64::from(b.ts_sec) * 1_000_000_000 + u64::from(b.ts_usec) * sub;
                let n = (b.caplen as usize).min(b.data.len());
                let (original, kept) = without_fcs(b.origlen, n, self.legacy_fcs);
                next.copy(original, &b.data[..kept]);
                Ok(true)
            }
            PcapBlockOwned::NG(Block::SectionHeader(shb)) => {
                // Interface ids restart in every section.
                self.interfaces.clear();
                self.pcapng = true;
                self.big_endian = shb.big_endian();
                Ok(false)
            }
            PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => self.describe(&idb, path).map(|()| false),
            PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                let ticks = (u64::from(epb.ts_high) << 32) | u64::from(epb.ts_low);
                self.packet(epb.if_id, ticks, epb.orig_len(), epb.packet_data(), next, path)
            }
            // The obsolete packet block (type 2) that libpcap wrote before the enhanced one:
            // the same fields, a 16-bit interface id and a drop count before the time.
            // (pcap-parser reads its type in the section's byte order.)
            PcapBlockOwned::NG(Block::Unknown(b)) if b.block_type == 2 => {
                let d = b.data;
                if d.len() < 20 {
                    bail!("{}: an obsolete packet block of {} bytes", path.display(), d.len());
                }
                let u16_at = |at: usize| {
                    let b = [d[at], d[at + 1]];
                    if self.big_endian {
                        u16::from_be_bytes(b)
                    } else {
                        u16::from_le_bytes(b)
                    }
                };
                let u32_at = |at: usize| self.u32_at(d, at);
                let ticks = (u64::from(u32_at(4)) << 32) | u64::from(u32_at(8));
                let caplen = (u32_at(12) as usize).min(d.len() - 20);
                if caplen > MAX_RECORD {
                    bail!("{}: a record larger than {} KiB (no frame is)", path.display(), MAX_RECORD >> 10);
                }
                let (if_id, orig_len) = (u32::from(u16_at(0)), u32_at(16));
                self.packet(if_id, ticks, orig_len, &d[20..20 + caplen], next, path)
            }
            PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                // On the section's first interface, which the file describes first: a
                // packet before any is damage (as Wireshark takes it).
                let Some(first) = self.interfaces.first() else {
                    bail!("{}: a simple packet block before any interface is described", path.display());
                };
                if !first.ethernet {
                    self.skipped += 1;
                    return Ok(false);
                }
                // No timestamp in a simple packet block: keep the previous one.
                next.copy(spb.orig_len(), spb.packet_data());
                Ok(true)
            }
            PcapBlockOwned::NG(_) => Ok(false),
        }
    }

    /// The 32-bit word at `at` of `d`, in the current section's byte order.
    fn u32_at(&self, d: &[u8], at: usize) -> u32 {
        let b = [d[at], d[at + 1], d[at + 2], d[at + 3]];
        if self.big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    }

    /// The length of the pcapng block at the start of `data` that the parser could not
    /// read, if it can be skipped: a block of a kind that holds no packet and describes no
    /// section or interface (a name resolution block without its end record, a statistics
    /// block with a bad option), whole in `data`, whose length is a multiple of four and
    /// repeated in its trailer. Counted. `None`: damage (a packet, section or interface
    /// block, or framing that does not hold), where the file stops.
    fn unreadable_block(&mut self, data: &[u8]) -> Option<usize> {
        const SECTION: u32 = 0x0A0D_0D0A;
        // Obsolete packet, interface, simple packet and enhanced packet blocks.
        const NEEDED: [u32; 5] = [SECTION, 1, 2, 3, 6];
        if !self.pcapng || data.len() < 12 {
            return None;
        }
        let word = |at: usize| self.u32_at(data, at);
        let (kind, len) = (word(0), word(4) as usize);
        let framed = len >= 12 && len % 4 == 0 && len <= data.len() && word(len - 4) as usize == len;
        if NEEDED.contains(&kind) || !framed {
            return None;
        }
        if self.unreadable == 0 {
            self.first_unreadable = kind;
        }
        self.unreadable += 1;
        Some(len)
    }

    /// A pcapng packet on interface `if_id` at `ticks` of its clock: copied into `next`
    /// (true), or skipped on an interface that is not Ethernet.
    fn packet(
        &mut self,
        if_id: u32,
        ticks: u64,
        orig_len: u32,
        data: &[u8],
        next: &mut Pending,
        path: &Path,
    ) -> Result<bool> {
        let Some(ifc) = self.interfaces.get(if_id as usize).copied() else {
            bail!("{}: packet on interface {} that was never described", path.display(), if_id);
        };
        if !ifc.ethernet {
            self.skipped += 1;
            return Ok(false);
        }
        next.ts_ns = ticks_to_ns(ticks, ifc.resolution, ifc.offset_s);
        let (original, kept) = without_fcs(orig_len, data.len(), ifc.fcs);
        next.copy(original, &data[..kept]);
        Ok(true)
    }

    /// A pcapng interface: its timestamp resolution and offset, and whether it is Ethernet
    /// (the packets of any other are skipped).
    fn describe(&mut self, idb: &InterfaceDescriptionBlock<'_>, path: &Path) -> Result<()> {
        if idb.linktype != Linktype::ETHERNET {
            self.other.get_or_insert((self.interfaces.len(), idb.linktype.0));
            self.interfaces.push(Interface { resolution: 1, offset_s: 0, ethernet: false, fcs: 0 });
            return Ok(());
        }
        self.any_ethernet = true;
        let Some(resolution) = ticks_per_second(idb.if_tsresol) else {
            bail!(
                "{}: interface {} gives its timestamps in units of {}, which roceprobe cannot count in 64 bits",
                path.display(),
                self.interfaces.len(),
                match idb.if_tsresol {
                    r if r & 0x80 == 0 => format!("10^-{r} s"),
                    r => format!("2^-{} s", r & 0x7F),
                }
            );
        };
        // The first such option, of its one byte (as Wireshark reads it).
        let fcs = idb.options.iter().find(|o| o.code == IF_FCSLEN).and_then(|o| match o.as_bytes() {
            Ok(&[v]) => Some(fcs_len(v)),
            _ => None,
        });
        let fcs = fcs.unwrap_or(0);
        // The first such option, in the section's byte order (pcap-parser reads it as
        // little-endian whatever the section's order).
        let offset_s = idb.options.iter().find(|o| o.code == IF_TSOFFSET).and_then(|o| match o.as_bytes() {
            Ok(&[a, b, c, d, e, f, g, h]) if self.big_endian => {
                Some(i64::from_be_bytes([a, b, c, d, e, f, g, h]))
            }
            Ok(&[a, b, c, d, e, f, g, h]) => Some(i64::from_le_bytes([a, b, c, d, e, f, g, h])),
            _ => None,
        });
        let offset_s = offset_s.unwrap_or(0);
        self.interfaces.push(Interface { resolution, offset_s, ethernet: true, fcs });
        Ok(())
    }
}

/// A regular file that begins as a pcap or pcapng file does but ends before its file
/// header does (24 bytes; a pcapng section header's length, at least 28): its format and
/// length. `None` for anything else, which is no capture.
fn cut_in_header(path: &Path) -> Option<(&'static str, u64)> {
    use std::io::Read;
    let mut head = [0u8; 12];
    let mut f = File::open(path).ok()?;
    let len = f.metadata().ok().filter(|m| m.is_file())?.len();
    let n = f.read(&mut head).ok()?;
    let magic = u32::from_le_bytes(head[..4].try_into().ok()?);
    match magic {
        0xA1B2_C3D4 | 0xD4C3_B2A1 | 0xA1B2_3C4D | 0x4D3C_B2A1 if len < 24 => Some(("pcap", len)),
        0x0A0D_0D0A => {
            // The section header's length, in the byte order its magic (bytes 8-11) gives.
            let block = if n >= 12 && head[8..12] == [0x4D, 0x3C, 0x2B, 0x1A] {
                u64::from(u32::from_le_bytes(head[4..8].try_into().ok()?))
            } else if n >= 12 {
                u64::from(u32::from_be_bytes(head[4..8].try_into().ok()?))
            } else {
                28
            };
            (len < block.max(28)).then_some(("pcapng", len))
        }
        _ => None,
    }
}

/// A classic pcap file read in place through a memory map: frames are handed on as slices
/// of the mapping, never copied (the kernel reads the file ahead of the cursor).
struct Cursor {
    path: PathBuf,
    nanos: bool,
    /// Written on a machine of the other byte order.
    swapped: bool,
    /// Offset of the record after the current one.
    off: usize,
    has_next: bool,
    ts_ns: u64,
    wire_len: u32,
    data: std::ops::Range<usize>,
    /// The mapping's pages before this offset were given back (see `Mapping::release`).
    released: usize,
    /// Bytes of frame check sequence ending each frame (see [`fcs_bytes`]), left out.
    fcs: usize,
    stats: SourceStats,
}

/// Record header: seconds, fraction, captured length, original length.
const RECORD_HEADER: usize = 16;
/// Read pages of a mapped file are given back in steps of this much.
const RELEASE_STEP: usize = 8 << 20;
/// A record claiming more than this is damaged: no frame is that long (a 9 KiB jumbo frame
/// in two encapsulations is far from it), and libpcap and Wireshark refuse larger records
/// alike (their largest snapshot length).
const MAX_RECORD: usize = 256 << 10;

impl Cursor {
    /// A cursor on `bytes` if they are a classic pcap file of Ethernet frames (anything
    /// else is read by [`FileReader`]), at its first packet.
    fn open(path: &Path, bytes: &[u8]) -> Result<Option<Cursor>> {
        let Some(magic) = bytes.get(0..4).map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]])) else {
            return Ok(None);
        };
        let (nanos, swapped) = match magic {
            0xA1B2_C3D4 => (false, false),
            0xA1B2_3C4D => (true, false),
            0xD4C3_B2A1 => (false, true),
            0x4D3C_B2A1 => (true, true),
            _ => return Ok(None),
        };
        let mut c = Cursor {
            path: path.to_owned(),
            nanos,
            swapped,
            off: 24,
            has_next: false,
            ts_ns: 0,
            wire_len: 0,
            data: 0..0,
            released: 0,
            fcs: 0,
            stats: SourceStats::default(),
        };
        if bytes.len() < 24 || c.u32_at(bytes, 20) & LINKTYPE_MASK != LINKTYPE_ETHERNET {
            return Ok(None);
        }
        c.fcs = fcs_bytes(c.u32_at(bytes, 20));
        c.advance(bytes)?;
        Ok(Some(c))
    }

    fn u32_at(&self, b: &[u8], at: usize) -> u32 {
        let v = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        if self.swapped {
            v.swap_bytes()
        } else {
            v
        }
    }

    /// The file ends inside a record: what came before it stands.
    #[cold]
    fn warn_cut_short(&mut self) {
        self.stats.cut_short = true;
        crate::note!("{}", cut_short_warning(&self.path, self.stats.ipackets));
    }

    /// The time of the record after the current one, if the file holds it whole (a record
    /// cut short or damaged is where the file stops: no frame comes after the current one).
    fn after_ts(&self, b: &[u8]) -> Option<u64> {
        self.whole_at(b, self.off).map(|_| self.ts_at(b, self.off))
    }

    /// The time of the record after that one, if the file holds both whole.
    fn after2_ts(&self, b: &[u8]) -> Option<u64> {
        let at = self.whole_at(b, self.off)?;
        self.whole_at(b, at).map(|_| self.ts_at(b, at))
    }

    /// If the file holds the record whose header is at `at` whole (and a current one),
    /// the offset of the record after it.
    fn whole_at(&self, b: &[u8], at: usize) -> Option<usize> {
        if !self.has_next || at.saturating_add(RECORD_HEADER) > b.len() {
            return None;
        }
        let caplen = self.u32_at(b, at + 8) as usize;
        let end = at + RECORD_HEADER + caplen;
        (caplen <= MAX_RECORD && end <= b.len()).then_some(end)
    }

    /// The time of the record whose header is at `at` (which must be in `b`).
    fn ts_at(&self, b: &[u8], at: usize) -> u64 {
        let frac = u64::from(self.u32_at(b, at + 4));
        u64::from(self.u32_at(b, at)) * 1_000_000_000 + if self.nanos { frac } else { frac * 1_000 }
    }

    /// Moves to the next record. At the end, or at a record cut short (a capture still
    /// being written) `has_next` becomes false; a record claiming more than 256 MiB is an
    /// error, as for any other file.
    fn advance(&mut self, b: &[u8]) -> Result<()> {
        self.has_next = false;
        let at = self.off;
        if at.saturating_add(RECORD_HEADER) > b.len() {
            if at < b.len() {
                self.warn_cut_short();
            }
            return Ok(());
        }
        let caplen = self.u32_at(b, at + 8) as usize;
        if caplen > MAX_RECORD {
            // Damage: what came before stands, the rest of the file is left.
            self.stats.cut_short = true;
            crate::note!(
                "roceprobe: warning: {}: a record larger than {} KiB (no frame is), after {} packets; stopping this file there",
                self.path.display(),
                MAX_RECORD >> 10,
                self.stats.ipackets
            );
            return Ok(());
        }
        let start = at + RECORD_HEADER;
        if start + caplen > b.len() {
            self.warn_cut_short();
            return Ok(());
        }
        self.ts_ns = self.ts_at(b, at);
        let original = self.u32_at(b, at + 12);
        let (original, kept) = without_fcs(original, caplen, self.fcs);
        self.wire_len = wire_len(original, kept);
        self.data = start..start + kept;
        self.off = start + caplen;
        self.has_next = true;
        Ok(())
    }
}

/// What is told of a capture file that ends inside a record, after `packets` whole ones.
fn cut_short_warning(path: &Path, packets: u64) -> String {
    format!(
        "roceprobe: warning: {}: the last record is cut short after {packets} packets (a capture still being written, or a truncated file); stopping this file there",
        path.display()
    )
}

/// One input file.
enum Input {
    /// A classic pcap file, mapped (its mapping is in `Replay::maps`).
    Mapped(Cursor),
    /// pcapng, read record by record.
    Stream(Box<FileReader>),
}

impl Input {
    fn next_ts(&self) -> Option<u64> {
        match self {
            Input::Mapped(c) => c.has_next.then_some(c.ts_ns),
            Input::Stream(r) => r.has_next.then_some(r.next.ts_ns),
        }
    }

    /// The time of the file's frame after the next one, if it has one (`map`: its mapping).
    fn after_ts(&self, map: Option<&Mapping>) -> Option<u64> {
        match self {
            Input::Mapped(c) => c.after_ts(map.map_or(&[][..], Mapping::bytes)),
            Input::Stream(r) => r.after_ts(),
        }
    }

    /// The time of the frame after that one, if the file has it.
    fn after2_ts(&self, map: Option<&Mapping>) -> Option<u64> {
        match self {
            Input::Mapped(c) => c.after2_ts(map.map_or(&[][..], Mapping::bytes)),
            Input::Stream(r) => r.after2_ts(),
        }
    }

    fn stats(&self) -> SourceStats {
        let s = match self {
            Input::Mapped(c) => c.stats,
            Input::Stream(r) => r.stats,
        };
        SourceStats { captured: true, ..s }
    }
}

/// Replays one or more files as one timestamp-ordered stream. Source ids are file indices.
pub struct Replay {
    /// Per file: its mapping, for a classic pcap file.
    maps: Vec<Option<Mapping>>,
    inputs: Vec<Input>,
    /// Per file: the time of its last frame replayed.
    last: Vec<Option<u64>>,
    /// See [`Capture::split_bursts_at`] (0: bursts are not split).
    interval_ns: u64,
}

/// The time a file's next frame, stamped `ts`, is replayed at, and merged with the other
/// files by: its own, unless it is a lone frame more than a second (a clock step, as the
/// reorder window takes it) away from both the file's frame `before` it (the time that
/// one was replayed at) and the one `after` it, which agree with each other. That is one
/// timestamp gone wrong: the frame takes the time of the frame before it, where its file
/// put it, and is counted as retimed (`SourceStats::retimed`). Merged by its wrong time,
/// a frame stamped seconds ahead would hold back every later frame of its file until the
/// other files reached its time, and the mirrors' copies would no longer meet; analysed
/// at it, it would move time on by seconds and back (a clock step each way), and the I/Os
/// in flight would time out. Decided here, where every frame of a file passes in order,
/// before any dispatcher, the result is the same whatever the number of workers.
///
/// A file's first and last frames have one neighbour each; each is taken as wrong only if
/// it goes against its file's order by more than a second, the first ahead of the frame
/// after it, the last behind the frame before it (a first frame seconds before the rest,
/// or a last one seconds after, may be a real one before or after a silence). A wrong
/// last frame takes the time of the frame before it. A wrong first frame takes the time
/// of the frame after it, if that one and the frame after it (`after2`) agree: if they do
/// not, the second frame may be the wrong one (it is then retimed as a lone frame). A
/// first frame alone before a clock step back looks like a wrong one and is moved to the
/// step's side: one frame by seconds, where keeping a wrong first frame's time would hold
/// every frame of its file back in the merge.
pub fn merge_ts(before: Option<u64>, ts: u64, after: Option<u64>, after2: Option<u64>) -> u64 {
    use crate::runtime::reorder::CLOCK_STEP_NS as STEP;
    match (before, after, after2) {
        (Some(b), Some(a), _) if ts.abs_diff(b) > STEP && ts.abs_diff(a) > STEP && a.abs_diff(b) <= STEP => b,
        (Some(b), None, _) if ts.saturating_add(STEP) < b => b,
        (None, Some(a), Some(a2)) if ts > a.saturating_add(STEP) && a.abs_diff(a2) <= STEP => a,
        _ => ts,
    }
}

impl Replay {
    /// Opens every file up front: any unreadable or non-capture file is an error before
    /// a single packet is processed.
    pub fn open(paths: &[PathBuf]) -> Result<Self> {
        if paths.is_empty() {
            bail!("no input files");
        }
        if paths.len() > usize::from(u16::MAX) {
            bail!("too many input files ({})", paths.len());
        }
        let mut maps = Vec::with_capacity(paths.len());
        let mut inputs = Vec::with_capacity(paths.len());
        for p in paths {
            // The stream reader checks the file (and says what is wrong with it). What it
            // would warn about in the packets it read ahead is told only if it reads the
            // file: one read in place says it itself, when it gets there.
            let mut reader = FileReader::open_holding_warnings(p)?;
            // A regular file is read through a mapping; a pipe or a FIFO as a stream (opening
            // it a second time would wait for another writer).
            let regular = std::fs::metadata(p).ok().filter(|m| m.is_file());
            let map = regular.and_then(|_| File::open(p).ok()).and_then(|f| Mapping::of(&f).ok().flatten());
            let cursor = match map.as_ref() {
                Some(m) => Cursor::open(p, m.bytes())?,
                None => None,
            };
            match cursor {
                Some(c) => {
                    maps.push(map);
                    inputs.push(Input::Mapped(c));
                }
                None => {
                    reader.tell_warnings();
                    maps.push(None);
                    inputs.push(Input::Stream(Box::new(reader)));
                }
            }
        }
        let last = vec![None; inputs.len()];
        Ok(Self { maps, inputs, last, interval_ns: 0 })
    }

    /// The input whose next packet comes first in the merge, and the time it is merged at
    /// (its own but for a lone frame whose time went wrong, see [`merge_ts`]); ties go to
    /// the lower file index.
    fn earliest(&self) -> Option<(u64, usize)> {
        (0..self.inputs.len())
            .filter_map(|i| {
                let input = &self.inputs[i];
                let ts = input.next_ts()?;
                let map = self.maps[i].as_ref();
                // The frame after next matters for a first frame only (see `merge_ts`).
                let after2 = if self.last[i].is_none() { input.after2_ts(map) } else { None };
                Some((merge_ts(self.last[i], ts, input.after_ts(map), after2), i))
            })
            .min()
    }
}

const NO_FRAME: Frame<'static> = Frame { data: &[], wire_len: 0, ts_ns: 0, source: 0 };

impl Capture for Replay {
    fn next_ts(&self) -> Option<u64> {
        self.earliest().map(|(ts, _)| ts)
    }

    fn split_bursts_at(&mut self, interval_ns: u64) {
        self.interval_ns = interval_ns;
    }

    fn poll<F: FnMut(Frame<'_>)>(&mut self, mut f: F) -> Result<Poll> {
        self.poll_burst(|frames| frames.iter().for_each(|fr| f(*fr)))
    }

    /// Frames of mapped files go in bursts, as slices of their mappings; a frame of a
    /// pcapng file goes alone (its reader reuses its buffer).
    fn poll_burst<F: FnMut(&[Frame<'_>])>(&mut self, mut f: F) -> Result<Poll> {
        // The frames of earlier polls are done with: what lies before them can go.
        for (input, map) in self.inputs.iter_mut().zip(&self.maps) {
            if let (Input::Mapped(c), Some(m)) = (input, map) {
                let done = c.data.start;
                if done >= c.released + RELEASE_STEP {
                    m.release(c.released, done);
                    c.released = done & !4095;
                }
            }
        }
        let mut burst = [NO_FRAME; BURST];
        let (mut n, mut total) = (0, 0);
        // The end of the interval of the burst's first frame (see `split_bursts_at`).
        let mut until = u64::MAX;
        while total < BURST {
            let Some((ts, i)) = self.earliest() else { break };
            if self.interval_ns > 0 {
                if total == 0 {
                    until = (ts - ts % self.interval_ns).saturating_add(self.interval_ns);
                } else if ts >= until {
                    break;
                }
            }
            let map = self.maps[i].as_ref();
            match &mut self.inputs[i] {
                Input::Mapped(c) => {
                    let bytes = map.map_or(&[][..], Mapping::bytes);
                    c.stats.ipackets += 1;
                    c.stats.ibytes += u64::from(c.wire_len);
                    c.stats.retimed += u64::from(ts != c.ts_ns);
                    self.last[i] = Some(ts);
                    burst[n] = Frame {
                        data: &bytes[c.data.clone()],
                        wire_len: c.wire_len,
                        ts_ns: ts,
                        source: i as u16,
                    };
                    n += 1;
                    if let Err(e) = c.advance(bytes) {
                        // The frames read before the damage are analysed all the same.
                        f(&burst[..n]);
                        return Err(e);
                    }
                }
                Input::Stream(r) => {
                    if n > 0 {
                        f(&burst[..n]);
                        n = 0;
                    }
                    r.stats.ipackets += 1;
                    r.stats.ibytes += u64::from(r.next.wire_len);
                    r.stats.retimed += u64::from(ts != r.next.ts_ns);
                    self.last[i] = Some(ts);
                    f(&[Frame {
                        data: &r.next.data,
                        wire_len: r.next.wire_len,
                        ts_ns: ts,
                        source: i as u16,
                    }]);
                    r.advance()?;
                }
            }
            total += 1;
        }
        if n > 0 {
            f(&burst[..n]);
        }
        Ok(if total > 0 { Poll::Frames(total) } else { Poll::End })
    }

    fn stats(&mut self) -> Vec<SourceStats> {
        self.inputs.iter().map(Input::stats).collect()
    }

    fn time_sources(&self) -> Vec<&'static str> {
        vec!["pcap"; self.inputs.len()]
    }
}

/// Writes Ethernet frames to a nanosecond-resolution pcap file (used by the scenario
/// generator and by tests that need a capture with specific frames).
pub struct Writer<W: std::io::Write> {
    out: W,
}

/// Magic of a little-endian pcap with nanosecond timestamps.
const PCAP_MAGIC_NANOS: u32 = 0xA1B2_3C4D;
const LINKTYPE_ETHERNET: u32 = 1;
/// The link type in a classic pcap header's link-type field (libpcap's `LT_LINKTYPE`);
/// its top bits say whether the frames end with their frame check sequence, and how long
/// it is.
const LINKTYPE_MASK: u32 = 0x03FF_FFFF;

/// Bytes of frame check sequence a classic pcap header's link-type field says each frame
/// ends with, as libpcap reads the field: when its FCS-present bit (0x04000000) is set,
/// the FCS length in 16-bit words in its top four bits.
fn fcs_bytes(field: u32) -> usize {
    if field & 0x0400_0000 == 0 {
        0
    } else {
        ((field >> 28) as usize) * 2
    }
}

impl<W: std::io::Write> Writer<W> {
    pub fn new(mut out: W) -> std::io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&PCAP_MAGIC_NANOS.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes()); // thiszone
        h.extend_from_slice(&0u32.to_le_bytes()); // sigfigs
        h.extend_from_slice(&262_144u32.to_le_bytes()); // snaplen
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(Self { out })
    }

    /// Appends one frame; `wire_len` may exceed `data.len()` for a truncated capture.
    pub fn write(&mut self, ts_ns: u64, data: &[u8], wire_len: u32) -> std::io::Result<()> {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&wire_len.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(data)
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// The longest frame (captured bytes) of a file, and how many frames it holds.
pub fn frame_sizes(path: &Path) -> Result<(usize, u64)> {
    let mut r = FileReader::open(path)?;
    let (mut largest, mut frames) = (0, 0);
    while r.has_next {
        largest = largest.max(r.next.data.len());
        frames += 1;
        r.advance()?;
    }
    Ok((largest, frames))
}

/// Whether a capture file ends at a damaged record or inside one (told on stderr as a
/// replay tells it), read through to its end.
pub fn cut_short(path: &Path) -> Result<bool> {
    let mut r = FileReader::open(path)?;
    while r.has_next {
        r.advance()?;
    }
    Ok(r.stats.cut_short)
}

/// Reads every frame of a file (for tests and tools; allocates per frame).
pub fn read_all_frames(path: &Path) -> Result<Vec<Vec<u8>>> {
    Ok(read_all_records(path)?.into_iter().map(|(_, _, data)| data).collect())
}

/// Reads every record of a file: its time (ns), original length and captured bytes (for
/// tests and tools; allocates per frame).
pub fn read_all_records(path: &Path) -> Result<Vec<(u64, u32, Vec<u8>)>> {
    let mut r = FileReader::open(path)?;
    let mut out = Vec::new();
    while r.has_next {
        out.push((r.next.ts_ns, r.next.wire_len, r.next.data.clone()));
        r.advance()?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_frame_seconds_away_from_its_neighbours_is_merged_beside_them() {
        let s = 1_000_000_000u64;
        let t = 100 * s;
        // Ahead of both neighbours, which agree: merged at the frame before it.
        assert_eq!(merge_ts(Some(t), t + 2 * s, Some(t + 1_000), None), t);
        // Behind both: the same.
        assert_eq!(merge_ts(Some(t), t - 2 * s, Some(t + 1_000), None), t);
        // A clock that stepped (the frame after it agrees with it), a silence before
        // traffic resumes, steps of at most a second: its own time.
        assert_eq!(merge_ts(Some(t), t + 2 * s, Some(t + 2 * s + 1), None), t + 2 * s);
        assert_eq!(merge_ts(Some(t), t + 5 * s, Some(t + 5 * s), None), t + 5 * s);
        assert_eq!(merge_ts(Some(t), t + s, Some(t), None), t + s);
        // A last frame before the frame before it: that frame's time.
        assert_eq!(merge_ts(Some(t), t - 2 * s, None, None), t);
        // A first frame seconds ahead of the two after it, which agree: the next one's time.
        assert_eq!(merge_ts(None, t + 2 * s, Some(t), Some(t + 1_000)), t);
        // A first frame whose next frame is the wrong one (the two after it do not agree),
        // or that has only one after it, or is within a second of it, or before a silence;
        // a last one after a silence or within a second of the frame before it, a frame
        // alone in its file: its own time.
        assert_eq!(merge_ts(None, t, Some(t + 2 * s), Some(t + 1_000)), t);
        assert_eq!(merge_ts(None, t, Some(t + 2 * s), Some(t + 2 * s)), t);
        assert_eq!(merge_ts(None, t + 2 * s, Some(t), None), t + 2 * s);
        assert_eq!(merge_ts(None, t, Some(t + 2 * s), None), t);
        assert_eq!(merge_ts(Some(t), t + 2 * s, None, None), t + 2 * s);
        assert_eq!(merge_ts(None, t + s, Some(t), Some(t)), t + s);
        assert_eq!(merge_ts(Some(t), t - s, None, None), t - s);
        assert_eq!(merge_ts(None, t, None, None), t);
        // The frame after next counts for a first frame only.
        assert_eq!(merge_ts(Some(t), t, Some(t + 2 * s), Some(t + 2 * s)), t);
        // Neighbours that do not agree (a step of their own): its own time.
        assert_eq!(merge_ts(Some(t), t + 4 * s, Some(t + 2 * s), None), t + 4 * s);
    }

    #[test]
    fn pcapng_resolutions() {
        assert_eq!(ticks_to_ns(1_500_000, 1_000_000, 0), 1_500_000_000);
        assert_eq!(ticks_to_ns(3, 1_000_000_000, 10), 10_000_000_003);
        assert_eq!(ticks_to_ns(1024, 1024, 0), 1_000_000_000);
        assert_eq!(ticks_to_ns(5, 1_000_000, -10), 0);
    }

    /// A pcapng file (little-endian) of one Ethernet interface with `if_tsresol` and one
    /// 60-byte frame at `ticks`, built by hand from the format's block layouts.
    fn pcapng(if_tsresol: u8, ticks: u64) -> Vec<u8> {
        pcapng_frames(if_tsresol, &[ticks], 60)
    }

    /// A pcapng block of `kind` around `body` (little-endian, its length at both ends).
    fn ng_block(kind: u32, body: &[u8]) -> Vec<u8> {
        let len = (12 + body.len()) as u32;
        [&kind.to_le_bytes()[..], &len.to_le_bytes(), body, &len.to_le_bytes()].concat()
    }

    /// The same with a frame of `len` bytes at each of `ticks`, in that order (the frame's
    /// first byte is its index).
    fn pcapng_frames(if_tsresol: u8, ticks: &[u64], len: u32) -> Vec<u8> {
        let shb =
            ng_block(0x0A0D_0D0A, &[&0x1A2B_3C4Du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xFF; 8]].concat());
        // Link type 1, snap length 0 (none); options: if_tsresol (code 9, length 1,
        // padded to 4), then the end of options.
        let idb = ng_block(1, &[1, 0, 0, 0, 0, 0, 0, 0, 9, 0, 1, 0, if_tsresol, 0, 0, 0, 0, 0, 0, 0]);
        let mut file = [shb, idb].concat();
        for (i, &t) in ticks.iter().enumerate() {
            let epb_head = [0u32, (t >> 32) as u32, t as u32, len, len]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<_>>();
            let mut frame = vec![0u8; len as usize];
            frame[0] = i as u8;
            file.extend(ng_block(6, &[&epb_head[..], &frame].concat()));
        }
        file
    }

    /// Obsolete packet blocks (type 2, libpcap's before the enhanced one) are packets as
    /// enhanced ones are: two between two enhanced ones, each at its own time (µs ticks).
    #[test]
    fn obsolete_packet_blocks_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("opb.pcapng");
        let mut file = pcapng_frames(6, &[10], 60);
        for (k, t) in [(1u8, 20u64), (2, 30)] {
            // Interface 0 (16 bits), drops 0 (16 bits), time high and low, captured and
            // original lengths.
            let mut body: Vec<u8> = [0u16, 0].iter().flat_map(|v| v.to_le_bytes()).collect();
            body.extend([(t >> 32) as u32, t as u32, 60, 60].iter().flat_map(|v| v.to_le_bytes()));
            let mut frame = vec![0u8; 60];
            frame[0] = k;
            body.extend(frame);
            file.extend(ng_block(2, &body));
        }
        file.extend_from_slice(&pcapng_frames(6, &[40], 60)[60..]);
        std::fs::write(&path, &file).unwrap();
        assert_eq!(replayed(&path), [(0, 10_000), (1, 20_000), (2, 30_000), (0, 40_000)]);
    }

    /// A name resolution block without its end record (its one IPv4 record runs to the
    /// block's end) holds no packet: skipped, as tshark reads on past it (three packets, the
    /// file not cut short). The same block with a trailer that does not repeat its length
    /// is damage, where the file stops.
    #[test]
    fn a_block_without_packets_that_cannot_be_read_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nrb.pcapng");
        let whole = pcapng_frames(6, &[10, 20, 30], 60);
        // Record type 1 (IPv4), length 10: the address and "host1\0", padded to 4.
        let nrb = ng_block(4, &[&[1u8, 0, 10, 0, 10, 0, 0, 1][..], b"host1\0", &[0, 0]].concat());
        // The section and interface (28 + 32 bytes), the first packet (92), the block, the
        // other two packets.
        let (head, rest) = whole.split_at(28 + 32 + 92);
        std::fs::write(&path, [head, &nrb, rest].concat()).unwrap();
        let mut r = Replay::open(std::slice::from_ref(&path)).unwrap();
        let mut n = 0;
        while let Poll::Frames(k) = r.poll(|_| {}).unwrap() {
            n += k;
        }
        assert_eq!((n, r.stats()[0].cut_short), (3, false));
        let mut broken = nrb.clone();
        let at = broken.len() - 4;
        broken[at] ^= 4;
        std::fs::write(&path, [head, &broken, rest].concat()).unwrap();
        let mut r = Replay::open(&[path]).unwrap();
        let mut n = 0;
        while let Poll::Frames(k) = r.poll(|_| {}).unwrap() {
            n += k;
        }
        assert_eq!((n, r.stats()[0].cut_short), (1, true));
    }

    /// A simple packet block before any interface: at the file's start, not a file to read;
    /// further on, damage where the file stops.
    #[test]
    fn a_simple_packet_block_before_any_interface_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spb.pcapng");
        let whole = pcapng_frames(6, &[10], 60);
        let spb = ng_block(3, &[&60u32.to_le_bytes()[..], &[0u8; 60]].concat());
        // The section header alone, then the simple packet.
        std::fs::write(&path, [&whole[..28], &spb].concat()).unwrap();
        let e = format!("{:#}", Replay::open(std::slice::from_ref(&path)).err().expect("refused"));
        assert!(e.contains("a simple packet block before any interface is described"), "{e}");
        // A whole file, then a second section (its header) and a simple packet in it.
        std::fs::write(&path, [&whole[..], &whole[..28], &spb].concat()).unwrap();
        let mut r = Replay::open(&[path]).unwrap();
        let mut n = 0;
        while let Poll::Frames(k) = r.poll(|_| {}).unwrap() {
            n += k;
        }
        assert_eq!(n, 1);
        assert!(r.stats()[0].cut_short);
    }

    #[test]
    fn a_streams_header_length_is_told_by_its_first_bytes() {
        let le = [[0x0A, 0x0D, 0x0D, 0x0A], 100u32.to_le_bytes(), [0x4D, 0x3C, 0x2B, 0x1A]].concat();
        let be = [[0x0A, 0x0D, 0x0D, 0x0A], 100u32.to_be_bytes(), [0x1A, 0x2B, 0x3C, 0x4D]].concat();
        assert_eq!(header_len(&le, 1 << 20), 100);
        assert_eq!(header_len(&be, 1 << 20), 100);
        assert_eq!(header_len(&le[..6], 1 << 20), 28, "its length not in yet");
        assert_eq!(header_len(&le, 64), 64, "at most the room");
        assert_eq!(header_len(&[0xD4, 0xC3, 0xB2, 0xA1], 1 << 20), 24);
        assert_eq!(header_len(&[0xD4, 0xC3], 1 << 20), 28);
    }

    /// A classic pcap whose link-type field says its frames end with a 4-byte FCS (as
    /// libpcap writes it: the FCS-present bit 0x04000000 and 2 words in the top bits,
    /// 0x24000001): read as Ethernet, the FCS left out of the frames and their lengths.
    /// Top bits without the present bit say nothing of an FCS.
    #[test]
    fn a_classic_pcap_of_frames_with_their_fcs_is_read_without_it() {
        assert_eq!((fcs_bytes(0x2400_0001), fcs_bytes(1), fcs_bytes(0x5000_0001)), (4, 0, 0));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fcs.pcap");
        // Magic, version 2.4 (two 16-bit halves), zone, accuracy, snap length, link type.
        let mut file: Vec<u8> = [0xA1B2_C3D4u32, 0x0004_0002, 0, 0, 65535, 0x2400_0001]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        // The third record cut 2 bytes into its FCS, the fourth before it.
        for (k, len, fcs_kept) in [(1u8, 64u32, 4u32), (2, 100, 4), (3, 80, 2), (4, 90, 0)] {
            let captured = if k == 4 { 70 } else { len + fcs_kept };
            file.extend([1u32, 0, captured, len + 4].iter().flat_map(|v| v.to_le_bytes()));
            let mut frame = vec![0u8; captured.min(len) as usize];
            frame[0] = k;
            file.extend(frame);
            file.extend(vec![0xEEu8; fcs_kept as usize]);
        }
        std::fs::write(&path, &file).unwrap();
        let mut r = Replay::open(&[path]).unwrap();
        let mut got = Vec::new();
        while let Poll::Frames(_) = r.poll(|f| got.push((f.data[0], f.data.len(), f.wire_len))).unwrap() {}
        assert_eq!(got, [(1, 64, 64), (2, 100, 100), (3, 80, 80), (4, 70, 90)]);
    }

    /// A pcapng interface whose `if_fcslen` (option 13) says its packets end with a 4-byte
    /// FCS: read without it, frames and lengths, as the classic pcap's above; a packet cut
    /// short by the capture has no FCS in its bytes, but its length on the wire loses it too.
    #[test]
    fn a_pcapng_interface_of_frames_with_their_fcs_is_read_without_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fcs.pcapng");
        let shb =
            ng_block(0x0A0D_0D0A, &[&0x1A2B_3C4Du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xFF; 8]].concat());
        // Link type 1, snap length 0; options: if_fcslen (code 13, length 1, 4, padded),
        // then the end of options.
        let idb = ng_block(1, &[1, 0, 0, 0, 0, 0, 0, 0, 13, 0, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0]);
        let mut file = [shb, idb].concat();
        for (k, len, captured) in [(1u8, 64u32, 68u32), (2, 100, 104), (3, 200, 60), (4, 120, 122)] {
            let head = [0u32, 0, k.into(), captured, len + 4]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<_>>();
            // Padded to 32 bits, as the block's data is.
            let mut frame = vec![0u8; captured.div_ceil(4) as usize * 4];
            frame[0] = k;
            if captured > len {
                frame[len as usize..captured as usize].fill(0xEE);
            }
            file.extend(ng_block(6, &[&head[..], &frame].concat()));
        }
        std::fs::write(&path, &file).unwrap();
        let mut r = Replay::open(&[path]).unwrap();
        let mut got = Vec::new();
        while let Poll::Frames(_) = r.poll(|f| got.push((f.data[0], f.data.len(), f.wire_len))).unwrap() {}
        assert_eq!(
            got,
            [(1, 64, 64), (2, 100, 100), (3, 60, 200), (4, 120, 120)],
            "record 4 cut inside its FCS"
        );
        assert_eq!([0, 2, 4, 16, 32, 8, 255].map(fcs_len), [0, 2, 4, 2, 4, 0, 0], "bits, bytes, nonsense");
    }

    /// Each frame's first byte and the time it is replayed at.
    fn replayed(path: &Path) -> Vec<(u8, u64)> {
        let mut r = Replay::open(&[path.to_path_buf()]).unwrap();
        let mut got = Vec::new();
        while let Poll::Frames(_) = r.poll(|f| got.push((f.data[0], f.ts_ns))).unwrap() {}
        got
    }

    #[test]
    fn a_first_frame_seconds_ahead_of_the_two_after_it_is_replayed_at_the_next_ones_time() {
        let s = 1_000_000_000u64;
        let dir = tempfile::tempdir().unwrap();
        // pcapng (read as a stream) and classic pcap (read in place) alike: frame 0 ten
        // seconds ahead of frames 1 and 2, which agree, takes frame 1's time. Frame 0
        // right and frame 1 wrong: frame 1 takes frame 0's.
        let wrong_first = [110 * s, 100 * s, 100 * s + 1_000, 100 * s + 2_000];
        let wrong_second = [100 * s, 110 * s, 100 * s + 1_000, 100 * s + 2_000];
        for (times, want) in [
            (wrong_first, [100 * s, 100 * s, 100 * s + 1_000, 100 * s + 2_000]),
            (wrong_second, [100 * s, 100 * s, 100 * s + 1_000, 100 * s + 2_000]),
        ] {
            let ng = dir.path().join("t.pcapng");
            std::fs::write(&ng, pcapng_frames(9, &times, 60)).unwrap();
            let classic = dir.path().join("t.pcap");
            let mut w = Writer::new(std::fs::File::create(&classic).unwrap()).unwrap();
            for (i, &t) in times.iter().enumerate() {
                let mut frame = [0u8; 60];
                frame[0] = i as u8;
                w.write(t, &frame, 60).unwrap();
            }
            drop(w);
            for path in [&ng, &classic] {
                let got = replayed(path);
                assert_eq!(got, want.iter().enumerate().map(|(i, &t)| (i as u8, t)).collect::<Vec<_>>());
                let mut r = Replay::open(std::slice::from_ref(path)).unwrap();
                while let Poll::Frames(_) = r.poll(|_| {}).unwrap() {}
                assert_eq!(r.stats()[0].retimed, 1, "{}", path.display());
            }
        }
        // Two frames only: the first cannot be told wrong, and keeps its time; the last,
        // seconds before it, goes against the file's order and takes it.
        let ng = dir.path().join("two.pcapng");
        std::fs::write(&ng, pcapng_frames(9, &[110 * s, 100 * s], 60)).unwrap();
        assert_eq!(replayed(&ng), vec![(0, 110 * s), (1, 110 * s)]);
    }

    fn first_time(file: &[u8]) -> Result<u64> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pcapng");
        std::fs::write(&path, file).unwrap();
        let mut r = Replay::open(&[path])?;
        let mut ts = None;
        while let Poll::Frames(_) = r.poll(|f| {
            ts.get_or_insert(f.ts_ns);
        })? {}
        Ok(ts.expect("one frame"))
    }

    #[test]
    fn pcapng_records_up_to_256_kib_are_read_and_a_larger_one_is_damage() {
        // Records of 256 KiB (the largest snapshot length libpcap and Wireshark take)
        // between two small frames: each read whole. Then records of three times the
        // reader's buffer: damage, where the file stops, what came before standing.
        let dir = tempfile::tempdir().unwrap();
        for (big, want) in [(MAX_RECORD as u32, 4), (3 * READ_BUFFER as u32, 2)] {
            let path = dir.path().join("big.pcapng");
            let mut file = pcapng_frames(9, &[1, 2], 60);
            let blocks = pcapng_frames(9, &[3, 4], big);
            // The second file's blocks after its section header (28 bytes) and interface (32).
            file.extend_from_slice(&blocks[60..]);
            std::fs::write(&path, &file).unwrap();
            let mut r = Replay::open(&[path]).unwrap();
            let mut got = Vec::new();
            while let Poll::Frames(_) = r.poll(|f| got.push((f.ts_ns, f.data.len()))).unwrap() {}
            let whole = [(1, 60), (2, 60), (3, big as usize), (4, big as usize)];
            assert_eq!(got, whole[..want], "records of {big} bytes");
            assert_eq!(r.stats()[0].cut_short, want == 2);
        }
    }

    #[test]
    fn a_pcapng_block_whose_two_lengths_differ_is_damage() {
        // Two frames, a block of an unknown type whose trailing length says 20 where its
        // leading one says 16 (tshark: "total block lengths ... don't match"), then two
        // frames more: the file stops at the block, the frames before it standing. The
        // same block with both lengths 16 is skipped.
        let dir = tempfile::tempdir().unwrap();
        for (trailing, want) in [(16u32, 4), (20, 2)] {
            let path = dir.path().join("lengths.pcapng");
            let mut file = pcapng_frames(9, &[1, 2], 60);
            file.extend(
                [&0x0BAD_0001u32.to_le_bytes()[..], &16u32.to_le_bytes(), &[0; 4], &trailing.to_le_bytes()]
                    .concat(),
            );
            file.extend_from_slice(&pcapng_frames(9, &[3, 4], 60)[60..]);
            std::fs::write(&path, &file).unwrap();
            let mut r = Replay::open(&[path]).unwrap();
            let mut got = Vec::new();
            while let Poll::Frames(_) = r.poll(|f| got.push(f.ts_ns)).unwrap() {}
            assert_eq!(got, [1, 2, 3, 4][..want], "trailing length {trailing}");
            assert_eq!(r.stats()[0].cut_short, want == 2, "trailing length {trailing}");
        }
    }

    #[test]
    fn a_record_claiming_more_than_the_file_holds_grows_no_buffer() {
        // One frame, then a packet block whose length says 200 MiB, with 64 bytes of it in
        // the file: the frame is read, the file stops there, and the reader's buffer is
        // still its first (the length alone allocates nothing).
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("claims.pcapng");
        let mut file = pcapng_frames(9, &[1], 60);
        file.extend_from_slice(&6u32.to_le_bytes());
        file.extend_from_slice(&(200u32 << 20).to_le_bytes());
        file.extend_from_slice(&[0u8; 56]);
        std::fs::write(&path, &file).unwrap();
        let mut r = FileReader::open(&path).unwrap();
        let mut n = 0;
        while r.has_next {
            n += 1;
            r.advance().unwrap();
        }
        assert_eq!((n, r.buffer), (1, READ_BUFFER));
    }

    #[test]
    fn pcapng_binary_and_decimal_resolutions() {
        // 2^-20 s ticks: 3 × 2^20 + 2^19 of them are 3.5 s.
        assert_eq!(first_time(&pcapng(0x80 | 20, 3 * (1 << 20) + (1 << 19))).unwrap(), 3_500_000_000);
        // 10^-9 s and 10^-3 s.
        assert_eq!(first_time(&pcapng(9, 1_234_567_891)).unwrap(), 1_234_567_891);
        assert_eq!(first_time(&pcapng(3, 1_500)).unwrap(), 1_500_000_000);
        // 10^-20 s ticks do not fit in 64 bits: refused in one line that names the unit.
        let e = first_time(&pcapng(20, 1)).unwrap_err().to_string();
        assert!(e.contains("interface 0 gives its timestamps in units of 10^-20 s"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    /// A pcapng file of one Ethernet interface with nanosecond ticks and `if_tsoffset` of
    /// `offset_s`, and one 60-byte frame at `ticks`, every field in the byte order the
    /// section says (`big_endian`), built by hand from the format's block layouts.
    fn pcapng_offset(big_endian: bool, offset_s: i64, ticks: u64) -> Vec<u8> {
        let u16s = |v: u16| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let u32s = |v: u32| if big_endian { v.to_be_bytes() } else { v.to_le_bytes() };
        let block = |kind: u32, body: &[u8]| {
            let len = u32s((12 + body.len()) as u32);
            [&u32s(kind)[..], &len, body, &len].concat()
        };
        let shb = block(0x0A0D_0D0A, &[&u32s(0x1A2B_3C4D)[..], &u16s(1), &u16s(0), &[0xFF; 8]].concat());
        let offset = if big_endian { offset_s.to_be_bytes() } else { offset_s.to_le_bytes() };
        // Link type 1, reserved, snap length 0; options: if_tsresol (code 9) 10^-9 s padded
        // to 4 bytes, if_tsoffset (code 14) of 8 bytes, the end of options.
        let idb = [
            &u16s(1)[..],
            &u16s(0),
            &u32s(0),
            &u16s(9),
            &u16s(1),
            &[9, 0, 0, 0],
            &u16s(14),
            &u16s(8),
            &offset,
            &u16s(0),
            &u16s(0),
        ]
        .concat();
        let epb =
            [&u32s(0)[..], &u32s((ticks >> 32) as u32), &u32s(ticks as u32), &u32s(60), &u32s(60), &[0; 60]];
        [shb, block(1, &idb), block(6, &epb.concat())].concat()
    }

    /// `if_tsoffset` is read in the section's byte order: a big-endian file's offset of
    /// 1,700,000,000 s is that, not 2^64 s and more (what its bytes read little-endian say).
    #[test]
    fn pcapng_time_offset_in_either_byte_order() {
        for big_endian in [false, true] {
            let t = first_time(&pcapng_offset(big_endian, 1_700_000_000, 5)).unwrap();
            assert_eq!(t, 1_700_000_000_000_000_005, "big-endian: {big_endian}");
            // A negative offset: 100 s before a tick count of 150 s.
            let t = first_time(&pcapng_offset(big_endian, -100, 150_000_000_000)).unwrap();
            assert_eq!(t, 50_000_000_000, "big-endian: {big_endian}");
        }
    }

    /// A capture cut inside its file header is told as that, not as no capture: a pcap of
    /// 10 bytes (its magic as libpcap writes it on a little-endian machine, then 6 of the 20
    /// bytes after it) and pcapngs of 20 and 27 bytes (`pcapng_frames`'s section header is
    /// 28 bytes, without options); 37 bytes of text are no capture.
    #[test]
    fn a_capture_cut_inside_its_file_header_is_told_so() {
        let dir = tempfile::tempdir().unwrap();
        let ng = pcapng(6, 1);
        let cases: [(&str, Vec<u8>, &str); 4] = [
            (
                "p.pcap",
                [&[0xD4, 0xC3, 0xB2, 0xA1][..], &[2, 0, 4, 0, 0, 0]].concat(),
                "pcap file header (10 bytes)",
            ),
            ("n.pcapng", ng[..20].to_vec(), "pcapng file header (20 bytes)"),
            ("m.pcapng", ng[..27].to_vec(), "pcapng file header (27 bytes)"),
            ("x.pcap", b"not a capture at all, but long enough".to_vec(), "is not a pcap or pcapng file"),
        ];
        for (name, bytes, says) in cases {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            let e = format!("{:#}", Replay::open(&[path]).err().expect("refused"));
            assert!(e.contains(says), "{name}: {e}");
        }
    }

    #[test]
    fn writer_round_trip_keeps_nanoseconds_and_lengths() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.pcap");
        let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
        w.write(1_700_000_000_123_456_789, &[0xAB; 60], 60).unwrap();
        w.write(1_700_000_000_123_456_790, &[0xCD; 64], 1500).unwrap();
        drop(w);
        let mut r = Replay::open(&[path]).unwrap();
        let mut got = Vec::new();
        while let Poll::Frames(_) = r.poll(|f| got.push((f.ts_ns, f.data.len(), f.wire_len))).unwrap() {}
        assert_eq!(got, vec![(1_700_000_000_123_456_789, 60, 60), (1_700_000_000_123_456_790, 64, 1500)]);
    }

    #[test]
    fn the_time_after_a_frame_is_that_of_a_whole_record_only() {
        let mut w = Writer::new(Vec::new()).unwrap();
        for ts in [1_000_000_000u64, 2_000_000_000, 3_000_000_000] {
            w.write(ts, &[0xAB; 60], 60).unwrap();
        }
        let bytes = w.into_inner();
        let c = Cursor::open(Path::new("w.pcap"), &bytes).unwrap().unwrap();
        assert_eq!(
            (c.ts_ns, c.after_ts(&bytes), c.after2_ts(&bytes)),
            (1_000_000_000, Some(2_000_000_000), Some(3_000_000_000))
        );
        // The third record cut short: nothing after the second.
        let cut = &bytes[..24 + 2 * (16 + 60) + 16 + 30];
        let c = Cursor::open(Path::new("w.pcap"), cut).unwrap().unwrap();
        assert_eq!((c.after_ts(cut), c.after2_ts(cut)), (Some(2_000_000_000), None));
        // The second record cut short (the file ends inside its data): nothing after.
        let cut = &bytes[..24 + 16 + 60 + 16 + 30];
        let c = Cursor::open(Path::new("w.pcap"), cut).unwrap().unwrap();
        assert_eq!((c.after_ts(cut), c.after2_ts(cut)), (None, None));
    }

    #[test]
    fn real_capture_reads_with_microsecond_timestamps() {
        let path = crate::test_capture("rdma_write_bw.pcap");
        let mut replay = Replay::open(&[path]).unwrap();
        let mut n = 0;
        let mut first = None;
        while let Poll::Frames(_) = replay
            .poll(|f| {
                n += 1;
                first.get_or_insert((f.ts_ns, f.wire_len));
            })
            .unwrap()
        {}
        assert_eq!(n, 60);
        let (ts, len) = first.unwrap();
        assert_eq!(ts % 1000, 0, "microsecond pcap: whole microseconds");
        assert_eq!(len, 74);
        assert_eq!(replay.stats()[0].ipackets, 60);
    }
}
