//! A queue-pair connection between two endpoints: PSN spaces, MTU segmentation of
//! messages, acknowledgements, READ requests with their PSN span, and CNPs.

use crate::sim::{Fate, Role, Side, Spec, Wire};
use roceprobe::wire::bth::{self, opcode as op};
use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
use std::net::IpAddr;

pub const PSN_MOD: u32 = 1 << 24;

#[derive(Debug, Clone)]
pub struct Endpoint {
    pub ip: IpAddr,
    pub side: Side,
    pub qpn: u32,
    /// Next PSN of this endpoint's requests.
    pub next_psn: u32,
    /// Messages this endpoint completed as a responder (AETH MSN).
    pub msn: u32,
    pub udp_src_port: u16,
    /// The endpoint's link is busy sending until then: a QP sends one packet at a time.
    pub busy_until: u64,
}

impl Endpoint {
    pub fn new(ip: &str, side: Side, qpn: u32, first_psn: u32) -> Self {
        Self {
            ip: ip.parse().unwrap(),
            side,
            qpn,
            next_psn: first_psn % PSN_MOD,
            msn: 0,
            udp_src_port: 49152 + (qpn % 16000) as u16,
            busy_until: 0,
        }
    }
}

/// What kind of message to send.
#[derive(Debug, Clone, Copy)]
pub enum Msg {
    Send,
    /// SEND with Invalidate (the last or only packet carries IETH).
    SendInvalidate(u32),
    Write(Reth),
}

/// Times and PSNs of a message's packets.
#[derive(Debug, Clone, Copy)]
pub struct Sent {
    pub first_psn: u32,
    pub last_psn: u32,
    /// Index in `Wire::packets` of the first and last packet.
    pub first_index: usize,
    pub last_index: usize,
    pub first_t: u64,
    pub last_t: u64,
}

#[derive(Debug, Clone)]
pub struct Conn {
    pub a: Endpoint,
    pub b: Endpoint,
    /// 0x00 RC, 0x20 UC.
    pub transport: u8,
    pub mtu: usize,
    pub vlans: Vec<u16>,
}

/// Time on a 100 Gb/s link for a packet with this payload (headers included).
pub fn serialization_ns(payload: usize) -> u64 {
    ((payload + 78) as u64 * 8).div_ceil(100)
}

impl Conn {
    pub fn new(a: Endpoint, b: Endpoint, mtu: usize) -> Self {
        Self { a, b, transport: 0x00, mtu, vlans: Vec::new() }
    }

    fn ends(&mut self, from_a: bool) -> (&mut Endpoint, &mut Endpoint) {
        if from_a {
            (&mut self.a, &mut self.b)
        } else {
            (&mut self.b, &mut self.a)
        }
    }

    fn spec(&self, from_a: bool, opcode: u8, psn: u32, ext: ExtHeaders, payload: &[u8]) -> Spec {
        let (s, d) = if from_a { (&self.a, &self.b) } else { (&self.b, &self.a) };
        Spec {
            src: s.ip,
            dst: d.ip,
            vlans: self.vlans.clone(),
            ecn: 0b10,
            udp_src_port: s.udp_src_port,
            bth: bth::Repr {
                opcode,
                pkey: 0xFFFF,
                dest_qp: d.qpn,
                psn: psn % PSN_MOD,
                ack_req: false,
                ..Default::default()
            },
            ext,
            payload: payload.to_vec(),
            role: Role::Plain,
            corrupt_icrc: false,
        }
    }

