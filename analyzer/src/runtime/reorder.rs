//! The reorder window (`--reorder-window`): a worker's frames are handed to the analysis in
//! packet-time order, not in the order they reached the probe. Mirror copies reach the probe
//! over paths of their own (one ERSPAN session's copies trail another's; queueing on the
//! way delays some copies more than others; two capture ports are polled one burst after the
//! other), so a frame is held until the latest packet time seen is a window past its own,
//! and frames are released oldest first.
//!
//! Frames are copied into a ring of bytes allocated at start-up (the bytes the analysis
//! reads, [`kept_len`]: a plain frame's headers and the largest payload a tracker reads,
//! any other frame's first [`KEPT_BYTES`]; more for the evidence's snap length; whole frames
//! when `--check-icrc` needs them); the held frames are ordered by (time, arrival): a deque
//! that a frame in order joins at the back in O(1), and a heap for the frames that come
//! behind its back (a second vantage's copies, say, a path's delay behind), which join it
//! in O(log n) without moving the others; the oldest of the two fronts goes first. A
//! frame older than what was already released is *late*: the caller analyses it at once and
//! counts it. When the ring or the deque is full, the oldest held frame is released early
//! (counted): the window shrinks rather than memory growing. Nothing here allocates after
//! start-up.

use crate::capture::Frame;
use crate::wire::{Detached, RocePacket};
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// Bytes of frames a worker can hold: a 1 ms window at 128 Gb/s of mirrored frames.
pub const RING_BYTES: usize = 16 << 20;
/// The part of the ring used at first (it grows as the window needs).
const FIRST_LIMIT: usize = 256 << 10;
/// Frames a worker can hold: a 1 ms window at 65 Mpps.
pub const MAX_HELD: usize = 1 << 16;
/// Bytes of a frame kept while it is held, unless its headers are at fixed offsets
/// ([`crate::wire::bytes_read`]): any stack of headers the decoder walks (VLANs, ERSPAN,
/// IPv6 with extension headers, BTH and its extension headers) plus the largest payload a
/// tracker reads (a 256-byte CM MAD). What follows is data; lengths come from the
/// headers, so a frame cut here decodes to the same packet (as a mirror's snap length does).
pub const KEPT_BYTES: usize = 1024;
/// The bytes kept of `frame` where at least `at_least` are asked for (the evidence's snap
/// length; `usize::MAX`: the whole frame, whose ICRC is checked): those the analysis reads
/// (of a frame whose headers are at fixed offsets, [`crate::wire::bytes_read`]; of any
/// other, [`KEPT_BYTES`]), or `at_least` if more. What a held frame keeps, and what a
/// dispatcher hands its worker: the rest of a large frame would be copied, and fetched by
/// another core, for nothing.
#[inline]
pub fn kept_len(frame: &[u8], at_least: usize) -> usize {
    let len = frame.len();
    if len <= at_least {
        return len;
    }
    let read = crate::wire::bytes_read(frame).unwrap_or(KEPT_BYTES);
    len.min(read.max(at_least))
}

/// A frame this far from the latest time (either way) is no late mirror copy but a clock
/// that stepped (or a bogus timestamp): the window starts again from it.
pub use crate::track::clock::CLOCK_STEP_NS;

/// Whether a frame of time `ts` is a clock step from the latest time `latest` (0: no time
/// yet): more than [`CLOCK_STEP_NS`] away, either way.
#[inline]
pub fn is_clock_step(latest: u64, ts: u64) -> bool {
    latest > 0 && ts.abs_diff(latest) > CLOCK_STEP_NS
}

/// A frame waiting for its turn.
#[derive(Debug, Clone, Copy, Default)]
pub struct Held {
    /// Packet time.
    pub ts: u64,
    /// The frame's time is an ERSPAN III switch's.
    pub switch: bool,
    seq: u64,
    offset: u32,
    len: u32,
    wire_len: u32,
    source: u16,
}

/// A held frame that came behind the deque's back, in [`Reorder::behind`]: the heap's top
/// is the oldest (by time, then arrival).
#[derive(Debug, Clone, Copy)]
struct Behind(Held);

impl Behind {
    fn key(&self) -> (u64, u64) {
        (self.0.ts, self.0.seq)
    }
}

