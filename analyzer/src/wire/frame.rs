//! Walks a frame from Ethernet to the RoCEv2 payload.

use super::erspan::{self, SessionKey, SwitchTime};
use super::ib_ext;
use super::{bth, cm, ethernet, gre, icrc, ipv4, ipv6, udp, DecodeError, ROCEV2_UDP_PORT};
use std::net::IpAddr;

/// At most this many VLAN tags are walked (QinQ plus an RSPAN tag is three; Wireshark
/// decodes frames of eight): a frame of more is other traffic.
pub const MAX_VLAN_TAGS: usize = 16;

/// Why a well-formed frame is not RoCEv2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotRoce {
    /// Neither IPv4 nor IPv6 after the VLAN tags (ARP, LLDP, ...).
    NotIp,
    /// IP, but not UDP (nor a GRE-encapsulated mirror).
    NotUdp,
    /// UDP whose destination port is not 4791.
    OtherUdpPort,
    /// A non-first IP fragment: no UDP header to look at.
    IpFragmentTail,
    /// GRE that is not ERSPAN, or ERSPAN inside ERSPAN.
    OtherGre,
}

/// Source and destination address of the innermost IP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpPair {
    pub src: IpAddr,
    pub dst: IpAddr,
}

/// The remote-mirror encapsulation a packet arrived in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mirror {
    /// 1 (ERSPAN type I: GRE protocol 0x88BE without sequence number, and no ERSPAN
    /// header), 2 (type II) or 3 (type III).
    pub erspan_type: u8,
    /// The session id (types II and III).
    pub session: Option<u16>,
    /// The switch's timestamp (type III).
    pub time: Option<SwitchTime>,
    /// The switch cut the mirrored frame short (the ERSPAN T bit).
    pub truncated: bool,
    /// The switch that sent it: the tunnel's source address (an IPv6 one folded to 32
    /// bits), which tells apart two switches mirroring under one session id.
    pub origin: u32,
}

impl Mirror {
    /// The session and its switch's time for the packet (type III with a usable stamp).
    #[inline]
    pub fn timed(&self) -> Option<(SessionKey, SwitchTime)> {
        Some((SessionKey { origin: self.origin, id: self.session? }, self.time?))
    }
}

/// An address in 32 bits: an IPv4 address itself, an IPv6 one hashed (its two halves
/// multiplied out, so that addresses that differ in a few bits, as a fabric numbers its
/// switches, do not cancel out as the words of a plain xor do).
fn fold_address(ip: &IpAddr) -> u32 {
    match ip {
        IpAddr::V4(a) => u32::from(*a),
        IpAddr::V6(a) => {
            let w = u128::from(*a);
            let h = ((w as u64) ^ (w >> 64) as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ ((w >> 64) as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
            (h >> 32) as u32 ^ h as u32
        }
    }
}

/// The headers of one RoCEv2 packet that the trackers use, borrowed from the frame.
#[derive(Debug, Clone, Copy)]
pub struct RocePacket<'a> {
    /// VLAN ids of the frame that carries the RoCE packet (the mirrored frame inside ERSPAN),
    /// from the outermost tag inwards (`vlan_count` of them are valid).
    pub vlans: [u16; 2],
    pub vlan_count: u8,
    /// ERSPAN encapsulation, if the frame came through a remote mirror.
    pub mirror: Option<Mirror>,
    /// For a mirrored frame: the length of the mirrored frame (L2 headers + IP total
    /// length), which is what the monitored link carried (see [`RocePacket::link_len`]).
    pub inner_frame_len: Option<u32>,
    pub ip: IpPair,
    /// The IP ECN field (3 = Congestion Experienced).
    pub ecn: u8,
    /// The IPv4 TTL or IPv6 hop limit: one less on the copy a mirror takes after a router
    /// forwarded the packet.
    pub ttl: u8,
    pub udp_src_port: u16,
    /// The BTH, copied out of the frame (12 bytes).
    pub bth: bth::Packet<[u8; bth::HEADER_LEN]>,
    /// The extension headers between BTH and the payload, as bytes (the ICRC covers them),
    /// and those the trackers read parsed once here, for every tracker to use.
    pub ext: &'a [u8],
    pub exts: ib_ext::Tracked,
    /// Payload length from the UDP length: UDP − 8 − BTH − extension headers − pad − ICRC.
    pub payload_len: u32,
    /// The payload bytes that were captured (may be shorter than `payload_len` when the
    /// mirror truncates frames).
    pub payload: &'a [u8],
    /// The region the ICRC covers, for `--check-icrc`.
    pub icrc: icrc::IcrcRegion<'a>,
}

impl RocePacket<'_> {
    /// Whether the packet's frame may have been longer on the monitored link than on the
    /// wire to the probe: it is a mirror's inner frame, or it was cut inside its payload
    /// (fewer of the payload's bytes came than its headers say). Then
    /// [`RocePacket::link_len`] says how long.
    #[inline]
    pub fn may_be_longer(&self) -> bool {
        self.inner_frame_len.is_some() || !self.datagram_whole()
    }

    /// Whether the frame's bytes reach the end of its UDP datagram (its ICRC included).
    /// In 32 bits: a frame is at most 64 KiB plus its headers.
    #[inline]
    fn datagram_whole(&self) -> bool {
        let r = &self.icrc;
        r.l3.len() as u32 >= r.udp_offset + u32::from(r.udp_len)
    }

    /// The length the monitored link carried the packet's frame at, the packet decoded
    /// from `frame`, which was `wire_len` bytes on the wire as its capture says: a mirrored
    /// frame's own length; a frame cut before the end of its UDP datagram (inside its
    /// payload, pad or ICRC: a local SPAN port that truncates, a cut capture replayed
    /// through `net_pcap`; nothing need say so) as long as its headers say, if that is
    /// longer: its L2 headers and its IP datagram (the IPv4 total length; IPv6's fixed
    /// header and payload length), as a mirrored frame is counted. Out of the packets'
    /// path: asked only where [`RocePacket::may_be_longer`].
    #[cold]
    #[inline(never)]
    pub fn link_len(&self, frame: &[u8], wire_len: u32) -> u32 {
        if let Some(len) = self.inner_frame_len {
            return len;
        }
        if self.datagram_whole() {
            return wire_len;
        }
        let l3 = self.icrc.l3;
        let Some(l2_len) = (l3.as_ptr() as usize).checked_sub(frame.as_ptr() as usize) else {
            return wire_len;
        };
        let be16 = |at: usize| l3.get(at..at + 2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])));
        let ip_len = if self.icrc.ipv6 { be16(4).map(|n| ipv6::HEADER_LEN + n) } else { be16(2) };
        // The decoder took the UDP datagram as within the IP one: the larger bounds both.
        let udp_end = self.icrc.udp_offset as usize + usize::from(self.icrc.udp_len);
        let end = l2_len + ip_len.unwrap_or(0).max(udp_end);
        u32::try_from(end).map_or(wire_len, |end| end.max(wire_len))
    }

    /// The outermost VLAN id, if the frame is tagged.
    #[inline]
    pub fn outer_vlan(&self) -> Option<u16> {
        (self.vlan_count > 0).then_some(self.vlans[0])
    }

    /// The packet apart from `frame`, the bytes it was decoded from: its parts borrowed
    /// from the frame become offsets into it, so that a byte-for-byte copy of the frame
    /// gives the packet again ([`Detached::attach`]) without a second decode. `None` if a
    /// part lies outside `frame` (a packet decoded from other bytes).
    #[inline]
    pub fn detach(&self, frame: &[u8]) -> Option<Detached> {
        let start = frame.as_ptr() as usize;
        let span = |s: &[u8]| -> Option<(u32, u32)> {
            if s.is_empty() {
                return Some((0, 0));
            }
            let at = (s.as_ptr() as usize).checked_sub(start)?;
            (at + s.len() <= frame.len()).then_some((at as u32, s.len() as u32))
        };
        Some(Detached {
            ext: span(self.ext)?,
            payload: span(self.payload)?,
            l3: span(self.icrc.l3)?,
            packet: RocePacket {
                ext: &[],
                payload: &[],
                icrc: icrc::IcrcRegion { l3: &[], ..self.icrc },
                ..*self
            },
        })
    }
}

