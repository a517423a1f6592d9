//! RC traffic under loss and congestion, crossing the fabric between the taps.

use super::*;
use crate::conn::{Conn, Endpoint, Msg};
use crate::rng::Rng;
use crate::sim::{Fate, Role, Side, Wire};
use roceprobe::wire::ib_ext::{Aeth, Reth};

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
    Built { wire, ios: Vec::new(), mtu, args: vec![], outcomes: None, collectives: None }
}
