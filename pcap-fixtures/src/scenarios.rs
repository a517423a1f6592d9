//! The scenarios: each builds a wire (every packet, when each tap saw it) and the I/O
//! records that anchor latencies. Deterministic functions of their seed.

use crate::conn::{Conn, Endpoint, Msg, Sent};
use crate::rng::Rng;
use crate::sim::{Fate, Role, Side, Spec, Wire, COMPUTE};
use crate::truth::IoRecord;
use roceprobe::wire::bth::{self, opcode as op};
use roceprobe::wire::build::{arp_frame, tcp_frame, udp_frame};
use roceprobe::wire::cm::{CmMessage, RdmaCmIp, Rep, Req, GSI_QKEY, GSI_QPN, MAD_LEN, NVME_OF_PORT};
use roceprobe::wire::ib_ext::{Aeth, AtomicEth, Deth, ExtHeaders, Reth};
use roceprobe::wire::nvme::{self, Cqe, Sgl, Sqe};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;

/// Fabric delay between the compute and the storage tap.
pub const FABRIC_NS: u64 = 2_000;
/// Start of every scenario: 2026-11-29T08:00:00Z.
pub const EPOCH_NS: u64 = 1_795_939_200_000_000_000;

pub struct Built {
    pub wire: Wire,
    pub ios: Vec<IoRecord>,
    pub mtu: usize,
    /// Options the probe needs for this scenario (besides the vantages).
    pub args: Vec<String>,
    /// I/O outcomes the scenario was made to produce, under `args`.
    pub outcomes: Option<IoOutcomes>,
}

/// I/O outcomes of a scenario, as the probe counts them.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, PartialEq, Eq)]
pub struct IoOutcomes {
    pub completed: u64,
    pub timed_out: u64,
    /// I/Os with a packet seen twice at one vantage.
    pub retransmitted: u64,
    /// Command observations (at each vantage) that found the table of pending I/Os full.
    pub overflowed: u64,
}

// ---------------------------------------------------------------------------------------
// NVMe/RDMA: reads, writes with an RDMA READ data phase, in-capsule writes and flushes,
// three hosts and two targets, queue depth > 1, completions out of order, CIDs reused.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IoKind {
    Read,
    Write,
    InCapsule,
    Flush,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Submit,
    AckSqe,
    DataWrite,
    AckData,
    ReadRequest,
    ReadResponses,
    Completion,
    AckCompletion,
}

struct Io {
    conn: usize,
    kind: IoKind,
    len: usize,
    addr: u64,
    rkey: u32,
    invalidate: bool,
    cid: u16,
    sqe: Option<Sent>,
    data_last_psn: u32,
    read_psn: u32,
    cqe: Option<Sent>,
    rec: IoRecord,
}

