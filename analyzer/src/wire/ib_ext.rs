//! InfiniBand extension transport headers (IBTA Vol. 1 §9.3): which follow BTH for each
//! opcode, in which order, and a view and `Repr` for each.
//!
//! [`layout_by_spec`] is the single definition of the order and presence of extension
//! headers per opcode; the payload offset (and so payload length) is derived from it. It is
//! evaluated at compile time into a 256-entry table ([`layout`], [`plan`]), so that the
//! per-packet cost is one lookup.

use super::bth::opcode as op;
use super::{be24, put24, DecodeError, Result};

/// An extension header kind, with its length in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtKind {
    /// Reliable Datagram ETH: EE context (4).
    Rdeth,
    /// Datagram ETH: Q_Key, source QP (8).
    Deth,
    /// XRC ETH: XRC SRQ (4).
    Xrceth,
    /// RDMA ETH: VA, R_Key, DMA length (16).
    Reth,
    /// Atomic ETH: VA, R_Key, swap/add, compare (28).
    AtomicEth,
    /// Immediate data (4).
    ImmDt,
    /// Invalidate ETH: R_Key to invalidate (4).
    Ieth,
    /// ACK ETH: syndrome, MSN (4).
    Aeth,
    /// Atomic ACK ETH: original remote data (8).
    AtomicAckEth,
    /// CNP: 16 reserved bytes.
    CnpReserved,
    /// FLUSH ETH: selectivity level and placement type (4).
    Feth,
}

impl ExtKind {
    /// Length in bytes.
    pub const fn size(self) -> usize {
        match self {
            Self::Rdeth | Self::Xrceth | Self::ImmDt | Self::Ieth | Self::Aeth | Self::Feth => 4,
            Self::Deth | Self::AtomicAckEth => 8,
            Self::Reth | Self::CnpReserved => 16,
            Self::AtomicEth => 28,
        }
    }
}

/// The extension headers of one opcode, in wire order (at most four).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    kinds: [ExtKind; 4],
    n: u8,
}

impl Layout {
    const fn of(list: &[ExtKind]) -> Self {
        let mut kinds = [ExtKind::Rdeth; 4];
        let mut i = 0;
        while i < list.len() {
            kinds[i] = list[i];
            i += 1;
        }
        Self { kinds, n: list.len() as u8 }
    }
    const fn prefixed(prefix: &[ExtKind], rest: Layout) -> Self {
        let mut kinds = [ExtKind::Rdeth; 4];
        let mut i = 0;
        while i < prefix.len() {
            kinds[i] = prefix[i];
            i += 1;
        }
        let mut j = 0;
        while j < rest.n as usize {
            kinds[i + j] = rest.kinds[j];
            j += 1;
        }
        Self { kinds, n: (prefix.len() + rest.n as usize) as u8 }
    }
    pub fn kinds(&self) -> &[ExtKind] {
        &self.kinds[..usize::from(self.n)]
    }
    /// Total length of the extension headers.
    pub const fn len(&self) -> usize {
        let mut sum = 0;
        let mut i = 0;
        while i < self.n as usize {
            sum += self.kinds[i].size();
            i += 1;
        }
        sum
    }
    pub const fn is_empty(&self) -> bool {
        self.n == 0
    }
    /// Offset of `kind` from the end of BTH, if this opcode carries it.
    pub fn offset_of(&self, kind: ExtKind) -> Option<usize> {
        let mut off = 0;
        for k in self.kinds() {
            if *k == kind {
                return Some(off);
            }
            off += k.size();
        }
        None
    }
}

