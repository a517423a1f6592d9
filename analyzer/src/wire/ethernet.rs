//! Ethernet II header and 802.1Q / 802.1ad VLAN tags.

use super::{be16, put16, DecodeError, Result};

pub const HEADER_LEN: usize = 14;
pub const VLAN_TAG_LEN: usize = 4;

pub mod ethertype {
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86DD;
    /// 802.1Q customer tag.
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service tag (QinQ outer tag).
    pub const QINQ: u16 = 0x88A8;
    /// Pre-standard QinQ outer tag still used by some switches.
    pub const QINQ_LEGACY: u16 = 0x9100;
}

#[inline]
pub fn is_vlan_ethertype(t: u16) -> bool {
    t == ethertype::VLAN || t == ethertype::QINQ || t == ethertype::QINQ_LEGACY
}

mod field {
    use core::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
    // VLAN tag, relative to the tag
    pub const TCI: usize = 0;
    pub const INNER_TYPE: usize = 2;
}

/// A view of an Ethernet II header at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct Packet<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < HEADER_LEN {
            return Err(DecodeError::EthernetTruncated);
        }
        Ok(Self { buf })
    }
    #[inline]
    pub fn dst(&self) -> [u8; 6] {
        self.buf.as_ref()[field::DST].try_into().unwrap()
    }
    #[inline]
    pub fn src(&self) -> [u8; 6] {
        self.buf.as_ref()[field::SRC].try_into().unwrap()
    }
    #[inline]
    pub fn ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), field::ETHERTYPE)
    }
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buf.as_ref()[HEADER_LEN..]
    }
}

/// A view of one VLAN tag (TCI + the ethertype that follows it).
#[derive(Debug, Clone, Copy)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buf: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    pub fn new_checked(buf: T) -> Result<Self> {
        if buf.as_ref().len() < VLAN_TAG_LEN {
            return Err(DecodeError::VlanTruncated);
        }
        Ok(Self { buf })
    }
    #[inline]
    pub fn pcp(&self) -> u8 {
        (be16(self.buf.as_ref(), field::TCI) >> 13) as u8
    }
    #[inline]
    pub fn vid(&self) -> u16 {
        be16(self.buf.as_ref(), field::TCI) & 0x0FFF
    }
    #[inline]
    pub fn inner_ethertype(&self) -> u16 {
        be16(self.buf.as_ref(), field::INNER_TYPE)
    }
}

/// Parsed Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub ethertype: u16,
}

impl Repr {
    pub fn parse<T: AsRef<[u8]>>(p: &Packet<T>) -> Self {
        Self { dst: p.dst(), src: p.src(), ethertype: p.ethertype() }
    }
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[field::DST].copy_from_slice(&self.dst);
        out[field::SRC].copy_from_slice(&self.src);
        put16(out, field::ETHERTYPE, self.ethertype);
    }
}

/// Parsed VLAN tag: the tag's own fields and the ethertype after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanRepr {
    pub pcp: u8,
    pub vid: u16,
    pub inner_ethertype: u16,
}

impl VlanRepr {
    pub fn parse<T: AsRef<[u8]>>(t: &VlanTag<T>) -> Self {
        Self { pcp: t.pcp(), vid: t.vid(), inner_ethertype: t.inner_ethertype() }
    }
    pub fn emit(&self, out: &mut [u8]) {
        put16(out, field::TCI, (u16::from(self.pcp & 7) << 13) | (self.vid & 0x0FFF));
        put16(out, field::INNER_TYPE, self.inner_ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // First 18 bytes of a QinQ-less 802.1Q frame: dst, src, 0x8100, TCI (pcp 3, vid 100), 0x0800.
    const TAGGED: [u8; 18] =
        [0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x81, 0x00, 0x60, 0x64, 0x08, 0x00];

    #[test]
    fn parses_header_and_tag() {
        let p = Packet::new_checked(&TAGGED[..]).unwrap();
        assert_eq!(p.ethertype(), ethertype::VLAN);
        assert_eq!(p.src(), [2, 0, 0, 0, 0, 1]);
        let t = VlanTag::new_checked(p.payload()).unwrap();
        assert_eq!((t.pcp(), t.vid(), t.inner_ethertype()), (3, 100, ethertype::IPV4));
    }

    #[test]
    fn emit_parse_round_trip() {
        let r = Repr { dst: [1, 2, 3, 4, 5, 6], src: [7, 8, 9, 10, 11, 12], ethertype: 0x88A8 };
        let mut b = [0u8; HEADER_LEN];
        r.emit(&mut b);
        assert_eq!(Repr::parse(&Packet::new_checked(&b[..]).unwrap()), r);
        let v = VlanRepr { pcp: 5, vid: 4094, inner_ethertype: 0x8100 };
        let mut t = [0u8; VLAN_TAG_LEN];
        v.emit(&mut t);
        assert_eq!(VlanRepr::parse(&VlanTag::new_checked(&t[..]).unwrap()), v);
    }

    #[test]
    fn short_buffers_are_errors() {
        assert_eq!(Packet::new_checked(&TAGGED[..13]).err(), Some(DecodeError::EthernetTruncated));
        assert_eq!(VlanTag::new_checked(&TAGGED[..3]).err(), Some(DecodeError::VlanTruncated));
    }
}
