//! IPv6 header; extension headers are skipped to reach the upper-layer protocol.

use super::{be16, put16, DecodeError, Result};
use std::net::Ipv6Addr;

pub const HEADER_LEN: usize = 40;

pub mod next_header {
    pub const HOP_BY_HOP: u8 = 0;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const AUTH: u8 = 51;
    pub const DEST_OPTS: u8 = 60;
    pub const MOBILITY: u8 = 135;
    pub const NO_NEXT: u8 = 59;
}

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// A view of an IPv6 header. As with IPv4, the captured buffer may end before the payload
/// length says (a truncating mirror).
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(DecodeError::Ipv6Truncated);
        }
        if buf.as_ref()[field::VER_TC_FLOW] >> 4 != 6 {
            return Err(DecodeError::Ipv6BadHeader);
        }
        Ok(Self { buf })
    }
    #[inline]
    pub fn version(&self) -> u8 {
        self.buf.as_ref()[field::VER_TC_FLOW] >> 4
    }
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        let b = self.buf.as_ref();
        (b[0] << 4) | (b[1] >> 4)
    }
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.traffic_class() & 0x03
    }
    #[inline]
    pub fn flow_label(&self) -> u32 {
        let b = self.buf.as_ref();
        u32::from_be_bytes([0, b[1] & 0x0F, b[2], b[3]])
    }
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.buf.as_ref(), field::PAYLOAD_LEN)
    }
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buf.as_ref()[field::NEXT_HEADER]
    }
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buf.as_ref()[field::HOP_LIMIT]
    }
    #[inline]
    pub fn src(&self) -> Ipv6Addr {
        let a: [u8; 16] = self.buf.as_ref()[field::SRC].try_into().unwrap();
        Ipv6Addr::from(a)
    }
    #[inline]
    pub fn dst(&self) -> Ipv6Addr {
        let a: [u8; 16] = self.buf.as_ref()[field::DST].try_into().unwrap();
        Ipv6Addr::from(a)
    }
    /// Skips extension headers. Returns the upper-layer protocol, the offset of its header
    /// from the start of the IPv6 header, and which part of its datagram the packet is (a
    /// Fragment header's). Bounded: at most 16 extension headers are walked (then the
    /// upper layer's header must come).
    pub fn upper_layer(&self) -> Result<(u8, usize, Fragment)> {
        let b = self.buf.as_ref();
        let mut nh = self.next_header();
        let mut off = HEADER_LEN;
        let (mut later, mut more) = (false, false);
        for _ in 0..=16 {
            match nh {
                next_header::HOP_BY_HOP
                | next_header::ROUTING
                | next_header::DEST_OPTS
                | next_header::MOBILITY => {
                    if b.len() < off + 2 {
                        return Err(DecodeError::Ipv6ExtTruncated);
                    }
                    nh = b[off];
                    off += (usize::from(b[off + 1]) + 1) * 8;
                }
                next_header::FRAGMENT => {
                    if b.len() < off + 8 {
                        return Err(DecodeError::Ipv6ExtTruncated);
                    }
                    let fo = be16(b, off + 2);
                    later |= (fo & 0xFFF8) != 0;
                    more |= (fo & 1) != 0;
                    nh = b[off];
                    off += 8;
                }
                next_header::AUTH => {
                    if b.len() < off + 2 {
                        return Err(DecodeError::Ipv6ExtTruncated);
                    }
                    nh = b[off];
                    off += (usize::from(b[off + 1]) + 2) * 4;
                }
                _ => {
                    if off > b.len() || off > HEADER_LEN + usize::from(self.payload_len()) {
                        return Err(DecodeError::Ipv6ExtTruncated);
                    }
                    let fragment = match (later, more) {
                        (true, _) => Fragment::Later,
                        (false, true) => Fragment::First,
                        (false, false) => Fragment::Whole,
                    };
                    return Ok((nh, off, fragment));
                }
            }
        }
        Err(DecodeError::Ipv6ExtTruncated)
    }
}

/// Which part of its datagram a packet is, by its Fragment header (none: whole).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fragment {
    /// Not fragmented (no Fragment header, or an atomic one: offset 0, no more fragments).
    Whole,
    /// The first fragment: it holds the upper-layer header, more fragments follow.
    First,
    /// A later fragment: what follows its headers is data, not an upper-layer header.
    Later,
}

/// Parsed IPv6 header (without extension headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub next_header: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    pub hop_limit: u8,
    pub payload_len: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Self {
            src: p.src(),
            dst: p.dst(),
            next_header: p.next_header(),
            traffic_class: p.traffic_class(),
            flow_label: p.flow_label(),
            hop_limit: p.hop_limit(),
            payload_len: p.payload_len(),
        }
    }
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    pub fn emit(&self, out: &mut [u8]) {
        let w = (6u32 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0xF_FFFF);
        out[0..4].copy_from_slice(&w.to_be_bytes());
        put16(out, field::PAYLOAD_LEN, self.payload_len);
        out[field::NEXT_HEADER] = self.next_header;
        out[field::HOP_LIMIT] = self.hop_limit;
        out[field::SRC].copy_from_slice(&self.src.octets());
        out[field::DST].copy_from_slice(&self.dst.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Repr {
        Repr {
            src: "fd00::1".parse().unwrap(),
            dst: "fd00::2".parse().unwrap(),
            next_header: 17,
            traffic_class: 0x6B, // DSCP 26, ECN CE
            flow_label: 0xABCDE,
            hop_limit: 64,
            payload_len: 48,
        }
    }

    #[test]
    fn emit_parse_round_trip() {
        let r = sample();
        let mut b = [0u8; HEADER_LEN];
        r.emit(&mut b);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.ecn(), 3);
        assert_eq!(Repr::parse(&p), r);
    }

    #[test]
    fn skips_extension_headers() {
        let mut r = sample();
        r.next_header = next_header::HOP_BY_HOP;
        r.payload_len = 8 + 16 + 8;
        let mut b = vec![0u8; HEADER_LEN + 8 + 16 + 8];
        r.emit(&mut b);
        b[40] = next_header::DEST_OPTS; // hop-by-hop, 8 bytes
        b[41] = 0;
        b[48] = next_header::FRAGMENT; // destination options, 16 bytes
        b[49] = 1;
        b[64] = 17; // fragment header: offset 0, M = 0: an atomic fragment
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.upper_layer().unwrap(), (17, 72, Fragment::Whole));
        b[67] = 1; // M flag: more fragments follow
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.upper_layer().unwrap(), (17, 72, Fragment::First));
        b[66] = 0; // offset 1 (8 bytes), M = 0: the last fragment
        b[67] = 8;
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.upper_layer().unwrap(), (17, 72, Fragment::Later));
        let p = Packet::new_checked(&b[..60]).unwrap();
        assert_eq!(p.upper_layer().err(), Some(DecodeError::Ipv6ExtTruncated));
    }

    #[test]
    fn endless_extension_chain_is_bounded() {
        let mut r = sample();
        r.next_header = next_header::DEST_OPTS;
        r.payload_len = 8 * 20;
        let mut b = vec![0u8; HEADER_LEN + 8 * 20];
        r.emit(&mut b);
        for i in 0..20 {
            b[40 + 8 * i] = next_header::DEST_OPTS;
        }
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.upper_layer().err(), Some(DecodeError::Ipv6ExtTruncated));
    }
}
