//! InfiniBand Communication Management MADs (IBTA Vol. 1 ch. 12), carried over RoCEv2 as
//! UD SEND Only to QP 1 with a 256-byte MAD: ConnectRequest (REQ), ConnectReply (REP),
//! ReadyToUse (RTU), ConnectReject (REJ), DisconnectRequest/Reply (DREQ/DREP) and MRA.
//! They name both QPNs of a connection, its service id (for RDMA-CM over IP: the port space
//! and port, 4420 for NVMe-oF) and its start and end.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Destination QP of every CM MAD (the General Services Interface).
pub const GSI_QPN: u32 = 1;
/// The well-known Q_Key of QP 1.
pub const GSI_QKEY: u32 = 0x8001_0000;
pub const MAD_LEN: usize = 256;
pub const MAD_HEADER_LEN: usize = 24;
pub const MGMT_CLASS_CM: u8 = 0x07;
/// MAD method: Send.
pub const METHOD_SEND: u8 = 0x03;

/// CM attribute ids.
pub mod attr {
    pub const REQ: u16 = 0x0010;
    pub const MRA: u16 = 0x0011;
    pub const REJ: u16 = 0x0012;
    pub const REP: u16 = 0x0013;
    pub const RTU: u16 = 0x0014;
    pub const DREQ: u16 = 0x0015;
    pub const DREP: u16 = 0x0016;
}

/// Offset of the REQ private data in the CM message, and where RDMA-CM's IP header sits in it.
const REQ_PRIVATE: usize = 140;
/// The RDMA-CM service id prefix: 0x0000_0000_01 | port space (8 bits) | port (16 bits).
const RDMA_CM_PREFIX: u64 = 0x0000_0000_0100_0000;
pub const PORT_SPACE_TCP: u8 = 0x06;
/// NVMe-oF's well-known port.
pub const NVME_OF_PORT: u16 = 4420;

fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
fn be24(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([0, b[at], b[at + 1], b[at + 2]])
}
fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}
fn put24(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 3].copy_from_slice(&v.to_be_bytes()[1..]);
}

/// The common MAD header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MadHeader {
    pub base_version: u8,
    pub mgmt_class: u8,
    pub class_version: u8,
    pub method: u8,
    pub status: u16,
    pub transaction_id: u64,
    pub attribute_id: u16,
    pub attribute_modifier: u32,
}

impl MadHeader {
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < MAD_HEADER_LEN {
            return None;
        }
        Some(Self {
            base_version: b[0],
            mgmt_class: b[1],
            class_version: b[2],
            method: b[3],
            status: be16(b, 4),
            transaction_id: be64(b, 8),
            attribute_id: be16(b, 16),
            attribute_modifier: be32(b, 20),
        })
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[..MAD_HEADER_LEN].fill(0);
        out[0] = self.base_version;
        out[1] = self.mgmt_class;
        out[2] = self.class_version;
        out[3] = self.method;
        out[4..6].copy_from_slice(&self.status.to_be_bytes());
        out[8..16].copy_from_slice(&self.transaction_id.to_be_bytes());
        out[16..18].copy_from_slice(&self.attribute_id.to_be_bytes());
        out[20..24].copy_from_slice(&self.attribute_modifier.to_be_bytes());
    }
    /// A CM Send MAD header for `attribute_id`.
    pub fn cm(attribute_id: u16, transaction_id: u64) -> Self {
        Self {
            base_version: 1,
            mgmt_class: MGMT_CLASS_CM,
            class_version: 2,
            method: METHOD_SEND,
            status: 0,
            transaction_id,
            attribute_id,
            attribute_modifier: 0,
        }
    }
}

/// The IP addressing RDMA-CM puts in a REQ's private data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmaCmIp {
    pub src_port: u16,
    pub src: IpAddr,
    pub dst: IpAddr,
}

