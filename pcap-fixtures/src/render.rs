//! Delivery: how the two taps reach the probe, and what the probe receives: the frames of
//! each capture file in capture order, each with the tap it came from and the time the
//! probe will assign to it.

use crate::rng::Rng;
use crate::sim::{Packet, Wire, COMPUTE, STORAGE};
use roceprobe::wire::build::erspan_wrap;
use roceprobe::wire::erspan::{self, Granularity};
use roceprobe::wire::ipv4;
use std::net::Ipv4Addr;

/// The path from a tap to the probe: a constant delay, and a delay of its own for each
/// packet (queueing on the way). Jitter is mostly up to `typical_ns`; `tail_per_mille`
/// packets in a thousand wait between a quarter of `tail_ns` and all of it (a heavy tail).
/// A `fifo` path is one queue, where a packet never overtakes the one before it (a capture
/// port); otherwise packets are delayed independently and overtake each other (ERSPAN
/// spread over ECMP paths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MirrorPath {
    pub delay_ns: u64,
    pub typical_ns: u64,
    pub tail_ns: u64,
    pub tail_per_mille: u64,
    pub fifo: bool,
}

impl MirrorPath {
    /// A path that takes `delay_ns`, the same for every packet.
    pub const fn fixed(delay_ns: u64) -> Self {
        Self { delay_ns, typical_ns: 0, tail_ns: 0, tail_per_mille: 0, fifo: true }
    }

    /// How long this packet takes on the path.
    fn delay(&self, rng: &mut Rng) -> u64 {
        let jitter = if self.tail_ns > 0 && rng.range(0, 999) < self.tail_per_mille {
            rng.range(self.tail_ns / 4, self.tail_ns)
        } else if self.typical_ns > 0 {
            rng.range(0, self.typical_ns)
        } else {
            0
        };
        self.delay_ns + jitter
    }
}

/// Two taps whose mirror paths are direct (no delay between a tap and the probe).
pub const DIRECT: [MirrorPath; 2] = [MirrorPath::fixed(0); 2];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// One file; each tap's frames carry an extra outer VLAN tag (RSPAN-style).
    Vlan { compute: u16, storage: u16 },
    /// One file per tap (compute first), each frame stamped with the time its tap saw it (a
    /// switch's timestamp, or the tap's NIC clock), each file in the order in which the
    /// frames reached the probe over `mirror[tap]`.
    Split { mirror: [MirrorPath; 2] },
    /// Only the compute tap, in one file (a probe with one vantage).
    ComputeOnly,
    /// Only the compute tap, mirrored at both ports of a routed hop: every RoCE packet
    /// twice, the copy the router received and, `egress_ns` (a range) later, the copy it
    /// sent on, with the TTL (hop limit) one less and the router's MACs.
    RoutedHop { egress_ns: (u64, u64) },
    /// ERSPAN-encapsulated mirrors. Types II and III: one file, one session per tap.
    /// Type III carries the switch's timestamp (in `granularity`'s units: 100 ns, or 1 ns
    /// as IEEE 1588 without the seconds; each switch with its own clock offset). Type I has
    /// no header (no session to tell the taps apart): one file per tap, as two probe ports
    /// would receive them. The frame reaches the probe over `mirror[tap]`, which gives its
    /// capture time.
    Erspan {
        erspan_type: u8,
        sessions: [u16; 2],
        clock_offset_ns: [u64; 2],
        mirror: [MirrorPath; 2],
        granularity: Granularity,
    },
}

/// The same traffic delivered over mirror paths of equal, constant delay (what a delivery
/// with skewed or jittery paths must give the same results as).
pub fn without_skew(d: Delivery) -> Delivery {
    match d {
        Delivery::Split { .. } => Delivery::Split { mirror: DIRECT },
        Delivery::Erspan { erspan_type, sessions, clock_offset_ns, mirror, granularity } => {
            Delivery::Erspan {
                erspan_type,
                sessions,
                clock_offset_ns,
                mirror: [MirrorPath::fixed(mirror[COMPUTE].delay_ns); 2],
                granularity,
            }
        }
        other => other,
    }
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
    /// When the tap saw the packet.
    pub tap_ns: u64,
    /// When the frame reached the probe (the files' order).
    pub arrival_ns: u64,
    /// The mirror's second copy of the packet (see [`Delivery::RoutedHop`]).
    pub duplicate: bool,
}