    /// Sends a message from one end starting at time `t`. `psn` is the PSN of its first
    /// packet (`None`: the sender's next PSN, which then advances; `Some`: a retransmission
    /// that leaves it alone). `fate(i)` decides the fate of the i-th packet; `role` marks the
    /// first packet.
    #[allow(clippy::too_many_arguments)]
    pub fn message(
        &mut self,
        wire: &mut Wire,
        from_a: bool,
        msg: Msg,
        payload: &[u8],
        t: u64,
        psn: Option<u32>,
        role: Role,
        fate: &mut dyn FnMut(usize) -> Fate,
    ) -> Sent {
        let chunks: Vec<&[u8]> =
            if payload.is_empty() { vec![&[][..]] } else { payload.chunks(self.mtu).collect() };
        let n = chunks.len();
        let base = self.transport;
        let first_psn = match psn {
            Some(p) => p % PSN_MOD,
            None => {
                let (s, _) = self.ends(from_a);
                let p = s.next_psn;
                s.next_psn = (p + n as u32) % PSN_MOD;
                p
            }
        };
        let side = if from_a { self.a.side } else { self.b.side };
        let mut t = self.start_at(from_a, t);
        let mut sent =
            Sent { first_psn, last_psn: first_psn, first_index: 0, last_index: 0, first_t: t, last_t: t };
        for (i, chunk) in chunks.iter().enumerate() {
            let only = n == 1;
            let (first, last) = (i == 0, i + 1 == n);
            let mut ext = ExtHeaders::default();
            let opcode = match msg {
                Msg::Send | Msg::SendInvalidate(_) => {
                    let inv = matches!(msg, Msg::SendInvalidate(_));
                    if let Msg::SendInvalidate(k) = msg {
                        if last {
                            ext.ieth_rkey = Some(k);
                        }
                    }
                    match (only, first, last, inv) {
                        (true, _, _, false) => op::SEND_ONLY,
                        (true, _, _, true) => op::SEND_ONLY_INV,
                        (_, true, _, _) => op::SEND_FIRST,
                        (_, _, true, false) => op::SEND_LAST,
                        (_, _, true, true) => op::SEND_LAST_INV,
                        _ => op::SEND_MIDDLE,
                    }
                }
                Msg::Write(reth) => {
                    if first {
                        ext.reth = Some(reth);
                    }
                    match (only, first, last) {
                        (true, _, _) => op::WRITE_ONLY,
                        (_, true, _) => op::WRITE_FIRST,
                        (_, _, true) => op::WRITE_LAST,
                        _ => op::WRITE_MIDDLE,
                    }
                }
            };
            let psn_i = (first_psn + i as u32) % PSN_MOD;
            let mut spec = self.spec(from_a, base | opcode, psn_i, ext, chunk);
            spec.bth.ack_req = last;
            if first {
                spec.role = role.clone();
            }
            let index = wire.packets.len();
            wire.send(side, spec, t, fate(i));
            if first {
                sent.first_index = index;
                sent.first_t = t;
            }
            sent.last_index = index;
            sent.last_t = t;
            sent.last_psn = psn_i;
            t += serialization_ns(chunk.len());
        }
        self.ends(from_a).0.busy_until = t;
        sent
    }

    /// When a packet the endpoint wants to send at `t` actually leaves.
    fn start_at(&mut self, from_a: bool, t: u64) -> u64 {
        t.max(self.ends(from_a).0.busy_until)
    }

    fn done_at(&mut self, from_a: bool, t: u64, payload: usize) {
        self.ends(from_a).0.busy_until = t + serialization_ns(payload);
    }

    /// An acknowledgement (or NAK) from one end for PSN `psn` of the other end's requests.
    /// Returns the packet's index and the time it left.
    pub fn ack(
        &mut self,
        wire: &mut Wire,
        from_a: bool,
        psn: u32,
        aeth: Aeth,
        t: u64,
        fate: Fate,
    ) -> (usize, u64) {
        let t = self.start_at(from_a, t);
        self.done_at(from_a, t, 0);
        let mut ext = ExtHeaders::default();
        let (s, _) = self.ends(from_a);
        let aeth = Aeth { msn: s.msn % PSN_MOD, ..aeth };
        ext.aeth = Some(aeth);
        let side = s.side;
        let spec = self.spec(from_a, self.transport | op::ACKNOWLEDGE, psn, ext, &[]);
        wire.send(side, spec, t, fate);
        (wire.packets.len() - 1, t)
    }