/// ConnectRequest: the active side's QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Req {
    pub local_comm_id: u32,
    pub service_id: u64,
    pub local_ca_guid: u64,
    pub local_qkey: u32,
    pub local_qpn: u32,
    pub starting_psn: u32,
    pub pkey: u16,
    /// Path MTU code (1 = 256 ... 5 = 4096).
    pub path_mtu: u8,
    pub ip: Option<RdmaCmIp>,
    /// NVMe/RDMA's queue id, from the request data that follows RDMA-CM's IP header in the
    /// private data (record format 0, then the QID, little-endian; 0: the admin queue).
    /// `None` without RDMA-CM's header, with another record format, or with queue sizes of
    /// zero (no NVMe/RDMA request data there).
    pub nvme_qid: Option<u16>,
}

impl Req {
    /// The RDMA-CM port if the service id is in RDMA-CM's TCP port space.
    pub fn rdma_cm_port(&self) -> Option<u16> {
        (self.service_id & !0xFF_FFFF == RDMA_CM_PREFIX && (self.service_id >> 16) as u8 == PORT_SPACE_TCP)
            .then_some(self.service_id as u16)
    }
    /// Path MTU in bytes.
    pub fn path_mtu_bytes(&self) -> Option<u32> {
        (1..=5).contains(&self.path_mtu).then(|| 128u32 << self.path_mtu)
    }
    pub fn rdma_cm_service_id(port: u16) -> u64 {
        RDMA_CM_PREFIX | (u64::from(PORT_SPACE_TCP) << 16) | u64::from(port)
    }
}

/// ConnectReply: the passive side's QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rep {
    pub local_comm_id: u32,
    pub remote_comm_id: u32,
    pub local_qkey: u32,
    pub local_qpn: u32,
    pub starting_psn: u32,
    pub local_ca_guid: u64,
}

/// A CM message, by attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmMessage {
    Req(Req),
    Rep(Rep),
    Rtu { local_comm_id: u32, remote_comm_id: u32 },
    Rej { local_comm_id: u32, remote_comm_id: u32, reason: u16 },
    Dreq { local_comm_id: u32, remote_comm_id: u32, remote_qpn: u32 },
    Drep { local_comm_id: u32, remote_comm_id: u32 },
    Mra { local_comm_id: u32, remote_comm_id: u32 },
}

impl CmMessage {
    pub fn attribute_id(&self) -> u16 {
        match self {
            Self::Req(_) => attr::REQ,
            Self::Rep(_) => attr::REP,
            Self::Rtu { .. } => attr::RTU,
            Self::Rej { .. } => attr::REJ,
            Self::Dreq { .. } => attr::DREQ,
            Self::Drep { .. } => attr::DREP,
            Self::Mra { .. } => attr::MRA,
        }
    }

