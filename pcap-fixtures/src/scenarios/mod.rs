//! The scenarios: each builds a wire (every packet, when each tap saw it) and the I/O
//! records that anchor latencies. Deterministic functions of their seed. One file per
//! scenario family; the helpers they share are here.

mod collective;
mod corrupted;
mod faults;
mod misc;
mod nvme;
mod rc_loss;

pub use collective::collective;
pub use corrupted::{corrupted, malformed_frames};
pub use faults::nvme_faults;
pub use misc::misc;
pub use nvme::{nvme, nvme_silent};
pub use rc_loss::rc_loss;

use crate::sim::{Role, Spec, Wire};
use crate::truth::IoRecord;
use roceprobe::wire::bth;
use roceprobe::wire::cm::{CmMessage, MAD_LEN};
use roceprobe::wire::ib_ext::ExtHeaders;

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
    /// The collectives' connections and the hosts the scenario held back, for the truth about
    /// jobs and steps (scenarios with collectives only).
    pub collectives: Option<crate::truth::collective::Collectives>,
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

// Helpers the families share.

fn data(len: usize, fill: u8) -> Vec<u8> {
    vec![fill; len]
}

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
