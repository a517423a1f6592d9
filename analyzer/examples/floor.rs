//! A floor under any per-packet path on this machine, measured the way `examples/passes`
//! measures roceprobe's (in memory, one core, bursts of 32, the fastest and the median
//! pass): a minimal tracker written for speed alone, not a part of the probe.
//!
//! It does what no design of the per-packet path can skip for an RC request or its ACK on
//! a plain frame (Ethernet, at most one 802.1Q tag, IPv4 without options, UDP 4791): the
//! headers read at fixed offsets; the flow's key (the IPv4 pair and the destination QPN)
//! hashed once; one open-addressing table whose 64-byte entry is the flow's only line
//! (found, or taken for a new flow); its packets, bytes and time; the request's PSN against
//! the one expected (retransmissions and gaps counted); the message end awaiting its ACK;
//! an ACK's match in its paired flow (found once per flow off the fast path, then kept in
//! the entry) and its latency summed. The same three-step prefetching pipeline as the
//! probe's burst, eight packets apart. Every other frame is only counted: no NVMe, CM,
//! vantages, intervals, transmissions, histograms or reports. What it takes is what is
//! left for everything else the probe does per packet within a goal.
//!
//! Two options add what roceprobe's flow table has beyond that one line, to measure what
//! each costs: `--index`, a separate index of 8-byte buckets naming the entry (one more
//! dependent line a packet, and a pipeline step to read it, as the probe's table has);
//! `--extra-lines N`, N more lines of the flow's state (apart from the entry, as the probe's
//! second hot line and its cold ring and counters are) that every packet writes.
//!
//! `cargo run --release -p roceprobe --example floor -- FILE.pcap [PASSES] [--index] [--extra-lines N]`

use roceprobe::capture::dpdk::prefetch;
use roceprobe::capture::pcap::Replay;
use roceprobe::capture::{Capture, Poll, BURST};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const PIPE: usize = 8;
const NONE: u32 = u32::MAX;
const ACK: u8 = 0x11;

/// One flow: one cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Entry {
    addrs: u64,
    /// Destination QPN, `NONE` for a free entry.
    qpn: u32,
    next_psn: u32,
    peer: u32,
    /// PSN of the message end awaiting an ACK; `NONE` when none does.
    awaiting: u32,
    awaiting_ts: u64,
    packets: u64,
    bytes: u64,
    last_ts: u64,
    /// Retransmitted packets and PSNs skipped, 32 bits each.
    lost: u64,
    latency_ns: u64,
}

const FREE: Entry = Entry {
    addrs: 0,
    qpn: NONE,
    next_psn: NONE,
    peer: NONE,
    awaiting: NONE,
    awaiting_ts: 0,
    packets: 0,
    bytes: 0,
    last_ts: 0,
    lost: 0,
    latency_ns: 0,
};

#[derive(Clone, Copy, Default)]
struct Parsed {
    addrs: u64,
    qpn: u32,
    psn: u32,
    opcode: u8,
    plain: bool,
    home: u32,
    slot: u32,
    len: u32,
    ts: u64,
}

struct Floor {
    table: Vec<Entry>,
    mask: u32,
    /// With `--index`: buckets of (hash, slot), at most half full; entries taken in turn.
    index: Vec<u64>,
    /// Entries taken.
    used: u32,
    /// With `--extra-lines`: that many lines of each flow's further state.
    extra: usize,
    lines: Vec<[u64; 8]>,
    /// Request flows by host pair, to pair an ACK's flow once (off the fast path).
    requests: HashMap<u64, Vec<u32>>,
    other: u64,
    acks_matched: u64,
}

#[inline(always)]
fn be24(b: &[u8]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

#[inline(always)]
fn parse(frame: &[u8], ts: u64) -> Parsed {
    let mut p = Parsed { ts, len: frame.len() as u32, ..Parsed::default() };
    let at = if frame.len() >= 14 && frame[12..14] == [0x81, 0x00] { 18 } else { 14 };
    let Some(h) = frame.get(at - 2..at + 20 + 8 + 12) else { return p };
    let (ip, udp, bth) = (&h[2..22], &h[22..30], &h[30..42]);
    if h[..2] != [0x08, 0x00] || ip[0] != 0x45 || ip[9] != 17 || ip[6] & 0x3F != 0 || ip[7] != 0 {
        return p;
    }
    if udp[2..4] != [0x12, 0xB7] {
        return p;
    }
    p.addrs = u64::from(u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]])) << 32
        | u64::from(u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]));
    p.opcode = bth[0];
    p.qpn = be24(&bth[5..8]);
    p.psn = be24(&bth[9..12]);
    p.plain = p.opcode >> 5 == 0;
    p
}