/// The MACs of the router whose ports are mirrored, and of its next hop.
pub const ROUTER_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0xfe, 0x01];
pub const NEXT_HOP_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0xfe, 0x02];

/// The frame a router sends on: its own MAC as the source, the next hop's as the
/// destination, the IPv4 TTL (and header checksum) or IPv6 hop limit one less. The ICRC
/// leaves both out, so it stays right.
pub fn routed(frame: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    f[0..6].copy_from_slice(&NEXT_HOP_MAC);
    f[6..12].copy_from_slice(&ROUTER_MAC);
    let mut at = 12;
    while matches!(u16::from_be_bytes([f[at], f[at + 1]]), 0x8100 | 0x88a8) {
        at += 4;
    }
    let l3 = at + 2;
    match u16::from_be_bytes([f[at], f[at + 1]]) {
        0x0800 => {
            f[l3 + 8] -= 1;
            // The header's checksum, recomputed with the TTL one less.
            let hl = usize::from(f[l3] & 0x0F) * 4;
            f[l3 + 10..l3 + 12].fill(0);
            let c = ipv4::checksum(&f[l3..l3 + hl]);
            f[l3 + 10..l3 + 12].copy_from_slice(&c.to_be_bytes());
        }
        0x86DD => f[l3 + 7] -= 1,
        other => panic!("a routed copy of ethertype {other:#06x}"),
    }
    f
}

