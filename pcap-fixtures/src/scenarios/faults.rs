//! NVMe I/Os that go wrong: completions that never come (timeouts), capsules lost in the
//! fabric and sent again (retransmitted I/Os), and a burst of commands larger than the
//! probe's table of pending I/Os (overflow), with `--io-timeout 500us --max-ios 8`.

use super::*;
use crate::conn::{Conn, Endpoint, Msg};
use crate::rng::Rng;
use crate::sim::{Fate, Role, Side, Wire};
use roceprobe::wire::ib_ext::{Aeth, Reth};
use roceprobe::wire::nvme::{self, Cqe, Sgl, Sqe};

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
    Built { wire, ios: Vec::new(), mtu: 4096, args, outcomes: Some(out), collectives: None }
}