    /// Parses a CM MAD (the UD payload). `None` if it is not a CM MAD or is truncated, or
    /// is not one a CM sends: every CM message is a Send (method 0x03) of class version 2
    /// with status 0; any other (a response method, another version, an error status) is
    /// not acted on, so that it cannot start a connection's PSN analysis again.
    pub fn parse(mad: &[u8]) -> Option<(MadHeader, CmMessage)> {
        let h = MadHeader::parse(mad)?;
        if h.base_version != 1
            || h.mgmt_class != MGMT_CLASS_CM
            || h.class_version != 2
            || h.method != METHOD_SEND
            || h.status != 0
            || mad.len() < MAD_LEN
        {
            return None;
        }
        let m = &mad[MAD_HEADER_LEN..MAD_LEN];
        let ids = (be32(m, 0), be32(m, 4));
        let msg = match h.attribute_id {
            attr::REQ => CmMessage::Req(Req {
                local_comm_id: be32(m, 0),
                service_id: be64(m, 8),
                local_ca_guid: be64(m, 16),
                local_qkey: be32(m, 28),
                local_qpn: be24(m, 32),
                starting_psn: be24(m, 44),
                pkey: be16(m, 48),
                path_mtu: m[50] >> 4,
                ip: parse_rdma_cm_ip(be64(m, 8), &m[REQ_PRIVATE..]),
                nvme_qid: parse_nvme_qid(be64(m, 8), &m[REQ_PRIVATE..]),
            }),
            attr::REP => CmMessage::Rep(Rep {
                local_comm_id: ids.0,
                remote_comm_id: ids.1,
                local_qkey: be32(m, 8),
                local_qpn: be24(m, 12),
                starting_psn: be24(m, 20),
                local_ca_guid: be64(m, 28),
            }),
            attr::RTU => CmMessage::Rtu { local_comm_id: ids.0, remote_comm_id: ids.1 },
            attr::REJ => CmMessage::Rej { local_comm_id: ids.0, remote_comm_id: ids.1, reason: be16(m, 10) },
            attr::DREQ => {
                CmMessage::Dreq { local_comm_id: ids.0, remote_comm_id: ids.1, remote_qpn: be24(m, 8) }
            }
            attr::DREP => CmMessage::Drep { local_comm_id: ids.0, remote_comm_id: ids.1 },
            attr::MRA => CmMessage::Mra { local_comm_id: ids.0, remote_comm_id: ids.1 },
            _ => return None,
        };
        Some((h, msg))
    }

    /// Writes the 256-byte MAD.
    pub fn emit(&self, transaction_id: u64, out: &mut [u8]) {
        out[..MAD_LEN].fill(0);
        MadHeader::cm(self.attribute_id(), transaction_id).emit(out);
        let m = &mut out[MAD_HEADER_LEN..MAD_LEN];
        let ids = |m: &mut [u8], l: u32, r: u32| {
            m[0..4].copy_from_slice(&l.to_be_bytes());
            m[4..8].copy_from_slice(&r.to_be_bytes());
        };
        match *self {
            CmMessage::Req(r) => {
                m[0..4].copy_from_slice(&r.local_comm_id.to_be_bytes());
                m[8..16].copy_from_slice(&r.service_id.to_be_bytes());
                m[16..24].copy_from_slice(&r.local_ca_guid.to_be_bytes());
                m[28..32].copy_from_slice(&r.local_qkey.to_be_bytes());
                put24(m, 32, r.local_qpn);
                put24(m, 44, r.starting_psn);
                m[48..50].copy_from_slice(&r.pkey.to_be_bytes());
                m[50] = r.path_mtu << 4;
                if let Some(ip) = r.ip {
                    emit_rdma_cm_ip(&ip, &mut m[REQ_PRIVATE..]);
                }
            }
            CmMessage::Rep(r) => {
                ids(m, r.local_comm_id, r.remote_comm_id);
                m[8..12].copy_from_slice(&r.local_qkey.to_be_bytes());
                put24(m, 12, r.local_qpn);
                put24(m, 20, r.starting_psn);
                m[28..36].copy_from_slice(&r.local_ca_guid.to_be_bytes());
            }
            CmMessage::Rtu { local_comm_id, remote_comm_id }
            | CmMessage::Drep { local_comm_id, remote_comm_id }
            | CmMessage::Mra { local_comm_id, remote_comm_id } => ids(m, local_comm_id, remote_comm_id),
            CmMessage::Rej { local_comm_id, remote_comm_id, reason } => {
                ids(m, local_comm_id, remote_comm_id);
                m[10..12].copy_from_slice(&reason.to_be_bytes());
            }
            CmMessage::Dreq { local_comm_id, remote_comm_id, remote_qpn } => {
                ids(m, local_comm_id, remote_comm_id);
                put24(m, 8, remote_qpn);
            }
        }
    }
}

