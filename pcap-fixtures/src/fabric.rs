//! Fabric-scale traffic for benchmarks: many RC queue pairs between many hosts, small
//! frames, QPs interleaved at random, as a switch mirror of an AI fabric carries it. Not a
//! scenario with truth (nothing asserts on it): it measures how the probe's per-packet path
//! copes when consecutive packets rarely share a flow and the flow table does not fit in
//! any cache.
//!
//! Connection `c` joins requester host `c % hosts` to another host; the requester's QPN is
//! `0x100 + 2c`, the responder's `0x101 + 2c`. Each step picks a connection at random:
//! with [`Mix::acks`], one that has a request awaiting its ACK sends the ACK, else it sends
//! the next request. Frames follow each other at the serialisation time of a link of
//! `link_gbps` (frame + preamble, FCS and inter-frame gap), as on a mirror port at line rate.

use crate::rng::Rng;
use anyhow::{bail, Context, Result};
use roceprobe::capture::pcap::Writer;
use roceprobe::wire::bth::{self, opcode as op};
use roceprobe::wire::build::RoceFrame;
use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct Mix {
    /// RC connections (two QPs each, one flow per direction).
    pub connections: u32,
    pub hosts: u32,
    /// Frame length of each request, FCS excluded: a SEND Only below 74 bytes, else an RDMA
    /// WRITE Only; its payload is what makes up the length (a multiple of 4).
    pub request_bytes: usize,
    /// Every request is acknowledged by its own ACK (62-byte frames), at a random later step.
    pub acks: bool,
    pub packets: usize,
    pub seed: u64,
    pub link_gbps: u64,
}

impl Mix {
    /// The issue-12 mix: 32,768 RC QPs (16,384 connections) between 256 hosts, 64-byte RDMA
    /// WRITE Only (138-byte frames) and their ACKs (62-byte frames).
    pub fn many_qps(packets: usize) -> Self {
        Self {
            connections: 16_384,
            hosts: 256,
            request_bytes: 138,
            acks: true,
            packets,
            seed: 12,
            link_gbps: 100,
        }
    }
}

/// SEND Only without extension headers: Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4.
const SEND_ONLY_BYTES: usize = 58;
/// RDMA WRITE Only adds a RETH of 16 bytes.
const WRITE_ONLY_BYTES: usize = 74;

fn host_ip(h: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 20 + (h >> 8) as u8, (h & 0xFF) as u8, 1))
}

struct Conn {
    requester: u32,
    responder: u32,
    next_psn: u32,
    msn: u32,
    awaiting_ack: bool,
}

/// Writes the mix to `path` (nanosecond pcap); returns the frames written.
pub fn write(mix: &Mix, path: &Path) -> Result<usize> {
    if mix.hosts < 2 || mix.connections == 0 || mix.request_bytes < SEND_ONLY_BYTES {
        bail!("a fabric mix needs 2 hosts, 1 connection and requests of at least {SEND_ONLY_BYTES} bytes");
    }
    if u64::from(mix.connections) * 2 + 0x100 >= 1 << 24 {
        bail!("too many connections for 24-bit QPNs");
    }
    let mut rng = Rng::new(mix.seed);
    let mut conns: Vec<Conn> = (0..mix.connections)
        .map(|c| {
            let a = c % mix.hosts;
            let b = (a + 1 + (c / mix.hosts) % (mix.hosts - 1)) % mix.hosts;
            Conn {
                requester: a,
                responder: b,
                next_psn: rng.range(0, 0xFF_FFFF) as u32,
                msn: 0,
                awaiting_ack: false,
            }
        })
        .collect();
    let write_op = mix.request_bytes >= WRITE_ONLY_BYTES;
    let header = if write_op { WRITE_ONLY_BYTES } else { SEND_ONLY_BYTES };
    let payload = vec![0xA5u8; (mix.request_bytes - header) / 4 * 4];
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut w = Writer::new(std::io::BufWriter::with_capacity(1 << 20, file))?;
    let mut t: u64 = 1_700_000_000_000_000_000;
    for _ in 0..mix.packets {
        let c = rng.range(0, u64::from(mix.connections) - 1) as u32;
        let conn = &mut conns[c as usize];
        let (req_qpn, resp_qpn) = (0x100 + 2 * c, 0x101 + 2 * c);
        let frame = if mix.acks && conn.awaiting_ack {
            conn.awaiting_ack = false;
            conn.msn = (conn.msn + 1) & 0xFF_FFFF;
            let psn = conn.next_psn.wrapping_sub(1) & 0xFF_FFFF;
            let mut f = RoceFrame::new(
                host_ip(conn.responder),
                host_ip(conn.requester),
                bth::Repr { opcode: op::ACKNOWLEDGE, dest_qp: req_qpn, psn, ..Default::default() },
            );
            f.ext = ExtHeaders { aeth: Some(Aeth::ack(31, conn.msn)), ..Default::default() };
            f.emit()
        } else {
            let psn = conn.next_psn;
            conn.next_psn = (psn + 1) & 0xFF_FFFF;
            conn.awaiting_ack = mix.acks;
            let opcode = if write_op { op::WRITE_ONLY } else { op::SEND_ONLY };
            let mut f = RoceFrame::new(
                host_ip(conn.requester),
                host_ip(conn.responder),
                bth::Repr { opcode, dest_qp: resp_qpn, psn, ack_req: mix.acks, ..Default::default() },
            );
            if write_op {
                let va = 0x7f00_0000_0000 + u64::from(psn) * 4096;
                f.ext = ExtHeaders {
                    reth: Some(Reth { va, rkey: 0x1000 + c, dma_len: payload.len() as u32 }),
                    ..Default::default()
                };
            }
            f.payload = &payload;
            f.emit()
        };
        w.write(t, &frame, frame.len() as u32)?;
        // Preamble + SFD 8, FCS 4, inter-frame gap 12: 24 bytes beyond the captured frame.
        t += ((frame.len() as u64 + 24) * 8).div_ceil(mix.link_gbps).max(1);
    }
    w.into_inner().flush()?;
    Ok(mix.packets)
}
