//! InfiniBand Base Transport Header (12 bytes) and the opcode table: transport, operation,
//! and the extension headers that follow BTH (IBTA Vol. 1 ch. 9, RoCEv2 annex A17).

use super::{be16, put16, put24, DecodeError, Result};
use std::fmt;

pub const HEADER_LEN: usize = 12;
pub const ICRC_LEN: usize = 4;
/// PSNs and QPNs are 24-bit.
pub const PSN_MASK: u32 = 0x00FF_FFFF;

mod field {
    pub const OPCODE: usize = 0;
    pub const FLAGS: usize = 1; // SE, MigReq, PadCnt, TVer
    pub const PKEY: usize = 2;
    pub const RESV8A: usize = 4; // FECN, BECN in IB; reserved in RoCEv2
    pub const DEST_QP: usize = 5;
    pub const ACKREQ: usize = 8;
    pub const PSN: usize = 9;
}

/// The transport service, from the opcode's top three bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    Rc,
    Uc,
    Rd,
    Ud,
    Cnp,
    Xrc,
}

impl Transport {
    pub fn from_opcode(op: u8) -> Option<Self> {
        match op >> 5 {
            0 => Some(Self::Rc),
            1 => Some(Self::Uc),
            2 => Some(Self::Rd),
            3 => Some(Self::Ud),
            5 => Some(Self::Xrc),
            4 if op == opcode::CNP => Some(Self::Cnp),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Rc => "RC",
            Self::Uc => "UC",
            Self::Rd => "RD",
            Self::Ud => "UD",
            Self::Cnp => "CNP",
            Self::Xrc => "XRC",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Operation codes (low five bits) shared by RC, UC, RD and XRC, plus the whole-byte
/// opcodes of UD and CNP.
pub mod opcode {
    pub const SEND_FIRST: u8 = 0x00;
    pub const SEND_MIDDLE: u8 = 0x01;
    pub const SEND_LAST: u8 = 0x02;
    pub const SEND_LAST_IMM: u8 = 0x03;
    pub const SEND_ONLY: u8 = 0x04;
    pub const SEND_ONLY_IMM: u8 = 0x05;
    pub const WRITE_FIRST: u8 = 0x06;
    pub const WRITE_MIDDLE: u8 = 0x07;
    pub const WRITE_LAST: u8 = 0x08;
    pub const WRITE_LAST_IMM: u8 = 0x09;
    pub const WRITE_ONLY: u8 = 0x0A;
    pub const WRITE_ONLY_IMM: u8 = 0x0B;
    pub const READ_REQUEST: u8 = 0x0C;
    pub const READ_RESPONSE_FIRST: u8 = 0x0D;
    pub const READ_RESPONSE_MIDDLE: u8 = 0x0E;
    pub const READ_RESPONSE_LAST: u8 = 0x0F;
    pub const READ_RESPONSE_ONLY: u8 = 0x10;
    pub const ACKNOWLEDGE: u8 = 0x11;
    pub const ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    pub const COMPARE_SWAP: u8 = 0x13;
    pub const FETCH_ADD: u8 = 0x14;
    pub const RESYNC: u8 = 0x15;
    pub const SEND_LAST_INV: u8 = 0x16;
    pub const SEND_ONLY_INV: u8 = 0x17;
    /// RC only (IBTA 1.5, the persistent-memory extensions): FLUSH, answered by a READ
    /// Response Only without payload, and ATOMIC WRITE (8 bytes written as one), answered
    /// by an ACK.
    pub const FLUSH: u8 = 0x1C;
    pub const ATOMIC_WRITE: u8 = 0x1D;
    /// UD SEND Only / SEND Only with Immediate (whole byte).
    pub const UD_SEND_ONLY: u8 = 0x64;
    pub const UD_SEND_ONLY_IMM: u8 = 0x65;
    /// RoCEv2 Congestion Notification Packet (whole byte).
    pub const CNP: u8 = 0x81;
}

/// Total length of the extension headers after BTH for a full opcode byte, or `None` if the
/// opcode is reserved or unknown (a lookup in the table built from
/// [`super::ib_ext::layout_by_spec`] at compile time).
#[inline]
pub fn ext_headers_len(opcode: u8) -> Option<usize> {
    super::ib_ext::plan(opcode).ext_len()
}

/// Human name of an opcode, for tables and logs.
pub fn opcode_name(opcode: u8) -> &'static str {
    if opcode == opcode::CNP {
        return "CNP";
    }
    if opcode == opcode::UD_SEND_ONLY {
        return "SEND_ONLY";
    }
    if opcode == opcode::UD_SEND_ONLY_IMM {
        return "SEND_ONLY_IMM";
    }
    match opcode & 0x1F {
        0x00 => "SEND_FIRST",
        0x01 => "SEND_MIDDLE",
        0x02 => "SEND_LAST",
        0x03 => "SEND_LAST_IMM",
        0x04 => "SEND_ONLY",
        0x05 => "SEND_ONLY_IMM",
        0x06 => "WRITE_FIRST",
        0x07 => "WRITE_MIDDLE",
        0x08 => "WRITE_LAST",
        0x09 => "WRITE_LAST_IMM",
        0x0A => "WRITE_ONLY",
        0x0B => "WRITE_ONLY_IMM",
        0x0C => "READ_REQUEST",
        0x0D => "READ_RESPONSE_FIRST",
        0x0E => "READ_RESPONSE_MIDDLE",
        0x0F => "READ_RESPONSE_LAST",
        0x10 => "READ_RESPONSE_ONLY",
        0x11 => "ACK",
        0x12 => "ATOMIC_ACK",
        0x13 => "CMP_SWAP",
        0x14 => "FETCH_ADD",
        0x15 => "RESYNC",
        0x16 => "SEND_LAST_INV",
        0x17 => "SEND_ONLY_INV",
        0x1C => "FLUSH",
        0x1D => "ATOMIC_WRITE",
        _ => "RESERVED",
    }
}

/// A view of a BTH.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Checks the length, the transport version (0) and that the opcode is one whose
    /// extension headers are known.
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(DecodeError::BthTruncated);
        }
        let p = Self { buf };
        if p.tver() != 0 {
            return Err(DecodeError::BthBadVersion);
        }
        if ext_headers_len(p.opcode()).is_none() {
            return Err(DecodeError::BthUnknownOpcode);
        }
        Ok(p)
    }
    #[inline]
    pub fn opcode(&self) -> u8 {
        self.buf.as_ref()[field::OPCODE]
    }
    #[inline]
    pub fn transport(&self) -> Transport {
        // new_checked accepted the opcode, so the transport is known.
        Transport::from_opcode(self.opcode()).unwrap_or(Transport::Rc)
    }
    #[inline]
    pub fn solicited(&self) -> bool {
        self.buf.as_ref()[field::FLAGS] & 0x80 != 0
    }
    #[inline]
    pub fn migreq(&self) -> bool {
        self.buf.as_ref()[field::FLAGS] & 0x40 != 0
    }
    #[inline]
    pub fn pad_count(&self) -> u8 {
        (self.buf.as_ref()[field::FLAGS] >> 4) & 0x03
    }
    #[inline]
    pub fn tver(&self) -> u8 {
        self.buf.as_ref()[field::FLAGS] & 0x0F
    }
    #[inline]
    pub fn pkey(&self) -> u16 {
        be16(self.buf.as_ref(), field::PKEY)
    }
    #[inline]
    pub fn fecn(&self) -> bool {
        self.buf.as_ref()[field::RESV8A] & 0x80 != 0
    }
    #[inline]
    pub fn becn(&self) -> bool {
        self.buf.as_ref()[field::RESV8A] & 0x40 != 0
    }
    /// The 24-bit field at `at` (≥ 1) read as the low bits of the big-endian word that ends
    /// with it: one load, where three bytes assembled one by one take several instructions
    /// (the packet's QPN and PSN are read a few times each).
    #[inline]
    fn low24(&self, at: usize) -> u32 {
        let word: [u8; 4] = self.buf.as_ref()[at - 1..at + 3].try_into().unwrap_or_default();
        u32::from_be_bytes(word) & PSN_MASK
    }
    #[inline]
    pub fn dest_qp(&self) -> u32 {
        self.low24(field::DEST_QP)
    }
    #[inline]
    pub fn ack_req(&self) -> bool {
        self.buf.as_ref()[field::ACKREQ] & 0x80 != 0
    }
    #[inline]
    pub fn psn(&self) -> u32 {
        self.low24(field::PSN)
    }
    /// Extension headers' total length for this opcode.
    #[inline]
    pub fn ext_headers_len(&self) -> usize {
        ext_headers_len(self.opcode()).unwrap_or(0)
    }
    /// The header's 12 bytes as a view of their own (a checked view holds at least that
    /// many): its fields are then read at fixed offsets of an array, with no bounds check
    /// however often the trackers read them.
    #[inline]
    pub fn header(&self) -> Packet<[u8; HEADER_LEN]> {
        let mut h = [0u8; HEADER_LEN];
        let b = self.buf.as_ref();
        let n = b.len().min(HEADER_LEN);
        h[..n].copy_from_slice(&b[..n]);
        Packet { buf: h }
    }
}