/// A decoded RoCE packet kept apart from its frame's bytes ([`RocePacket::detach`]): what
/// the reorder window keeps beside the copy of a frame it had to decode as the frame
/// arrived (an ERSPAN mirror, for the switch's time), so that the frame is decoded once.
#[derive(Debug, Clone, Copy)]
pub struct Detached {
    /// The packet, its borrowed parts empty.
    packet: RocePacket<'static>,
    /// Where those parts lie in the frame (offset and length).
    ext: (u32, u32),
    payload: (u32, u32),
    l3: (u32, u32),
}

impl Detached {
    /// The packet again, its parts borrowed from `frame`: a byte-for-byte copy of the frame
    /// it was detached from (at least up to the end of its parts), decoded as that frame was.
    #[inline]
    pub fn attach<'b>(&self, frame: &'b [u8]) -> RocePacket<'b> {
        let part = |(at, len): (u32, u32)| frame.get(at as usize..(at + len) as usize).unwrap_or_default();
        RocePacket {
            ext: part(self.ext),
            payload: part(self.payload),
            icrc: icrc::IcrcRegion { l3: part(self.l3), ..self.packet.icrc },
            ..self.packet
        }
    }
}

/// The bytes of a frame that decoding a plain RoCE packet reads: Ethernet, one 802.1Q tag,
/// IPv4, UDP, BTH and a RETH, its largest extension header on the common path (74 bytes,
/// which straddle two cache lines from anywhere but a line's first ten bytes).
pub const PLAIN_HEADERS_LEN: usize = ethernet::HEADER_LEN
    + ethernet::VLAN_TAG_LEN
    + ipv4::MIN_HEADER_LEN
    + udp::HEADER_LEN
    + bth::HEADER_LEN
    + ib_ext::ExtKind::Reth.size();
const _: () = assert!(PLAIN_HEADERS_LEN == 74);

/// The bytes of a frame that the analysis reads, if the frame is one [`plain`] reads at
/// fixed offsets (with at most one 802.1Q tag, an IPv4 header without options, not a
/// fragment, carrying UDP): its headers up to the longest run of extension headers, and the
/// largest payload any tracker reads (a CM MAD; an NVMe command capsule is 64 bytes). A
/// frame cut there decodes to the same packet but for the payload's bytes past those, which
/// no tracker reads (lengths come from the headers). `None` for any other frame, whose
/// headers may go deeper.
#[inline]
pub fn bytes_read(frame: &[u8]) -> Option<usize> {
    let (at, _) = plain_ipv4(frame, ipv4::PROTO_UDP)?;
    Some(at + ipv4::MIN_HEADER_LEN + udp::HEADER_LEN + bth::HEADER_LEN + ib_ext::MAX_EXT_LEN + cm::MAD_LEN)
}

/// What one frame turned out to be.
#[derive(Debug, Clone, Copy)]
// Decoded frames live on the stack for the length of a burst; boxing the RoCE packet
// would allocate per packet.
#[allow(clippy::large_enum_variant)]
pub enum Decoded<'a> {
    Roce(RocePacket<'a>),
    NotRoce(NotRoce),
    Error(DecodeError),
}

/// Decodes one Ethernet frame. Never panics, whatever the bytes.
///
/// One pass without recursion: the headers down to the IP layer (at fixed offsets for the
/// common frame, see [`plain`], and for an ERSPAN mirror of one, see [`plain_mirror`]; else
/// by the general walk), then either the ERSPAN
/// encapsulation of a mirror (and the same again on the mirrored frame, once) or UDP, BTH
/// and the extension headers, with the [`RocePacket`] built once, as the return value.
pub fn decode_frame(frame: &[u8]) -> Decoded<'_> {
    if let Some((l2, n)) = plain(frame) {
        return transport(frame, &l2, &n, None, false);
    }
    match plain_mirror(frame) {
        Some((inner, l2, n, m)) => transport(inner, &l2, &n, Some(m), false),
        None => walk(frame, false),
    }
}

/// [`decode_frame`] of a frame its capture cut short (fewer bytes captured than the wire
/// carried: a snap length, a mirror's truncation): a RoCE packet whose extension headers
/// were cut too is still that packet, its BTH whole and its lengths from the headers that
/// were captured, with the extension headers that fit (`exts` without the others) and no
/// payload. Any other frame whose bytes end inside its extension headers is broken
/// (`ExtHeadersTruncated`), as [`decode_frame`] finds it, unless an ERSPAN header says its
/// switch cut it (the T bit). Out of the packets' path: only for the frames that error.
#[cold]
#[inline(never)]
fn decode_cut_frame(frame: &[u8]) -> Decoded<'_> {
    match walk(frame, true) {
        // Cut by its capture only if its bytes ran out where the captured frame's do (not
        // where an outer datagram that ends early says, with more bytes after it).
        Decoded::Roce(p)
            if p.ext.len() < usize::from(ib_ext::plan(p.bth.opcode()).len)
                && p.ext.as_ptr_range().end != frame.as_ptr_range().end =>
        {
            Decoded::Error(DecodeError::ExtHeadersTruncated)
        }
        d => d,
    }
}

/// A frame decoded to `d` whose bytes ended inside its extension headers, if its capture
/// took fewer bytes (`frame`) than the wire carried (`wire_len`): decoded again as cut
/// ([`decode_cut_frame`]). Every other `d` stays as it is. For the frames that are no RoCE
/// packet as decoded: out of the packets' path.
#[cold]
#[inline(never)]
pub fn decode_again_if_cut<'a>(frame: &'a [u8], wire_len: u32, d: &mut Decoded<'a>) {
    if matches!(d, Decoded::Error(DecodeError::ExtHeadersTruncated)) && wire_len as usize > frame.len() {
        *d = decode_cut_frame(frame);
    }
}