/// Extension headers of an RC operation (low five bits), or `None` if reserved.
const fn rc_layout(o: u8) -> Option<Layout> {
    use ExtKind::*;
    Some(match o {
        op::SEND_FIRST | op::SEND_MIDDLE | op::SEND_LAST | op::SEND_ONLY => Layout::of(&[]),
        op::SEND_LAST_IMM | op::SEND_ONLY_IMM => Layout::of(&[ImmDt]),
        op::WRITE_FIRST | op::WRITE_ONLY => Layout::of(&[Reth]),
        op::WRITE_MIDDLE | op::WRITE_LAST => Layout::of(&[]),
        op::WRITE_LAST_IMM => Layout::of(&[ImmDt]),
        op::WRITE_ONLY_IMM => Layout::of(&[Reth, ImmDt]),
        op::READ_REQUEST => Layout::of(&[Reth]),
        op::READ_RESPONSE_FIRST | op::READ_RESPONSE_LAST | op::READ_RESPONSE_ONLY => Layout::of(&[Aeth]),
        op::READ_RESPONSE_MIDDLE => Layout::of(&[]),
        op::ACKNOWLEDGE => Layout::of(&[Aeth]),
        op::ATOMIC_ACKNOWLEDGE => Layout::of(&[Aeth, AtomicAckEth]),
        op::COMPARE_SWAP | op::FETCH_ADD => Layout::of(&[AtomicEth]),
        op::SEND_LAST_INV | op::SEND_ONLY_INV => Layout::of(&[Ieth]),
        _ => return None,
    })
}

/// Responses (READ responses, ACKs) come from the responder: no DETH on RD, no XRCETH on XRC.
const fn is_response(o: u8) -> bool {
    matches!(o, 0x0D..=0x12)
}

/// The extension headers that follow BTH for a full opcode byte, or `None` if the opcode is
/// reserved or unknown: the definition that fills [`LAYOUTS`] and [`PLANS`] at compile time
/// (use [`layout`] or [`plan`] at run time).
pub const fn layout_by_spec(opcode: u8) -> Option<Layout> {
    use ExtKind::*;
    let o = opcode & 0x1F;
    match opcode >> 5 {
        // FLUSH and ATOMIC WRITE are RC's alone.
        0 if o == op::FLUSH => Some(Layout::of(&[Feth, Reth])),
        0 if o == op::ATOMIC_WRITE => Some(Layout::of(&[Reth])),
        0 => rc_layout(o),
        // UC has SEND and RDMA WRITE only.
        1 if o <= op::WRITE_ONLY_IMM => rc_layout(o),
        2 if o == op::RESYNC => Some(Layout::of(&[Rdeth, Deth])),
        2 => match rc_layout(o) {
            Some(l) if is_response(o) => Some(Layout::prefixed(&[Rdeth], l)),
            Some(l) => Some(Layout::prefixed(&[Rdeth, Deth], l)),
            None => None,
        },
        3 if opcode == op::UD_SEND_ONLY => Some(Layout::of(&[Deth])),
        3 if opcode == op::UD_SEND_ONLY_IMM => Some(Layout::of(&[Deth, ImmDt])),
        5 => match rc_layout(o) {
            Some(l) if is_response(o) => Some(l),
            Some(l) => Some(Layout::prefixed(&[Xrceth], l)),
            None => None,
        },
        4 if opcode == op::CNP => Some(Layout::of(&[CnpReserved])),
        _ => None,
    }
}

/// [`layout_by_spec`] of every opcode byte, evaluated at compile time.
static LAYOUTS: [Option<Layout>; 256] = {
    let mut t = [None; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = layout_by_spec(i as u8);
        i += 1;
    }
    t
};

/// The extension headers that follow BTH for a full opcode byte, or `None` if the opcode is
/// reserved or unknown (a lookup in the table built from [`layout_by_spec`]).
#[inline]
pub fn layout(opcode: u8) -> Option<Layout> {
    LAYOUTS[usize::from(opcode)]
}

/// Where each extension header of one opcode starts after BTH ([`Plan::ABSENT`] if the
/// opcode does not carry it) and their total length: what parsing needs, precomputed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The opcode is known (its layout is defined).
    pub known: bool,
    /// Total length of the extension headers (0 when unknown).
    pub len: u8,
    rdeth: u8,
    deth: u8,
    xrceth: u8,
    reth: u8,
    atomic: u8,
    imm: u8,
    ieth: u8,
    aeth: u8,
    atomic_ack: u8,
}

impl Plan {
    /// The offset of a header the opcode does not carry.
    pub const ABSENT: u8 = u8::MAX;