    /// Counts a message completed by the responder at `from_a` (for AETH MSNs).
    pub fn complete_message(&mut self, responder_is_a: bool) {
        let (s, _) = self.ends(responder_is_a);
        s.msn = (s.msn + 1) % PSN_MOD;
    }

    /// A READ Request from one end; it reserves ceil(len / MTU) PSNs. Returns (first PSN,
    /// PSN count, packet index, time it left).
    pub fn read_request(
        &mut self,
        wire: &mut Wire,
        from_a: bool,
        reth: Reth,
        t: u64,
        fate: Fate,
    ) -> (u32, u32, usize, u64) {
        let n = (reth.dma_len as usize).div_ceil(self.mtu).max(1) as u32;
        let t = self.start_at(from_a, t);
        self.done_at(from_a, t, 0);
        let mtu_side;
        let psn = {
            let (s, _) = self.ends(from_a);
            let p = s.next_psn;
            s.next_psn = (p + n) % PSN_MOD;
            mtu_side = s.side;
            p
        };
        let ext = ExtHeaders { reth: Some(reth), ..Default::default() };
        let mut spec = self.spec(from_a, op::READ_REQUEST, psn, ext, &[]);
        spec.bth.ack_req = true;
        wire.send(mtu_side, spec, t, fate);
        (psn, n, wire.packets.len() - 1, t)
    }

    /// READ Responses from the responder end for a request at `first_psn`. Returns
    /// (first time, last time, index of the last packet).
    pub fn read_responses(
        &mut self,
        wire: &mut Wire,
        responder_is_a: bool,
        first_psn: u32,
        data: &[u8],
        t: u64,
    ) -> (u64, u64, usize) {
        self.complete_message(responder_is_a);
        let msn = if responder_is_a { self.a.msn } else { self.b.msn };
        let side = if responder_is_a { self.a.side } else { self.b.side };
        let chunks: Vec<&[u8]> =
            if data.is_empty() { vec![&[][..]] } else { data.chunks(self.mtu).collect() };
        let n = chunks.len();
        let mut t = self.start_at(responder_is_a, t);
        let first_t = t;
        let mut last = (t, 0);
        for (i, c) in chunks.iter().enumerate() {
            let opcode = match (n == 1, i == 0, i + 1 == n) {
                (true, _, _) => op::READ_RESPONSE_ONLY,
                (_, true, _) => op::READ_RESPONSE_FIRST,
                (_, _, true) => op::READ_RESPONSE_LAST,
                _ => op::READ_RESPONSE_MIDDLE,
            };
            let mut ext = ExtHeaders::default();
            if opcode != op::READ_RESPONSE_MIDDLE {
                ext.aeth = Some(Aeth::ack(31, msn));
            }
            let spec = self.spec(responder_is_a, opcode, first_psn + i as u32, ext, c);
            wire.send(side, spec, t, Fate::Delivered);
            last = (t, wire.packets.len() - 1);
            t += serialization_ns(c.len());
        }
        self.ends(responder_is_a).0.busy_until = t;
        (first_t, last.0, last.1)
    }

    /// A CNP from the notification point (`from_a`) to the other end's QP, which it throttles.
    pub fn cnp(&mut self, wire: &mut Wire, from_a: bool, t: u64) {
        let t = self.start_at(from_a, t);
        self.done_at(from_a, t, 16);
        let (s, d) = if from_a { (&self.a, &self.b) } else { (&self.b, &self.a) };
        let mut spec = self.spec(from_a, op::CNP, 0, ExtHeaders::default(), &[]);
        spec.ecn = 0b01;
        spec.role = Role::Cnp { throttled_src: d.ip, throttled_dst: s.ip, throttled_qpn: s.qpn };
        let side = s.side;
        wire.send(side, spec, t, Fate::Delivered);
    }
}
