//! Malformed frames of every kind, interleaved with the intact `misc` traffic.

use super::*;
use crate::rng::Rng;
use crate::sim::{Fate, Side, COMPUTE};
use roceprobe::wire::bth::{self, opcode as op};
use roceprobe::wire::ib_ext::Reth;
use std::net::Ipv4Addr;

/// Frames made malformed on purpose, each with the decode error it must be counted as.
pub fn malformed_frames() -> Vec<(Vec<u8>, &'static str)> {
    use roceprobe::wire::build::{erspan_wrap, RoceFrame};
    use roceprobe::wire::erspan::{self, Granularity};
    let (a, b) = ("10.0.1.7".parse().unwrap(), "10.0.2.7".parse().unwrap());
    let payload = data(100, 0x3C);
    let mut w = RoceFrame::new(
        a,
        b,
        bth::Repr { opcode: op::WRITE_FIRST, dest_qp: 0x0D01, psn: 99, ..Default::default() },
    );
    w.ext.reth = Some(Reth { va: 1, rkey: 2, dma_len: 4096 });
    w.payload = &payload;
    // Untagged IPv4: UDP at 34, BTH at 42, extension headers at 54.
    let write = w.emit();
    let mut s = RoceFrame::new(
        a,
        b,
        bth::Repr { opcode: op::SEND_ONLY, dest_qp: 0x0D01, psn: 98, ..Default::default() },
    );
    s.payload = &payload;
    let send = s.emit();
    let mut q = w.clone();
    let vlans = [300u16, 42];
    q.vlans = &vlans;
    let qinq = q.emit();
    let v6 = RoceFrame::new(
        "fd00:1::5".parse().unwrap(),
        "fd00:2::5".parse().unwrap(),
        bth::Repr { opcode: op::SEND_ONLY, dest_qp: 0x0F01, psn: 1, ..Default::default() },
    )
    .emit();
    let h = erspan::Repr {
        erspan_type: 3,
        vlan: 0,
        cos: 0,
        session: 5,
        truncated: false,
        index: 0,
        timestamp: 1,
        granularity: Granularity::Nanos100,
        hw_id: 0,
        platform: None,
    };
    // Outer Ethernet 14, IPv4 20, GRE with sequence 8: ERSPAN III at 42.
    let mirrored = erspan_wrap(&write, &h, Ipv4Addr::new(192, 168, 0, 1), Ipv4Addr::new(192, 168, 0, 2), 1);
    let edit = |f: &[u8], at: usize, v: u8| {
        let mut g = f.to_vec();
        g[at] = v;
        g
    };
    let mut udp_len_22 = send[..14 + 20 + 22].to_vec();
    udp_len_22[16..18].copy_from_slice(&42u16.to_be_bytes()); // IPv4 total length 20 + 22
    udp_len_22[38..40].copy_from_slice(&22u16.to_be_bytes()); // UDP: 8 + BTH + 2 < 8 + 12 + 4
    let mut v6_hbh = v6.clone();
    v6_hbh[14 + 6] = 0; // next header: hop-by-hop, which the frame does not hold
    vec![
        (write[..10].to_vec(), "ethernet_truncated"),
        (qinq[..16].to_vec(), "vlan_truncated"),
        (write[..14 + 12].to_vec(), "ipv4_truncated"),
        (edit(&write, 14, 0x55), "ipv4_bad_header"),
        (edit(&write, 14 + 6, 0x60), "ip_fragment"),
        (v6[..14 + 30].to_vec(), "ipv6_truncated"),
        (v6_hbh[..14 + 41].to_vec(), "ipv6_ext_truncated"),
        (write[..34 + 5].to_vec(), "udp_truncated"),
        (edit(&write, 34 + 5, 7), "udp_bad_length"),
        (write[..42 + 6].to_vec(), "bth_truncated"),
        (edit(&write, 42 + 1, 0x01), "bth_bad_version"),
        (edit(&write, 42, 0x1F), "bth_unknown_opcode"),
        (write[..54 + 8].to_vec(), "ext_headers_truncated"),
        (udp_len_22, "roce_bad_length"),
        (mirrored[..14 + 20 + 2].to_vec(), "gre_truncated"),
        (mirrored[..42 + 6].to_vec(), "erspan_truncated"),
        (edit(&mirrored, 42, (mirrored[42] & 0x0F) | 0x30), "erspan_bad_version"),
    ]
}

pub fn corrupted(seed: u64) -> Built {
    let mut built = misc(seed);
    let mut rng = Rng::new(seed ^ 0xBAD);
    let times: Vec<u64> = built.wire.packets.iter().filter_map(|p| p.seen()[COMPUTE]).collect();
    for (k, (frame, kind)) in malformed_frames().into_iter().enumerate() {
        // Between two intact frames (1 ns after one of them), twice each.
        for _ in 0..2 {
            let t = times[rng.range(0, times.len() as u64 - 1) as usize] + 1 + k as u64;
            built.wire.raw(COMPUTE, frame.clone(), t, Some(kind));
        }
    }
    // A packet of an existing flow that arrives with a wrong ICRC.
    let bad = built.wire.packets.iter().find_map(|p| match p {
        crate::sim::Packet::Roce { spec, seen, .. }
            if spec.bth.opcode == op::SEND_ONLY && seen[COMPUTE].is_some() =>
        {
            Some((spec.clone(), seen[COMPUTE].unwrap()))
        }
        _ => None,
    });
    if let Some((mut spec, t)) = bad {
        spec.corrupt_icrc = true;
        built.wire.send(Side::Compute, spec, t + 7, Fate::Delivered);
    }
    built
}