/// The mirror paths of a delivery, if it has any.
fn paths(d: &Delivery) -> Option<[MirrorPath; 2]> {
    match *d {
        Delivery::Split { mirror } | Delivery::Erspan { mirror, .. } => Some(mirror),
        _ => None,
    }
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
            Delivery::Split { .. } | Delivery::Erspan { erspan_type: 1, .. } => 2,
            _ => 1,
        }
    }

    pub fn taps(&self) -> &'static [usize] {
        match self {
            Delivery::ComputeOnly | Delivery::RoutedHop { .. } => &[COMPUTE],
            _ => &[COMPUTE, STORAGE],
        }
    }

    /// The `--vantage` options that tell the probe which traffic is which tap.
    pub fn vantage_args(&self) -> Vec<String> {
        match self {
            Delivery::Vlan { compute, storage } => {
                vec![format!("compute=vlan:{compute}"), format!("storage=vlan:{storage}")]
            }
            Delivery::Split { .. } | Delivery::Erspan { erspan_type: 1, .. } => vec!["storage=file:1".into()],
            Delivery::ComputeOnly | Delivery::RoutedHop { .. } => vec![],
            Delivery::Erspan { sessions, .. } => {
                vec![format!("compute=erspan:{}", sessions[0]), format!("storage=erspan:{}", sessions[1])]
            }
        }
        .into_iter()
        .flat_map(|v| ["--vantage".to_string(), v])
        .collect()
    }

    /// On a path that is one queue with jitter, no packet overtakes one the tap saw before
    /// it: each waits for the one ahead.
    fn queue(&self, out: &mut [Delivered]) {
        let Some(mirror) = paths(self) else { return };
        for tap in [COMPUTE, STORAGE] {
            let m = mirror[tap];
            if !m.fifo || (m.typical_ns == 0 && m.tail_ns == 0) {
                continue;
            }
            let mut order: Vec<usize> = (0..out.len()).filter(|&i| out[i].tap == tap).collect();
            order.sort_by_key(|&i| (out[i].tap_ns, out[i].packet));
            let mut ahead = 0;
            for i in order {
                let d = &mut out[i];
                d.arrival_ns = d.arrival_ns.max(ahead);
                ahead = d.arrival_ns;
                if let Delivery::Erspan { erspan_type, .. } = *self {
                    // ERSPAN is captured at its arrival (and type II timed by nothing else).
                    d.capture_ns = d.arrival_ns;
                    if erspan_type != 3 {
                        d.probe_ns = d.arrival_ns;
                    }
                }
            }
        }
    }

    /// Renders the wire as the probe receives it, each file in the order of arrival. The
    /// mirror paths' delays are drawn from a generator of their own, so a delivery without
    /// jitter gives the same frames whatever the paths.
    pub fn render(&self, wire: &Wire) -> Vec<Delivered> {
        let mut out = Vec::new();
        let mut seq = [0u32; 2];
        let mut paths = Rng::new(0x6d69_7272_6f72);
        for (index, p) in wire.packets.iter().enumerate() {
            for &tap in self.taps() {
                let Some(t) = p.seen()[tap] else { continue };
                let frame = match p {
                    Packet::Roce { spec, ecn, .. } => spec.frame(ecn[tap]),
                    Packet::Raw { frame, .. } => frame.clone(),
                };
                let wire_len = frame.len() as u32;
                let (file, capture_ns, frame, probe_ns, arrival_ns) = match *self {
                    Delivery::Vlan { compute, storage } => {
                        let f = tag(&frame, if tap == COMPUTE { compute } else { storage });
                        (0, t, f, t, t)
                    }
                    Delivery::Split { mirror } => (tap, t, frame, t, t + mirror[tap].delay(&mut paths)),
                    Delivery::ComputeOnly | Delivery::RoutedHop { .. } => (0, t, frame, t, t),
                    Delivery::Erspan { erspan_type, sessions, clock_offset_ns, mirror, granularity } => {
                        let switch_ns = t + clock_offset_ns[tap];
                        let unit_ns = u64::from(granularity.unit_ns().expect("a granularity of fixed units"));
                        let h = erspan::Repr {
                            erspan_type,
                            vlan: 0,
                            cos: 0,
                            session: sessions[tap],
                            truncated: false,
                            index: tap as u32,
                            timestamp: (switch_ns / unit_ns) as u32,
                            granularity,
                            hw_id: 1,
                            platform: None,
                        };
                        let h = if erspan_type == 1 { erspan::Repr::type_i() } else { h };
                        seq[tap] = seq[tap].wrapping_add(1);
                        let switch = Ipv4Addr::new(192, 168, 100, 1 + tap as u8);
                        let f = erspan_wrap(&frame, &h, switch, Ipv4Addr::new(192, 168, 100, 10), seq[tap]);
                        let capture = t + mirror[tap].delay(&mut paths);
                        // Type III: the probe uses the switch clock (in its ticks).
                        let probe = if erspan_type == 3 { (switch_ns / unit_ns) * unit_ns } else { capture };
                        let file = if erspan_type == 1 { tap } else { 0 };
                        (file, capture, f, probe, capture)
                    }
                };
                let wire_len =
                    if matches!(self, Delivery::Erspan { .. }) { wire_len } else { frame.len() as u32 };

                if let (Delivery::RoutedHop { egress_ns: (lo, hi) }, Packet::Roce { .. }) = (*self, p) {
                    let at = t + paths.range(lo, hi);
                    let copy = routed(&frame);
                    out.push(Delivered {
                        file,
                        capture_ns: at,
                        wire_len: copy.len() as u32,
                        frame: copy,
                        tap,
                        packet: index,
                        probe_ns: at,
                        tap_ns: t,
                        arrival_ns: at,
                        duplicate: true,
                    });
                }
                out.push(Delivered {
                    file,
                    capture_ns,
                    frame,
                    wire_len,
                    tap,
                    packet: index,
                    probe_ns,
                    tap_ns: t,
                    arrival_ns,
                    duplicate: false,
                });
            }
        }
        self.queue(&mut out);
        // Arrival order per file; a stable sort keeps creation order for equal times.
        out.sort_by_key(|d| (d.file, d.arrival_ns, d.tap_ns, d.duplicate));
        out
    }
}
