//! RoCEv2 invariant CRC (IBTA annex A17): CRC-32 (zlib's polynomial) over 8 bytes of 0xFF
//! (the masked LRH of InfiniBand) followed by the packet from the IP header to the end of
//! the pad, with the fields a switch may rewrite masked to ones: IPv4 TOS, TTL and header
//! checksum (IPv6 traffic class, flow label and hop limit), the UDP checksum and BTH byte 4.
//! Stored after the pad, least significant byte first.

use super::bth::ICRC_LEN;

/// Where a RoCEv2 packet's ICRC-covered region lies in its frame. Narrow integers: it is
/// part of every decoded packet, which is copied per packet.
#[derive(Debug, Clone, Copy)]
pub struct IcrcRegion<'a> {
    /// From the IP header to the end of the UDP datagram, as captured.
    pub l3: &'a [u8],
    /// Offset of the UDP header in `l3` (after IPv6 extension headers: may pass 65535).
    pub udp_offset: u32,
    /// The UDP length field.
    pub udp_len: u16,
    /// Length of the IPv4 header with options (60 at most), or 40 for IPv6.
    pub ip_header_len: u8,
    pub ipv6: bool,
}

impl IcrcRegion<'_> {
    /// Offset of the UDP header, its length and the end of the datagram in `l3`.
    #[inline]
    fn udp(&self) -> (usize, usize, usize) {
        let (off, len) = (self.udp_offset as usize, usize::from(self.udp_len));
        (off, len, off + len)
    }
}

const LRH_MASK: [u8; 8] = [0xFF; 8];

/// The ICRC of the region, or `None` if the frame was not captured in full.
pub fn compute(r: &IcrcRegion<'_>) -> Option<u32> {
    let (udp_offset, udp_len, end) = r.udp();
    let ip_header_len = usize::from(r.ip_header_len);
    if r.l3.len() < end || udp_len < 8 + 12 + ICRC_LEN || udp_offset < ip_header_len {
        return None;
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&LRH_MASK);
    // IP header, masked on a copy (60 bytes at most for IPv4 with options, 40 for IPv6).
    let mut ip = [0u8; 60];
    let ipl = ip_header_len.min(60);
    ip[..ipl].copy_from_slice(&r.l3[..ipl]);
    if r.ipv6 {
        ip[0] |= 0x0F; // traffic class, high nibble
        ip[1] = 0xFF; // traffic class low nibble, flow label
        ip[2] = 0xFF;
        ip[3] = 0xFF;
        ip[7] = 0xFF; // hop limit
    } else {
        ip[1] = 0xFF; // TOS (DSCP + ECN)
        ip[8] = 0xFF; // TTL
        ip[10] = 0xFF; // header checksum
        ip[11] = 0xFF;
    }
    h.update(&ip[..ipl]);
    // IPv6 extension headers, as they are.
    h.update(&r.l3[ipl..udp_offset]);
    let mut udp_bth = [0u8; 20];
    udp_bth.copy_from_slice(&r.l3[udp_offset..udp_offset + 20]);
    udp_bth[6] = 0xFF; // UDP checksum
    udp_bth[7] = 0xFF;
    udp_bth[8 + 4] = 0xFF; // BTH resv8a (FECN/BECN in InfiniBand)
    h.update(&udp_bth);
    h.update(&r.l3[udp_offset + 20..end - ICRC_LEN]);
    Some(h.finalize())
}

/// The ICRC the packet carries.
pub fn stored(r: &IcrcRegion<'_>) -> Option<u32> {
    let (_, _, end) = r.udp();
    let b = r.l3.get(end - ICRC_LEN..end)?;
    Some(u32::from_le_bytes(b.try_into().unwrap()))
}

/// `Some(true)` if the ICRC is right, `Some(false)` if not, `None` if the frame is
/// truncated and cannot be checked.
pub fn check(r: &IcrcRegion<'_>) -> Option<bool> {
    Some(compute(r)? == stored(r)?)
}

/// Writes the ICRC into the last four bytes of the region (for the generator).
pub fn fill(l3: &mut [u8], ipv6: bool, ip_header_len: usize, udp_offset: usize, udp_len: usize) {
    let r = IcrcRegion {
        l3,
        udp_offset: udp_offset.try_into().expect("UDP offset"),
        udp_len: udp_len.try_into().expect("UDP length"),
        ip_header_len: ip_header_len.try_into().expect("IP header length"),
        ipv6,
    };
    let crc = compute(&r).expect("full packet");
    let end = udp_offset + udp_len;
    l3[end - ICRC_LEN..end].copy_from_slice(&crc.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_frame, Decoded};

    fn region_of(f: &[u8]) -> IcrcRegion<'_> {
        match decode_frame(f) {
            Decoded::Roce(p) => p.icrc,
            other => panic!("not RoCE: {other:?}"),
        }
    }

    #[test]
    fn known_answer_from_real_ud_send() {
        // tshark, pingpong_ud.pcap frame 12: infiniband.invariant.crc 0x8bbc41bd. tshark shows
        // the four wire bytes read big-endian (8b bc 41 bd); the CRC is stored LSB first.
        let f = crate::wire::frame::tests::real_frame("pingpong_ud.pcap", 11);
        assert_eq!(&f[f.len() - 4..], &[0x8b, 0xbc, 0x41, 0xbd]);
        assert_eq!(compute(&region_of(&f)), Some(u32::from_le_bytes([0x8b, 0xbc, 0x41, 0xbd])));
    }

    #[test]
    fn masked_fields_do_not_matter_and_others_do() {
        let f = crate::wire::frame::tests::real_frame("rdma_write_bw.pcap", 21);
        let mut g = f.clone();
        g[14 + 1] ^= 0x03; // ECN marked by a switch
        g[14 + 8] -= 1; // TTL decremented
        g[14 + 10] ^= 0x55; // checksum rewritten
        g[34 + 6] ^= 0x12; // UDP checksum
        g[42 + 4] |= 0x80; // BTH resv8a
        assert_eq!(check(&region_of(&g)), Some(true));
        let mut h = f.clone();
        h[60] ^= 1; // a payload bit
        assert_eq!(check(&region_of(&h)), Some(false));
        assert_eq!(check(&region_of(&f[..f.len() - 1])), None, "truncated: cannot check");
    }
}
