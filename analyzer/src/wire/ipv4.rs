//! IPv4 header (with options).

use super::{be16, put16, DecodeError, Result};
use std::net::Ipv4Addr;

pub const MIN_HEADER_LEN: usize = 20;
pub const PROTO_UDP: u8 = 17;
pub const PROTO_GRE: u8 = 47;

mod field {
    pub const VER_IHL: usize = 0;
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
}

/// A view of an IPv4 header. `new_checked` validates version, IHL and total length against
/// each other; the buffer may be shorter than the total length (a mirror that truncates
/// frames), and [`Packet::payload`] then returns what was captured.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        let b = buf.as_ref();
        if b.len() < MIN_HEADER_LEN {
            return Err(DecodeError::Ipv4Truncated);
        }
        let p = Self { buf };
        let hl = p.header_len();
        if p.version() != 4 || hl < MIN_HEADER_LEN || usize::from(p.total_len()) < hl {
            return Err(DecodeError::Ipv4BadHeader);
        }
        if p.buf.as_ref().len() < hl {
            return Err(DecodeError::Ipv4Truncated);
        }
        Ok(p)
    }
    #[inline]
    pub fn version(&self) -> u8 {
        self.buf.as_ref()[field::VER_IHL] >> 4
    }
    #[inline]
    pub fn header_len(&self) -> usize {
        usize::from(self.buf.as_ref()[field::VER_IHL] & 0x0F) * 4
    }
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buf.as_ref()[field::TOS] >> 2
    }
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buf.as_ref()[field::TOS] & 0x03
    }
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.buf.as_ref(), field::TOTAL_LEN)
    }
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.buf.as_ref(), field::IDENT)
    }
    #[inline]
    pub fn dont_frag(&self) -> bool {
        be16(self.buf.as_ref(), field::FLAGS_FRAG) & 0x4000 != 0
    }
    #[inline]
    pub fn more_frags(&self) -> bool {
        be16(self.buf.as_ref(), field::FLAGS_FRAG) & 0x2000 != 0
    }
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        be16(self.buf.as_ref(), field::FLAGS_FRAG) & 0x1FFF
    }
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.more_frags() || self.frag_offset() != 0
    }
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buf.as_ref()[field::TTL]
    }
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buf.as_ref()[field::PROTOCOL]
    }
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), field::CHECKSUM)
    }
    #[inline]
    pub fn src(&self) -> Ipv4Addr {
        let b = self.buf.as_ref();
        Ipv4Addr::new(b[field::SRC], b[field::SRC + 1], b[field::SRC + 2], b[field::SRC + 3])
    }
    #[inline]
    pub fn dst(&self) -> Ipv4Addr {
        let b = self.buf.as_ref();
        Ipv4Addr::new(b[field::DST], b[field::DST + 1], b[field::DST + 2], b[field::DST + 3])
    }
    /// The payload as far as it was captured, bounded by the total length (Ethernet pads
    /// short frames, and the padding is not IP payload).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buf.as_ref();
        let end = usize::from(self.total_len()).min(b.len());
        &b[self.header_len()..end]
    }
    /// Payload length according to the header.
    #[inline]
    pub fn payload_len(&self) -> usize {
        usize::from(self.total_len()) - self.header_len()
    }
}

/// Internet checksum of a header (one's complement sum of 16-bit words).
pub fn checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for c in header.chunks(2) {
        let w = if c.len() == 2 { u16::from_be_bytes([c[0], c[1]]) } else { u16::from(c[0]) << 8 };
        sum += u32::from(w);
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

/// Parsed IPv4 header. Options are kept as their length only (the probe skips them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    pub dscp: u8,
    pub ecn: u8,
    pub ttl: u8,
    pub ident: u16,
    pub dont_frag: bool,
    /// Bytes of options (multiple of 4, at most 40); emitted as NOPs ending in EOL.
    pub options_len: u8,
    pub payload_len: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Self {
            src: p.src(),
            dst: p.dst(),
            protocol: p.protocol(),
            dscp: p.dscp(),
            ecn: p.ecn(),
            ttl: p.ttl(),
            ident: p.ident(),
            dont_frag: p.dont_frag(),
            options_len: (p.header_len() - MIN_HEADER_LEN) as u8,
            payload_len: p.payload_len() as u16,
        }
    }
    pub fn header_len(&self) -> usize {
        MIN_HEADER_LEN + usize::from(self.options_len)
    }
    /// Writes the header (with a valid checksum) into `out[..header_len()]`.
    pub fn emit(&self, out: &mut [u8]) {
        let hl = self.header_len();
        out[field::VER_IHL] = 0x40 | (hl / 4) as u8;
        out[field::TOS] = (self.dscp << 2) | (self.ecn & 3);
        put16(out, field::TOTAL_LEN, (hl as u16) + self.payload_len);
        put16(out, field::IDENT, self.ident);
        put16(out, field::FLAGS_FRAG, if self.dont_frag { 0x4000 } else { 0 });
        out[field::TTL] = self.ttl;
        out[field::PROTOCOL] = self.protocol;
        put16(out, field::CHECKSUM, 0);
        out[field::SRC..field::SRC + 4].copy_from_slice(&self.src.octets());
        out[field::DST..field::DST + 4].copy_from_slice(&self.dst.octets());
        if self.options_len > 0 {
            out[MIN_HEADER_LEN..hl - 1].fill(1); // NOP
            out[hl - 1] = 0; // End of option list
        }
        let c = checksum(&out[..hl]);
        put16(out, field::CHECKSUM, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // IPv4 header of frame 22 of rdma_write_bw.pcap (10.1.16.62 -> 10.1.16.61, UDP, 1084 bytes).
    fn real_header() -> Vec<u8> {
        crate::wire::frame::tests::real_frame("rdma_write_bw.pcap", 21)[14..34].to_vec()
    }

    #[test]
    fn known_answer_from_real_packet() {
        let h = real_header();
        let p = Packet::new_checked(&h[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.protocol(), PROTO_UDP);
        assert_eq!(p.src(), Ipv4Addr::new(10, 1, 16, 62));
        assert_eq!(p.dst(), Ipv4Addr::new(10, 1, 16, 61));
        assert_eq!(checksum(&h), 0, "a received header sums to zero");
    }

    #[test]
    fn emit_parse_round_trip_with_options() {
        let r = Repr {
            src: Ipv4Addr::new(192, 0, 2, 1),
            dst: Ipv4Addr::new(198, 51, 100, 7),
            protocol: PROTO_UDP,
            dscp: 26,
            ecn: 3,
            ttl: 63,
            ident: 0xBEEF,
            dont_frag: true,
            options_len: 8,
            payload_len: 100,
        };
        let mut b = vec![0u8; r.header_len()];
        r.emit(&mut b);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Repr::parse(&p), r);
        assert_eq!(checksum(&b), 0);
    }

    #[test]
    fn malformed_headers() {
        let mut h = real_header();
        assert_eq!(Packet::new_checked(&h[..19]).err(), Some(DecodeError::Ipv4Truncated));
        h[0] = 0x44; // IHL 4 < 5
        assert_eq!(Packet::new_checked(&h[..]).err(), Some(DecodeError::Ipv4BadHeader));
        h[0] = 0x46; // IHL 6: 24 bytes of header, only 20 captured
        assert_eq!(Packet::new_checked(&h[..]).err(), Some(DecodeError::Ipv4Truncated));
        h[0] = 0x65; // version 6
        assert_eq!(Packet::new_checked(&h[..]).err(), Some(DecodeError::Ipv4BadHeader));
    }
}