/// [`decode_frame`] into a place (a burst's array): the decoded packet is written where it
/// is kept, not built aside and moved there.
pub fn decode_frame_into<'a>(frame: &'a [u8], out: &mut Decoded<'a>) {
    if let Some((l2, n)) = plain(frame) {
        transport_into(frame, &l2, &n, None, false, out);
    } else if let Some((inner, l2, n, m)) = plain_mirror(frame) {
        transport_into(inner, &l2, &n, Some(m), false, out);
    } else {
        *out = walk(frame, false);
    }
}

/// An ERSPAN mirror (GRE) in a frame [`plain`] would read but for its IP protocol, whose
/// mirrored frame is plain: the mirrored frame, read at fixed offsets, and the
/// encapsulation. `None` for anything else, which [`walk`] decodes to the same result in
/// more steps. Not inlined: mirrors are the rarer case, and the plain path stays short.
#[inline(never)]
fn plain_mirror(frame: &[u8]) -> Option<(&[u8], L2, L3<'_>, Mirror)> {
    let (_, outer) = plain_carrying(frame, ipv4::PROTO_GRE)?;
    let (inner, m) = mirrored(&outer, false).ok()?;
    let (l2, n) = plain(inner)?;
    Some((inner, l2, n, m))
}

/// The general walk of [`decode_frame`], for every frame [`plain`] leaves to it (`cut`: of
/// [`decode_cut_frame`]).
#[inline(never)]
fn walk(frame: &[u8], cut: bool) -> Decoded<'_> {
    let mut frame = frame;
    let mut mirror = None;
    loop {
        let l2 = match link(frame) {
            Ok(l2) => l2,
            Err(e) => return Decoded::Error(e),
        };
        let n = match network(frame.get(l2.l3_offset..).unwrap_or_default(), l2.ethertype) {
            Ok(n) => n,
            Err(stop) => return stop.decoded(),
        };
        if n.protocol == ipv4::PROTO_GRE {
            match mirrored(&n, mirror.is_some()) {
                Ok((inner, m)) => {
                    frame = inner;
                    mirror = Some(m);
                    continue;
                }
                Err(stop) => return stop.decoded(),
            }
        }
        return transport(frame, &l2, &n, mirror, cut);
    }
}

/// The frame nearly every RoCE packet on a fabric arrives in, read at fixed offsets: Ethernet
/// with at most one 802.1Q tag, then an IPv4 header without options, not a fragment,
/// carrying UDP, with a total length that covers the header. Anything else is `None`, for
/// [`walk`], which decodes these frames to the same result in more steps.
#[inline(always)]
fn plain(frame: &[u8]) -> Option<(L2, L3<'_>)> {
    plain_carrying(frame, ipv4::PROTO_UDP)
}

/// [`plain`] for a frame whose IPv4 header names `protocol` (UDP, or GRE for the outer
/// frame of an ERSPAN mirror).
#[inline(always)]
fn plain_carrying(frame: &[u8], protocol: u8) -> Option<(L2, L3<'_>)> {
    let (at, ip) = plain_ipv4(frame, protocol)?;
    let tagged = at > ethernet::HEADER_LEN;
    let total_len = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
    let vid = u16::from_be_bytes([frame[14], frame[15]]) & 0x0FFF;
    let l2 = L2 {
        vlans: [if tagged { vid } else { 0 }, 0],
        vlan_count: u8::from(tagged),
        ethertype: ethernet::ethertype::IPV4,
        l3_offset: at,
    };
    let addr = |i: usize| IpAddr::V4(std::net::Ipv4Addr::new(ip[i], ip[i + 1], ip[i + 2], ip[i + 3]));
    let n = L3 {
        ip: IpPair { src: addr(12), dst: addr(16) },
        ecn: ip[1] & 0x03,
        ttl: ip[8],
        protocol,
        l3: &frame[at..],
        l4_offset: ipv4::MIN_HEADER_LEN,
        l4_len: total_len - ipv4::MIN_HEADER_LEN,
        ipv6: false,
        ip_header_len: ipv4::MIN_HEADER_LEN,
        first_fragment: false,
    };
    Some((l2, n))
}

/// The checks of [`plain_carrying`] at fixed offsets: where the IPv4 header starts (after
/// Ethernet and at most one 802.1Q tag), and the header, if it has no options, is no
/// fragment, names `protocol` and a total length that covers it.
#[inline(always)]
fn plain_ipv4(frame: &[u8], protocol: u8) -> Option<(usize, &[u8; ipv4::MIN_HEADER_LEN])> {
    let tagged = frame.get(12..14)? == ethernet::ethertype::VLAN.to_be_bytes();
    let at = if tagged { ethernet::HEADER_LEN + ethernet::VLAN_TAG_LEN } else { ethernet::HEADER_LEN };
    let ip: &[u8; ipv4::MIN_HEADER_LEN] = frame.get(at..at + ipv4::MIN_HEADER_LEN)?.try_into().ok()?;
    // Version 4 and no options; neither more fragments nor an offset; `protocol`.
    let fixed = frame[at - 2..at] == ethernet::ethertype::IPV4.to_be_bytes()
        && ip[0] == 0x45
        && u16::from_be_bytes([ip[6], ip[7]]) & 0x3FFF == 0
        && ip[9] == protocol
        && usize::from(u16::from_be_bytes([ip[2], ip[3]])) >= ipv4::MIN_HEADER_LEN;
    fixed.then_some((at, ip))
}

/// The IP pair of a frame [`plain`] reads whose UDP destination port is RoCEv2's, without
/// decoding the rest: what a dispatcher routes such a frame by (it is no mirror, so it
/// carries no switch time either). `None` for every other frame, which is decoded to route
/// it. A frame that passes here but whose transport headers do not decode goes by its pair
/// too, where a decoded frame that is not a RoCE packet goes to the first worker: either
/// worker counts it the same.
#[inline]
pub fn plain_roce_pair(frame: &[u8]) -> Option<(IpAddr, IpAddr)> {
    let (_, n) = plain(frame)?;
    let at = n.l4_offset + 2;
    let port = n.l3.get(at..at + 2)?;
    (u16::from_be_bytes([port[0], port[1]]) == ROCEV2_UDP_PORT).then_some((n.ip.src, n.ip.dst))
}

/// The ERSPAN encapsulation of a frame that is a mirror, whatever the mirrored frame holds
/// (the switch time of a mirrored frame that is no RoCE packet, or does not decode, still
/// tells the time). Not on the common path: for frames that [`decode_frame`] found no RoCE
/// packet in.
#[inline(never)]
pub fn mirror_of(frame: &[u8]) -> Option<Mirror> {
    let l2 = link(frame).ok()?;
    let n = network(frame.get(l2.l3_offset..)?, l2.ethertype).ok()?;
    if n.protocol != ipv4::PROTO_GRE {
        return None;
    }
    mirrored(&n, false).ok().map(|(_, m)| m)
}

