//! Delivery: how the two taps reach the probe, and what the probe receives: the frames of
//! each capture file in capture order, each with the tap it came from and the time the
//! probe will assign to it.

use crate::sim::{Packet, Wire, COMPUTE, STORAGE};
use roceprobe::wire::build::erspan_wrap;
use roceprobe::wire::erspan::{self, Granularity};
use std::net::Ipv4Addr;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// One file; each tap's frames carry an extra outer VLAN tag (RSPAN-style).
    Vlan { compute: u16, storage: u16 },
    /// One file per tap (compute first).
    Split,
    /// Only the compute tap, in one file (a probe with one vantage).
    ComputeOnly,
    /// One file of ERSPAN-encapsulated mirrors, one session per tap. Type III carries the
    /// switch's timestamp (100 ns units, each switch with its own clock offset); the
    /// mirror path adds `mirror_ns[tap]` before capture.
    Erspan { erspan_type: u8, sessions: [u16; 2], clock_offset_ns: [u64; 2], mirror_ns: [u64; 2] },
}

/// One frame as the probe receives it.
#[derive(Debug, Clone)]
pub struct Delivered {
    pub file: usize,
    pub capture_ns: u64,
    pub frame: Vec<u8>,
    pub wire_len: u32,
    /// Which tap, and which packet of the wire.
    pub tap: usize,
    pub packet: usize,
    /// The time the probe will give the packet, up to a constant per tap (for ERSPAN III,
    /// the switch clock quantised to 100 ns).
    pub probe_ns: u64,
}

/// Inserts an outer 802.1Q tag into a frame.
pub fn tag(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(frame.len() + 4);
    f.extend_from_slice(&frame[..12]);
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&((3u16 << 13) | vid).to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

impl Delivery {
    pub fn files(&self) -> usize {
        match self {
            Delivery::Split => 2,
            _ => 1,
        }
    }

    pub fn taps(&self) -> &'static [usize] {
        match self {
            Delivery::ComputeOnly => &[COMPUTE],
            _ => &[COMPUTE, STORAGE],
        }
    }

    /// The `--vantage` options that tell the probe which traffic is which tap.
    pub fn vantage_args(&self) -> Vec<String> {
        match self {
            Delivery::Vlan { compute, storage } => {
                vec![format!("compute=vlan:{compute}"), format!("storage=vlan:{storage}")]
            }
            Delivery::Split => vec!["storage=file:1".into()],
            Delivery::ComputeOnly => vec![],
            Delivery::Erspan { sessions, .. } => {
                vec![format!("compute=erspan:{}", sessions[0]), format!("storage=erspan:{}", sessions[1])]
            }
        }
        .into_iter()
        .flat_map(|v| ["--vantage".to_string(), v])
        .collect()
    }

    /// Renders the wire as the probe receives it, each file in capture order.
    pub fn render(&self, wire: &Wire) -> Vec<Delivered> {
        let mut out = Vec::new();
        let mut seq = [0u32; 2];
        for (index, p) in wire.packets.iter().enumerate() {
            for &tap in self.taps() {
                let Some(t) = p.seen()[tap] else { continue };
                let frame = match p {
                    Packet::Roce { spec, ecn, .. } => spec.frame(ecn[tap]),
                    Packet::Raw { frame, .. } => frame.clone(),
                };
                let wire_len = frame.len() as u32;
                let (file, capture_ns, frame, probe_ns) = match *self {
                    Delivery::Vlan { compute, storage } => {
                        let f = tag(&frame, if tap == COMPUTE { compute } else { storage });
                        (0, t, f, t)
                    }
                    Delivery::Split => (tap, t, frame, t),
                    Delivery::ComputeOnly => (0, t, frame, t),
                    Delivery::Erspan { erspan_type, sessions, clock_offset_ns, mirror_ns } => {
                        let switch_ns = t + clock_offset_ns[tap];
                        let h = erspan::Repr {
                            erspan_type,
                            vlan: 0,
                            cos: 0,
                            session: sessions[tap],
                            index: tap as u32,
                            timestamp: (switch_ns / 100) as u32,
                            granularity: Granularity::Nanos100,
                            hw_id: 1,
                            platform: None,
                        };
                        seq[tap] = seq[tap].wrapping_add(1);
                        let switch = Ipv4Addr::new(192, 168, 100, 1 + tap as u8);
                        let f = erspan_wrap(&frame, &h, switch, Ipv4Addr::new(192, 168, 100, 10), seq[tap]);
                        let capture = t + mirror_ns[tap];
                        // Type III: the probe uses the switch clock (100 ns ticks).
                        let probe = if erspan_type == 3 { (switch_ns / 100) * 100 } else { capture };
                        (0, capture, f, probe)
                    }
                };
                let wire_len =
                    if matches!(self, Delivery::Erspan { .. }) { wire_len } else { frame.len() as u32 };
                out.push(Delivered { file, capture_ns, frame, wire_len, tap, packet: index, probe_ns });
            }
        }
        // Capture order per file; a stable sort keeps creation order for equal times.
        out.sort_by_key(|d| (d.file, d.capture_ns));
        out
    }
}
