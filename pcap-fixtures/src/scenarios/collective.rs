//! Collective communication: two training jobs side by side, each a ring all-reduce over RC
//! RDMA WRITEs repeated step after step with a pause for compute in between. In some steps
//! one host is held back (a packet lost in the fabric, congestion, or the host itself) and
//! finishes last: the straggler the truth names (`truth::collective`).
//!
//! - Job A: 8 hosts, 10.1.0.1-10.1.0.8, 30 steps 4-8 ms apart. Host i writes to host i+1
//!   (mod 8) over its own RC QP, acknowledged per chunk. Steps 4-9 hold a host back by loss,
//!   12-17 by congestion, 20-25 by a slow host (three hosts for two steps each); the other
//!   12 steps hold no one back.
//! - Job B: 4 other hosts, 10.2.0.1-10.2.0.4, 36 steps 4.5-5.5 ms apart over the same time:
//!   a slow host in steps 8-9, loss in 20-21, congestion in 28-29.
//!
//! In a step each rank writes 2(N - 1) chunks (the reduce-scatter, then the all-gather), one
//! WRITE of 128 bytes each (small, so the capture stays small), 2-5 µs apart: one
//! transmission per flow per step. Ranks start within 3 µs of each other; a held-back host
//! finishes 150-400 µs after the others, far beyond the few µs the others differ by. Each
//! rank is paced by its own clock: the ring's data dependencies are not modelled, so the
//! delay shows on the held-back host's flow alone, as the straggler analysis needs.
//!
//! Every host sits on the compute side: a packet passes the compute tap as it leaves its
//! host and the storage tap 2 µs later in the fabric (`sim.rs`), in both directions.

use super::*;
use crate::conn::{serialization_ns, Conn, Endpoint, Msg, Sent};
use crate::rng::Rng;
use crate::sim::{Fate, Packet, Role, Side, Wire};
use crate::truth::collective::{Cause, Collectives, Injection, QpPair};
use roceprobe::wire::ib_ext::{Aeth, Reth};

const MTU: usize = 1024;
/// Bytes of one chunk (one RDMA WRITE).
const CHUNK: usize = 128;

/// Job A's held-back hosts: (step, rank, cause).
const JOB_A_HELD: [(usize, usize, Cause); 18] = [
    (4, 2, Cause::Loss),
    (5, 2, Cause::Loss),
    (6, 5, Cause::Loss),
    (7, 5, Cause::Loss),
    (8, 7, Cause::Loss),
    (9, 7, Cause::Loss),
    (12, 4, Cause::Congestion),
    (13, 4, Cause::Congestion),
    (14, 1, Cause::Congestion),
    (15, 1, Cause::Congestion),
    (16, 6, Cause::Congestion),
    (17, 6, Cause::Congestion),
    (20, 3, Cause::SlowHost),
    (21, 3, Cause::SlowHost),
    (22, 0, Cause::SlowHost),
    (23, 0, Cause::SlowHost),
    (24, 7, Cause::SlowHost),
    (25, 7, Cause::SlowHost),
];
const JOB_A: Plan = Plan { steps: 30, pause: (4_000_000, 8_000_000), held: &JOB_A_HELD };

/// Job B's held-back hosts.
const JOB_B_HELD: [(usize, usize, Cause); 6] = [
    (8, 2, Cause::SlowHost),
    (9, 2, Cause::SlowHost),
    (20, 1, Cause::Loss),
    (21, 1, Cause::Loss),
    (28, 3, Cause::Congestion),
    (29, 3, Cause::Congestion),
];
const JOB_B: Plan = Plan { steps: 36, pause: (4_500_000, 5_500_000), held: &JOB_B_HELD };

/// A ring: `conns[i]` carries rank i's WRITEs to rank i + 1 (mod N), `a` being rank i.
struct Ring {
    conns: Vec<Conn>,
    /// Where each connection's next WRITE lands in the remote buffer.
    offset: Vec<u64>,
    rkey: u32,
}