/// RDMA-CM's header at the start of the REQ private data: version (1), IP version in bits
/// 7:4 (1), source port (2), source IP (16), destination IP (16); IPv4 in the last 4 bytes.
fn parse_rdma_cm_ip(service_id: u64, p: &[u8]) -> Option<RdmaCmIp> {
    if service_id & !0xFF_FFFF != RDMA_CM_PREFIX || p.len() < 36 {
        return None;
    }
    let addr = |b: &[u8]| -> Option<IpAddr> {
        match p[1] >> 4 {
            4 => Some(IpAddr::V4(Ipv4Addr::new(b[12], b[13], b[14], b[15]))),
            6 => Some(IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(b).ok()?))),
            _ => None,
        }
    };
    Some(RdmaCmIp { src_port: be16(p, 2), src: addr(&p[4..20])?, dst: addr(&p[20..36])? })
}

/// NVMe/RDMA's RDMA_CM_REQUEST after RDMA-CM's 36-byte header: RECFMT (2), QID (2),
/// HRQSIZE (2), HSQSIZE (2), little-endian. Only record format 0 is defined.
fn parse_nvme_qid(service_id: u64, p: &[u8]) -> Option<u16> {
    let d = p.get(36..44)?;
    let le16 = |at: usize| u16::from_le_bytes([d[at], d[at + 1]]);
    (service_id & !0xFF_FFFF == RDMA_CM_PREFIX && le16(0) == 0 && le16(4) != 0 && le16(6) != 0)
        .then(|| le16(2))
}

