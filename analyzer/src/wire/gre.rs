//! GRE (RFC 2784, RFC 2890 key and sequence number), as it carries ERSPAN mirrors.

use super::{be16, put16, DecodeError, Result};

pub const BASE_LEN: usize = 4;

pub mod protocol {
    /// ERSPAN type II, or type I when the GRE header has no sequence number.
    pub const ERSPAN_II: u16 = 0x88BE;
    /// ERSPAN type III.
    pub const ERSPAN_III: u16 = 0x22EB;
}

const FLAG_CHECKSUM: u8 = 0x80;
const FLAG_KEY: u8 = 0x20;
const FLAG_SEQ: u8 = 0x10;

#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        let b = buf.as_ref();
        if b.len() < BASE_LEN {
            return Err(DecodeError::GreTruncated);
        }
        let p = Self { buf };
        if p.buf.as_ref().len() < p.header_len() {
            return Err(DecodeError::GreTruncated);
        }
        Ok(p)
    }
    #[inline]
    fn flags(&self) -> u8 {
        self.buf.as_ref()[0]
    }
    #[inline]
    pub fn version(&self) -> u8 {
        self.buf.as_ref()[1] & 0x07
    }
    #[inline]
    pub fn protocol(&self) -> u16 {
        be16(self.buf.as_ref(), 2)
    }
    #[inline]
    pub fn header_len(&self) -> usize {
        let f = self.flags();
        BASE_LEN
            + 4 * usize::from(f & FLAG_CHECKSUM != 0)
            + 4 * usize::from(f & FLAG_KEY != 0)
            + 4 * usize::from(f & FLAG_SEQ != 0)
    }
    pub fn key(&self) -> Option<u32> {
        let f = self.flags();
        (f & FLAG_KEY != 0).then(|| {
            let at = BASE_LEN + 4 * usize::from(f & FLAG_CHECKSUM != 0);
            u32::from_be_bytes(self.buf.as_ref()[at..at + 4].try_into().unwrap())
        })
    }
    #[inline]
    pub fn has_sequence(&self) -> bool {
        self.flags() & FLAG_SEQ != 0
    }
    pub fn sequence(&self) -> Option<u32> {
        let f = self.flags();
        (f & FLAG_SEQ != 0).then(|| {
            let at = BASE_LEN + 4 * usize::from(f & FLAG_CHECKSUM != 0) + 4 * usize::from(f & FLAG_KEY != 0);
            u32::from_be_bytes(self.buf.as_ref()[at..at + 4].try_into().unwrap())
        })
    }
}

/// Parsed GRE header (no checksum is emitted; switches send ERSPAN without one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub protocol: u16,
    pub key: Option<u32>,
    pub sequence: Option<u32>,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Self { protocol: p.protocol(), key: p.key(), sequence: p.sequence() }
    }
    pub fn header_len(&self) -> usize {
        BASE_LEN + 4 * usize::from(self.key.is_some()) + 4 * usize::from(self.sequence.is_some())
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[0] = if self.key.is_some() { FLAG_KEY } else { 0 }
            | if self.sequence.is_some() { FLAG_SEQ } else { 0 };
        out[1] = 0;
        put16(out, 2, self.protocol);
        let mut at = BASE_LEN;
        for v in [self.key, self.sequence].into_iter().flatten() {
            out[at..at + 4].copy_from_slice(&v.to_be_bytes());
            at += 4;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_lengths() {
        for r in [
            Repr { protocol: protocol::ERSPAN_II, key: None, sequence: Some(7) },
            Repr { protocol: protocol::ERSPAN_III, key: Some(0xABCD), sequence: Some(1) },
            Repr { protocol: 0x6558, key: None, sequence: None },
        ] {
            let mut b = [0u8; 12];
            r.emit(&mut b);
            let p = Packet::new_checked(&b[..r.header_len()]).unwrap();
            assert_eq!(Repr::parse(&p), r);
            assert_eq!(p.header_len(), r.header_len());
            assert_eq!(Packet::new_checked(&b[..r.header_len() - 1]).err(), Some(DecodeError::GreTruncated));
        }
        // Known answer: ERSPAN II over GRE with a sequence number (RFC 2890): 10 00 88 be.
        let mut b = [0u8; 8];
        Repr { protocol: protocol::ERSPAN_II, key: None, sequence: Some(0x01020304) }.emit(&mut b);
        assert_eq!(b, [0x10, 0x00, 0x88, 0xBE, 1, 2, 3, 4]);
    }
}