/// Parsed BTH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Repr {
    pub opcode: u8,
    pub solicited: bool,
    pub migreq: bool,
    pub pad_count: u8,
    pub pkey: u16,
    pub fecn: bool,
    pub becn: bool,
    pub dest_qp: u32,
    pub ack_req: bool,
    pub psn: u32,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Self {
            opcode: p.opcode(),
            solicited: p.solicited(),
            migreq: p.migreq(),
            pad_count: p.pad_count(),
            pkey: p.pkey(),
            fecn: p.fecn(),
            becn: p.becn(),
            dest_qp: p.dest_qp(),
            ack_req: p.ack_req(),
            psn: p.psn(),
        }
    }
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[field::OPCODE] = self.opcode;
        out[field::FLAGS] =
            (u8::from(self.solicited) << 7) | (u8::from(self.migreq) << 6) | ((self.pad_count & 3) << 4);
        put16(out, field::PKEY, self.pkey);
        out[field::RESV8A] = (u8::from(self.fecn) << 7) | (u8::from(self.becn) << 6);
        put24(out, field::DEST_QP, self.dest_qp & PSN_MASK);
        out[field::ACKREQ] = u8::from(self.ack_req) << 7;
        put24(out, field::PSN, self.psn & PSN_MASK);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::frame::tests::real_frame;

    #[test]
    fn known_answer_from_real_write_first() {
        // rdma_write_bw.pcap frame 22: RC RDMA WRITE First (0x06) to QP 0x1b, tshark:
        // infiniband.bth.opcode == 6, destqp == 0x00001b, psn == 5454383.
        let f = real_frame("rdma_write_bw.pcap", 21);
        let p = Packet::new_checked(&f[42..]).unwrap();
        assert_eq!(p.opcode(), opcode::WRITE_FIRST);
        assert_eq!(p.transport(), Transport::Rc);
        assert_eq!(p.pkey(), 0xFFFF);
        assert_eq!(p.tver(), 0);
        assert_eq!(p.dest_qp(), 0x1b);
        assert_eq!(p.psn(), 5454383);
        assert_eq!(p.ext_headers_len(), 16);
    }

    #[test]
    fn emit_parse_round_trip() {
        let r = Repr {
            opcode: 0xA0 | opcode::SEND_ONLY,
            solicited: true,
            migreq: true,
            pad_count: 3,
            pkey: 0x8001,
            fecn: true,
            becn: false,
            dest_qp: 0xABCDEF,
            ack_req: true,
            psn: 0xFFFFFF,
        };
        let mut b = [0u8; HEADER_LEN];
        r.emit(&mut b);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p), r);
        assert_eq!(p.transport(), Transport::Xrc);
        assert_eq!(p.ext_headers_len(), 4);
    }

    #[test]
    fn extension_header_table() {
        assert_eq!(ext_headers_len(0x0B), Some(20)); // WRITE Only w/ Imm: RETH + ImmDt
        assert_eq!(ext_headers_len(0x12), Some(12)); // Atomic ACK: AETH + AtomicAckETH
        assert_eq!(ext_headers_len(0x14), Some(28)); // FetchAdd: AtomicETH
        assert_eq!(ext_headers_len(0x2A), Some(16)); // UC WRITE Only: RETH
        assert_eq!(ext_headers_len(0x2C), None); // UC has no READ
        assert_eq!(ext_headers_len(0x64), Some(8)); // UD SEND Only: DETH
        assert_eq!(ext_headers_len(0x65), Some(12));
        assert_eq!(ext_headers_len(0x60), None);
        assert_eq!(ext_headers_len(0x81), Some(16)); // CNP
        assert_eq!(ext_headers_len(0x80), None);
        assert_eq!(ext_headers_len(0xAC), Some(20)); // XRC READ Request: XRCETH + RETH
        assert_eq!(ext_headers_len(0xB1), Some(4)); // XRC ACK: AETH only
        assert_eq!(ext_headers_len(0x44), Some(12)); // RD SEND Only: RDETH + DETH
        assert_eq!(ext_headers_len(0x51), Some(8)); // RD ACK: RDETH + AETH
        assert_eq!(ext_headers_len(0x18), None);
        assert_eq!(ext_headers_len(0xE0), None);
    }

    #[test]
    fn bad_headers() {
        let mut b = [0u8; HEADER_LEN];
        Repr { opcode: 0x04, ..Default::default() }.emit(&mut b);
        assert_eq!(Packet::new_checked(&b[..11]).err(), Some(DecodeError::BthTruncated));
        b[1] = 1; // TVer 1
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(DecodeError::BthBadVersion));
        b[1] = 0;
        b[0] = 0x1F;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(DecodeError::BthUnknownOpcode));
    }
}