impl PartialEq for Behind {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Behind {}

impl PartialOrd for Behind {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Behind {
    /// Reversed: the oldest is the greatest, the max-heap's top.
    fn cmp(&self, other: &Self) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// What a frame took from the ring, in arrival order.
#[derive(Debug, Clone, Copy)]
struct Arrival {
    /// Bytes, including the ring's tail skipped after it to keep the next frame whole.
    span: u32,
    released: bool,
    /// The frame's decoded packet kept beside its bytes (see [`Reorder::keep_packet`]):
    /// its place in `packets` plus one, 0 if none. Here, not in [`Held`], which moves as
    /// frames are put in order.
    packet: u32,
}

pub struct Reorder {
    window_ns: u64,
    /// Bytes kept of each frame at least (see [`kept_len`]).
    kept: usize,
    ring: Box<[u8]>,
    /// The part of the ring in use: it grows (up to the whole ring) only when frames would
    /// not fit otherwise, so that the bytes written and read again stay in the cache.
    limit: usize,
    /// Where the next frame is written, and the bytes in use before it.
    write: usize,
    used: usize,
    /// Held frames, by (time, arrival): those in order at the deque's back when they came,
    /// and the heap of those that came behind it (see the module's comment); at most
    /// `max_held` in all.
    held: VecDeque<Held>,
    behind: BinaryHeap<Behind>,
    max_held: usize,
    /// Every frame whose bytes are still in the ring, in arrival order from `first_seq`
    /// (a frame held long keeps the ones after it here, released or not).
    arrivals: VecDeque<Arrival>,
    first_seq: u64,
    next_seq: u64,
    /// The latest packet time seen (a frame's, or one observed).
    latest: u64,
    /// Frames older than this are late: the analysis has moved past them (and so are
    /// frames more than the window older than `latest`, see [`Reorder::is_late`]).
    floor: u64,
    /// Frames are held. Until then (no second vantage or source, and every frame so far
    /// in time order) they are analysed as they come, without a copy.
    armed: bool,
    /// The decoded packets of held frames that were decoded as they arrived (an ERSPAN
    /// mirror, for its switch's time), so that they are not decoded again when released:
    /// room for one per frame held, taken as needed (`Vec::with_capacity` reserves it
    /// without touching it), and the places given back.
    packets: Vec<Detached>,
    free_packets: Vec<u32>,
}

impl Reorder {
    /// A window of `window_ns` that keeps what the analysis reads of each frame and at
    /// least `at_least` bytes (see [`kept_len`]).
    pub fn new(window_ns: u64, at_least: usize) -> Self {
        Self::with_room(window_ns, RING_BYTES, MAX_HELD).keeping(at_least)
    }

    /// Keeps at least the first `bytes` of each frame (see [`kept_len`]). Frames kept whole
    /// (for their ICRC) are four times and more the bytes of their headers: the whole ring
    /// is in use from the start, as a part of it that has wrapped round cannot grow.
    pub fn keeping(mut self, bytes: usize) -> Self {
        self.kept = bytes;
        if bytes > KEPT_BYTES {
            self.limit = self.ring.len();
        }
        self
    }

    pub fn with_room(window_ns: u64, bytes: usize, frames: usize) -> Self {
        Self {
            window_ns,
            kept: usize::MAX,
            ring: vec![0u8; bytes.max(1 << 16)].into_boxed_slice(),
            limit: FIRST_LIMIT.min(bytes.max(1 << 16)),
            write: 0,
            used: 0,
            held: VecDeque::with_capacity(frames.max(1)),
            behind: BinaryHeap::with_capacity(frames.max(1)),
            max_held: frames.max(1),
            // Room for frames released behind one held long, before that one must go.
            arrivals: VecDeque::with_capacity(2 * frames.max(1)),
            first_seq: 0,
            next_seq: 0,
            latest: 0,
            floor: 0,
            armed: true,
            packets: Vec::with_capacity(frames.max(1)),
            free_packets: Vec::with_capacity(frames.max(1)),
        }
    }

    /// Frames will be held only once one comes out of time order (see [`Reorder::pass`]).
    pub fn unarmed(mut self) -> Self {
        self.armed = false;
        self
    }

    /// Whether frames are held.
    #[inline]
    pub fn is_armed(&self) -> bool {
        self.armed
    }

    /// Not armed: a frame of time `ts` is analysed at once if it is in time order, and is
    /// then the latest; a frame out of order arms the window (it is itself late: frames
    /// after it were analysed already). Returns whether the frame is in order.
    #[inline]
    pub fn pass(&mut self, ts: u64) -> bool {
        if ts >= self.latest {
            self.latest = ts;
            self.floor = ts;
            true
        } else {
            self.armed = true;
            false
        }
    }