    const fn of(opcode: u8) -> Self {
        let mut p = Self {
            known: false,
            len: 0,
            rdeth: Self::ABSENT,
            deth: Self::ABSENT,
            xrceth: Self::ABSENT,
            reth: Self::ABSENT,
            atomic: Self::ABSENT,
            imm: Self::ABSENT,
            ieth: Self::ABSENT,
            aeth: Self::ABSENT,
            atomic_ack: Self::ABSENT,
        };
        let Some(l) = layout_by_spec(opcode) else { return p };
        p.known = true;
        let mut off = 0;
        let mut i = 0;
        while i < l.n as usize {
            let k = l.kinds[i];
            let o = off as u8;
            match k {
                ExtKind::Rdeth => p.rdeth = o,
                ExtKind::Deth => p.deth = o,
                ExtKind::Xrceth => p.xrceth = o,
                ExtKind::Reth => p.reth = o,
                ExtKind::AtomicEth => p.atomic = o,
                ExtKind::ImmDt => p.imm = o,
                ExtKind::Ieth => p.ieth = o,
                ExtKind::Aeth => p.aeth = o,
                ExtKind::AtomicAckEth => p.atomic_ack = o,
                ExtKind::CnpReserved | ExtKind::Feth => {}
            }
            off += k.size();
            i += 1;
        }
        p.len = off as u8;
        p
    }

    /// The total length of the extension headers, or `None` if the opcode is unknown.
    #[inline]
    pub fn ext_len(&self) -> Option<usize> {
        self.known.then_some(usize::from(self.len))
    }
}

/// [`Plan`] of every opcode byte, evaluated at compile time from [`layout_by_spec`].
static PLANS: [Plan; 256] = {
    let mut t = [Plan::of(0); 256];
    let mut i = 0;
    while i < 256 {
        t[i] = Plan::of(i as u8);
        i += 1;
    }
    t
};

/// The longest run of extension headers any opcode carries.
pub const MAX_EXT_LEN: usize = {
    let (mut max, mut i) = (0, 0);
    while i < 256 {
        let p = Plan::of(i as u8);
        if p.known && p.len as usize > max {
            max = p.len as usize;
        }
        i += 1;
    }
    max
};

/// The parsing plan of an opcode byte (a table lookup).
#[inline]
pub fn plan(opcode: u8) -> &'static Plan {
    &PLANS[usize::from(opcode)]
}

fn need(b: &[u8], n: usize) -> Result<()> {
    if b.len() < n {
        Err(DecodeError::ExtHeadersTruncated)
    } else {
        Ok(())
    }
}

fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// RETH: the remote buffer of an RDMA WRITE or READ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reth {
    pub va: u64,
    pub rkey: u32,
    pub dma_len: u32,
}

impl Reth {
    pub fn parse(b: &[u8]) -> Result<Self> {
        need(b, 16)?;
        Ok(Self { va: be64(b, 0), rkey: be32(b, 8), dma_len: be32(b, 12) })
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.va.to_be_bytes());
        out[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        out[12..16].copy_from_slice(&self.dma_len.to_be_bytes());
    }
}

/// What an AETH syndrome says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckKind {
    /// ACK with a credit count (bits 4:0).
    Ack { credits: u8 },
    /// Receiver not ready; bits 4:0 are the RNR timer code.
    RnrNak { timer: u8 },
    /// NAK with a code: 0 PSN sequence error, 1 invalid request, 2 remote access error,
    /// 3 remote operational error, 4 invalid RD request.
    Nak { code: u8 },
    /// Syndrome 010 or 1xx: reserved.
    Reserved,
}

pub mod nak_code {
    pub const PSN_SEQUENCE_ERROR: u8 = 0;
    pub const INVALID_REQUEST: u8 = 1;
    pub const REMOTE_ACCESS_ERROR: u8 = 2;
    pub const REMOTE_OPERATIONAL_ERROR: u8 = 3;
    pub const INVALID_RD_REQUEST: u8 = 4;
}

/// AETH: the responder's acknowledgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Aeth {
    pub syndrome: u8,
    pub msn: u32,
}

impl Aeth {
    pub fn parse(b: &[u8]) -> Result<Self> {
        need(b, 4)?;
        Ok(Self { syndrome: b[0], msn: be24(b, 1) })
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[0] = self.syndrome;
        put24(out, 1, self.msn);
    }
    pub fn kind(&self) -> AckKind {
        let low = self.syndrome & 0x1F;
        match self.syndrome >> 5 {
            0b000 => AckKind::Ack { credits: low },
            0b001 => AckKind::RnrNak { timer: low },
            0b011 => AckKind::Nak { code: low },
            _ => AckKind::Reserved,
        }
    }
    pub fn ack(credits: u8, msn: u32) -> Self {
        Self { syndrome: credits & 0x1F, msn }
    }
    pub fn rnr_nak(timer: u8, msn: u32) -> Self {
        Self { syndrome: 0x20 | (timer & 0x1F), msn }
    }
    pub fn nak(code: u8, msn: u32) -> Self {
        Self { syndrome: 0x60 | (code & 0x1F), msn }
    }
}

