//! Builds frames from `Repr`s with the same `emit` code the decoders are tested against:
//! RoCEv2 packets (any opcode, VLAN/QinQ, IPv4/IPv6, ECN, pad and ICRC filled in), the
//! ERSPAN II/III encapsulation of a mirrored frame, and plain UDP/TCP/ARP frames for noise.
//! Used by the scenario generator (`pcap-fixtures`) and by tests.

use super::ib_ext::{layout, ExtHeaders};
use super::{bth, erspan, ethernet, gre, icrc, ipv4, ipv6, udp};
use std::net::{IpAddr, Ipv4Addr};

/// A RoCEv2 packet to build.
#[derive(Debug, Clone)]
pub struct RoceFrame<'a> {
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// VLAN ids, outermost first: one is 802.1Q; two are QinQ (802.1ad outer tag).
    pub vlans: &'a [u16],
    pub src: IpAddr,
    pub dst: IpAddr,
    pub dscp: u8,
    pub ecn: u8,
    pub ttl: u8,
    pub udp_src_port: u16,
    /// BTH; `pad_count` is set from the payload length.
    pub bth: bth::Repr,
    pub ext: ExtHeaders,
    pub payload: &'a [u8],
}

impl<'a> RoceFrame<'a> {
    /// A frame between two hosts with common defaults (DSCP 26, ECT(0), TTL 64).
    pub fn new(src: IpAddr, dst: IpAddr, bth: bth::Repr) -> Self {
        Self {
            src_mac: mac_of(src),
            dst_mac: mac_of(dst),
            vlans: &[],
            src,
            dst,
            dscp: 26,
            ecn: 0b10,
            ttl: 64,
            udp_src_port: 49152,
            bth,
            ext: ExtHeaders::default(),
            payload: &[],
        }
    }

    /// Emits the frame; the ICRC is computed over it.
    pub fn emit(&self) -> Vec<u8> {
        let ext_len = layout(self.bth.opcode).map_or(0, |l| l.len());
        let pad = (4 - self.payload.len() % 4) % 4;
        let roce_len = bth::HEADER_LEN + ext_len + self.payload.len() + pad + bth::ICRC_LEN;
        let v6 = self.src.is_ipv6();
        let ip_len = if v6 { ipv6::HEADER_LEN } else { ipv4::MIN_HEADER_LEN };
        let l2 = ethernet::HEADER_LEN + ethernet::VLAN_TAG_LEN * self.vlans.len();
        let mut f = vec![0u8; l2 + ip_len + udp::HEADER_LEN + roce_len];
        let inner_type = if v6 { ethernet::ethertype::IPV6 } else { ethernet::ethertype::IPV4 };
        emit_l2(&mut f, self.src_mac, self.dst_mac, self.vlans, inner_type);
        let udp_payload = (roce_len) as u16;
        match (self.src, self.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => ipv4::Repr {
                src: s,
                dst: d,
                protocol: ipv4::PROTO_UDP,
                dscp: self.dscp,
                ecn: self.ecn,
                ttl: self.ttl,
                ident: 0,
                dont_frag: true,
                options_len: 0,
                payload_len: udp::HEADER_LEN as u16 + udp_payload,
            }
            .emit(&mut f[l2..]),
            (IpAddr::V6(s), IpAddr::V6(d)) => ipv6::Repr {
                src: s,
                dst: d,
                next_header: ipv4::PROTO_UDP,
                traffic_class: (self.dscp << 2) | (self.ecn & 3),
                flow_label: 0,
                hop_limit: self.ttl,
                payload_len: udp::HEADER_LEN as u16 + udp_payload,
            }
            .emit(&mut f[l2..]),
            _ => panic!("source and destination must be of one IP version"),
        }
        let u = l2 + ip_len;
        udp::Repr { src_port: self.udp_src_port, dst_port: super::ROCEV2_UDP_PORT, payload_len: udp_payload }
            .emit(&mut f[u..]);
        let b = u + udp::HEADER_LEN;
        bth::Repr { pad_count: pad as u8, ..self.bth }.emit(&mut f[b..]);
        self.ext.emit(self.bth.opcode, &mut f[b + bth::HEADER_LEN..]);
        let p = b + bth::HEADER_LEN + ext_len;
        f[p..p + self.payload.len()].copy_from_slice(self.payload);
        icrc::fill(&mut f[l2..], v6, ip_len, ip_len, udp::HEADER_LEN + roce_len);
        f
    }
}

/// A locally administered MAC derived from an IP address (stable, readable in Wireshark).
pub fn mac_of(ip: IpAddr) -> [u8; 6] {
    let o = match ip {
        IpAddr::V4(v) => v.octets(),
        IpAddr::V6(v) => {
            let b = v.octets();
            [b[12], b[13], b[14], b[15]]
        }
    };
    [0x02, 0x00, o[0], o[1], o[2], o[3]]
}