    /// Whether a frame of packet time `ts` comes too late to be put in order: frames after
    /// it were analysed already, or it is more than the window behind the latest time. The
    /// second is judged frame by frame, not by the frames released so far (which move on a
    /// burst or a dispatcher's batch at a time): one worker and several judge alike.
    #[inline]
    pub fn is_late(&self, ts: u64) -> bool {
        ts < self.late_before()
    }

    /// The time before which a frame is late ([`Reorder::is_late`]): the time the analysis
    /// has passed, judged frame by frame as lateness is.
    #[inline]
    pub fn late_before(&self) -> u64 {
        self.floor.max(self.passed_by_window())
    }

    /// Arms the window for a frame that is in time order here, because another worker's
    /// frame was not (see `runtime::dispatch`): as one worker's window would have been
    /// armed then, with every frame up to `latest` (the latest time before that frame)
    /// analysed already, unless the clock has stepped since (`ts`: this frame's time).
    pub fn arm_after(&mut self, latest: u64, ts: u64) {
        self.armed = true;
        if !is_clock_step(latest, ts) {
            self.floor = self.floor.max(latest);
        }
    }

    /// Whether a frame of packet time `ts` is so far from the latest time that the clock
    /// stepped: then everything held is to be analysed, and [`Reorder::restart`] called.
    /// Whether frames were held before or analysed straight away (one source in time order,
    /// see [`Reorder::pass`]): after one frame stamped hours ahead, the frames that follow
    /// at the right time are a clock that stepped back, not frames too late to analyse.
    #[inline]
    pub fn is_clock_step(&self, ts: u64) -> bool {
        is_clock_step(self.latest, ts)
    }

    /// Starts afresh (nothing may be held): the next frame sets the time.
    pub fn restart(&mut self) {
        debug_assert!(self.held_none());
        self.latest = 0;
        self.floor = 0;
    }

    /// Holds a frame that is not late, with its packet time and the place of its decoded
    /// packet if one was kept for it ([`Reorder::keep_packet`]; 0 if none). If there is no
    /// room, the oldest frames are released to `early` first.
    #[inline]
    pub fn push(
        &mut self,
        f: &Frame<'_>,
        ts: u64,
        switch: bool,
        packet: u32,
        early: &mut impl FnMut(&mut Self),
    ) {
        let len = self.kept_len(f.data);
        let skip = loop {
            // The frame is kept whole: if it does not fit before the end of the part in use,
            // the rest of it is skipped (counted as used until the frame before it is done).
            let skip = if self.write + len > self.limit { self.limit - self.write } else { 0 };
            let bytes = self.used + skip + len <= self.limit;
            // At the end of the part in use (the frame must turn round, or the last one
            // ended there), or no room: the part may grow first (see `Reorder::grows`).
            if (skip > 0 || self.write == 0 || !bytes) && self.grows(skip, bytes) {
                continue;
            }
            let room = bytes
                && self.held.len() + self.behind.len() < self.max_held
                && self.arrivals.len() < self.arrivals.capacity();
            if room || self.held_none() {
                break skip;
            }
            early(self);
        };
        // The tail skipped goes with the frame before it, which ends there: once the frames
        // before the turn are done, the bytes in use are those before `write` again, and the
        // part in use can grow (counted with the frame after it, the tail stayed in use until
        // that frame was done: a ring always full, its frames passed on early to make room,
        // never reached that state, and a part of 256 KiB never grew for a window of more).
        let mut span = len;
        if skip > 0 {
            self.write = 0;
            match self.arrivals.back_mut() {
                Some(before) => before.span += skip as u32,
                None => span += skip,
            }
        }
        let offset = self.write;
        self.ring[offset..offset + len].copy_from_slice(&f.data[..len]);
        // The frame ends at `limit` at the furthest (it was skipped to the start otherwise):
        // there the next begins again at 0. (A remainder would be a division a frame.)
        let end = offset + len;
        self.write = if end >= self.limit { 0 } else { end };
        self.used += skip + len;
        let h = Held {
            ts,
            switch,
            seq: self.next_seq,
            offset: offset as u32,
            len: len as u32,
            wire_len: f.wire_len,
            source: f.source,
        };
        self.next_seq += 1;
        self.arrivals.push_back(Arrival { span: span as u32, released: false, packet });
        // In order: at the deque's back. Behind it: in the heap.
        if self.held.back().is_none_or(|b| b.ts <= ts) {
            self.held.push_back(h);
        } else {
            self.behind.push(Behind(h));
        }
        self.latest = self.latest.max(ts);
    }