impl Floor {
    fn new(bits: u32, index: bool, extra: usize) -> Self {
        Self {
            table: vec![FREE; 1 << bits],
            mask: (1 << bits) - 1,
            index: if index { vec![u64::MAX; 2 << bits] } else { Vec::new() },
            used: 0,
            extra,
            lines: vec![[0; 8]; if extra > 0 { extra << bits } else { 0 }],
            requests: HashMap::new(),
            other: 0,
            acks_matched: 0,
        }
    }

    /// The key's hash: with `--index` all 32 bits (kept in the bucket), else the entry it
    /// starts at.
    #[inline(always)]
    fn home(&self, addrs: u64, qpn: u32) -> u32 {
        let h = ((addrs ^ u64::from(qpn).rotate_left(29)).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32;
        if self.index.is_empty() {
            h & self.mask
        } else {
            h
        }
    }

    /// Prefetches the flow's entry and its further lines.
    #[inline(always)]
    fn prefetch_flow(&self, slot: u32) {
        prefetch(&self.table[slot as usize] as *const Entry, 1);
        for k in 0..self.extra {
            prefetch(&self.lines[slot as usize * self.extra + k] as *const [u64; 8], 1);
        }
    }

    /// The bucket of `--index` a hash starts at.
    #[inline(always)]
    fn bucket(&self, p: &Parsed) -> usize {
        p.home as usize & (self.index.len() - 1)
    }

    /// With `--index`: the slot the first bucket under the packet's hash names (a hint).
    #[inline(always)]
    fn peek(&self, p: &Parsed) -> u32 {
        let mut b = self.bucket(p);
        loop {
            let v = self.index[b];
            if v == u64::MAX || (v >> 32) as u32 == p.home {
                return v as u32;
            }
            b = (b + 1) & (self.index.len() - 1);
        }
    }

    /// With `--index`: the flow's entry, found through the index or taken in turn.
    #[inline(always)]
    fn find_indexed(&mut self, p: &Parsed) -> u32 {
        let mut b = self.bucket(p);
        loop {
            let v = self.index[b];
            if v == u64::MAX {
                let i = self.used;
                self.index[b] = u64::from(p.home) << 32 | u64::from(i);
                return self.insert(i, p);
            }
            let e = &self.table[v as u32 as usize];
            if (v >> 32) as u32 == p.home && e.qpn == p.qpn && e.addrs == p.addrs {
                return v as u32;
            }
            b = (b + 1) & (self.index.len() - 1);
        }
    }

    /// The flow's entry: found, or taken for it.
    #[inline(always)]
    fn find(&mut self, p: &Parsed) -> u32 {
        if !self.index.is_empty() {
            return self.find_indexed(p);
        }
        let mut i = p.home;
        loop {
            let e = &self.table[i as usize];
            if e.qpn == p.qpn && e.addrs == p.addrs {
                return i;
            }
            if e.qpn == NONE {
                return self.insert(i, p);
            }
            i = (i + 1) & self.mask;
        }
    }

    #[inline(never)]
    fn insert(&mut self, i: u32, p: &Parsed) -> u32 {
        // Taken in turn with the index; at most a quarter full without it (the table is
        // four times the flows it may hold, so a lookup always ends).
        let room = if self.index.is_empty() { self.table.len() / 4 } else { self.table.len() };
        if self.used as usize == room {
            eprintln!("floor: the capture has more than {room} flows, which is all the floor holds");
            std::process::exit(1);
        }
        self.used += 1;
        self.table[i as usize] = Entry { addrs: p.addrs, qpn: p.qpn, ..FREE };
        if p.opcode != ACK {
            self.requests.entry(p.addrs).or_default().push(i);
        }
        i
    }

    /// The request flow an ACK's flow answers: between the same hosts, the other way, last
    /// sent the PSN the ACK names.
    #[inline(never)]
    fn pair(&mut self, i: u32, addrs: u64, psn: u32) {
        let back = addrs.rotate_left(32);
        let Some(slots) = self.requests.get(&back) else { return };
        if let Some(&r) = slots.iter().find(|&&r| self.table[r as usize].next_psn == (psn + 1) & 0xFF_FFFF) {
            self.table[i as usize].peer = r;
            self.table[r as usize].peer = i;
        }
    }

    #[inline(always)]
    fn track(&mut self, p: &Parsed) {
        let i = p.slot;
        for k in 0..self.extra {
            self.lines[i as usize * self.extra + k][usize::from(p.opcode) & 7] += 1;
        }
        let e = &mut self.table[i as usize];
        e.packets += 1;
        e.bytes += u64::from(p.len);
        e.last_ts = e.last_ts.max(p.ts);
        if p.opcode == ACK {
            if e.peer == NONE {
                self.pair(i, p.addrs, p.psn);
            }
            let peer = self.table[i as usize].peer;
            if let Some(r) = self.table.get_mut(peer as usize) {
                if r.awaiting != NONE && p.psn.wrapping_sub(r.awaiting) & 0xFF_FFFF < 1 << 23 {
                    r.latency_ns += p.ts.saturating_sub(r.awaiting_ts);
                    r.awaiting = NONE;
                    self.acks_matched += 1;
                }
            }
            return;
        }
        if e.next_psn != NONE && p.psn != e.next_psn {
            let ahead = p.psn.wrapping_sub(e.next_psn) & 0xFF_FFFF;
            e.lost += if ahead < 1 << 23 { u64::from(ahead) } else { 1 << 32 };
        }
        e.next_psn = (p.psn + 1) & 0xFF_FFFF;
        if matches!(p.opcode, 0x04 | 0x05 | 0x0A | 0x0B) {
            e.awaiting = p.psn;
            e.awaiting_ts = p.ts;
        }
    }

    #[inline(never)]
    fn burst(&mut self, frames: &[(u64, &[u8])]) {
        let mut staged = [Parsed::default(); BURST];
        let n = frames.len();
        let indexed = !self.index.is_empty();
        for (s, &(ts, data)) in staged.iter_mut().zip(frames) {
            *s = parse(data, ts);
            if s.plain {
                s.home = self.home(s.addrs, s.qpn);
                if indexed {
                    prefetch(&self.index[self.bucket(s)] as *const u64, 1);
                } else {
                    self.prefetch_flow(s.home);
                }
            }
        }
        // With the index, one more step: read the bucket, prefetch the entry it names.
        let (find_at, track_at) = if indexed { (PIPE, 2 * PIPE) } else { (0, 2 * PIPE) };
        for k in 0..n + track_at {
            if indexed && k < n && staged[k].plain {
                let hint = self.peek(&staged[k]);
                if (hint as usize) < self.table.len() {
                    self.prefetch_flow(hint);
                }
            }
            if let Some(j) = k.checked_sub(find_at).filter(|&j| j < n && staged[j].plain) {
                let slot = self.find(&staged[j]);
                staged[j].slot = slot;
                let peer = self.table[slot as usize].peer;
                if staged[j].opcode == ACK && peer != NONE {
                    prefetch(&self.table[peer as usize] as *const Entry, 1);
                }
            }
            if let Some(j) = k.checked_sub(track_at).filter(|&j| j < n) {
                if staged[j].plain {
                    self.track(&staged[j]);
                } else {
                    self.other += 1;
                }
            }
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(file) = args.first() else {
        eprintln!("usage: floor FILE.pcap [PASSES] [--index] [--extra-lines N]");
        std::process::exit(2);
    };
    let passes: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(30);
    let mut frames = Vec::new();
    let mut r = Replay::open(&[file.into()]).unwrap_or_else(|e| {
        eprintln!("floor: {file}: {e}");
        std::process::exit(1);
    });
    while let Poll::Frames(_) = r.poll(|fr| frames.push((fr.ts_ns, fr.data.to_vec()))).unwrap() {}
    let first = frames.iter().map(|f| f.0).min().unwrap_or(0);
    let span = frames.iter().map(|f| f.0).max().unwrap_or(0) - first + 1_000_000;
    let extra = args.iter().position(|a| a == "--extra-lines").map_or(0, |i| {
        args.get(i + 1).and_then(|n| n.parse().ok()).unwrap_or_else(|| {
            eprintln!("floor: --extra-lines needs a number");
            std::process::exit(2);
        })
    });
    // Room for 65,536 flows (roceprobe's default bound): with the index, entries taken in
    // turn and 131,072 buckets (1 MiB, as the probe's); without, an open-addressing table at
    // most a quarter full.
    let index = args.iter().any(|a| a == "--index");
    let mut floor = Floor::new(if index { 16 } else { 18 }, index, extra);
    let mut times = Vec::with_capacity(passes);
    for pass in 1..=passes as u64 + 3 {
        let t = Instant::now();
        for chunk in frames.chunks(BURST) {
            let mut burst = [(0u64, &[][..]); BURST];
            for (b, (ts, data)) in burst.iter_mut().zip(chunk) {
                *b = (ts + pass * span, data.as_slice());
            }
            floor.burst(&burst[..chunk.len()]);
        }
        if pass > 3 {
            times.push(t.elapsed());
        }
    }
    times.sort();
    let ns = |d: Duration| d.as_nanos() as f64 / frames.len() as f64;
    let flows = floor.table.iter().filter(|e| e.qpn != NONE).count();
    println!(
        "frames={} flows={} other_frames_per_pass={} acks_matched={} passes={} min_ns_per_packet={:.1} median_ns_per_packet={:.1}",
        frames.len(),
        flows,
        floor.other / (passes as u64 + 3),
        floor.acks_matched,
        times.len(),
        ns(times[0]),
        ns(times[times.len() / 2])
    );
}