fn emit_l2(f: &mut [u8], src: [u8; 6], dst: [u8; 6], vlans: &[u16], inner: u16) {
    let first = match vlans.len() {
        0 => inner,
        1 => ethernet::ethertype::VLAN,
        _ => ethernet::ethertype::QINQ,
    };
    ethernet::Repr { dst, src, ethertype: first }.emit(f);
    let mut at = ethernet::HEADER_LEN;
    for (i, vid) in vlans.iter().enumerate() {
        let next = if i + 1 < vlans.len() { ethernet::ethertype::VLAN } else { inner };
        ethernet::VlanRepr { pcp: 3, vid: *vid, inner_ethertype: next }.emit(&mut f[at..]);
        at += ethernet::VLAN_TAG_LEN;
    }
}

/// Wraps a mirrored frame in Ethernet / IPv4 / GRE / ERSPAN, as a switch sends it to a
/// remote probe.
pub fn erspan_wrap(
    inner: &[u8],
    header: &erspan::Repr,
    switch_ip: Ipv4Addr,
    probe_ip: Ipv4Addr,
    sequence: u32,
) -> Vec<u8> {
    let g = gre::Repr {
        protocol: if header.erspan_type == 3 { gre::protocol::ERSPAN_III } else { gre::protocol::ERSPAN_II },
        key: None,
        // Type I is told apart from type II by the absence of the sequence number.
        sequence: (header.erspan_type != 1).then_some(sequence),
    };
    let tunnel = g.header_len() + header.header_len();
    let ip_payload = tunnel + inner.len();
    let l2 = ethernet::HEADER_LEN;
    let mut f = vec![0u8; l2 + ipv4::MIN_HEADER_LEN + ip_payload];
    emit_l2(
        &mut f,
        mac_of(IpAddr::V4(switch_ip)),
        mac_of(IpAddr::V4(probe_ip)),
        &[],
        ethernet::ethertype::IPV4,
    );
    ipv4::Repr {
        src: switch_ip,
        dst: probe_ip,
        protocol: ipv4::PROTO_GRE,
        dscp: 0,
        ecn: 0,
        ttl: 64,
        ident: sequence as u16,
        dont_frag: true,
        options_len: 0,
        payload_len: ip_payload as u16,
    }
    .emit(&mut f[l2..]);
    let at = l2 + ipv4::MIN_HEADER_LEN;
    g.emit(&mut f[at..]);
    header.emit(&mut f[at + g.header_len()..]);
    f[at + tunnel..].copy_from_slice(inner);
    f
}

/// A UDP/IPv4 frame that is not RoCE (noise).
pub fn udp_frame(src: Ipv4Addr, dst: Ipv4Addr, src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let l2 = ethernet::HEADER_LEN;
    let len = ipv4::MIN_HEADER_LEN + udp::HEADER_LEN + payload.len();
    let mut f = vec![0u8; (l2 + len).max(60)];
    emit_l2(&mut f, mac_of(IpAddr::V4(src)), mac_of(IpAddr::V4(dst)), &[], ethernet::ethertype::IPV4);
    ipv4::Repr {
        src,
        dst,
        protocol: ipv4::PROTO_UDP,
        dscp: 0,
        ecn: 0,
        ttl: 64,
        ident: 1,
        dont_frag: false,
        options_len: 0,
        payload_len: (udp::HEADER_LEN + payload.len()) as u16,
    }
    .emit(&mut f[l2..]);
    let u = l2 + ipv4::MIN_HEADER_LEN;
    udp::Repr { src_port, dst_port, payload_len: payload.len() as u16 }.emit(&mut f[u..]);
    f[u + udp::HEADER_LEN..u + udp::HEADER_LEN + payload.len()].copy_from_slice(payload);
    f
}

/// A TCP SYN/ACK-less segment header (noise: a storage or management TCP connection).
pub fn tcp_frame(src: Ipv4Addr, dst: Ipv4Addr, src_port: u16, dst_port: u16, payload: &[u8]) -> Vec<u8> {
    let l2 = ethernet::HEADER_LEN;
    let len = ipv4::MIN_HEADER_LEN + 20 + payload.len();
    let mut f = vec![0u8; (l2 + len).max(60)];
    emit_l2(&mut f, mac_of(IpAddr::V4(src)), mac_of(IpAddr::V4(dst)), &[], ethernet::ethertype::IPV4);
    ipv4::Repr {
        src,
        dst,
        protocol: 6,
        dscp: 0,
        ecn: 0,
        ttl: 64,
        ident: 2,
        dont_frag: true,
        options_len: 0,
        payload_len: (20 + payload.len()) as u16,
    }
    .emit(&mut f[l2..]);
    let t = l2 + ipv4::MIN_HEADER_LEN;
    f[t..t + 2].copy_from_slice(&src_port.to_be_bytes());
    f[t + 2..t + 4].copy_from_slice(&dst_port.to_be_bytes());
    f[t + 12] = 5 << 4; // data offset
    f[t + 13] = 0x18; // PSH, ACK
    f[t + 20..t + 20 + payload.len()].copy_from_slice(payload);
    f
}