/// Whether a frame may be an ERSPAN mirror (IP carrying GRE, or IPv6 whose next header is
/// not UDP): only such a frame can carry a switch's timestamp. A glance at two bytes, for
/// timing frames before they are decoded; `false` is certain, `true` is a maybe.
#[inline]
pub fn could_be_mirrored(frame: &[u8]) -> bool {
    let mut at = ethernet::HEADER_LEN - 2;
    let ethertype = |at: usize| frame.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let mut tags = 0;
    while ethertype(at).is_some_and(ethernet::is_vlan_ethertype) && tags < MAX_VLAN_TAGS {
        at += ethernet::VLAN_TAG_LEN;
        tags += 1;
    }
    let l3 = at + 2;
    match ethertype(at) {
        Some(ethernet::ethertype::IPV4) => frame.get(l3 + 9).is_some_and(|&p| p == ipv4::PROTO_GRE),
        Some(ethernet::ethertype::IPV6) => frame.get(l3 + 6).is_some_and(|&n| n != ipv4::PROTO_UDP),
        _ => false,
    }
}

/// Where the walk ends when the frame is not a RoCE packet.
enum Stop {
    NotRoce(NotRoce),
    Error(DecodeError),
}

impl From<DecodeError> for Stop {
    #[inline]
    fn from(e: DecodeError) -> Self {
        Self::Error(e)
    }
}

impl Stop {
    #[inline]
    fn decoded(self) -> Decoded<'static> {
        match self {
            Self::NotRoce(r) => Decoded::NotRoce(r),
            Self::Error(e) => Decoded::Error(e),
        }
    }
}

/// The link layer of a frame.
struct L2 {
    vlans: [u16; 2],
    vlan_count: u8,
    /// The ethertype after the VLAN tags.
    ethertype: u16,
    /// Offset of the IP header in the frame.
    l3_offset: usize,
}

/// The IP layer of a frame: what the UDP / GRE decoding needs.
struct L3<'a> {
    ip: IpPair,
    ecn: u8,
    ttl: u8,
    protocol: u8,
    /// From the IP header to the end of the captured frame.
    l3: &'a [u8],
    /// Offset of the upper-layer header in `l3`, and its length per the IP header.
    l4_offset: usize,
    l4_len: usize,
    ipv6: bool,
    ip_header_len: usize,
    /// A first fragment (more follow).
    first_fragment: bool,
}

/// Ethernet and up to [`MAX_VLAN_TAGS`] VLAN tags.
#[inline(always)]
fn link(frame: &[u8]) -> Result<L2, DecodeError> {
    let eth = ethernet::Packet::new_checked(frame)?;
    let mut ethertype = eth.ethertype();
    let mut at = ethernet::HEADER_LEN;
    let mut vlans = [0u16; 2];
    let mut vlan_count = 0u8;
    let mut tags = 0;
    while ethernet::is_vlan_ethertype(ethertype) && tags < MAX_VLAN_TAGS {
        let tag = ethernet::VlanTag::new_checked(frame.get(at..).unwrap_or_default())?;
        if usize::from(vlan_count) < vlans.len() {
            vlans[usize::from(vlan_count)] = tag.vid();
            vlan_count += 1;
        }
        ethertype = tag.inner_ethertype();
        at += ethernet::VLAN_TAG_LEN;
        tags += 1;
    }
    Ok(L2 { vlans, vlan_count, ethertype, l3_offset: at })
}

/// The IPv4 or IPv6 header (and IPv6 extension headers) at the start of `l3`.
#[inline(always)]
fn network(l3: &[u8], ethertype: u16) -> Result<L3<'_>, Stop> {
    match ethertype {
        ethernet::ethertype::IPV4 => {
            let p = ipv4::Packet::new_checked(l3)?;
            if p.frag_offset() != 0 {
                return Err(Stop::NotRoce(NotRoce::IpFragmentTail));
            }
            let hl = p.header_len();
            Ok(L3 {
                ip: IpPair { src: IpAddr::V4(p.src()), dst: IpAddr::V4(p.dst()) },
                ecn: p.ecn(),
                ttl: p.ttl(),
                protocol: p.protocol(),
                l3,
                l4_offset: hl,
                l4_len: p.payload_len(),
                ipv6: false,
                ip_header_len: hl,
                first_fragment: p.more_frags(),
            })
        }
        ethernet::ethertype::IPV6 => {
            let p = ipv6::Packet::new_checked(l3)?;
            let (proto, off, fragment) = p.upper_layer()?;
            // As for IPv4: a later fragment carries no UDP header to look at.
            if fragment == ipv6::Fragment::Later {
                return Err(Stop::NotRoce(NotRoce::IpFragmentTail));
            }
            Ok(L3 {
                ip: IpPair { src: IpAddr::V6(p.src()), dst: IpAddr::V6(p.dst()) },
                ecn: p.ecn(),
                ttl: p.hop_limit(),
                protocol: proto,
                l3,
                l4_offset: off,
                l4_len: ipv6::HEADER_LEN + usize::from(p.payload_len()) - off,
                ipv6: true,
                ip_header_len: ipv6::HEADER_LEN,
                first_fragment: fragment == ipv6::Fragment::First,
            })
        }
        _ => Err(Stop::NotRoce(NotRoce::NotIp)),
    }
}

/// GRE carrying ERSPAN: the mirrored frame and the encapsulation. Not inlined: mirrors are
/// the rare case. The first fragment of a mirror the tunnel's path fragmented (a jumbo
/// frame mirrored towards a link of a smaller MTU) holds the mirrored frame's headers and
/// the first part of its payload: it is the mirrored frame cut short, as a T bit says (the
/// later fragments are no RoCE packet).
#[inline(never)]
fn mirrored<'a>(n: &L3<'a>, inside_mirror: bool) -> Result<(&'a [u8], Mirror), Stop> {
    if inside_mirror {
        return Err(Stop::NotRoce(NotRoce::OtherGre));
    }
    // The mirror's GRE packet ends where its IP datagram does, whatever follows in the
    // frame (Ethernet padding, a trailer).
    let l4 = n.l3.get(n.l4_offset..).unwrap_or_default();
    let l4 = &l4[..l4.len().min(n.l4_len)];
    let g = gre::Packet::new_checked(l4)?;
    let erspan_type = match g.protocol() {
        // Type II always numbers its packets; without the sequence number it is type I.
        gre::protocol::ERSPAN_II if !g.has_sequence() => 1,
        gre::protocol::ERSPAN_II => 2,
        gre::protocol::ERSPAN_III => 3,
        _ => return Err(Stop::NotRoce(NotRoce::OtherGre)),
    };
    let after_gre = l4.get(g.header_len()..).unwrap_or_default();
    let (e, len) = erspan::Repr::parse(after_gre, erspan_type)?;
    let session = (erspan_type != 1).then_some(e.session);
    let m = Mirror {
        erspan_type,
        session,
        time: e.switch_time(),
        truncated: e.truncated || n.first_fragment,
        origin: fold_address(&n.ip.src),
    };
    Ok((after_gre.get(len..).unwrap_or_default(), m))
}

