//! Traffic that goes on from pass to pass, for timing the analysis over many passes of one
//! capture (`benches/analysis.rs`, `examples/passes.rs`).
//!
//! A capture fed again as it is sends every PSN a second time: every request of the second
//! pass is a retransmission, and every NVMe capsule in it a copy of one sent already, which
//! is not what a fabric sends. Between passes, [`Advance::apply`] moves every packet's PSN
//! on by its PSN space's span in the capture. A request's space is its flow
//! (source, destination, destination QPN). A response (READ Response, ACK, NAK, Atomic ACK)
//! belongs to the space of the requests it answers: the request flow in the other
//! direction whose PSNs, in the capture, cover the response's (a READ's responses stretch
//! its space to the PSNs the READ reserved). So each flow's second pass
//! continues where its first ended, in order, and the ACKs still cover their requests.
//! Where a frame's ICRC was right, it is written again for the new PSN.
//!
//! A harness, not a reference: it finds the headers with roceprobe's own decoder.

use roceprobe::wire::bth::PSN_MASK;
use roceprobe::wire::{decode_frame, icrc, Decoded};
use std::collections::HashMap;
use std::net::IpAddr;

/// A request flow: source, destination, destination QPN.
type Flow = (IpAddr, IpAddr, u32);

/// Where a frame's PSN is and how far it moves each pass; where its ICRC is, if it was
/// right.
struct Site {
    psn_at: usize,
    step: u32,
    icrc: Option<IcrcAt>,
}

struct IcrcAt {
    l3: std::ops::Range<usize>,
    ipv6: bool,
    ip_header_len: usize,
    udp_offset: usize,
    udp_len: usize,
}

/// The plan for a list of frames: one entry per frame (`None`: not a RoCE packet).
pub struct Advance {
    sites: Vec<Option<Site>>,
}

/// A PSN space's PSNs, relative to the first seen (signed, so that a space that wraps
/// at 2^24 within the capture is still one range).
#[derive(Clone, Copy)]
struct Span {
    first: u32,
    low: i32,
    high: i32,
}

impl Span {
    fn rel(&self, psn: u32) -> i32 {
        (((psn.wrapping_sub(self.first) & PSN_MASK) << 8) as i32) >> 8
    }
    fn add(&mut self, psn: u32) {
        let r = self.rel(psn);
        self.low = self.low.min(r);
        self.high = self.high.max(r);
    }
    fn len(&self) -> u32 {
        (self.high - self.low + 1) as u32
    }
    /// Whether a response with this PSN answers requests of this space (an ACK carries the
    /// last PSN it covers, a NAK the next one expected; a READ Response one of the PSNs
    /// its READ Request reserved, up to `beyond` past the space's highest request PSN).
    fn answers(&self, psn: u32, beyond: i32) -> bool {
        (self.low - 1..=self.high + beyond).contains(&self.rel(psn))
    }
}

fn is_response(opcode: u8) -> bool {
    matches!(opcode >> 5, 0 | 2 | 5) && matches!(opcode & 0x1F, 0x0D..=0x12)
}

fn is_read_response(opcode: u8) -> bool {
    is_response(opcode) && matches!(opcode & 0x1F, 0x0D..=0x10)
}

/// How far past a space's highest request PSN a READ Response may be: the PSNs the last
/// READ reserved (a READ of 16 MiB at a 256-byte MTU reserves 65,536).
const READ_BEYOND: i32 = 1 << 16;

impl Advance {
    pub fn plan<'a>(frames: impl Iterator<Item = &'a [u8]>) -> Self {
        let mut spaces: HashMap<Flow, Span> = HashMap::new();
        let mut found = Vec::new();
        for f in frames {
            let Decoded::Roce(p) = decode_frame(f) else {
                found.push(None);
                continue;
            };
            let (opcode, psn) = (p.bth.opcode(), p.bth.psn());
            let flow = (p.ip.src, p.ip.dst, p.bth.dest_qp());
            if !is_response(opcode) && opcode != 0x81 {
                spaces.entry(flow).or_insert(Span { first: psn, low: 0, high: 0 }).add(psn);
            }
            let l3 = p.icrc.l3.as_ptr() as usize - f.as_ptr() as usize;
            let udp_offset = p.icrc.udp_offset as usize;
            let icrc = (icrc::check(&p.icrc) == Some(true)).then(|| IcrcAt {
                l3: l3..l3 + p.icrc.l3.len(),
                ipv6: p.icrc.ipv6,
                ip_header_len: usize::from(p.icrc.ip_header_len),
                udp_offset,
                udp_len: usize::from(p.icrc.udp_len),
            });
            // UDP header (8), then the BTH's PSN in its bytes 9 to 11.
            found.push(Some((flow, opcode, psn, l3 + udp_offset + 8 + 9, icrc)));
        }
        // Request spaces per (source, destination), for the responses to find theirs.
        let mut by_hosts: HashMap<(IpAddr, IpAddr), Vec<Flow>> = HashMap::new();
        for &(src, dst, qpn) in spaces.keys() {
            by_hosts.entry((src, dst)).or_default().push((src, dst, qpn));
        }
        for v in by_hosts.values_mut() {
            v.sort_by_key(|f| f.2);
        }
        // Each response's space; a READ Response stretches its space to the PSNs its READ
        // reserved.
        let mut answered: Vec<Option<Flow>> = vec![None; found.len()];
        for (k, x) in found.iter().enumerate() {
            let Some((flow, opcode, psn, ..)) = x else { continue };
            if !is_response(*opcode) {
                continue;
            }
            let beyond = if is_read_response(*opcode) { READ_BEYOND } else { 1 };
            let candidates = by_hosts.get(&(flow.1, flow.0)).map(Vec::as_slice).unwrap_or_default();
            let Some(&space) = candidates.iter().find(|f| spaces[f].answers(*psn, beyond)) else { continue };
            answered[k] = Some(space);
            let s = spaces.get_mut(&space).unwrap();
            s.high = s.high.max(s.rel(*psn));
        }
        let sites = found
            .into_iter()
            .zip(answered)
            .map(|(x, answered)| {
                let (flow, opcode, _, psn_at, icrc) = x?;
                let step = if opcode == 0x81 {
                    0 // a CNP carries no sequence
                } else if is_response(opcode) {
                    answered.map_or(0, |f| spaces[&f].len())
                } else {
                    spaces[&flow].len()
                };
                Some(Site { psn_at, step, icrc })
            })
            .collect();
        Self { sites }
    }

    /// Moves every frame's PSN on by its space's span (see the module's documentation).
    pub fn apply<'a>(&self, frames: impl Iterator<Item = &'a mut Vec<u8>>) {
        for (f, site) in frames.zip(&self.sites) {
            let Some(s) = site else { continue };
            let Some(b) = f.get_mut(s.psn_at..s.psn_at + 3) else { continue };
            let psn = u32::from_be_bytes([0, b[0], b[1], b[2]]).wrapping_add(s.step) & PSN_MASK;
            b.copy_from_slice(&psn.to_be_bytes()[1..]);
            if let Some(i) = &s.icrc {
                icrc::fill(&mut f[i.l3.clone()], i.ipv6, i.ip_header_len, i.udp_offset, i.udp_len);
            }
        }
    }
}
