//! UDP header.

use super::{be16, put16, DecodeError, Result};

pub const HEADER_LEN: usize = 8;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(DecodeError::UdpTruncated);
        }
        let p = Self { buf };
        if usize::from(p.length()) < HEADER_LEN {
            return Err(DecodeError::UdpBadLength);
        }
        Ok(p)
    }
    #[inline(always)]
    pub fn src_port(&self) -> u16 {
        be16(self.buf.as_ref(), field::SRC_PORT)
    }
    #[inline(always)]
    pub fn dst_port(&self) -> u16 {
        be16(self.buf.as_ref(), field::DST_PORT)
    }
    /// Header plus payload, as the header says.
    #[inline(always)]
    pub fn length(&self) -> u16 {
        be16(self.buf.as_ref(), field::LENGTH)
    }
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buf.as_ref(), field::CHECKSUM)
    }
    /// The payload as far as it was captured and the length field allows.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        let b = self.buf.as_ref();
        let end = usize::from(self.length()).min(b.len());
        &b[HEADER_LEN..end]
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub src_port: u16,
    pub dst_port: u16,
    pub payload_len: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Self { src_port: p.src_port(), dst_port: p.dst_port(), payload_len: p.length() - HEADER_LEN as u16 }
    }
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    /// Writes the header with checksum 0 (allowed for UDP over IPv4 and, for RoCEv2 over
    /// IPv6, what NICs commonly send; the ICRC protects the packet).
    pub fn emit(&self, out: &mut [u8]) {
        put16(out, field::SRC_PORT, self.src_port);
        put16(out, field::DST_PORT, self.dst_port);
        put16(out, field::LENGTH, self.payload_len + HEADER_LEN as u16);
        put16(out, field::CHECKSUM, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer_from_real_packet() {
        // UDP header of frame 22 of rdma_write_bw.pcap: RoCEv2, 1064 bytes.
        let f = crate::wire::frame::tests::real_frame("rdma_write_bw.pcap", 21);
        let p = Packet::new_checked(&f[34..]).unwrap();
        assert_eq!(p.dst_port(), crate::wire::ROCEV2_UDP_PORT);
        assert_eq!(usize::from(p.length()), f.len() - 34);
    }

    #[test]
    fn emit_parse_round_trip_and_errors() {
        let r = Repr { src_port: 69, dst_port: 4791, payload_len: 32 };
        let mut b = [0u8; HEADER_LEN];
        r.emit(&mut b);
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), r);
        assert_eq!(Packet::new_checked(&b[..7]).err(), Some(DecodeError::UdpTruncated));
        b[5] = 7; // length 7 < 8
        b[4] = 0;
        assert_eq!(Packet::new_checked(&b[..]).err(), Some(DecodeError::UdpBadLength));
    }
}