fn emit_rdma_cm_ip(ip: &RdmaCmIp, p: &mut [u8]) {
    p[0] = 0; // RDMA-CM header version 0
    p[2..4].copy_from_slice(&ip.src_port.to_be_bytes());
    for (a, at) in [(ip.src, 4), (ip.dst, 20)] {
        match a {
            IpAddr::V4(v4) => {
                p[1] = 4 << 4;
                p[at..at + 12].fill(0);
                p[at + 12..at + 16].copy_from_slice(&v4.octets());
            }
            IpAddr::V6(v6) => {
                p[1] = 6 << 4;
                p[at..at + 16].copy_from_slice(&v6.octets());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_frame, Decoded};

    /// The CM MAD of a real rdma_cm.pcap frame (UD SEND Only: BTH, DETH, MAD).
    fn mad_of(index: usize) -> (MadHeader, CmMessage) {
        CmMessage::parse(&mad_bytes(index)).expect("a CM MAD")
    }

    /// The MAD of the real capture's frame `index`.
    fn mad_bytes(index: usize) -> Vec<u8> {
        let f = crate::wire::frame::tests::real_frame("rdma_cm.pcap", index);
        let Decoded::Roce(p) = decode_frame(&f) else { panic!() };
        assert_eq!((p.bth.opcode(), p.bth.dest_qp()), (0x64, GSI_QPN));
        p.payload.to_vec()
    }

    #[test]
    fn known_answers_from_the_real_handshake() {
        // tshark -r rdma_cm.pcap -Y infiniband.bth.opcode==100 -T fields -e ...:
        // frame 1 REQ: serviceid 0x0000000001064853, localqpn 0x3d, startpsn 0x7cc204, pppmtu 3,
        //   ip_cm.sport 0xccf7, sip4 10.1.16.62, dip4 10.1.16.61
        let (h, m) = mad_of(0);
        assert_eq!((h.mgmt_class, h.method, h.attribute_id), (MGMT_CLASS_CM, METHOD_SEND, attr::REQ));
        let CmMessage::Req(r) = m else { panic!("{m:?}") };
        assert_eq!(r.service_id, 0x0000_0000_0106_4853);
        assert_eq!(r.rdma_cm_port(), Some(18515), "perftest's port");
        assert_eq!((r.local_qpn, r.starting_psn, r.path_mtu), (0x3d, 0x7cc204, 3));
        assert_eq!(r.path_mtu_bytes(), Some(1024));
        assert_eq!(
            r.ip,
            Some(RdmaCmIp {
                src_port: 0xccf7,
                src: "10.1.16.62".parse().unwrap(),
                dst: "10.1.16.61".parse().unwrap()
            })
        );
        // frame 2 REP: localqpn 0x3b, startpsn 0x727d6d, remotecommid 0x64c0c56d
        let (_, m) = mad_of(1);
        let CmMessage::Rep(p) = m else { panic!("{m:?}") };
        assert_eq!((p.local_qpn, p.starting_psn, p.remote_comm_id), (0x3b, 0x727d6d, 0x64c0c56d));
        assert_eq!(r.local_comm_id, p.remote_comm_id, "the REP answers the REQ");
        // frame 3 RTU: localcommid 0x64c0c56d, remotecommid 0x8988f456
        let (_, m) = mad_of(2);
        assert_eq!(m, CmMessage::Rtu { local_comm_id: 0x64c0c56d, remote_comm_id: 0x8988f456 });
        assert_eq!(p.local_comm_id, 0x8988f456);
        // frame 91 DREQ: localcommid 0x65c0c56d, remotecommid 0x8b88f456
        let (_, m) = mad_of(90);
        assert!(matches!(m, CmMessage::Dreq { local_comm_id: 0x65c0c56d, remote_comm_id: 0x8b88f456, .. }));
        let (h, m) = mad_of(92);
        assert_eq!(h.attribute_id, attr::DREP);
        assert!(matches!(m, CmMessage::Drep { .. }));
    }

    /// The real handshake's REQ with its header changed in one field at a time (the
    /// class version to 9, the method to 0x83, the status to 1): not a CM message a CM
    /// sends, so none is taken (IBTA: CM MADs are Sends of class version 2, status 0).
    #[test]
    fn a_mad_that_is_no_cm_send_is_not_taken() {
        let mad = mad_bytes(0);
        assert!(CmMessage::parse(&mad).is_some());
        for (at, value) in [(2, 9u8), (3, 0x83), (5, 1)] {
            let mut m = mad.clone();
            m[at] = value;
            assert!(CmMessage::parse(&m).is_none(), "byte {at} = {value:#x}");
        }
    }

    #[test]
    fn round_trips() {
        let v6 =
            RdmaCmIp { src_port: 40000, src: "fd00::1".parse().unwrap(), dst: "fd00::2".parse().unwrap() };
        let msgs = [
            CmMessage::Req(Req {
                local_comm_id: 7,
                service_id: Req::rdma_cm_service_id(NVME_OF_PORT),
                local_ca_guid: 0x0002_c903_0000_1234,
                local_qkey: 0,
                local_qpn: 0x1234,
                starting_psn: 0xFFFFF0,
                pkey: 0xFFFF,
                path_mtu: 5,
                ip: Some(v6),
                // Not written by `emit`; its request data left zero reads as none.
                nvme_qid: None,
            }),
            CmMessage::Rep(Rep {
                local_comm_id: 8,
                remote_comm_id: 7,
                local_qkey: 0,
                local_qpn: 0x4321,
                starting_psn: 17,
                local_ca_guid: 42,
            }),
            CmMessage::Rtu { local_comm_id: 7, remote_comm_id: 8 },
            CmMessage::Rej { local_comm_id: 7, remote_comm_id: 8, reason: 28 },
            CmMessage::Dreq { local_comm_id: 7, remote_comm_id: 8, remote_qpn: 0x4321 },
            CmMessage::Drep { local_comm_id: 8, remote_comm_id: 7 },
            CmMessage::Mra { local_comm_id: 8, remote_comm_id: 7 },
        ];
        for m in msgs {
            let mut b = [0u8; MAD_LEN];
            m.emit(99, &mut b);
            let (h, back) = CmMessage::parse(&b).unwrap();
            assert_eq!((h.transaction_id, back), (99, m));
            assert_eq!(CmMessage::parse(&b[..255]), None, "truncated");
        }
        let CmMessage::Req(r) = msgs[0] else { unreachable!() };
        assert_eq!(r.rdma_cm_port(), Some(4420));
    }
}