pub fn nvme(seed: u64) -> Built {
    let mut rng = Rng::new(seed);
    let mut wire = Wire::new(FABRIC_NS);
    let mtu = 4096;
    let hosts = ["10.0.1.1", "10.0.1.2", "10.0.1.3"];
    let targets = ["10.0.2.1", "10.0.2.2"];
    let mut conns = Vec::new();
    for (h, host) in hosts.iter().enumerate() {
        for (t, target) in targets.iter().enumerate() {
            let i = (h * targets.len() + t) as u32;
            conns.push(Conn::new(
                Endpoint::new(host, Side::Compute, 0x100 + i, rng.range(0, 0xFF_FFFF) as u32),
                Endpoint::new(target, Side::Storage, 0x200 + i, rng.range(0, 0xFF_FFFF) as u32),
                mtu,
            ));
        }
    }
    let mut free_cids: Vec<Vec<u16>> = conns.iter().map(|_| (0..64).rev().collect()).collect();
    let mut ios: Vec<Io> = Vec::new();
    let mut queue: BinaryHeap<Reverse<(u64, u64, Step, usize)>> = BinaryHeap::new();
    let mut seq = 0u64;
    let mut schedule = |q: &mut BinaryHeap<_>, t: u64, step: Step, io: usize| {
        seq += 1;
        q.push(Reverse((t, seq, step, io)));
    };
    for (c, conn) in conns.iter().enumerate() {
        let mut t = EPOCH_NS + rng.range(0, 20_000);
        for n in 0..20 {
            let kind = match (n, rng.range(0, 9)) {
                (7, _) => IoKind::Flush,
                (12, _) => IoKind::InCapsule,
                (_, 0..=4) => IoKind::Read,
                (_, 5..=7) => IoKind::Write,
                _ => IoKind::InCapsule,
            };
            let len = match kind {
                IoKind::Read | IoKind::Write => 512 * rng.range(1, 32) as usize,
                // One in-capsule write per connection needs several packets.
                IoKind::InCapsule if n == 12 => 8192,
                IoKind::InCapsule => 512 * rng.range(1, 4) as usize,
                IoKind::Flush => 0,
            };
            let host = conn.a.ip;
            let target = conn.b.ip;
            ios.push(Io {
                conn: c,
                kind,
                len,
                addr: 0x7f00_0000_0000 | (rng.next_u64() & 0xFFFF_F000),
                rkey: rng.next_u64() as u32,
                invalidate: rng.chance(30),
                cid: 0,
                sqe: None,
                data_last_psn: 0,
                read_psn: 0,
                cqe: None,
                rec: IoRecord {
                    op: match kind {
                        IoKind::Read => "nvme_read",
                        IoKind::Write | IoKind::InCapsule => "nvme_write",
                        IoKind::Flush => "nvme_other",
                    },
                    in_capsule: kind == IoKind::InCapsule,
                    host,
                    target,
                    cid: 0,
                    sqe_first: 0,
                    sqe_last: 0,
                    cqe: 0,
                    read_request: None,
                    last_read_response: None,
                },
            });
            schedule(&mut queue, t, Step::Submit, ios.len() - 1);
            t += rng.range(2_000, 25_000);
        }
    }
    let f = FABRIC_NS;
    while let Some(Reverse((t, _, step, i))) = queue.pop() {
        let c = ios[i].conn;
        match step {
            Step::Submit => {
                let Some(cid) = free_cids[c].pop() else {
                    // Queue full: try again shortly.
                    schedule(&mut queue, t + 5_000, Step::Submit, i);
                    continue;
                };
                let io = &mut ios[i];
                io.cid = cid;
                io.rec.cid = cid;
                let sgl = match io.kind {
                    IoKind::InCapsule => Sgl::InCapsule { offset: 0, length: io.len as u32 },
                    _ => Sgl::Keyed {
                        address: io.addr,
                        length: io.len as u32,
                        key: io.rkey,
                        invalidate: io.invalidate,
                    },
                };
                let sqe = Sqe {
                    opcode: match io.kind {
                        IoKind::Read => nvme::opcode::READ,
                        IoKind::Write | IoKind::InCapsule => nvme::opcode::WRITE,
                        IoKind::Flush => nvme::opcode::FLUSH,
                    },
                    flags: nvme::FLAGS_SGL,
                    cid,
                    nsid: 1,
                    sgl,
                    slba: rng.range(0, 1 << 30),
                    nlb: (io.len / 512).saturating_sub(1) as u16,
                };
                let mut capsule =
                    vec![0u8; nvme::SQE_LEN + if io.kind == IoKind::InCapsule { io.len } else { 0 }];
                sqe.emit(&mut capsule);
                for (k, b) in capsule[nvme::SQE_LEN..].iter_mut().enumerate() {
                    *b = (k as u8).wrapping_mul(31);
                }
                let sent = conns[c].message(
                    &mut wire,
                    true,
                    Msg::Send,
                    &capsule,
                    t,
                    None,
                    Role::NvmeCommand,
                    &mut |_| Fate::Delivered,
                );
                io.sqe = Some(sent);
                io.rec.sqe_first = sent.first_index;
                io.rec.sqe_last = sent.last_index;
                let at_target = sent.last_t + f;
                schedule(&mut queue, at_target + 300, Step::AckSqe, i);
                let next = match io.kind {
                    IoKind::Read => (Step::DataWrite, rng.range(20_000, 150_000)),
                    IoKind::Write => (Step::ReadRequest, rng.range(3_000, 15_000)),
                    IoKind::InCapsule | IoKind::Flush => (Step::Completion, rng.range(15_000, 90_000)),
                };
                schedule(&mut queue, at_target + next.1, next.0, i);
            }
            Step::AckSqe => {
                let psn = ios[i].sqe.unwrap().last_psn;
                conns[c].complete_message(false);
                conns[c].ack(&mut wire, false, psn, Aeth::ack(31, 0), t, Fate::Delivered);
            }
            Step::DataWrite => {
                let io = &mut ios[i];
                let data = vec![0xA5u8; io.len];
                let reth = Reth { va: io.addr, rkey: io.rkey, dma_len: io.len as u32 };
                let sent = conns[c].message(
                    &mut wire,
                    false,
                    Msg::Write(reth),
                    &data,
                    t,
                    None,
                    Role::Plain,
                    &mut |_| Fate::Delivered,
                );
                io.data_last_psn = sent.last_psn;
                schedule(&mut queue, sent.last_t + f + 1_000, Step::AckData, i);
                schedule(&mut queue, sent.last_t + 300, Step::Completion, i);
            }
            Step::AckData => {
                let psn = ios[i].data_last_psn;
                conns[c].complete_message(true);
                conns[c].ack(&mut wire, true, psn, Aeth::ack(31, 0), t, Fate::Delivered);
            }
            Step::ReadRequest => {
                let io = &mut ios[i];
                let reth = Reth { va: io.addr, rkey: io.rkey, dma_len: io.len as u32 };
                let (psn, _, index, left) = conns[c].read_request(&mut wire, false, reth, t, Fate::Delivered);
                io.read_psn = psn;
                io.rec.read_request = Some(index);
                schedule(&mut queue, left + f + rng.range(3_000, 12_000), Step::ReadResponses, i);
            }
            Step::ReadResponses => {
                let io = &mut ios[i];
                let data = vec![0x5Au8; io.len];
                let (_, last_t, last_index) = conns[c].read_responses(&mut wire, true, io.read_psn, &data, t);
                io.rec.last_read_response = Some(last_index);
                schedule(&mut queue, last_t + f + rng.range(20_000, 80_000), Step::Completion, i);
            }
            Step::Completion => {
                let io = &mut ios[i];
                let cqe = Cqe {
                    dw0: 0,
                    sq_head: (io.cid + 1) % 64,
                    sq_id: 1 + c as u16 % 4,
                    cid: io.cid,
                    status: 0,
                };
                let mut b = [0u8; nvme::CQE_LEN];
                cqe.emit(&mut b);
                let msg = if io.invalidate && io.kind != IoKind::InCapsule {
                    Msg::SendInvalidate(io.rkey)
                } else {
                    Msg::Send
                };
                let sent =
                    conns[c].message(&mut wire, false, msg, &b, t, None, Role::NvmeCompletion, &mut |_| {
                        Fate::Delivered
                    });
                io.cqe = Some(sent);
                io.rec.cqe = sent.first_index;
                schedule(&mut queue, sent.last_t + f + rng.range(1_000, 6_000), Step::AckCompletion, i);
            }
            Step::AckCompletion => {
                let io = &mut ios[i];
                let psn = io.cqe.unwrap().last_psn;
                conns[c].complete_message(true);
                conns[c].ack(&mut wire, true, psn, Aeth::ack(31, 0), t, Fate::Delivered);
                free_cids[c].push(io.cid);
            }
        }
    }
    Built { wire, ios: ios.into_iter().map(|io| io.rec).collect(), mtu, args: vec![], outcomes: None }
}

