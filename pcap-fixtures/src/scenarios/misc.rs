//! Everything else the decoder must know: IPv6, QinQ, UC, UD, XRC, atomics, immediate
//! data, a CM handshake, and non-RoCE noise.

use super::*;
use crate::conn::{Conn, Endpoint, Msg};
use crate::rng::Rng;
use crate::sim::{Fate, Role, Side, Wire, COMPUTE};
use roceprobe::wire::bth::opcode as op;
use roceprobe::wire::build::{arp_frame, tcp_frame, udp_frame};
use roceprobe::wire::cm::{CmMessage, RdmaCmIp, Rep, Req, GSI_QKEY, GSI_QPN, NVME_OF_PORT};
use roceprobe::wire::ib_ext::{Aeth, AtomicEth, Deth, ExtHeaders, Reth};
use std::net::Ipv4Addr;

pub fn misc(seed: u64) -> Built {
    let mut rng = Rng::new(seed);
    let mut wire = Wire::new(FABRIC_NS);
    let mtu = 1024;
    let mut t = EPOCH_NS;
    // A pause longer than --flow-idle (1 ms) in the middle, so the flows that span it have
    // two transmissions.
    let pause = std::cell::Cell::new(0);
    let mut step = |rng: &mut Rng| {
        t += rng.range(500, 3_000) + pause.take();
        t
    };
    let (host, target) = ("10.0.1.7", "10.0.2.7");

    // A CM handshake for an NVMe-oF connection, then RC traffic on the QPs it names. Each
    // message's starting PSN is the one its sender expects to receive (Linux's CM sets its
    // receive queue's PSN from it): the REQ carries the target's first PSN, the REP the
    // host's.
    let req = Req {
        local_comm_id: 0x1111_2222,
        service_id: Req::rdma_cm_service_id(NVME_OF_PORT),
        local_ca_guid: 0x0002_c903_00ab_cdef,
        local_qkey: 0,
        local_qpn: 0x0C01,
        starting_psn: 777,
        pkey: 0xFFFF,
        path_mtu: 3,
        ip: Some(RdmaCmIp { src_port: 51000, src: host.parse().unwrap(), dst: target.parse().unwrap() }),
        // No NVMe/RDMA request data is written after RDMA-CM's header.
        nvme_qid: None,
    };
    let rep = Rep {
        local_comm_id: 0x3333_4444,
        remote_comm_id: 0x1111_2222,
        local_qkey: 0,
        local_qpn: 0x0D01,
        starting_psn: 4242,
        local_ca_guid: 0x0002_c903_00fe_dcba,
    };
    let ud = |src: &str, dst: &str, mad: Vec<u8>, src_qp: u32, psn: u32| {
        let ext = ExtHeaders { deth: Some(Deth { qkey: GSI_QKEY, src_qp }), ..Default::default() };
        spec(src, dst, op::UD_SEND_ONLY, GSI_QPN, psn, ext, mad)
    };
    let tid = 0x0000_0001_0000_0001;
    for (from, to, msg, side) in [
        (host, target, CmMessage::Req(req), Side::Compute),
        (target, host, CmMessage::Rep(rep), Side::Storage),
        (
            host,
            target,
            CmMessage::Rtu { local_comm_id: 0x1111_2222, remote_comm_id: 0x3333_4444 },
            Side::Compute,
        ),
    ] {
        let s = ud(from, to, cm_mad(msg, tid), 1, rng.range(0, 1000) as u32);
        wire.send(side, s, step(&mut rng), Fate::Delivered);
    }
    let mut rc = Conn::new(
        Endpoint::new(host, Side::Compute, 0x0C01, 4242),
        Endpoint::new(target, Side::Storage, 0x0D01, 777),
        mtu,
    );
    for k in 0..4 {
        if k == 2 {
            pause.set(2_500_000);
        }
        let s = rc.message(
            &mut wire,
            true,
            Msg::Send,
            &data(200 + k, 3),
            step(&mut rng),
            None,
            Role::Plain,
            &mut |_| Fate::Delivered,
        );
        rc.complete_message(false);
        rc.ack(&mut wire, false, s.last_psn, Aeth::ack(31, 0), step(&mut rng), Fate::Delivered);
    }

    // IPv6 RC: WRITE Only with Immediate, SEND Only with Immediate, and their ACKs.
    let mut v6 = Conn::new(
        Endpoint::new("fd00:1::5", Side::Compute, 0x0E01, 10),
        Endpoint::new("fd00:2::5", Side::Storage, 0x0F01, 20),
        mtu,
    );
    for k in 0..3u32 {
        let ext = ExtHeaders {
            reth: Some(Reth { va: 0x4000 + u64::from(k) * 512, rkey: 0x42, dma_len: 512 }),
            imm: Some(0xC0DE_0000 | k),
            ..Default::default()
        };
        let psn = v6.a.next_psn;
        v6.a.next_psn += 1;
        let mut s = spec("fd00:1::5", "fd00:2::5", op::WRITE_ONLY_IMM, 0x0F01, psn, ext, data(512, 7));
        s.udp_src_port = 61000;
        wire.send(Side::Compute, s, step(&mut rng), Fate::Delivered);
        let ext = ExtHeaders { imm: Some(k), ..Default::default() };
        let psn = v6.a.next_psn;
        v6.a.next_psn += 1;
        wire.send(
            Side::Compute,
            spec("fd00:1::5", "fd00:2::5", op::SEND_ONLY_IMM, 0x0F01, psn, ext, data(64, 8)),
            step(&mut rng),
            Fate::Delivered,
        );
        v6.complete_message(false);
        v6.ack(&mut wire, false, psn, Aeth::ack(31, 0), step(&mut rng), Fate::Delivered);
    }

    // QinQ-tagged RC WRITEs (a provider tag around a customer tag).
    let mut qinq = Conn::new(
        Endpoint::new("10.0.1.8", Side::Compute, 0x1001, 50),
        Endpoint::new("10.0.2.8", Side::Storage, 0x1101, 60),
        mtu,
    );
    qinq.vlans = vec![300, 42];
    for _ in 0..3 {
        let reth = Reth { va: 0x9000, rkey: 1, dma_len: 2500 };
        let s = qinq.message(
            &mut wire,
            true,
            Msg::Write(reth),
            &data(2500, 4),
            step(&mut rng),
            None,
            Role::Plain,
            &mut |_| Fate::Delivered,
        );
        qinq.complete_message(false);
        qinq.ack(&mut wire, false, s.last_psn, Aeth::ack(31, 0), step(&mut rng), Fate::Delivered);
    }

    // UC WRITEs (no ACKs on UC).
    let mut uc = Conn::new(
        Endpoint::new("10.0.1.9", Side::Compute, 0x1201, 900),
        Endpoint::new("10.0.2.9", Side::Storage, 0x1301, 901),
        mtu,
    );
    uc.transport = 0x20;
    for _ in 0..3 {
        let reth = Reth { va: 0xA000, rkey: 2, dma_len: 1500 };
        uc.message(
            &mut wire,
            true,
            Msg::Write(reth),
            &data(1500, 5),
            step(&mut rng),
            None,
            Role::Plain,
            &mut |_| Fate::Delivered,
        );
    }

    // DCQCN on UC: a CNP for the only UC QP between the two hosts (the probe knows the flow
    // it throttles), then a second UC QP between them and a CNP for each: UC has no responses
    // to pair the directions by, so with two QPs the probe cannot tell (unattributed).
    uc.cnp(&mut wire, false, step(&mut rng));
    let mut uc2 = Conn::new(
        Endpoint::new("10.0.1.9", Side::Compute, 0x1202, 300),
        Endpoint::new("10.0.2.9", Side::Storage, 0x1302, 301),
        mtu,
    );
    uc2.transport = 0x20;
    let reth = Reth { va: 0xA800, rkey: 2, dma_len: 600 };
    let msg = data(600, 5);
    uc2.message(&mut wire, true, Msg::Write(reth), &msg, step(&mut rng), None, Role::Plain, &mut |_| {
        Fate::Delivered
    });
    uc.cnp(&mut wire, false, step(&mut rng));
    uc2.cnp(&mut wire, false, step(&mut rng));

    // UD SENDs with and without immediate data (DETH names the source QP).
    for k in 0..3u32 {
        let ext = ExtHeaders {
            deth: Some(Deth { qkey: 0x1111_1111, src_qp: 0x1401 }),
            imm: (k == 2).then_some(7),
            ..Default::default()
        };
        let opcode = if k == 2 { op::UD_SEND_ONLY_IMM } else { op::UD_SEND_ONLY };
        wire.send(
            Side::Compute,
            spec("10.0.1.10", "10.0.2.10", opcode, 0x1501, 100 + k, ext, data(256, 6)),
            step(&mut rng),
            Fate::Delivered,
        );
    }

    // XRC SENDs (XRCETH names the SRQ) and their ACKs.
    for k in 0..3u32 {
        let ext = ExtHeaders { xrc_srq: Some(0x1601), ..Default::default() };
        wire.send(
            Side::Compute,
            spec("10.0.1.11", "10.0.2.11", 0xA0 | op::SEND_ONLY, 0x1701, 300 + k, ext, data(100, 1)),
            step(&mut rng),
            Fate::Delivered,
        );
        let ext = ExtHeaders { aeth: Some(Aeth::ack(31, k + 1)), ..Default::default() };
        wire.send(
            Side::Storage,
            spec("10.0.2.11", "10.0.1.11", 0xA0 | op::ACKNOWLEDGE, 0x1801, 300 + k, ext, Vec::new()),
            step(&mut rng),
            Fate::Delivered,
        );
    }

    // Atomics: FetchAdd and CmpSwap with their ATOMIC ACKNOWLEDGEs; a remote access error NAK.
    for k in 0..4u32 {
        let ext = ExtHeaders {
            atomic: Some(AtomicEth { va: 0xB000, rkey: 3, swap_add: 1, compare: u64::from(k) }),
            ..Default::default()
        };
        let opcode = if k % 2 == 0 { op::FETCH_ADD } else { op::COMPARE_SWAP };
        wire.send(
            Side::Compute,
            spec("10.0.1.12", "10.0.2.12", opcode, 0x1901, 600 + k, ext, Vec::new()),
            step(&mut rng),
            Fate::Delivered,
        );
        let ext = if k == 3 {
            ExtHeaders { aeth: Some(Aeth::nak(2, k)), ..Default::default() }
        } else {
            ExtHeaders {
                aeth: Some(Aeth::ack(31, k + 1)),
                atomic_ack: Some(u64::from(k)),
                ..Default::default()
            }
        };
        let opcode = if k == 3 { op::ACKNOWLEDGE } else { op::ATOMIC_ACKNOWLEDGE };
        wire.send(
            Side::Storage,
            spec("10.0.2.12", "10.0.1.12", opcode, 0x1A01, 600 + k, ext, Vec::new()),
            step(&mut rng),
            Fate::Delivered,
        );
    }

    // Disconnect.
    for (from, to, msg, side) in [
        (
            host,
            target,
            CmMessage::Dreq { local_comm_id: 0x1111_2222, remote_comm_id: 0x3333_4444, remote_qpn: 0x0D01 },
            Side::Compute,
        ),
        (
            target,
            host,
            CmMessage::Drep { local_comm_id: 0x3333_4444, remote_comm_id: 0x1111_2222 },
            Side::Storage,
        ),
    ] {
        wire.send(side, ud(from, to, cm_mad(msg, tid + 1), 1, 5), step(&mut rng), Fate::Delivered);
    }

    // Noise at the compute tap: ARP, TCP (an NVMe/TCP port), DNS, and UDP whose only 4791
    // is the source port.
    let a = Ipv4Addr::new(10, 0, 1, 50);
    let b = Ipv4Addr::new(10, 0, 2, 50);
    for k in 0..3u8 {
        wire.raw(COMPUTE, arp_frame(a, b), step(&mut rng), None);
        wire.raw(COMPUTE, tcp_frame(a, b, 40000 + u16::from(k), 4420, &[k; 40]), step(&mut rng), None);
        wire.raw(COMPUTE, udp_frame(a, b, 5353, 53, &[k; 30]), step(&mut rng), None);
        wire.raw(COMPUTE, udp_frame(a, b, 4791, 9999, &[k; 60]), step(&mut rng), None);
    }
    Built { wire, ios: Vec::new(), mtu, args: vec![], outcomes: None, collectives: None }
}