    /// Whether no frame is held.
    #[inline]
    fn held_none(&self) -> bool {
        self.held.is_empty() && self.behind.is_empty()
    }

    /// The oldest frame held, and whether it is the heap's (else the deque's front).
    #[inline]
    fn first_held(&self) -> Option<(&Held, bool)> {
        match (self.held.front(), self.behind.peek()) {
            // Nearly always nothing came behind: the deque's front.
            (Some(d), None) => Some((d, false)),
            (Some(d), Some(b)) if b.key() >= (d.ts, d.seq) => Some((d, false)),
            (_, Some(b)) => Some((&b.0, true)),
            (None, None) => None,
        }
    }

    /// Grows the part of the ring in use (doubled, up to the whole ring) when it can and
    /// should, before a frame that does not fit (`bytes` false) or must skip the part's last
    /// `skip` bytes is written. It can when the bytes in use all lie before `write` (none
    /// wrapped round), or the last frame ended at `limit` (`write` turned to 0, nothing
    /// written there since). It should when there is no room, and also when the writing
    /// comes to the part's end with more than half of it held, before a window that grows
    /// finds it full: it can grow only at such moments, which a full ring may wait a whole
    /// turn for, passing frames on early meanwhile.
    #[inline(never)]
    fn grows(&mut self, skip: usize, bytes: bool) -> bool {
        if self.limit >= self.ring.len() {
            return false;
        }
        let turned = self.write == 0 && self.used > 0;
        let unwrapped = self.write >= self.used || turned;
        let at_end = turned || (skip > 0 && unwrapped);
        if !((!bytes && unwrapped) || (at_end && 2 * self.used > self.limit)) {
            return false;
        }
        if turned {
            self.write = self.limit;
        }
        self.limit = (2 * self.limit).min(self.ring.len());
        true
    }

    /// Time moved on to `now` (a later frame elsewhere, or a silent link's clock). Behind a
    /// dispatcher, the latest time since the clock last stepped (not the highest ever seen,
    /// which after a step back would make every later frame a step of its own).
    #[inline]
    pub fn observe(&mut self, now: u64) {
        self.latest = self.latest.max(now);
    }

    /// Up to `out.len()` frames whose turn has come (the window has passed them), oldest
    /// first; the analysis may not go back before the last of them. Their bytes stay in the
    /// ring until [`Reorder::done`].
    #[inline]
    pub fn due(&mut self, out: &mut [Held]) -> usize {
        let until = self.passed_by_window();
        self.take(out, |h| h.ts <= until)
    }

    /// Frames up to this time are due.
    #[inline]
    fn passed_by_window(&self) -> u64 {
        self.latest.saturating_sub(self.window_ns)
    }

    /// Up to `out.len()` of the oldest frames, due or not (the end of the run, or no room).
    pub fn oldest(&mut self, out: &mut [Held]) -> usize {
        self.take(out, |_| true)
    }

    fn take(&mut self, out: &mut [Held], due: impl Fn(&Held) -> bool) -> usize {
        let mut n = 0;
        while n < out.len() {
            match self.first_held() {
                Some((h, behind)) if due(h) => {
                    out[n] = *h;
                    self.floor = self.floor.max(h.ts);
                    if behind {
                        self.behind.pop();
                    } else {
                        self.held.pop_front();
                    }
                    n += 1;
                }
                _ => break,
            }
        }
        n
    }

    /// The latest packet time seen (a frame's, or one observed).
    pub fn latest(&self) -> u64 {
        self.latest
    }

    /// The time before which frames are late once every due frame is released: what the
    /// analysis can be told has passed.
    pub fn watermark(&self) -> u64 {
        let until = self.passed_by_window();
        match self.first_held() {
            Some((h, _)) if h.ts <= until => h.ts,
            _ => until,
        }
    }

    /// After the analysis observed `t` (see [`Reorder::watermark`]): frames older are late.
    pub fn passed(&mut self, t: u64) {
        self.floor = self.floor.max(t);
    }

    /// The bytes kept of `frame` ([`kept_len`]); a frame larger than the ring keeps what
    /// fits (headers are what count).
    #[inline]
    fn kept_len(&self, frame: &[u8]) -> usize {
        kept_len(frame, self.kept).min(self.ring.len())
    }