/// AtomicETH: CmpSwap / FetchAdd operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AtomicEth {
    pub va: u64,
    pub rkey: u32,
    pub swap_add: u64,
    pub compare: u64,
}

impl AtomicEth {
    pub fn parse(b: &[u8]) -> Result<Self> {
        need(b, 28)?;
        Ok(Self { va: be64(b, 0), rkey: be32(b, 8), swap_add: be64(b, 12), compare: be64(b, 20) })
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[0..8].copy_from_slice(&self.va.to_be_bytes());
        out[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        out[12..20].copy_from_slice(&self.swap_add.to_be_bytes());
        out[20..28].copy_from_slice(&self.compare.to_be_bytes());
    }
}

/// DETH: datagram Q_Key and source QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Deth {
    pub qkey: u32,
    pub src_qp: u32,
}

impl Deth {
    pub fn parse(b: &[u8]) -> Result<Self> {
        need(b, 8)?;
        Ok(Self { qkey: be32(b, 0), src_qp: be24(b, 5) })
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&self.qkey.to_be_bytes());
        out[4] = 0;
        put24(out, 5, self.src_qp);
    }
}

/// The header at offset `o` of `b`, as an array of its size, if the opcode carries it
/// (`o` is not [`Plan::ABSENT`]) and it fits.
#[inline(always)]
fn at<const N: usize>(b: &[u8], o: u8) -> Option<[u8; N]> {
    if o == Plan::ABSENT {
        return None;
    }
    let o = usize::from(o);
    b.get(o..o + N).and_then(|h| h.try_into().ok())
}

#[inline(always)]
fn reth_at(b: &[u8], o: u8) -> Option<Reth> {
    at::<16>(b, o).map(|h| Reth {
        va: u64::from_be_bytes([h[0], h[1], h[2], h[3], h[4], h[5], h[6], h[7]]),
        rkey: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
        dma_len: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
    })
}

#[inline(always)]
fn aeth_at(b: &[u8], o: u8) -> Option<Aeth> {
    at::<4>(b, o).map(|h| Aeth { syndrome: h[0], msn: u32::from_be_bytes([0, h[1], h[2], h[3]]) })
}

/// The extension headers the trackers read, parsed once when a frame is decoded (into
/// `RocePacket::exts`): RETH (the target and length of an RDMA WRITE or READ Request) and
/// AETH (an acknowledgement's syndrome and MSN). The others stay bytes in
/// `RocePacket::ext`, which [`ExtHeaders::parse`] reads whole. 40 bytes where every header
/// parsed took 136, written for every packet and carried through the burst.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tracked {
    pub reth: Option<Reth>,
    pub aeth: Option<Aeth>,
}

impl Tracked {
    /// The headers `p` names from `b` (see [`ExtHeaders::parse_planned`]).
    #[inline(always)]
    pub fn parse_planned(p: &Plan, b: &[u8]) -> Self {
        Self { reth: reth_at(b, p.reth), aeth: aeth_at(b, p.aeth) }
    }
}

/// Every extension header of one packet, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExtHeaders {
    pub rdeth: Option<u32>,
    pub deth: Option<Deth>,
    pub xrc_srq: Option<u32>,
    pub reth: Option<Reth>,
    pub atomic: Option<AtomicEth>,
    pub imm: Option<u32>,
    pub ieth_rkey: Option<u32>,
    pub aeth: Option<Aeth>,
    pub atomic_ack: Option<u64>,
}

impl ExtHeaders {
    /// Parses the extension headers of `opcode` from `b` (the bytes right after BTH).
    #[inline]
    pub fn parse(opcode: u8, b: &[u8]) -> Result<Self> {
        let p = plan(opcode);
        if !p.known {
            return Err(DecodeError::BthUnknownOpcode);
        }
        need(b, usize::from(p.len))?;
        Ok(Self::parse_planned(p, b))
    }

