//! Wire: zero-copy decoders for the headers on the path from an Ethernet frame to the
//! RoCEv2 payload. One file per protocol, each the same shape (after smoltcp): a view
//! `Packet<T: AsRef<[u8]>>` whose `new_checked` checks the length once, infallible `#[inline]`
//! accessors after that, and a `Repr` whose `parse` and `emit` are symmetric so the same code
//! builds packets for tests and fixtures.
//!
//! [`decode_frame`] walks the layers and returns either a [`RocePacket`] (headers the
//! trackers need, no copy), a reason why the frame is not RoCE, or a [`DecodeError`] naming
//! the kind of malformation.

pub mod bth;
/// Frame builders for the generator and the tests (feature `builders`: not in the probe).
#[cfg(any(test, feature = "builders"))]
pub mod build;
pub mod cm;
pub mod erspan;
pub mod ethernet;
pub mod gre;
pub mod ib_ext;
pub mod icrc;
pub mod ipv4;
pub mod ipv6;
pub mod nvme;
pub mod udp;

mod frame;

pub use frame::{
    bytes_read, could_be_mirrored, decode_again_if_cut, decode_frame, decode_frame_into, mirror_of,
    plain_roce_pair, Decoded, Detached, IpPair, Mirror, NotRoce, RocePacket, MAX_VLAN_TAGS,
    PLAIN_HEADERS_LEN,
};

use std::fmt;

/// The UDP destination port that marks RoCEv2 (IANA). The source port is flow entropy and
/// some NICs put the source QPN there, so it is never looked at.
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// A malformed or truncated frame, by kind. Counted in the summary's `decode_errors` under
/// [`DecodeError::as_str`]; never a panic, never state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DecodeError {
    EthernetTruncated,
    VlanTruncated,
    Ipv4Truncated,
    Ipv4BadHeader,
    IpFragment,
    Ipv6Truncated,
    Ipv6BadHeader,
    Ipv6ExtTruncated,
    UdpTruncated,
    UdpBadLength,
    BthTruncated,
    BthBadVersion,
    BthUnknownOpcode,
    ExtHeadersTruncated,
    RoceBadLength,
    GreTruncated,
    ErspanTruncated,
    ErspanBadVersion,
}

impl DecodeError {
    pub const ALL: [DecodeError; 18] = [
        Self::EthernetTruncated,
        Self::VlanTruncated,
        Self::Ipv4Truncated,
        Self::Ipv4BadHeader,
        Self::IpFragment,
        Self::Ipv6Truncated,
        Self::Ipv6BadHeader,
        Self::Ipv6ExtTruncated,
        Self::UdpTruncated,
        Self::UdpBadLength,
        Self::BthTruncated,
        Self::BthBadVersion,
        Self::BthUnknownOpcode,
        Self::ExtHeadersTruncated,
        Self::RoceBadLength,
        Self::GreTruncated,
        Self::ErspanTruncated,
        Self::ErspanBadVersion,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::EthernetTruncated => "ethernet_truncated",
            Self::VlanTruncated => "vlan_truncated",
            Self::Ipv4Truncated => "ipv4_truncated",
            Self::Ipv4BadHeader => "ipv4_bad_header",
            Self::IpFragment => "ip_fragment",
            Self::Ipv6Truncated => "ipv6_truncated",
            Self::Ipv6BadHeader => "ipv6_bad_header",
            Self::Ipv6ExtTruncated => "ipv6_ext_truncated",
            Self::UdpTruncated => "udp_truncated",
            Self::UdpBadLength => "udp_bad_length",
            Self::BthTruncated => "bth_truncated",
            Self::BthBadVersion => "bth_bad_version",
            Self::BthUnknownOpcode => "bth_unknown_opcode",
            Self::ExtHeadersTruncated => "ext_headers_truncated",
            Self::RoceBadLength => "roce_bad_length",
            Self::GreTruncated => "gre_truncated",
            Self::ErspanTruncated => "erspan_truncated",
            Self::ErspanBadVersion => "erspan_bad_version",
        }
    }

    /// Dense index for per-kind counter arrays.
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub type Result<T> = std::result::Result<T, DecodeError>;

#[inline(always)]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline(always)]
pub(crate) fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}

#[inline]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

#[inline]
pub(crate) fn put24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}