// ---------------------------------------------------------------------------------------
// RC traffic under loss and congestion, crossing the fabric between the taps.

fn data(len: usize, fill: u8) -> Vec<u8> {
    vec![fill; len]
}

pub fn rc_loss(seed: u64) -> Built {
    let mut rng = Rng::new(seed);
    let mut wire = Wire::new(FABRIC_NS);
    let mtu = 1024;
    let f = FABRIC_NS;
    let t0 = EPOCH_NS;

    // QP A: WRITE stream host1 -> target1, starting near the PSN wrap. One packet lost in
    // the fabric (NAK + go-back-N), one lost before the compute tap (seen by neither).
    let mut a = Conn::new(
        Endpoint::new("10.0.1.1", Side::Compute, 0x0A01, 0xFF_FFF0),
        Endpoint::new("10.0.2.1", Side::Storage, 0x0B01, 100),
        mtu,
    );
    let mut t = t0;
    let mut k = 0;
    while k < 30 {
        let reth = Reth { va: 0x1000_0000 + k as u64 * 4096, rkey: 0x77, dma_len: 4096 };
        let payload = data(4096, k as u8);
        let lose = match k {
            9 => Some((1, Fate::DroppedInFabric)),
            20 => Some((2, Fate::DroppedBeforeFirstTap)),
            _ => None,
        };
        let sent =
            a.message(
                &mut wire,
                true,
                Msg::Write(reth),
                &payload,
                t,
                None,
                Role::Plain,
                &mut |i| match lose {
                    Some((j, fate)) if i == j => fate,
                    _ => Fate::Delivered,
                },
            );
        if let Some((j, _)) = lose {
            // The next message is already on its way when the target notices the gap.
            let reth2 = Reth { va: reth.va + 4096, ..reth };
            let next = a.message(
                &mut wire,
                true,
                Msg::Write(reth2),
                &data(4096, 0xEE),
                sent.last_t + 100,
                None,
                Role::Plain,
                &mut |_| Fate::Delivered,
            );
            let missing = (sent.first_psn + j as u32) % (1 << 24);
            // The target NAKs the first out-of-sequence packet it receives.
            let nak_at = sent.first_t + (j as u64 + 1) * 400 + f + 500;
            a.ack(&mut wire, false, missing, Aeth::nak(0, 0), nak_at, Fate::Delivered);
            // Go-back-N: the same packets again, from the missing PSN through everything sent
            // since.
            let resend_at = nak_at.max(next.last_t) + f + 2_000;
            let last_t = wire.resend(Side::Compute, sent.first_index + j..=next.last_index, resend_at);
            a.complete_message(false);
            a.complete_message(false);
            a.ack(&mut wire, false, next.last_psn, Aeth::ack(31, 0), last_t + f + 1_000, Fate::Delivered);
            k += 2;
            t = last_t + 20_000;
            continue;
        }
        a.complete_message(false);
        a.ack(&mut wire, false, sent.last_psn, Aeth::ack(31, 0), sent.last_t + f + 1_000, Fate::Delivered);
        t = sent.last_t + rng.range(3_000, 9_000);
        k += 1;
    }

    // QP B: SENDs host2 -> target1; the target is not ready for one (RNR NAK) and the host
    // sends it again after the RNR timer.
    let mut b = Conn::new(
        Endpoint::new("10.0.1.2", Side::Compute, 0x0A02, 5000),
        Endpoint::new("10.0.2.1", Side::Storage, 0x0B02, 9000),
        mtu,
    );
    let mut t = t0 + 1_000;
    for k in 0..20 {
        let payload = data(1500, k as u8);
        let sent =
            b.message(&mut wire, true, Msg::Send, &payload, t, None, Role::Plain, &mut |_| Fate::Delivered);
        if k == 6 || k == 13 {
            let (_, nak_t) = b.ack(
                &mut wire,
                false,
                sent.first_psn,
                Aeth::rnr_nak(14, 0),
                sent.last_t + f + 400,
                Fate::Delivered,
            );
            // After the RNR timer, the same SEND again.
            let last_t = wire.resend(Side::Compute, sent.first_index..=sent.last_index, nak_t + f + 40_000);
            b.complete_message(false);
            b.ack(&mut wire, false, sent.last_psn, Aeth::ack(31, 0), last_t + f + 800, Fate::Delivered);
            t = last_t + 5_000;
            continue;
        }
        b.complete_message(false);
        b.ack(&mut wire, false, sent.last_psn, Aeth::ack(31, 0), sent.last_t + f + 800, Fate::Delivered);
        t = sent.last_t + rng.range(2_000, 6_000);
    }

    // QP C: WRITEs host3 -> target2 through a congested switch: packets CE-marked in the
    // fabric, a few already CE at the compute tap; the target's NIC answers with CNPs.
    let mut c = Conn::new(
        Endpoint::new("10.0.1.3", Side::Compute, 0x0A03, 777),
        Endpoint::new("10.0.2.2", Side::Storage, 0x0B03, 888),
        mtu,
    );
    let mut t = t0 + 2_000;
    for k in 0..25 {
        let reth = Reth { va: 0x2000_0000 + k as u64 * 2048, rkey: 0x99, dma_len: 2048 };
        let marked = k % 4 == 1;
        let sent =
            c.message(&mut wire, true, Msg::Write(reth), &data(2048, 1), t, None, Role::Plain, &mut |_| {
                if marked {
                    Fate::MarkedInFabric
                } else {
                    Fate::Delivered
                }
            });
        if k == 10 {
            // Marked upstream of the compute tap too: CE at both vantages.
            if let crate::sim::Packet::Roce { ecn, .. } = &mut wire.packets[sent.first_index] {
                *ecn = [3, 3];
            }
        }
        if marked || k == 10 {
            c.cnp(&mut wire, false, sent.last_t + f + 300);
        }
        c.complete_message(false);
        c.ack(&mut wire, false, sent.last_psn, Aeth::ack(31, 0), sent.last_t + f + 900, Fate::Delivered);
        t = sent.last_t + rng.range(2_000, 5_000);
    }

    // QP D: RDMA READs host1 -> target2 of 3 KiB + 100 B: each request reserves 4 PSNs; the
    // requester's PSNs wrap at 2^24.
    let mut d = Conn::new(
        Endpoint::new("10.0.1.1", Side::Compute, 0x0A04, 0xFF_FFF4),
        Endpoint::new("10.0.2.2", Side::Storage, 0x0B04, 1),
        mtu,
    );
    let mut t = t0 + 3_000;
    for k in 0..12 {
        let len = 3 * mtu + 100;
        let reth = Reth { va: 0x3000_0000 + k as u64 * 8192, rkey: 0x55, dma_len: len as u32 };
        let (psn, _, _, left) = d.read_request(&mut wire, true, reth, t, Fate::Delivered);
        let (_, last_t, _) =
            d.read_responses(&mut wire, false, psn, &data(len, 9), left + f + rng.range(4_000, 9_000));
        t = last_t + f + rng.range(1_000, 3_000);
    }
    Built { wire, ios: Vec::new(), mtu, args: vec![], outcomes: None }
}