    /// Keeps the packet decoded from `frame` as it arrived, apart from the frame, for when
    /// the frame is released ([`Reorder::packet`]), so that it is not decoded again: its
    /// place, for [`Reorder::push`] (or, if the frame is not held after all,
    /// [`Reorder::take_packet`]). 0 if the frame would not be kept whole (cut to the bytes
    /// kept, it decodes to another packet) or there is no room: it is decoded again.
    #[inline]
    pub fn keep_packet(&mut self, p: &RocePacket<'_>, frame: &[u8]) -> u32 {
        if self.kept_len(frame) < frame.len() {
            return 0;
        }
        let Some(d) = p.detach(frame) else { return 0 };
        if let Some(i) = self.free_packets.pop() {
            self.packets[i as usize] = d;
            i + 1
        } else if self.packets.len() < self.packets.capacity() {
            self.packets.push(d);
            self.packets.len() as u32
        } else {
            0
        }
    }

    /// The packet kept at `place` by [`Reorder::keep_packet`] for a frame not held after
    /// all (late), given back.
    pub fn take_packet(&mut self, place: u32) -> Option<Detached> {
        let i = place.checked_sub(1)?;
        self.free_packets.push(i);
        self.packets.get(i as usize).copied()
    }

    /// Whether a decoded packet is kept for some frame (see [`Reorder::keep_packet`]): when
    /// none is, a released frame need not be asked for one.
    #[inline]
    pub fn keeps_packets(&self) -> bool {
        self.free_packets.len() != self.packets.len()
    }

    /// The decoded packet kept for a released frame, if any (see [`Reorder::keep_packet`]).
    #[inline]
    pub fn packet(&self, h: &Held) -> Option<&Detached> {
        let a = self.arrivals.get((h.seq - self.first_seq) as usize)?;
        a.packet.checked_sub(1).and_then(|i| self.packets.get(i as usize))
    }

    /// A released frame, borrowed from the ring.
    #[inline]
    pub fn frame(&self, h: &Held) -> Frame<'_> {
        let (o, l) = (h.offset as usize, h.len as usize);
        Frame { data: &self.ring[o..o + l], wire_len: h.wire_len, ts_ns: h.ts, source: h.source }
    }