impl Ring {
    /// A ring over `hosts`; rank i's QP is `qpn_base + i`, the QP that receives it on rank
    /// i + 1 is `qpn_base + 0x80 + i`.
    fn new(hosts: &[String], qpn_base: u32, rkey: u32, rng: &mut Rng, first_psns: &[(usize, u32)]) -> Self {
        let n = hosts.len();
        let conns = (0..n)
            .map(|i| {
                let psn = first_psns
                    .iter()
                    .find(|(r, _)| *r == i)
                    .map_or_else(|| rng.range(0, 0xFF_FFFF) as u32, |(_, p)| *p);
                Conn::new(
                    Endpoint::new(&hosts[i], Side::Compute, qpn_base + i as u32, psn),
                    Endpoint::new(&hosts[(i + 1) % n], Side::Compute, qpn_base + 0x80 + i as u32, 1),
                    MTU,
                )
            })
            .collect();
        Self { conns, offset: vec![0; n], rkey }
    }

    fn ranks(&self) -> usize {
        self.conns.len()
    }

    /// Chunks each rank writes per step.
    fn chunks(&self) -> usize {
        2 * (self.ranks() - 1)
    }

    fn pairs(&self) -> Vec<QpPair> {
        self.conns
            .iter()
            .map(|c| QpPair {
                requester: c.a.ip,
                requester_qpn: c.a.qpn,
                responder: c.b.ip,
                responder_qpn: c.b.qpn,
            })
            .collect()
    }

    /// One chunk from rank `r` at `t`.
    fn write(&mut self, r: usize, wire: &mut Wire, t: u64, fate: Fate) -> Sent {
        let reth =
            Reth { va: 0x7f00_0000_0000 + self.offset[r], rkey: self.rkey + r as u32, dma_len: CHUNK as u32 };
        self.offset[r] = (self.offset[r] + CHUNK as u64) % (64 << 20);
        let fill = (self.offset[r] / CHUNK as u64) as u8;
        self.conns[r].message(
            wire,
            true,
            Msg::Write(reth),
            &data(CHUNK, fill),
            t,
            None,
            Role::Plain,
            &mut |_| fate,
        )
    }

    /// The responder of rank `r`'s QP acknowledges everything up to `psn` at `t`.
    fn ack(&mut self, r: usize, wire: &mut Wire, psn: u32, t: u64) {
        self.conns[r].complete_message(false);
        self.conns[r].ack(wire, false, psn, Aeth::ack(31, 0), t, Fate::Delivered);
    }

    /// Rank `r`'s chunks of a step from `start`, held back by `cause` if any (`upstream`: a
    /// congestion mark already at the compute tap). Returns the index of its first packet and
    /// the time its last packet left.
    fn rank_step(
        &mut self,
        r: usize,
        wire: &mut Wire,
        rng: &mut Rng,
        start: u64,
        cause: Option<Cause>,
        upstream: bool,
    ) -> (usize, u64) {
        let f = FABRIC_NS;
        let chunks = self.chunks();
        // A loss takes a chunk with at least two after it.
        let lost = match cause {
            Some(Cause::Loss) => Some(rng.range(1, chunks as u64 - 3) as usize),
            _ => None,
        };
        let congested = cause == Some(Cause::Congestion);
        let mut t = start;
        let mut first = None;
        let mut finish = start;
        let mut c = 0;
        while c < chunks {
            let fate = if Some(c) == lost {
                Fate::DroppedInFabric
            } else if congested && c % 4 == 0 {
                Fate::MarkedInFabric
            } else {
                Fate::Delivered
            };
            let sent = self.write(r, wire, t, fate);
            first.get_or_insert(sent.first_index);
            finish = sent.last_t;
            if Some(c) == lost {
                // The next chunk reaches the receiver out of sequence: it answers with a NAK
                // (PSN sequence error) for the lost one and drops the next.
                let next = self.write(r, wire, sent.last_t + rng.range(2_000, 5_000), Fate::Delivered);
                let (_, nak_t) = self.conns[r].ack(
                    wire,
                    false,
                    sent.first_psn,
                    Aeth::nak(0, 0),
                    next.last_t + f + 500,
                    Fate::Delivered,
                );
                // The requester goes back to the lost PSN after its recovery (150-300 µs:
                // the NIC's retransmission path), resends both chunks (go-back-N) and
                // carries on.
                let mut at = nak_t + f + rng.range(150_000, 300_000);
                for s in [sent, next] {
                    finish = wire.resend(Side::Compute, s.first_index..=s.last_index, at);
                    at = finish + serialization_ns(CHUNK);
                }
                self.conns[r].a.busy_until = at;
                self.conns[r].complete_message(false);
                self.ack(r, wire, next.last_psn, finish + f + rng.range(600, 1_500));
                t = finish + rng.range(2_000, 5_000);
                c += 2;
                continue;
            }
            if fate == Fate::MarkedInFabric {
                if upstream && c == 0 {
                    // Marked upstream of the compute tap too: CE at both taps.
                    if let Packet::Roce { ecn, .. } = &mut wire.packets[sent.first_index] {
                        *ecn = [3, 3];
                    }
                }
                // The receiver's NIC answers a marked packet with a CNP.
                self.conns[r].cnp(wire, false, sent.last_t + f + 300);
            }
            self.ack(r, wire, sent.last_psn, sent.last_t + f + rng.range(600, 1_500));
            // Throttled by the first CNP, the sender spaces its chunks out.
            t = sent.last_t + if congested { rng.range(25_000, 40_000) } else { rng.range(2_000, 5_000) };
            c += 1;
        }
        (first.expect("a step sends chunks"), finish)
    }