// ---------------------------------------------------------------------------------------
// Everything else the decoder must know: IPv6, QinQ, UC, UD, XRC, atomics, immediate
// data, a CM handshake, and non-RoCE noise.

fn spec(src: &str, dst: &str, opcode: u8, qpn: u32, psn: u32, ext: ExtHeaders, payload: Vec<u8>) -> Spec {
    Spec {
        src: src.parse().unwrap(),
        dst: dst.parse().unwrap(),
        vlans: Vec::new(),
        ecn: 0b10,
        udp_src_port: 50000,
        bth: bth::Repr { opcode, pkey: 0xFFFF, dest_qp: qpn, psn, ..Default::default() },
        ext,
        payload,
        role: Role::Plain,
        corrupt_icrc: false,
    }
}

fn cm_mad(msg: CmMessage, tid: u64) -> Vec<u8> {
    let mut m = vec![0u8; MAD_LEN];
    msg.emit(tid, &mut m);
    m
}

pub fn misc(seed: u64) -> Built {
    let mut rng = Rng::new(seed);
    let mut wire = Wire::new(FABRIC_NS);
    let mtu = 1024;
    let mut t = EPOCH_NS;
    let mut step = |rng: &mut Rng| {
        t += rng.range(500, 3_000);
        t
    };
    let (host, target) = ("10.0.1.7", "10.0.2.7");

    // A CM handshake for an NVMe-oF connection, then RC traffic on the QPs it names.
    let req = Req {
        local_comm_id: 0x1111_2222,
        service_id: Req::rdma_cm_service_id(NVME_OF_PORT),
        local_ca_guid: 0x0002_c903_00ab_cdef,
        local_qkey: 0,
        local_qpn: 0x0C01,
        starting_psn: 4242,
        pkey: 0xFFFF,
        path_mtu: 3,
        ip: Some(RdmaCmIp { src_port: 51000, src: host.parse().unwrap(), dst: target.parse().unwrap() }),
    };
    let rep = Rep {
        local_comm_id: 0x3333_4444,
        remote_comm_id: 0x1111_2222,
        local_qkey: 0,
        local_qpn: 0x0D01,
        starting_psn: 777,
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
    Built { wire, ios: Vec::new(), mtu, args: vec![], outcomes: None }
}

// ---------------------------------------------------------------------------------------
// Malformed frames of every kind, interleaved with the intact `misc` traffic.

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

// ---------------------------------------------------------------------------------------
// NVMe I/Os that go wrong: completions that never come (timeouts), capsules lost in the
// fabric and sent again (retransmitted I/Os), and a burst of commands larger than the
// probe's table of pending I/Os (overflow), with `--io-timeout 500us --max-ios 8`.

const FAULT_TIMEOUT: &str = "500us";
const FAULT_MAX_IOS: u64 = 8;

/// One read I/O, one at a time on the connection. Returns when it is over.
#[allow(clippy::too_many_arguments)]
fn read_io(
    wire: &mut Wire,
    c: &mut Conn,
    t: u64,
    cid: u16,
    lose_sqe: bool,
    complete: bool,
    lose_cqe: bool,
) -> u64 {
    let f = FABRIC_NS;
    let addr = 0x7f00_1000_0000 + u64::from(cid) * 0x10000;
    let sqe = Sqe {
        opcode: nvme::opcode::READ,
        flags: nvme::FLAGS_SGL,
        cid,
        nsid: 1,
        sgl: Sgl::Keyed { address: addr, length: 4096, key: 0xABC0 + u32::from(cid), invalidate: false },
        slba: 8 * u64::from(cid),
        nlb: 7,
    };
    let mut b = [0u8; nvme::SQE_LEN];
    sqe.emit(&mut b);
    let fate = if lose_sqe { Fate::DroppedInFabric } else { Fate::Delivered };
    let sent = c.message(wire, true, Msg::Send, &b, t, None, Role::NvmeCommand, &mut |_| fate);
    let mut at_target = sent.last_t + f;
    if lose_sqe {
        // No ACK comes: the host's transport timer sends the same packet again.
        let again = wire.resend(Side::Compute, sent.first_index..=sent.last_index, sent.last_t + 50_000);
        at_target = again + f;
    }
    c.complete_message(false);
    c.ack(wire, false, sent.last_psn, Aeth::ack(31, 0), at_target + 300, Fate::Delivered);
    if !complete {
        return at_target + 1_000;
    }
    let reth = Reth { va: addr, rkey: 0xABC0 + u32::from(cid), dma_len: 4096 };
    let data = c.message(
        wire,
        false,
        Msg::Write(reth),
        &[0x11; 4096],
        at_target + 30_000,
        None,
        Role::Plain,
        &mut |_| Fate::Delivered,
    );
    c.complete_message(true);
    c.ack(wire, true, data.last_psn, Aeth::ack(31, 0), data.last_t + f + 1_000, Fate::Delivered);
    let mut cb = [0u8; nvme::CQE_LEN];
    Cqe { cid, sq_head: cid + 1, sq_id: 1, ..Default::default() }.emit(&mut cb);
    let fate = if lose_cqe { Fate::DroppedInFabric } else { Fate::Delivered };
    let cqe =
        c.message(wire, false, Msg::Send, &cb, data.last_t + 300, None, Role::NvmeCompletion, &mut |_| fate);
    let mut at_host = cqe.last_t + f;
    if lose_cqe {
        let again = wire.resend(Side::Storage, cqe.first_index..=cqe.last_index, cqe.last_t + 100_000);
        at_host = again + f;
    }
    c.complete_message(true);
    let (_, acked) = c.ack(wire, true, cqe.last_psn, Aeth::ack(31, 0), at_host + 3_000, Fate::Delivered);
    acked + 5_000
}

pub fn nvme_faults(seed: u64) -> Built {
    let mut rng = Rng::new(seed);
    let mut wire = Wire::new(FABRIC_NS);
    let mut c = Conn::new(
        Endpoint::new("10.0.1.9", Side::Compute, 0x0301, rng.range(0, 0xFF_FFFF) as u32),
        Endpoint::new("10.0.2.9", Side::Storage, 0x0401, rng.range(0, 0xFF_FFFF) as u32),
        4096,
    );
    let mut t = EPOCH_NS;
    let mut out = IoOutcomes::default();
    // (lose the SQE, complete at all, lose the CQE), one I/O each, CIDs 0..
    let plan = [
        (false, true, false),
        (false, false, false), // never completes
        (true, true, false),   // SQE lost in the fabric, resent
        (false, true, false),
        (false, false, false), // never completes
        (false, true, true),   // CQE lost in the fabric, resent
        (false, true, false),
        (false, true, true),   // CQE lost in the fabric, resent
        (false, false, false), // never completes
        (false, true, false),
    ];
    for (cid, &(lose_sqe, complete, lose_cqe)) in plan.iter().enumerate() {
        t = read_io(&mut wire, &mut c, t, cid as u16, lose_sqe, complete, lose_cqe) + rng.range(1_000, 5_000);
        out.completed += u64::from(complete);
        out.timed_out += u64::from(!complete);
        out.retransmitted += u64::from(lose_sqe || lose_cqe);
    }
    // The burst, well after the timeouts: 12 in-capsule writes back to back on another queue
    // pair, completed only after all are sent. The probe follows 8 (at each vantage the
    // first 8 it sees) and counts the other 4 at each of the two vantages.
    let mut w = Conn::new(
        Endpoint::new("10.0.1.9", Side::Compute, 0x0302, rng.range(0, 0xFF_FFFF) as u32),
        Endpoint::new("10.0.2.9", Side::Storage, 0x0402, rng.range(0, 0xFF_FFFF) as u32),
        4096,
    );
    let mut t = t + 2_000_000;
    let burst = 12u16;
    let mut sent = Vec::new();
    for cid in 0..burst {
        let sqe = Sqe {
            opcode: nvme::opcode::WRITE,
            flags: nvme::FLAGS_SGL,
            cid,
            nsid: 1,
            sgl: Sgl::InCapsule { offset: 0, length: 512 },
            slba: u64::from(cid),
            nlb: 0,
        };
        let mut b = vec![0u8; nvme::SQE_LEN + 512];
        sqe.emit(&mut b);
        let s =
            w.message(&mut wire, true, Msg::Send, &b, t, None, Role::NvmeCommand, &mut |_| Fate::Delivered);
        sent.push(s);
        t = s.last_t + 200;
    }
    let mut t = t + FABRIC_NS + 50_000;
    for (cid, s) in sent.iter().enumerate() {
        w.complete_message(false);
        w.ack(&mut wire, false, s.last_psn, Aeth::ack(31, 0), t, Fate::Delivered);
        let mut cb = [0u8; nvme::CQE_LEN];
        Cqe { cid: cid as u16, sq_head: cid as u16 + 1, sq_id: 2, ..Default::default() }.emit(&mut cb);
        let cqe =
            w.message(&mut wire, false, Msg::Send, &cb, t + 500, None, Role::NvmeCompletion, &mut |_| {
                Fate::Delivered
            });
        w.complete_message(true);
        w.ack(
            &mut wire,
            true,
            cqe.last_psn,
            Aeth::ack(31, 0),
            cqe.last_t + FABRIC_NS + 2_000,
            Fate::Delivered,
        );
        t = cqe.last_t + 3_000;
    }
    out.completed += FAULT_MAX_IOS;
    out.overflowed += (u64::from(burst) - FAULT_MAX_IOS) * 2;
    let args =
        vec!["--io-timeout".into(), FAULT_TIMEOUT.into(), "--max-ios".into(), FAULT_MAX_IOS.to_string()];
    Built { wire, ios: Vec::new(), mtu: 4096, args, outcomes: Some(out) }
}