/// An ARP request (noise that is not IP at all).
pub fn arp_frame(sender: Ipv4Addr, target: Ipv4Addr) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    emit_l2(&mut f, mac_of(IpAddr::V4(sender)), [0xFF; 6], &[], 0x0806);
    let a = ethernet::HEADER_LEN;
    f[a..a + 8].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f[a + 8..a + 14].copy_from_slice(&mac_of(IpAddr::V4(sender)));
    f[a + 14..a + 18].copy_from_slice(&sender.octets());
    f[a + 24..a + 28].copy_from_slice(&target.octets());
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ib_ext::Reth;
    use crate::wire::{decode_frame, Decoded, Mirror};

    #[test]
    fn built_frames_decode_to_what_was_built() {
        let payload = [7u8; 1021];
        let mut fr = RoceFrame::new(
            "192.0.2.1".parse().unwrap(),
            "192.0.2.2".parse().unwrap(),
            bth::Repr {
                opcode: 0x06,
                pkey: 0xFFFF,
                dest_qp: 0x123,
                psn: 0xFFFFFF,
                ack_req: true,
                ..Default::default()
            },
        );
        fr.vlans = &[100, 200];
        fr.ecn = 3;
        fr.ext.reth = Some(Reth { va: 0x1000, rkey: 0xBEEF, dma_len: 4096 });
        fr.payload = &payload;
        let f = fr.emit();
        let Decoded::Roce(p) = decode_frame(&f) else { panic!() };
        assert_eq!((p.vlan_count, p.vlans, p.ecn), (2, [100, 200], 3));
        assert_eq!(
            (p.bth.opcode(), p.bth.dest_qp(), p.bth.psn(), p.bth.pad_count()),
            (6, 0x123, 0xFFFFFF, 3)
        );
        assert_eq!((p.payload_len, p.payload), (1021, &payload[..]));
        assert_eq!(ExtHeaders::parse(6, p.ext).unwrap().reth, fr.ext.reth);
        assert_eq!(icrc::check(&p.icrc), Some(true));
    }

    #[test]
    fn erspan_wrapped_frames_decode_to_the_inner_packet() {
        let inner = RoceFrame::new(
            "fd00::1".parse().unwrap(),
            "fd00::2".parse().unwrap(),
            bth::Repr { opcode: 0x81, dest_qp: 0x42, ..Default::default() },
        )
        .emit();
        let h = erspan::Repr {
            erspan_type: 3,
            vlan: 0,
            cos: 0,
            session: 12,
            truncated: false,
            index: 0,
            timestamp: 1000,
            granularity: erspan::Granularity::Nanos100,
            hw_id: 1,
            platform: None,
        };
        let f = erspan_wrap(&inner, &h, Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 9), 5);
        let Decoded::Roce(p) = decode_frame(&f) else { panic!() };
        assert_eq!(p.bth.opcode(), 0x81);
        let m = p.mirror.unwrap();
        assert_eq!((m.erspan_type, m.session), (3, Some(12)));
        assert_eq!(m.time, Some(erspan::SwitchTime::Counter { ticks: 1000, bits: 32, unit_ns: 100 }));
        assert_eq!(icrc::check(&p.icrc), Some(true), "the inner packet's ICRC");
    }

    #[test]
    fn erspan_type_i_is_gre_without_sequence_number_and_no_header() {
        let inner = RoceFrame::new(
            "10.0.0.1".parse().unwrap(),
            "10.0.0.2".parse().unwrap(),
            bth::Repr { opcode: 0x0A, dest_qp: 0x77, ..Default::default() },
        )
        .emit();
        let f = erspan_wrap(
            &inner,
            &erspan::Repr::type_i(),
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 9),
            5,
        );
        // Ethernet 14 + IPv4 20, then GRE: no flags, version 0, protocol 0x88BE; the frame.
        assert_eq!(&f[34..38], &[0x00, 0x00, 0x88, 0xBE]);
        assert_eq!(&f[38..], &inner[..]);
        let Decoded::Roce(p) = decode_frame(&f) else { panic!() };
        assert_eq!((p.bth.opcode(), p.bth.dest_qp()), (0x0A, 0x77));
        assert_eq!(
            p.mirror,
            Some(Mirror { erspan_type: 1, session: None, time: None, truncated: false, origin: 0x0A00_0001 })
        );
        assert_eq!(p.inner_frame_len, Some(inner.len() as u32));
    }

    #[test]
    fn noise_is_not_roce() {
        let a = Ipv4Addr::new(10, 0, 0, 1);
        let b = Ipv4Addr::new(10, 0, 0, 2);
        for f in [udp_frame(a, b, 4791, 53, b"x"), tcp_frame(a, b, 22, 4420, b"hello"), arp_frame(a, b)] {
            assert!(matches!(decode_frame(&f), Decoded::NotRoce(_)));
        }
    }
}