/// UDP to port 4791, BTH and the extension headers: the RoCE packet, built in place.
#[inline(always)]
fn transport<'a>(frame: &'a [u8], l2: &L2, n: &L3<'a>, mirror: Option<Mirror>, cut: bool) -> Decoded<'a> {
    let mut out = Decoded::NotRoce(NotRoce::NotIp);
    transport_into(frame, l2, n, mirror, cut, &mut out);
    out
}

/// [`transport`] into `out`, written at each way out (one store of every field where it was
/// worked out; a single store of the outcome after the branches made the compiler keep the
/// packet's fields on the stack until the branches joined). `cut`: the capture cut the
/// frame short (see [`decode_cut_frame`]).
#[inline(always)]
fn transport_into<'a>(
    frame: &'a [u8],
    l2: &L2,
    n: &L3<'a>,
    mirror: Option<Mirror>,
    cut: bool,
    out: &mut Decoded<'a>,
) {
    if n.protocol != ipv4::PROTO_UDP {
        *out = Decoded::NotRoce(NotRoce::NotUdp);
        return;
    }
    let l4 = n.l3.get(n.l4_offset..).unwrap_or_default();
    if n.first_fragment {
        // RoCEv2 is never fragmented (DF), so a first fragment to 4791 is broken.
        *out = match udp::Packet::new_checked(l4) {
            Ok(u) if u.dst_port() == ROCEV2_UDP_PORT => Decoded::Error(DecodeError::IpFragment),
            _ => Decoded::NotRoce(NotRoce::IpFragmentTail),
        };
        return;
    }
    let u = match udp::Packet::new_checked(l4) {
        Ok(u) => u,
        Err(e) => {
            *out = Decoded::Error(e);
            return;
        }
    };
    if u.dst_port() != ROCEV2_UDP_PORT {
        *out = Decoded::NotRoce(NotRoce::OtherUdpPort);
        return;
    }
    let udp_len = usize::from(u.length());
    if udp_len > n.l4_len {
        *out = Decoded::Error(DecodeError::UdpBadLength);
        return;
    }
    let roce = l4.get(udp::HEADER_LEN..udp_len.min(l4.len())).unwrap_or_default();
    let b = match bth::Packet::new_checked(roce) {
        Ok(b) => b,
        Err(e) => {
            *out = Decoded::Error(e);
            return;
        }
    };
    let plan = ib_ext::plan(b.opcode());
    let hdrs = bth::HEADER_LEN + usize::from(plan.len);
    // A UDP length too short for the headers its BTH names is a bad length, whatever bytes
    // came after it.
    let overhead = udp::HEADER_LEN + hdrs + usize::from(b.pad_count()) + bth::ICRC_LEN;
    let Some(payload_len) = udp_len.checked_sub(overhead) else {
        *out = Decoded::Error(DecodeError::RoceBadLength);
        return;
    };
    // Cut inside its extension headers: broken, unless cut by its capture or its mirror.
    if roce.len() < hdrs && !(cut || mirror.is_some_and(|m| m.truncated)) {
        *out = Decoded::Error(DecodeError::ExtHeadersTruncated);
        return;
    }
    let payload_end = (hdrs + payload_len).min(roce.len());
    let ext = roce.get(bth::HEADER_LEN..hdrs.min(roce.len())).unwrap_or_default();
    *out = Decoded::Roce(RocePacket {
        vlans: l2.vlans,
        vlan_count: l2.vlan_count,
        mirror,
        inner_frame_len: mirror.map(|_| (frame.len() - n.l3.len() + n.l4_offset + n.l4_len) as u32),
        ip: n.ip,
        ecn: n.ecn,
        ttl: n.ttl,
        udp_src_port: u.src_port(),
        bth: b.header(),
        ext,
        exts: ib_ext::Tracked::parse_planned(plan, ext),
        payload_len: payload_len as u32,
        payload: roce.get(hdrs..payload_end).unwrap_or_default(),
        icrc: icrc::IcrcRegion {
            l3: n.l3,
            // At most 40 + 65535, 65535 and 60: the IP and UDP length fields bound them.
            udp_offset: n.l4_offset as u32,
            udp_len: udp_len as u16,
            ip_header_len: n.ip_header_len as u8,
            ipv6: n.ipv6,
        },
    });
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::wire::{bth, ethernet, ipv4, ipv6, udp};

    /// The `index`-th frame (0-based) of one of the committed real captures.
    pub(crate) fn real_frame(name: &str, index: usize) -> Vec<u8> {
        let path = crate::test_capture(name);
        let frames = crate::capture::pcap::read_all_frames(&path).expect("reading capture");
        frames[index].clone()
    }

    /// Builds a RoCEv2 frame with the crate's own emitters.
    pub(crate) fn build(
        vlans: &[u16],
        v6: bool,
        src_port: u16,
        dst_port: u16,
        b: bth::Repr,
        ext_len: usize,
        payload_len: usize,
    ) -> Vec<u8> {
        let roce_len = bth::HEADER_LEN + ext_len + payload_len + usize::from(b.pad_count) + 4;
        let udp_r = udp::Repr { src_port, dst_port, payload_len: roce_len as u16 };
        let ip_len = if v6 { ipv6::HEADER_LEN } else { ipv4::MIN_HEADER_LEN };
        let mut f = vec![0u8; 14 + 4 * vlans.len() + ip_len + 8 + roce_len];
        let first_type = if vlans.is_empty() {
            if v6 {
                ethernet::ethertype::IPV6
            } else {
                ethernet::ethertype::IPV4
            }
        } else if vlans.len() > 1 {
            ethernet::ethertype::QINQ
        } else {
            ethernet::ethertype::VLAN
        };
        ethernet::Repr { dst: [2, 0, 0, 0, 0, 2], src: [2, 0, 0, 0, 0, 1], ethertype: first_type }
            .emit(&mut f);
        let mut off = 14;
        for (i, vid) in vlans.iter().enumerate() {
            let inner = if i + 1 < vlans.len() {
                ethernet::ethertype::VLAN
            } else if v6 {
                ethernet::ethertype::IPV6
            } else {
                ethernet::ethertype::IPV4
            };
            ethernet::VlanRepr { pcp: 3, vid: *vid, inner_ethertype: inner }.emit(&mut f[off..]);
            off += 4;
        }
        if v6 {
            ipv6::Repr {
                src: "fd00::1".parse().unwrap(),
                dst: "fd00::2".parse().unwrap(),
                next_header: ipv4::PROTO_UDP,
                traffic_class: 0x03,
                flow_label: 0,
                hop_limit: 64,
                payload_len: (8 + roce_len) as u16,
            }
            .emit(&mut f[off..]);
        } else {
            ipv4::Repr {
                src: "192.0.2.1".parse().unwrap(),
                dst: "192.0.2.2".parse().unwrap(),
                protocol: ipv4::PROTO_UDP,
                dscp: 26,
                ecn: 2,
                ttl: 64,
                ident: 0,
                dont_frag: true,
                options_len: 0,
                payload_len: (8 + roce_len) as u16,
            }
            .emit(&mut f[off..]);
        }
        off += ip_len;
        udp_r.emit(&mut f[off..]);
        off += 8;
        b.emit(&mut f[off..]);
        f
    }

    fn send_only(psn: u32) -> bth::Repr {
        bth::Repr { opcode: 0x04, pkey: 0xFFFF, dest_qp: 0x42, psn, ..Default::default() }
    }

    #[test]
    fn real_write_first_decodes_like_tshark() {
        // tshark -r rdma_write_bw.pcap: frame 22 is 1098 bytes, WRITE First to QP 0x1b,
        // data.len 1024.
        let f = real_frame("rdma_write_bw.pcap", 21);
        let Decoded::Roce(p) = decode_frame(&f) else { panic!("not RoCE") };
        assert_eq!(p.ip.src.to_string(), "10.1.16.62");
        assert_eq!(p.ip.dst.to_string(), "10.1.16.61");
        assert_eq!(p.bth.opcode(), 6);
        assert_eq!(p.bth.dest_qp(), 0x1b);
        assert_eq!(p.ext.len(), 16);
        assert_eq!(p.payload_len, 1024);
        assert_eq!(p.payload.len(), 1024);
        assert_eq!(p.outer_vlan(), None);
    }

    /// `inner` behind ERSPAN type II, written here byte by byte (draft-foschiano-erspan):
    /// Ethernet, IPv4 carrying GRE (47), GRE with a sequence number (flags 0x1000,
    /// protocol 0x88BE), then ERSPAN II (version 1, session 7, the T bit as `truncated`).
    fn erspan_ii(inner: &[u8], truncated: bool) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 9, 2, 0, 0, 0, 0, 8, 0x08, 0x00];
        let total = (20 + 8 + 8 + inner.len()) as u16;
        f.extend([0x45, 0, (total >> 8) as u8, total as u8, 0, 0, 0x40, 0, 64, 47, 0, 0]);
        f.extend([192, 0, 2, 100, 192, 0, 2, 200]);
        f.extend([0x10, 0x00, 0x88, 0xBE, 0, 0, 0, 1]);
        f.extend([0x10, 0x00, if truncated { 0x04 } else { 0 }, 7, 0, 0, 0, 0]);
        f.extend(inner);
        f
    }

    /// A real WRITE First (RETH, then 1,024 bytes) cut 6 bytes into its RETH: as its own
    /// frame it is broken, but a frame its capture or its mirror cut short is still that
    /// packet, without its RETH and payload (lengths from its headers, as tshark reads them
    /// from the whole frame above).
    #[test]
    fn a_frame_cut_inside_its_extension_headers_by_its_capture_or_mirror() {
        let f = real_frame("rdma_write_bw.pcap", 21);
        let cut = &f[..60];
        assert!(matches!(decode_frame(cut), Decoded::Error(DecodeError::ExtHeadersTruncated)));
        let check = |d: Decoded<'_>| {
            let Decoded::Roce(p) = d else { panic!("not RoCE: {d:?}") };
            assert_eq!((p.bth.opcode(), p.bth.dest_qp()), (6, 0x1b));
            assert_eq!((p.ext.len(), p.exts.reth, p.payload_len, p.payload.len()), (6, None, 1024, 0));
        };
        check(decode_cut_frame(cut));
        let mut d = decode_frame(cut);
        decode_again_if_cut(cut, f.len() as u32, &mut d);
        check(d);
        let mut d = decode_frame(cut);
        decode_again_if_cut(cut, cut.len() as u32, &mut d);
        assert!(matches!(d, Decoded::Error(DecodeError::ExtHeadersTruncated)), "not cut by its capture");
        // Mirrored: the T bit says the switch cut it; without it, the frame is broken.
        check(decode_frame(&erspan_ii(cut, true)));
        let whole = erspan_ii(&f, false);
        let Decoded::Roce(p) = decode_frame(&whole) else { panic!() };
        assert_eq!(
            (p.exts.reth.map(|r| r.dma_len), p.mirror.map(|m| m.truncated)),
            (Some(3000), Some(false))
        );
        assert!(matches!(
            decode_frame(&erspan_ii(cut, false)),
            Decoded::Error(DecodeError::ExtHeadersTruncated)
        ));
        // Cut inside the BTH, it is no packet either way.
        assert!(matches!(decode_cut_frame(&f[..50]), Decoded::Error(DecodeError::BthTruncated)));
        // A mirror whose tunnel's IP datagram ends inside the RETH, 1,500 bytes before the
        // frame does (its copy of 1,024 bytes held for the reorder window, shorter than its
        // length on the wire): its bytes did not run out, it is broken.
        let mut early = erspan_ii(cut, false);
        early.extend([0u8; 1_500]);
        let mut d = decode_frame(&early[..1_024]);
        decode_again_if_cut(&early[..1_024], early.len() as u32, &mut d);
        assert!(matches!(d, Decoded::Error(DecodeError::ExtHeadersTruncated)), "{d:?}");
        // Cut by its capture, but its UDP length ends inside the RETH: its lengths
        // contradict each other, whatever the cut.
        let mut short_udp = cut.to_vec();
        short_udp[38..40].copy_from_slice(&(8u16 + 12 + 6).to_be_bytes());
        assert!(matches!(decode_cut_frame(&short_udp), Decoded::Error(DecodeError::RoceBadLength)));
    }

    /// Tunnel sources a fabric numbers alike (IPv6 addresses a few bits apart, which a plain
    /// xor of their words folds to one value) keep apart: each is a switch of its own.
    #[test]
    fn switches_numbered_alike_are_told_apart() {
        let fold = |a: &str| fold_address(&a.parse().unwrap());
        let v6 = ["fd00:0:0:1::2", "fd00:0:0:2::1", "fd00:0:0:1::3", "fd00::1:0:0:2", "fd00::1"];
        let mut all: Vec<u32> = v6.iter().map(|a| fold(a)).collect();
        all.push(fold("192.168.0.1"));
        all.sort();
        all.dedup();
        assert_eq!(all.len(), v6.len() + 1);
        assert_eq!(fold("192.168.0.1"), 0xC0A8_0001);
    }

    /// The same real frame behind eight 802.1Q tags (inserted by hand after the MAC
    /// addresses; Wireshark decodes such frames): still that RoCE packet, its first two
    /// tags kept.
    #[test]
    fn a_real_frame_behind_eight_tags_decodes() {
        let f = real_frame("rdma_write_bw.pcap", 21);
        let mut tagged = f[..12].to_vec();
        for vid in 1..=8u16 {
            tagged.extend_from_slice(&[0x81, 0x00]);
            tagged.extend_from_slice(&vid.to_be_bytes());
        }
        tagged.extend_from_slice(&f[12..]);
        let Decoded::Roce(p) = decode_frame(&tagged) else { panic!("not RoCE") };
        assert_eq!((p.bth.opcode(), p.bth.dest_qp(), p.payload_len), (6, 0x1b, 1024));
        assert_eq!((p.vlan_count, p.vlans), (2, [1, 2]));
    }

    #[test]
    fn real_tcp_control_frame_is_not_roce() {
        let f = real_frame("rdma_write_bw.pcap", 0);
        assert!(matches!(decode_frame(&f), Decoded::NotRoce(NotRoce::NotUdp)));
    }

    #[test]
    fn roce_is_keyed_on_destination_port_only() {
        // Source port 69 (a NIC that puts the source QPN there), destination 4791: RoCE.
        let f = build(&[], false, 69, 4791, send_only(7), 0, 64);
        let Decoded::Roce(p) = decode_frame(&f) else { panic!("not RoCE") };
        assert_eq!((p.udp_src_port, p.payload_len), (69, 64));
        // Only the source port is 4791: not RoCE.
        let f = build(&[], false, 4791, 5000, send_only(7), 0, 64);
        assert!(matches!(decode_frame(&f), Decoded::NotRoce(NotRoce::OtherUdpPort)));
    }

    #[test]
    fn qinq_and_ipv6() {
        let f = build(&[100, 200], true, 1234, 4791, send_only(9), 0, 100);
        let Decoded::Roce(p) = decode_frame(&f) else { panic!("not RoCE") };
        assert_eq!((p.vlan_count, p.vlans), (2, [100, 200]));
        assert_eq!(p.ip.dst.to_string(), "fd00::2");
        assert_eq!(p.ecn, 3);
        assert_eq!(p.payload_len, 100);
    }

    #[test]
    fn pad_count_is_not_payload() {
        let mut b = send_only(1);
        b.pad_count = 3;
        let f = build(&[], false, 1, 4791, b, 0, 61);
        let Decoded::Roce(p) = decode_frame(&f) else { panic!("not RoCE") };
        assert_eq!(p.payload_len, 61);
    }

    #[test]
    fn truncations_are_errors_by_kind_and_never_panic() {
        let f = build(&[7], false, 1, 4791, send_only(1), 0, 32);
        // Every prefix decodes to something without panicking.
        for n in 0..f.len() {
            let _ = decode_frame(&f[..n]);
        }
        let kind = |n: usize| match decode_frame(&f[..n]) {
            Decoded::Error(e) => Some(e),
            _ => None,
        };
        assert_eq!(kind(10), Some(DecodeError::EthernetTruncated));
        assert_eq!(kind(16), Some(DecodeError::VlanTruncated));
        assert_eq!(kind(30), Some(DecodeError::Ipv4Truncated));
        assert_eq!(kind(45), Some(DecodeError::UdpTruncated));
        assert_eq!(kind(50), Some(DecodeError::BthTruncated));
        // A payload cut short by the mirror still decodes: lengths come from the headers.
        let Decoded::Roce(p) = decode_frame(&f[..f.len() - 10]) else { panic!() };
        assert_eq!((p.payload_len, p.payload.len()), (32, 26));
    }

    #[test]
    fn lengths_that_contradict_each_other() {
        let mut f = build(&[], false, 1, 4791, send_only(1), 0, 0);
        // UDP length 8 + 12 + 3 < 8 + BTH + ICRC.
        f[38..40].copy_from_slice(&23u16.to_be_bytes());
        assert!(matches!(decode_frame(&f), Decoded::Error(DecodeError::RoceBadLength)));
        // UDP length beyond the IP payload.
        f[38..40].copy_from_slice(&900u16.to_be_bytes());
        assert!(matches!(decode_frame(&f), Decoded::Error(DecodeError::UdpBadLength)));
        // The real WRITE First, whole, its UDP length made to end 6 bytes into its RETH
        // (8 + 12 + 6): a length too short for the headers its opcode names, not a frame
        // cut inside them (its bytes go on).
        let mut w = real_frame("rdma_write_bw.pcap", 21);
        w[38..40].copy_from_slice(&26u16.to_be_bytes());
        assert!(matches!(decode_frame(&w), Decoded::Error(DecodeError::RoceBadLength)));
    }

    #[test]
    fn first_fragment_to_4791_is_an_error_tail_is_not_roce() {
        let mut f = build(&[], false, 1, 4791, send_only(1), 0, 8);
        f[20] = 0x20; // MF
        ipv4_fix_checksum(&mut f);
        assert!(matches!(decode_frame(&f), Decoded::Error(DecodeError::IpFragment)));
        f[20] = 0x00;
        f[21] = 0x10; // offset 16 * 8
        assert!(matches!(decode_frame(&f), Decoded::NotRoce(NotRoce::IpFragmentTail)));
        // IPv6 the same (a Fragment header before UDP): a later fragment's data is no UDP
        // header, even where its bytes look like one to 4791, as they do here.
        let v6 = build(&[], true, 1, 4791, send_only(1), 0, 8);
        let fragment = |offset_units: u16, more: bool| {
            let mut f = v6.clone();
            f[20] = 44; // next header: Fragment
            let fo = (offset_units << 3) | u16::from(more);
            f.splice(54..54, [17, 0, (fo >> 8) as u8, fo as u8, 0, 0, 0, 1]);
            let len = u16::from_be_bytes([f[18], f[19]]) + 8;
            f[18..20].copy_from_slice(&len.to_be_bytes());
            f
        };
        assert!(matches!(decode_frame(&fragment(0, true)), Decoded::Error(DecodeError::IpFragment)));
        assert!(matches!(decode_frame(&fragment(1, false)), Decoded::NotRoce(NotRoce::IpFragmentTail)));
        assert!(matches!(decode_frame(&fragment(1, true)), Decoded::NotRoce(NotRoce::IpFragmentTail)));
        // An atomic fragment (offset 0, no more) is the whole datagram.
        assert!(matches!(decode_frame(&fragment(0, false)), Decoded::Roce(_)));
    }

    /// The committed pcap files: the real captures, then every scenario's.
    fn fixture_captures() -> Vec<std::path::PathBuf> {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcap-fixtures");
        let mut files: Vec<_> =
            std::fs::read_dir(root.join("captures")).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for dir in std::fs::read_dir(root.join("scenarios")).unwrap() {
            files.extend(std::fs::read_dir(dir.unwrap().path()).unwrap().map(|e| e.unwrap().path()));
        }
        files.retain(|f| f.extension().is_some_and(|e| e == "pcap"));
        files
    }

    /// A frame cut to the bytes the analysis reads decodes to the same packet, but for
    /// payload bytes past the largest a tracker reads (a CM MAD): every RoCE frame of the
    /// committed captures and scenarios that `bytes_read` names. Frames it does not name
    /// (ERSPAN, IPv6, two VLAN tags, IPv4 options) keep their first KiB, as before.
    #[test]
    fn a_frame_cut_to_the_bytes_read_decodes_to_the_same_packet() {
        // The IBA's header layouts: the longest run of extension headers is a Reliable
        // Datagram atomic's, RDETH (4) + DETH (8) + AtomicETH (28) bytes.
        assert_eq!(ib_ext::MAX_EXT_LEN, 40);
        let (mut cut, mut named) = (0, 0);
        for file in fixture_captures() {
            for f in crate::capture::pcap::read_all_frames(&file).unwrap() {
                let Decoded::Roce(p) = decode_frame(&f) else { continue };
                let Some(n) = bytes_read(&f) else {
                    assert!(p.mirror.is_some() || p.ip.src.is_ipv6() || p.vlan_count > 1, "{file:?}: {p:?}");
                    continue;
                };
                // Ethernet (and its tag), IPv4, UDP, BTH, the longest extension headers, a MAD.
                assert_eq!(n, 14 + 4 * usize::from(p.vlan_count) + 20 + 8 + 12 + 40 + 256);
                named += 1;
                if f.len() <= n {
                    continue;
                }
                let Decoded::Roce(q) = decode_frame(&f[..n]) else { panic!("{file:?}: {p:?}") };
                let rest = |x: &RocePacket<'_>| {
                    (x.vlans, x.vlan_count, x.mirror, x.ip, x.ecn, x.ttl, x.udp_src_port)
                };
                assert_eq!(rest(&q), rest(&p));
                // The copy's headers say it was cut; it counts as long as the frame was.
                let wire_len = f.len() as u32;
                assert_eq!(q.link_len(&f[..n], wire_len), p.link_len(&f, wire_len));
                assert_eq!(format!("{:?}", q.bth), format!("{:?}", p.bth));
                assert_eq!((q.ext, q.exts, q.payload_len), (p.ext, p.exts, p.payload_len));
                let m = p.payload.len().min(cm::MAD_LEN);
                assert!(q.payload.len() >= m && q.payload[..m] == p.payload[..m], "{file:?}: {p:?}");
                cut += 1;
            }
        }
        assert!(named > 10_000 && cut > 1_000, "{named} {cut}");
        // Not named: IPv4 options, another protocol, too short for the IPv4 header.
        let frames =
            crate::capture::pcap::read_all_frames(&crate::test_capture("rdma_write_bw.pcap")).unwrap();
        let f = frames.into_iter().find(|f| bytes_read(f).is_some()).unwrap();
        assert_eq!(f[12..14], [0x08, 0x00], "untagged IPv4");
        let mut options = f.clone();
        options[14] = 0x46;
        let mut gre = f.clone();
        gre[14 + 9] = ipv4::PROTO_GRE;
        for other in [&options[..], &gre[..], &f[..33]] {
            assert_eq!(bytes_read(other), None);
        }
    }

    /// A packet detached from its frame and attached to a byte-for-byte copy is the packet
    /// the copy decodes to, its parts borrowed from the copy: every RoCE frame of the
    /// committed captures and scenarios (ERSPAN mirrors, IPv6, VLANs, every opcode's
    /// extension headers and payloads).
    #[test]
    fn a_detached_packet_attached_to_a_copy_is_the_copy_decoded() {
        let files = fixture_captures();
        let (mut packets, mut mirrored) = (0, 0);
        for file in &files {
            for f in crate::capture::pcap::read_all_frames(file).unwrap() {
                let Decoded::Roce(p) = decode_frame(&f) else { continue };
                let d = p.detach(&f).expect("the packet's parts lie in its frame");
                let copy = f.clone();
                let attached = d.attach(&copy);
                let same = format!("{:?}", Decoded::Roce(attached)) == format!("{:?}", decode_frame(&copy));
                assert!(same, "{file:?}: {p:?}");
                let within = |s: &[u8]| {
                    s.is_empty()
                        || copy.as_ptr_range().contains(&s.as_ptr())
                            && s.as_ptr_range().end <= copy.as_ptr_range().end
                };
                assert!(within(attached.ext) && within(attached.payload) && within(attached.icrc.l3));
                packets += 1;
                mirrored += usize::from(p.mirror.is_some());
            }
        }
        assert!(packets > 10_000 && mirrored > 4_000, "{packets} {mirrored}");
        // Parts outside the bytes given are refused.
        let frames = crate::capture::pcap::read_all_frames(&files[0]).unwrap();
        let f = frames.iter().find(|f| matches!(decode_frame(f), Decoded::Roce(_))).unwrap();
        let Decoded::Roce(p) = decode_frame(f) else { unreachable!() };
        assert!(p.detach(&f.clone()).is_none());
        assert!(p.detach(&f[..f.len() - 8]).is_none());
        assert!(p.detach(f).is_some());
    }

    #[test]
    fn a_decoded_packet_stays_small() {
        // Every frame of a burst is decoded into an array on the stack and read again by
        // the prefetch steps and the trackers: its size is bytes written and moved per packet.
        use std::mem::size_of;
        assert!(size_of::<ib_ext::Tracked>() <= 40, "Tracked {}", size_of::<ib_ext::Tracked>());
        assert!(size_of::<Decoded<'_>>() <= 200, "Decoded {}", size_of::<Decoded<'_>>());
    }

    /// Every frame of the committed captures and scenarios, and every one of them with bytes
    /// of its headers changed, decodes through the fixed-offset paths (plain frames and
    /// ERSPAN mirrors of them) exactly as through the general walk (the walk's own results
    /// are checked against tshark elsewhere).
    #[test]
    fn the_fixed_offset_path_decodes_as_the_general_walk() {
        let files = fixture_captures();
        assert!(files.len() > 10, "{files:?}");
        // Both entry points: `decode_frame` and the burst's `decode_frame_into`.
        let same = |f: &[u8]| {
            let walked = format!("{:?}", walk(f, false));
            assert_eq!(format!("{:?}", decode_frame(f)), walked, "{f:02x?}");
            let mut into = Decoded::NotRoce(NotRoce::NotIp);
            decode_frame_into(f, &mut into);
            assert_eq!(format!("{into:?}"), walked, "{f:02x?}");
        };
        let (mut plain_frames, mut mirror_frames, mut mutated) = (0, 0, 0);
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for file in &files {
            for (i, mut f) in crate::capture::pcap::read_all_frames(file).unwrap().into_iter().enumerate() {
                same(&f);
                plain_frames += usize::from(plain(&f).is_some());
                mirror_frames += usize::from(plain_mirror(&f).is_some());
                if i % 97 != 0 {
                    continue;
                }
                // Every header byte up to the BTH's (the mirrored frame's too, inside an
                // ERSPAN mirror), and the frame cut at each of them.
                let headers = if could_be_mirrored(&f) { 130 } else { 60 };
                for at in 0..f.len().min(headers) {
                    let keep = f[at];
                    for v in [0x00, 0xFF, keep ^ 0x01, keep ^ 0x40, keep ^ 0x0F] {
                        f[at] = v;
                        same(&f);
                    }
                    f[at] = keep;
                    same(&f[..at]);
                    mutated += 6;
                }
                // And one byte anywhere set to a pseudo-random value (xorshift).
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x as usize) % f.len();
                f[at] = (x >> 32) as u8;
                same(&f);
            }
        }
        // The path is taken: most RoCE frames of the fixtures are plain IPv4.
        assert!(plain_frames > 10_000, "{plain_frames}");
        // And the ERSPAN path: the mirrored scenarios' frames are plain ones in plain GRE.
        assert!(mirror_frames > 4_000, "{mirror_frames}");
        assert!(mutated > 5_000, "{mutated}");
    }

    fn ipv4_fix_checksum(f: &mut [u8]) {
        f[24] = 0;
        f[25] = 0;
        let c = ipv4::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
}