    /// A step of the ring from `t0`; `held` holds rank `.0` back by `.1`. Returns the time
    /// the last chunk left and the held-back rank's first packet.
    fn step(
        &mut self,
        wire: &mut Wire,
        rng: &mut Rng,
        t0: u64,
        held: Option<(usize, Cause)>,
        upstream: bool,
    ) -> (u64, Option<usize>) {
        let mut end = t0;
        let mut held_first = None;
        for r in 0..self.ranks() {
            let cause = held.filter(|h| h.0 == r).map(|h| h.1);
            let mut start = t0 + rng.range(0, 3_000);
            if cause == Some(Cause::SlowHost) {
                // Its compute took longer: it starts writing late.
                start += rng.range(150_000, 400_000);
            }
            let (first, finish) = self.rank_step(r, wire, rng, start, cause, upstream);
            if cause.is_some() {
                held_first = Some(first);
            }
            end = end.max(finish);
        }
        (end, held_first)
    }
}

/// A job's schedule: its steps, the compute pause between one step's end and the next
/// one's start (a range, in ns), and the hosts it holds back: (step, rank, cause).
struct Plan {
    steps: usize,
    pause: (u64, u64),
    held: &'static [(usize, usize, Cause)],
}

/// Runs a job's steps from `t0`; records the held-back hosts in `injections`.
fn run(
    ring: &mut Ring,
    wire: &mut Wire,
    rng: &mut Rng,
    t0: u64,
    plan: &Plan,
    injections: &mut Vec<Injection>,
) {
    let mut t = t0;
    let mut congested = 0;
    for k in 0..plan.steps {
        let h = plan.held.iter().find(|h| h.0 == k).map(|&(_, r, cause)| (r, cause));
        // Every other congested step has a mark upstream of the compute tap.
        let upstream = h.is_some_and(|h| h.1 == Cause::Congestion) && {
            congested += 1;
            congested % 2 == 0
        };
        let (end, first) = ring.step(wire, rng, t, h, upstream);
        if let (Some((r, cause)), Some(first_packet)) = (h, first) {
            injections.push(Injection { host: ring.conns[r].a.ip, cause, step: k, first_packet });
        }
        t = end + rng.range(plan.pause.0, plan.pause.1);
    }
}

pub fn collective(seed: u64) -> Built {
    let mut rng = Rng::new(seed);
    let mut wire = Wire::new(FABRIC_NS);
    let a_hosts: Vec<String> = (1..=8).map(|i| format!("10.1.0.{i}")).collect();
    let b_hosts: Vec<String> = (1..=4).map(|i| format!("10.2.0.{i}")).collect();
    // Rank 2 of job A starts 64 PSNs before the wrap: its PSNs wrap in step 4, a loss step.
    let mut a = Ring::new(&a_hosts, 0x100, 0xA000, &mut rng, &[(2, 0xFF_FFC0)]);
    let mut b = Ring::new(&b_hosts, 0x200, 0xB000, &mut rng, &[]);
    let mut injections = Vec::new();
    let t0 = EPOCH_NS;
    run(&mut a, &mut wire, &mut rng, t0, &JOB_A, &mut injections);
    run(&mut b, &mut wire, &mut rng, t0 + 1_300_000, &JOB_B, &mut injections);
    let mut connections = a.pairs();
    connections.extend(b.pairs());
    Built {
        wire,
        ios: Vec::new(),
        mtu: MTU,
        args: vec![],
        outcomes: None,
        collectives: Some(Collectives { connections, injections }),
    }
}