    /// Parses the headers `p` names from `b`, which holds at least `p.len` bytes (a header
    /// that does not fit is absent: never a panic). Inlined, so that the headers are written
    /// where the caller keeps them.
    #[inline(always)]
    pub fn parse_planned(p: &Plan, b: &[u8]) -> Self {
        let u32_at = |o| at::<4>(b, o).map(u32::from_be_bytes);
        Self {
            rdeth: u32_at(p.rdeth).map(|v| v & 0x00FF_FFFF),
            deth: at::<8>(b, p.deth).map(|h| Deth {
                qkey: u32::from_be_bytes([h[0], h[1], h[2], h[3]]),
                src_qp: u32::from_be_bytes([0, h[5], h[6], h[7]]),
            }),
            xrc_srq: u32_at(p.xrceth).map(|v| v & 0x00FF_FFFF),
            reth: reth_at(b, p.reth),
            atomic: at::<28>(b, p.atomic).and_then(|h| AtomicEth::parse(&h).ok()),
            imm: u32_at(p.imm),
            ieth_rkey: u32_at(p.ieth),
            aeth: aeth_at(b, p.aeth),
            atomic_ack: at::<8>(b, p.atomic_ack).map(u64::from_be_bytes),
        }
    }

    /// Writes the headers that `opcode` carries (taken from `self`, zero where absent) into
    /// `out[..layout(opcode).len()]`.
    pub fn emit(&self, opcode: u8, out: &mut [u8]) {
        let Some(l) = layout(opcode) else { return };
        let mut off = 0;
        for k in l.kinds() {
            let h = &mut out[off..off + k.size()];
            match k {
                ExtKind::Rdeth => h.copy_from_slice(&(self.rdeth.unwrap_or(0) & 0x00FF_FFFF).to_be_bytes()),
                ExtKind::Deth => self.deth.unwrap_or_default().emit(h),
                ExtKind::Xrceth => {
                    h[0] = 0;
                    put24(h, 1, self.xrc_srq.unwrap_or(0));
                }
                ExtKind::Reth => self.reth.unwrap_or_default().emit(h),
                ExtKind::AtomicEth => self.atomic.unwrap_or_default().emit(h),
                ExtKind::ImmDt => h.copy_from_slice(&self.imm.unwrap_or(0).to_be_bytes()),
                ExtKind::Ieth => h.copy_from_slice(&self.ieth_rkey.unwrap_or(0).to_be_bytes()),
                ExtKind::Aeth => self.aeth.unwrap_or_default().emit(h),
                ExtKind::AtomicAckEth => h.copy_from_slice(&self.atomic_ack.unwrap_or(0).to_be_bytes()),
                ExtKind::CnpReserved | ExtKind::Feth => h.fill(0),
            }
            off += k.size();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::tests::real_frame;

    /// The extension headers of a real untagged IPv4 frame (BTH at 42, ext at 54).
    fn ext_of(capture: &str, index: usize) -> ExtHeaders {
        let f = real_frame(capture, index);
        ExtHeaders::parse(f[42], &f[54..]).unwrap()
    }

    #[test]
    fn reth_from_real_write_first() {
        // tshark, rdma_write_bw.pcap frame 22: reth.va 0x00005e6b89b96000, r_key 0x00000ce6,
        // dmalen 3000.
        let x = ext_of("rdma_write_bw.pcap", 21);
        assert_eq!(x.reth, Some(Reth { va: 0x5e6b_89b9_6000, rkey: 0xce6, dma_len: 3000 }));
        assert_eq!((x.aeth, x.imm), (None, None));
    }

    #[test]
    fn aeth_from_real_ack() {
        // tshark, rdma_write_bw.pcap frame 25: aeth.syndrome 31, msn 1.
        let a = ext_of("rdma_write_bw.pcap", 24).aeth.unwrap();
        assert_eq!(a, Aeth { syndrome: 31, msn: 1 });
        assert_eq!(a.kind(), AckKind::Ack { credits: 31 });
    }

    #[test]
    fn deth_from_real_ud_send() {
        // tshark, pingpong_ud.pcap frame 12: deth.q_key 0x11111111, srcqp 0x000023.
        let x = ext_of("pingpong_ud.pcap", 11);
        assert_eq!(x.deth, Some(Deth { qkey: 0x1111_1111, src_qp: 0x23 }));
    }

    #[test]
    fn atomic_eth_from_real_fetch_add() {
        // tshark, rdma_atomic_bw.pcap frame 20: va 0x00006320d6be5000, r_key 0x1986,
        // swap/add 1, compare 0.
        let x = ext_of("rdma_atomic_bw.pcap", 19);
        assert_eq!(x.atomic, Some(AtomicEth { va: 0x6320_d6be_5000, rkey: 0x1986, swap_add: 1, compare: 0 }));
    }

    #[test]
    fn atomic_ack_eth_from_real_capture() {
        // tshark, rdma_atomic_bw.pcap frame 25: aeth.syndrome 31, msn 1,
        // atomicacketh.origremdt 4179805055496059590.
        let x = ext_of("rdma_atomic_bw.pcap", 24);
        assert_eq!(x.aeth, Some(Aeth { syndrome: 31, msn: 1 }));
        assert_eq!(x.atomic_ack, Some(4_179_805_055_496_059_590));
    }

    #[test]
    fn known_answers_from_the_specification() {
        // XRC SEND Only with Immediate (0xA5): XRCETH (reserved byte, 24-bit SRQ) then ImmDt.
        let b = [0x00, 0x12, 0x34, 0x56, 0xDE, 0xAD, 0xBE, 0xEF];
        let x = ExtHeaders::parse(0xA5, &b).unwrap();
        assert_eq!((x.xrc_srq, x.imm), (Some(0x123456), Some(0xDEAD_BEEF)));
        // SEND Only with Invalidate (0x17): IETH is the R_Key to invalidate.
        let x = ExtHeaders::parse(0x17, &[0x00, 0x00, 0x0C, 0xE6]).unwrap();
        assert_eq!(x.ieth_rkey, Some(0x0CE6));
        // RD SEND Only (0x44): RDETH (reserved byte, 24-bit EE context), then DETH.
        let b = [0x00, 0x00, 0x00, 0x07, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2A];
        let x = ExtHeaders::parse(0x44, &b).unwrap();
        assert_eq!(x.rdeth, Some(7));
        assert_eq!(x.deth, Some(Deth { qkey: 0x8001_0000, src_qp: 0x2A }));
    }

    #[test]
    fn layouts_in_wire_order() {
        use ExtKind::*;
        assert_eq!(layout(0x0B).unwrap().kinds(), &[Reth, ImmDt]);
        assert_eq!(layout(0x12).unwrap().kinds(), &[Aeth, AtomicAckEth]);
        assert_eq!(layout(0x4C).unwrap().kinds(), &[Rdeth, Deth, Reth]);
        assert_eq!(layout(0x51).unwrap().kinds(), &[Rdeth, Aeth]);
        assert_eq!(layout(0xA5).unwrap().kinds(), &[Xrceth, ImmDt]);
        assert_eq!(layout(0xB0).unwrap().kinds(), &[Aeth]);
        assert_eq!(layout(0x65).unwrap().kinds(), &[Deth, ImmDt]);
        assert_eq!(layout(0x81).unwrap().kinds(), &[CnpReserved]);
        assert_eq!(layout(0x0B).unwrap().offset_of(ImmDt), Some(16));
        assert!(layout(0x2C).is_none() && layout(0x66).is_none() && layout(0x18).is_none());
        // RC FLUSH (FETH, then RETH: 20 bytes, as Linux rxe sends it) and ATOMIC WRITE
        // (RETH, then 8 bytes of payload); neither exists on UC, RD or XRC.
        assert_eq!(layout(0x1C).unwrap().kinds(), &[Feth, Reth]);
        assert_eq!(layout(0x1C).unwrap().offset_of(Reth), Some(4));
        assert_eq!(layout(0x1D).unwrap().kinds(), &[Reth]);
        assert!([0x3C, 0x3D, 0x5C, 0xBC, 0xBD].iter().all(|&o| layout(o).is_none()));
    }

    #[test]
    fn plans_place_every_header_where_its_layout_does() {
        // The plans' offsets are summed header by header (`Plan::of`); the layouts' are
        // found by walking their kinds (`Layout::offset_of`): two computations from the
        // one definition, whose values `layouts_in_wire_order` checks against the spec.
        for opcode in 0..=255u8 {
            let l = layout(opcode);
            let p = plan(opcode);
            assert_eq!(p.ext_len(), l.map(|l| l.len()), "{opcode:#04x}");
            for k in l.iter().flat_map(|l| l.kinds().to_vec()) {
                let off = match k {
                    ExtKind::Rdeth => p.rdeth,
                    ExtKind::Deth => p.deth,
                    ExtKind::Xrceth => p.xrceth,
                    ExtKind::Reth => p.reth,
                    ExtKind::AtomicEth => p.atomic,
                    ExtKind::ImmDt => p.imm,
                    ExtKind::Ieth => p.ieth,
                    ExtKind::Aeth => p.aeth,
                    ExtKind::AtomicAckEth => p.atomic_ack,
                    ExtKind::CnpReserved | ExtKind::Feth => continue,
                };
                assert_eq!(Some(usize::from(off)), l.unwrap().offset_of(k), "{opcode:#04x} {k:?}");
            }
        }
    }

    #[test]
    fn syndromes() {
        assert_eq!(Aeth::nak(nak_code::PSN_SEQUENCE_ERROR, 5).kind(), AckKind::Nak { code: 0 });
        assert_eq!(Aeth::nak(nak_code::REMOTE_ACCESS_ERROR, 5).kind(), AckKind::Nak { code: 2 });
        assert_eq!(Aeth::rnr_nak(14, 5).kind(), AckKind::RnrNak { timer: 14 });
        assert_eq!(Aeth { syndrome: 0x40, msn: 0 }.kind(), AckKind::Reserved);
    }

    #[test]
    fn emit_parse_round_trip_for_every_valid_opcode() {
        let x = ExtHeaders {
            rdeth: Some(0x123456),
            deth: Some(Deth { qkey: 0x8001_0000, src_qp: 0xABCDEF }),
            xrc_srq: Some(0x654321),
            reth: Some(Reth { va: 0x1122_3344_5566_7788, rkey: 0x99AA_BBCC, dma_len: 65536 }),
            atomic: Some(AtomicEth { va: 1, rkey: 2, swap_add: 3, compare: 4 }),
            imm: Some(0xDEAD_BEEF),
            ieth_rkey: Some(0xFEED_F00D),
            aeth: Some(Aeth::nak(3, 0x00FF_FFFF)),
            atomic_ack: Some(0x0102_0304_0506_0708),
        };
        let mut n = 0;
        for opcode in 0..=255u8 {
            let Some(l) = layout(opcode) else { continue };
            n += 1;
            let mut b = vec![0u8; l.len()];
            x.emit(opcode, &mut b);
            let back = ExtHeaders::parse(opcode, &b).unwrap();
            // Exactly the headers the layout names come back, with their values.
            let keep = |k: ExtKind| l.kinds().contains(&k);
            let expect = ExtHeaders {
                rdeth: x.rdeth.filter(|_| keep(ExtKind::Rdeth)),
                deth: x.deth.filter(|_| keep(ExtKind::Deth)),
                xrc_srq: x.xrc_srq.filter(|_| keep(ExtKind::Xrceth)),
                reth: x.reth.filter(|_| keep(ExtKind::Reth)),
                atomic: x.atomic.filter(|_| keep(ExtKind::AtomicEth)),
                imm: x.imm.filter(|_| keep(ExtKind::ImmDt)),
                ieth_rkey: x.ieth_rkey.filter(|_| keep(ExtKind::Ieth)),
                aeth: x.aeth.filter(|_| keep(ExtKind::Aeth)),
                atomic_ack: x.atomic_ack.filter(|_| keep(ExtKind::AtomicAckEth)),
            };
            assert_eq!(back, expect, "opcode {opcode:#04x}");
            if !l.is_empty() {
                assert_eq!(
                    ExtHeaders::parse(opcode, &b[..l.len() - 1]),
                    Err(DecodeError::ExtHeadersTruncated)
                );
            }
        }
        // RC 23 (and IBTA 1.5's FLUSH and ATOMIC WRITE) + UC 12 + RD 24 + UD 2 + CNP 1 + XRC 23.
        assert_eq!(n, 23 + 2 + 12 + 24 + 2 + 1 + 23);
    }
}
