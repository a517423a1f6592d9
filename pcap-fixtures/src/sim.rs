//! The wire model behind the scenarios. Hosts sit on the compute side of the fabric,
//! targets on the storage side; a packet crossing the fabric passes the compute tap and the
//! storage tap in the order of its direction, `fabric_ns` apart. A packet can be dropped
//! before the first tap (seen nowhere), in the fabric (seen at the first tap only), and
//! CE-marked in the fabric (ECT at the first tap, CE at the second).

use roceprobe::wire::bth;
use roceprobe::wire::build::RoceFrame;
use roceprobe::wire::ib_ext::ExtHeaders;
use std::net::IpAddr;

pub const COMPUTE: usize = 0;
pub const STORAGE: usize = 1;

/// Where a host sits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Compute,
    Storage,
}

impl Side {
    pub fn tap(self) -> usize {
        match self {
            Side::Compute => COMPUTE,
            Side::Storage => STORAGE,
        }
    }
}

/// What a packet is, for the truth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Role {
    Plain,
    /// The first packet of an NVMe/RDMA command capsule (SQE).
    NvmeCommand,
    /// An NVMe/RDMA completion capsule (CQE).
    NvmeCompletion,
    /// A CNP: the flow it throttles (src, dst, dst QPN of the throttled direction).
    Cnp {
        throttled_src: IpAddr,
        throttled_dst: IpAddr,
        throttled_qpn: u32,
    },
}

/// A RoCEv2 packet as the sender put it on the wire.
#[derive(Debug, Clone)]
pub struct Spec {
    pub src: IpAddr,
    pub dst: IpAddr,
    pub vlans: Vec<u16>,
    pub ecn: u8,
    pub udp_src_port: u16,
    pub bth: bth::Repr,
    pub ext: ExtHeaders,
    pub payload: Vec<u8>,
    pub role: Role,
    /// Sent with a wrong ICRC (a bit flipped on a bad link after the CRC was computed).
    pub corrupt_icrc: bool,
}

impl Spec {
    /// The frame as seen at a tap (ECN may have been marked on the way).
    pub fn frame(&self, ecn: u8) -> Vec<u8> {
        let mut f = RoceFrame::new(self.src, self.dst, self.bth);
        f.vlans = &self.vlans;
        f.ecn = ecn;
        f.udp_src_port = self.udp_src_port;
        f.ext = self.ext;
        f.payload = &self.payload;
        let mut frame = f.emit();
        if self.corrupt_icrc {
            let n = frame.len();
            frame[n - 1] ^= 0x5A;
        }
        frame
    }
}

/// One packet on the wire and when each tap saw it.
#[derive(Debug, Clone)]
#[allow(clippy::large_enum_variant)] // generator-side, a few thousand packets
pub enum Packet {
    Roce {
        spec: Spec,
        seen: [Option<u64>; 2],
        ecn: [u8; 2],
    },
    /// Any other frame (noise, or a frame made malformed on purpose), with the decode
    /// error kind it must be counted under, if any.
    Raw {
        frame: Vec<u8>,
        seen: [Option<u64>; 2],
        error: Option<&'static str>,
    },
}

impl Packet {
    pub fn seen(&self) -> [Option<u64>; 2] {
        match self {
            Packet::Roce { seen, .. } | Packet::Raw { seen, .. } => *seen,
        }
    }
}

/// How a packet fares on its way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Fate {
    #[default]
    Delivered,
    /// Lost before the first tap: no vantage sees it.
    DroppedBeforeFirstTap,
    /// Lost in the fabric: only the first tap sees it.
    DroppedInFabric,
    /// CE-marked by a switch in the fabric.
    MarkedInFabric,
}

/// The packets of a scenario, in the order they were created.
#[derive(Debug, Default)]
pub struct Wire {
    pub packets: Vec<Packet>,
    /// Fabric delay between the taps.
    pub fabric_ns: u64,
}

impl Wire {
    pub fn new(fabric_ns: u64) -> Self {
        Self { packets: Vec::new(), fabric_ns }
    }

    /// Puts `spec`, sent by a host on `from`, on the wire at time `t` (at the first tap).
    pub fn send(&mut self, from: Side, spec: Spec, t: u64, fate: Fate) {
        let first = from.tap();
        let second = 1 - first;
        let mut seen = [None, None];
        let mut ecn = [spec.ecn; 2];
        match fate {
            Fate::DroppedBeforeFirstTap => {}
            Fate::DroppedInFabric => seen[first] = Some(t),
            Fate::Delivered => {
                seen[first] = Some(t);
                seen[second] = Some(t + self.fabric_ns);
            }
            Fate::MarkedInFabric => {
                seen[first] = Some(t);
                seen[second] = Some(t + self.fabric_ns);
                ecn[second] = 3;
            }
        }
        self.packets.push(Packet::Roce { spec, seen, ecn });
    }

    /// Sends the RoCE packets `indices` again, unchanged (same PSNs and opcodes), from
    /// time `t`, one after the other: a retransmission. Returns when the last one left.
    pub fn resend(&mut self, from: Side, indices: std::ops::RangeInclusive<usize>, t: u64) -> u64 {
        let mut t = t;
        let mut last = t;
        for i in indices {
            if let Packet::Roce { spec, .. } = &self.packets[i] {
                let spec = spec.clone();
                let len = spec.payload.len();
                self.send(from, spec, t, Fate::Delivered);
                last = t;
                t += crate::conn::serialization_ns(len);
            }
        }
        last
    }

    /// A frame that is not a modelled RoCE packet, seen at `tap` only.
    pub fn raw(&mut self, tap: usize, frame: Vec<u8>, t: u64, error: Option<&'static str>) {
        let mut seen = [None, None];
        seen[tap] = Some(t);
        self.packets.push(Packet::Raw { frame, seen, error });
    }
}