    /// The analysis is done with these released frames: their bytes can be reused.
    pub fn done(&mut self, released: &[Held]) {
        let kept = self.keeps_packets();
        for h in released {
            if let Some(a) = self.arrivals.get_mut((h.seq - self.first_seq) as usize) {
                a.released = true;
                if kept && a.packet > 0 {
                    self.free_packets.push(a.packet - 1);
                    a.packet = 0;
                }
            }
        }
        while let Some(a) = self.arrivals.front() {
            if !a.released {
                break;
            }
            self.used -= a.span as usize;
            self.arrivals.pop_front();
            self.first_seq += 1;
        }
        if self.arrivals.is_empty() {
            // Nothing in the ring: start again at its beginning.
            self.write = 0;
            self.used = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(byte: u8, len: usize) -> Vec<u8> {
        vec![byte; len]
    }

    fn push(r: &mut Reorder, data: &[u8], ts: u64, released: &mut Vec<(u64, u8)>) -> u64 {
        let f = Frame { data, wire_len: data.len() as u32, ts_ns: ts, source: 0 };
        let mut early = 0;
        r.push(&f, ts, false, 0, &mut |r| {
            let mut out = [Held::default(); 1];
            let n = r.oldest(&mut out);
            early += n as u64;
            for h in &out[..n] {
                released.push((h.ts, r.frame(h).data[0]));
            }
            r.done(&out[..n]);
        });
        early
    }

    fn drain(r: &mut Reorder, all: bool, released: &mut Vec<(u64, u8)>) {
        let mut out = [Held::default(); 4];
        loop {
            let n = if all { r.oldest(&mut out) } else { r.due(&mut out) };
            if n == 0 {
                return;
            }
            for h in &out[..n] {
                released.push((h.ts, r.frame(h).data[0]));
            }
            r.done(&out[..n]);
        }
    }

    #[test]
    fn frames_come_out_in_time_order_once_the_window_passed_them() {
        let mut r = Reorder::with_room(100, 1 << 16, 64);
        let mut got = Vec::new();
        // Arrival order 1000, 1050(b), 990(c), 1200, 1101(e).
        for (ts, b) in [(1000, b'a'), (1050, b'b'), (990, b'c'), (1200, b'd'), (1101, b'e')] {
            assert!(!r.is_late(ts));
            assert_eq!(push(&mut r, &frame(b, 60), ts, &mut got), 0);
            drain(&mut r, false, &mut got);
        }
        // Latest 1200: everything up to 1100 is out, in order.
        assert_eq!(got, [(990, b'c'), (1000, b'a'), (1050, b'b')]);
        // Behind what was released (1050), or more than the window behind the latest
        // (1200 - 100): late. 1100 is not.
        assert!(r.is_late(1049));
        assert!(r.is_late(1099));
        assert!(!r.is_late(1100));
        drain(&mut r, true, &mut got);
        assert_eq!(&got[3..], [(1101, b'e'), (1200, b'd')]);
    }

    /// Two sources interleaved, the second's frames 0 to 900 behind the first's (pseudo-
    /// random, ties among them): every frame comes out, by time and, for equal times, in
    /// arrival order, as a stable sort of the arrivals by time puts them.
    #[test]
    fn frames_behind_come_out_as_a_stable_sort_by_time() {
        let mut r = Reorder::with_room(1_000, 1 << 20, 4096);
        let (mut got, mut want) = (Vec::new(), Vec::new());
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        for k in 0..3_000u64 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let ts = if k % 2 == 0 { 10_000 + k * 10 } else { 10_000 + k * 10 - (seed % 10) * 100 };
            let tag = (k % 251) as u8;
            want.push((ts, tag));
            push(&mut r, &frame(tag, 60), ts, &mut got);
            drain(&mut r, false, &mut got);
        }
        drain(&mut r, true, &mut got);
        want.sort_by_key(|w| w.0);
        assert_eq!(got, want);
    }

    /// A packet decoded as its frame arrived comes back with the frame when it is released
    /// (and for a frame that is not held after all), only while the frame is kept whole;
    /// its place is given back and taken again, and a full set of places keeps none more.
    #[test]
    fn a_kept_packet_comes_back_with_its_frame_and_its_place_is_reused() {
        use crate::wire::{decode_frame, Decoded};
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcap-fixtures");
        let frames =
            crate::capture::pcap::read_all_frames(&root.join("captures/rdma_write_bw.pcap")).unwrap();
        let decoded = |f: &[u8]| match decode_frame(f) {
            Decoded::Roce(p) => format!("{p:?}"),
            other => panic!("{other:?}"),
        };
        // Room for three frames and their packets; frames kept to their first 1,024 bytes.
        let mut r = Reorder::with_room(100, 1 << 16, 3).keeping(KEPT_BYTES);
        let (small, large): (Vec<&Vec<u8>>, Vec<&Vec<u8>>) = frames
            .iter()
            .filter(|f| matches!(decode_frame(f), Decoded::Roce(_)))
            .partition(|f| f.len() <= KEPT_BYTES);
        let (a, b, big) = (small[0], small[1], large[0]);
        let keep = |r: &mut Reorder, f: &[u8]| match decode_frame(f) {
            Decoded::Roce(p) => r.keep_packet(&p, f),
            _ => unreachable!(),
        };
        // A frame cut to the bytes kept would decode to another packet: none kept.
        assert_eq!(keep(&mut r, big), 0);
        let (pa, pb, pc) = (keep(&mut r, a), keep(&mut r, b), keep(&mut r, a));
        assert!(pa > 0 && pb > 0 && pc > 0 && pa != pb && pb != pc && pa != pc);
        // No room for a fourth; the third's frame is not held after all (late): its
        // packet is handed back with its place.
        assert_eq!(keep(&mut r, a), 0);
        assert_eq!(r.take_packet(pc).map(|p| format!("{:?}", p.attach(a))), Some(decoded(a)));
        for (f, ts, place) in [(a, 1000, pa), (b, 990, pb), (big, 995, 0)] {
            let f = Frame { data: f, wire_len: f.len() as u32, ts_ns: ts, source: 0 };
            r.push(&f, ts, false, place, &mut |_| panic!("room for three frames"));
        }
        let mut out = [Held::default(); 4];
        assert_eq!(r.oldest(&mut out), 3);
        // Released in time order (b, big, a): each kept packet attached to the frame's copy
        // in the ring is what that copy decodes to; the frame kept without one has none.
        let got: Vec<Option<String>> = out[..3]
            .iter()
            .map(|h| r.packet(h).map(|p| format!("{:?}", p.attach(r.frame(h).data))))
            .collect();
        assert_eq!(got, [Some(decoded(b)), None, Some(decoded(a))]);
        assert_eq!(got[0], Some(decoded(r.frame(&out[0]).data)));
        r.done(&out[..3]);
        // Every place given back: all three taken again, then none.
        let again = [keep(&mut r, b), keep(&mut r, a), keep(&mut r, b)];
        assert!(again.iter().all(|p| [pa, pb, pc].contains(p)), "{again:?}");
        assert_eq!(keep(&mut r, a), 0);
        assert_eq!(r.take_packet(0).map(|_| ()), None);
    }

    #[test]
    fn equal_times_keep_their_arrival_order() {
        let mut r = Reorder::with_room(10, 1 << 16, 64);
        let mut got = Vec::new();
        for b in [b'x', b'y', b'z'] {
            push(&mut r, &frame(b, 10), 500, &mut got);
        }
        drain(&mut r, true, &mut got);
        assert_eq!(got, [(500, b'x'), (500, b'y'), (500, b'z')]);
    }

    #[test]
    fn a_full_ring_releases_the_oldest_early_and_reuses_its_bytes() {
        // 65,536 bytes: 1,000-byte frames, 65 fit; the window never passes.
        let mut r = Reorder::with_room(1 << 40, 1 << 16, 1 << 10);
        let mut got = Vec::new();
        let mut early = 0;
        for i in 0..1000u64 {
            early += push(&mut r, &frame((i % 251) as u8, 1000), 1_000_000 + i, &mut got);
        }
        // Every frame came out whole and in order, the first early.
        assert_eq!(early, 1000 - 65);
        drain(&mut r, true, &mut got);
        assert_eq!(got.len(), 1000);
        for (i, (ts, b)) in got.iter().enumerate() {
            assert_eq!((*ts, *b), (1_000_000 + i as u64, (i % 251) as u8));
        }
        // Everything released: the ring is empty again.
        assert_eq!((r.used, r.arrivals.len()), (0, 0));
    }

    #[test]
    fn a_full_deque_releases_the_oldest_early() {
        let mut r = Reorder::with_room(1 << 40, 1 << 16, 4);
        let mut got = Vec::new();
        for ts in [40, 30, 20, 10, 50] {
            push(&mut r, &frame(ts as u8, 8), ts, &mut got);
        }
        assert_eq!(got, [(10, 10)]);
        assert!(r.is_late(9));
        drain(&mut r, true, &mut got);
        assert_eq!(got, [(10, 10), (20, 20), (30, 30), (40, 40), (50, 50)]);
    }

    #[test]
    fn a_clock_that_steps_by_seconds_starts_the_window_again() {
        let mut r = Reorder::with_room(1_000, 1 << 16, 64);
        let mut got = Vec::new();
        assert!(!r.is_clock_step(5));
        push(&mut r, &frame(1, 8), 10_000, &mut got);
        push(&mut r, &frame(2, 8), 12_000, &mut got);
        drain(&mut r, false, &mut got);
        assert_eq!(got, [(10_000, 1)]);
        // Ten years ahead, then back: each is a step, not a late copy nor the new normal.
        let years = 10 * 365 * 86_400 * 1_000_000_000u64;
        for (ts, b) in [(years, 3u8), (13_000, 4)] {
            assert!(r.is_clock_step(ts));
            drain(&mut r, true, &mut got);
            r.restart();
            assert!(!r.is_late(ts));
            push(&mut r, &frame(b, 8), ts, &mut got);
        }
        assert_eq!(got, [(10_000, 1), (12_000, 2), (years, 3)]);
        // And the window works again from there.
        push(&mut r, &frame(5, 8), 12_500, &mut got);
        push(&mut r, &frame(6, 8), 15_000, &mut got);
        drain(&mut r, false, &mut got);
        assert_eq!(&got[3..], [(12_500, 5), (13_000, 4)]);
    }

    #[test]
    fn frames_are_kept_to_the_bytes_the_analysis_reads_or_more_if_asked() {
        // 4,000 bytes with an IPv4 header without options (total length 3,986, no
        // fragment) carrying UDP at the Ethernet header's end: Ethernet 14, IPv4 20, UDP 8,
        // BTH 12, the longest extension headers 40 (RDETH, DETH, AtomicETH) and a 256-byte
        // MAD are read, 350 bytes. Bytes of no such headers: the first KiB.
        let mut plain = frame(0, 4000);
        plain[12..14].copy_from_slice(&[0x08, 0x00]);
        plain[14] = 0x45;
        plain[14 + 2..14 + 4].copy_from_slice(&3986u16.to_be_bytes());
        plain[14 + 9] = 17;
        let other = frame(7, 4000);
        for (at_least, plain_kept, other_kept) in
            [(0, 350, KEPT_BYTES), (100, 350, KEPT_BYTES), (2000, 2000, 2000), (usize::MAX, 4000, 4000)]
        {
            let mut r = Reorder::with_room(10, 1 << 16, 64).keeping(at_least);
            let mut got = Vec::new();
            push(&mut r, &plain, 500, &mut got);
            push(&mut r, &other, 500, &mut got);
            push(&mut r, &frame(8, 60), 500, &mut got);
            let mut out = [Held::default(); 4];
            assert_eq!(r.oldest(&mut out), 3);
            let [a, b, c] = [0, 1, 2].map(|i| r.frame(&out[i]));
            assert_eq!(
                [(a.data.len(), a.wire_len), (b.data.len(), b.wire_len), (c.data.len(), c.wire_len)],
                [(plain_kept, 4000), (other_kept, 4000), (60, 60)],
                "at least {at_least}"
            );
        }
    }

    #[test]
    fn the_part_of_the_ring_in_use_grows_only_as_the_window_needs() {
        // 1 MiB ring, starting with 256 KiB in use; a window that never passes.
        let mut r = Reorder::with_room(1 << 40, 1 << 20, 1 << 12);
        let mut got = Vec::new();
        let mut early = 0;
        for i in 0..200u64 {
            early += push(&mut r, &frame(i as u8, 1000), 1_000 + i, &mut got);
        }
        assert_eq!((r.limit, early), (256 << 10, 0));
        for i in 200..1000u64 {
            early += push(&mut r, &frame(i as u8, 1000), 1_000 + i, &mut got);
        }
        // 1,000 frames of 1,000 bytes: the whole ring, nothing early.
        assert_eq!((r.limit, early), (1 << 20, 0));
        for i in 1000..1100u64 {
            early += push(&mut r, &frame(i as u8, 1000), 1_000 + i, &mut got);
        }
        assert!(early > 0);
        drain(&mut r, true, &mut got);
        assert!(got.iter().enumerate().all(|(i, (ts, b))| *ts == 1_000 + i as u64 && *b == i as u8));
    }

    /// Frames of 1 KiB in time order, a 1 ms window, at packet rates the window's bytes
    /// follow: passed on early only what no ring could hold (`early` counts them).
    fn early_at(rates: impl Iterator<Item = (u64, u64)>) -> (u64, usize) {
        let mut r = Reorder::new(1_000_000, 0);
        let data = frame(0, 1024);
        let (mut early, mut ts) = (0, 1_000_000_000u64);
        let mut out = [Held::default(); 32];
        for (gap_ns, frames) in rates {
            for _ in 0..frames {
                ts += gap_ns;
                let f = Frame { data: &data, wire_len: 1024, ts_ns: ts, source: 0 };
                r.push(&f, ts, false, 0, &mut |r| {
                    let n = r.oldest(&mut out[..1]);
                    early += n as u64;
                    let h = out[0];
                    r.done(&[h][..n]);
                });
                loop {
                    let n = r.due(&mut out);
                    if n == 0 {
                        break;
                    }
                    let h = out;
                    r.done(&h[..n]);
                }
            }
        }
        (early, r.limit)
    }

    #[test]
    fn the_part_of_the_ring_in_use_grows_with_the_window_once_it_has_turned() {
        // 100,000 frames a second (100 KiB in the window) turn the first 256 KiB round and
        // round; then 4 million a second need 4 MB. The part in use used to grow only when
        // full with nothing wrapped round, which a ring kept full by frames passed on early
        // never is: 39,841 of the 40,000 frames went early.
        let (early, limit) = early_at([(10_000, 1_000), (250, 40_000)].into_iter());
        assert_eq!(limit, 8 << 20);
        // What came before it turned once more (at most the first part's 256 frames).
        assert!(early <= 256, "{early}");
        // A rate that climbs as real traffic does: it grows before it is full.
        let (early, limit) = early_at((0..40).map(|k| (10_000 - k * 245, 2_000)).chain([(250, 40_000)]));
        assert_eq!((early, limit), (0, 8 << 20));
    }
}
