//! NVMe/RDMA: reads, writes with an RDMA READ data phase, in-capsule writes and flushes,
//! three hosts and two targets, queue depth > 1, completions out of order, CIDs reused.

use super::*;
use crate::conn::{Conn, Endpoint, Msg, Sent};
use crate::rng::Rng;
use crate::sim::{Fate, Role, Side, Wire};
use crate::truth::IoRecord;
use roceprobe::wire::ib_ext::{Aeth, Reth};
use roceprobe::wire::nvme::{self, Cqe, Sgl, Sqe};
use std::cmp::Reverse;
use std::collections::BinaryHeap;

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
    nvme_with_pause(seed, 0)
}

/// The same I/Os, each connection silent for 10 s before its eleventh: what ends each
/// connection's first ten has long finished, and a switch's nanosecond timestamp wraps
/// twice and more in that time.
pub fn nvme_silent(seed: u64) -> Built {
    nvme_with_pause(seed, 10_000_000_000)
}

fn nvme_with_pause(seed: u64, pause_ns: u64) -> Built {
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
            if n == 10 {
                t += pause_ns;
            }
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
                    target_qpn: conn.b.qpn,
                    cid: 0,
                    bytes: len as u32,
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
    Built {
        wire,
        ios: ios.into_iter().map(|io| io.rec).collect(),
        mtu,
        args: vec![],
        outcomes: None,
        collectives: None,
    }
}
