//! NVMe over Fabrics capsules carried in RDMA SEND payloads (NVMe base and NVMe-oF RDMA
//! transport binding; little-endian): the 64-byte submission queue entry (SQE) with its
//! SGL descriptor, and the 16-byte completion queue entry (CQE).
//!
//! ## Recognition without the connection handshake
//!
//! A probe attached mid-stream never sees the RDMA-CM exchange that says "this QP is
//! NVMe/RDMA", so capsules are recognised by structure, strictly enough that other SEND
//! traffic (perftest buffers, RPC, MPI) is not mistaken for NVMe:
//!
//! - **Command**: the first packet of a SEND message (SEND First/Only, with or without
//!   Immediate/Invalidate) whose payload has at least 64 bytes, where the flags byte is
//!   exactly 0x40 (PSDT = SGL, the only data-transfer mode NVMe/RDMA allows; no fused
//!   operation; reserved bits zero), the metadata pointer (bytes 16-23) is zero, and SGL1's
//!   identifier is a Keyed SGL Data Block (0x40, or 0x4F to invalidate the key) or an SGL Data
//!   Block with the Offset subtype (0x01, in-capsule data) whose offset and length fit the
//!   message. A random buffer passes with a probability below 2^-80.
//! - **Completion**: a SEND Only (with or without Immediate/Invalidate) whose payload is
//!   exactly 16 bytes with DW1 (bytes 4-7, reserved) zero and the phase bit zero (NVMe-oF
//!   completions carry no phase tag). This shape alone is weak, so the I/O tracker counts a
//!   completion as NVMe only when its command identifier matches a command it saw going the
//!   other way between the same two hosts.

use super::bth::opcode as op;

pub const SQE_LEN: usize = 64;
pub const CQE_LEN: usize = 16;
pub const SGL_LEN: usize = 16;

/// NVMe opcodes roceprobe names (I/O command set; 0x7F is the Fabrics command).
pub mod opcode {
    pub const FLUSH: u8 = 0x00;
    pub const WRITE: u8 = 0x01;
    pub const READ: u8 = 0x02;
    pub const FABRICS: u8 = 0x7F;
}

/// Which command set a command's opcode is read in: the queue it came on (the admin queue,
/// QID 0, or an I/O queue) says it, except for the Fabrics command (opcode 0x7F), which
/// either may carry and which is told apart by its command type (byte 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CommandSet {
    Io,
    Admin,
    Fabrics,
}

impl CommandSet {
    pub fn as_str(self) -> &'static str {
        match self {
            CommandSet::Io => "io",
            CommandSet::Admin => "admin",
            CommandSet::Fabrics => "fabrics",
        }
    }
}

/// The names of the NVM command set's I/O commands (the NVM Command Set specification).
const IO_NAMES: &[(u8, &str)] = &[
    (opcode::FLUSH, "flush"),
    (opcode::WRITE, "write"),
    (opcode::READ, "read"),
    (0x04, "write_uncorrectable"),
    (0x05, "compare"),
    (0x08, "write_zeroes"),
    (0x09, "dataset_management"),
    (0x0C, "verify"),
    (0x0D, "reservation_register"),
    (0x0E, "reservation_report"),
    (0x11, "reservation_acquire"),
    (0x15, "reservation_release"),
    (0x19, "copy"),
];

/// The names of the admin commands (the NVMe Base specification).
const ADMIN_NAMES: &[(u8, &str)] = &[
    (0x00, "delete_io_sq"),
    (0x01, "create_io_sq"),
    (0x02, "get_log_page"),
    (0x04, "delete_io_cq"),
    (0x05, "create_io_cq"),
    (0x06, "identify"),
    (0x08, "abort"),
    (0x09, "set_features"),
    (0x0A, "get_features"),
    (0x0C, "async_event_request"),
    (0x0D, "namespace_management"),
    (0x10, "firmware_commit"),
    (0x11, "firmware_download"),
    (0x14, "device_self_test"),
    (0x15, "namespace_attachment"),
    (0x18, "keep_alive"),
    (0x19, "directive_send"),
    (0x1A, "directive_receive"),
    (0x1C, "virtualization_management"),
    (0x1D, "nvme_mi_send"),
    (0x1E, "nvme_mi_receive"),
    (0x7C, "doorbell_buffer_config"),
    (0x80, "format_nvm"),
    (0x81, "security_send"),
    (0x82, "security_receive"),
    (0x84, "sanitize"),
    (0x86, "get_lba_status"),
];

/// The names of the Fabrics commands' types (the NVMe over Fabrics specification).
const FABRICS_NAMES: &[(u8, &str)] = &[
    (0x00, "property_set"),
    (0x01, "connect"),
    (0x04, "property_get"),
    (0x05, "authentication_send"),
    (0x06, "authentication_receive"),
    (0x08, "disconnect"),
];

/// A command by its set and opcode (a Fabrics command by its command type), as the
/// reports name it: `io.flush`, `admin.identify`, `fabrics.connect`, or with the code in hex
/// where it has no name here (`io.0x83`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Command {
    pub set: CommandSet,
    pub code: u8,
}

impl Command {
    /// The command `sqe` is, on the admin queue or not.
    pub fn of(sqe: &Sqe, admin_queue: bool) -> Self {
        match sqe.opcode {
            // The command type is byte 4, where other commands have the low byte of NSID.
            opcode::FABRICS => Command { set: CommandSet::Fabrics, code: sqe.nsid as u8 },
            code if admin_queue => Command { set: CommandSet::Admin, code },
            code => Command { set: CommandSet::Io, code },
        }
    }

    fn names(set: CommandSet) -> &'static [(u8, &'static str)] {
        match set {
            CommandSet::Io => IO_NAMES,
            CommandSet::Admin => ADMIN_NAMES,
            CommandSet::Fabrics => FABRICS_NAMES,
        }
    }

    pub fn name(self) -> Option<&'static str> {
        Self::names(self.set).iter().find(|(c, _)| *c == self.code).map(|(_, n)| *n)
    }
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{}.{n}", self.set.as_str()),
            None => write!(f, "{}.{:#04x}", self.set.as_str(), self.code),
        }
    }
}

impl std::str::FromStr for Command {
    type Err = String;
    /// Reads back what [`Command`]'s `Display` writes.
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("not an NVMe command name: {s:?}");
        let (set, rest) = s.split_once('.').ok_or_else(bad)?;
        let set = [CommandSet::Io, CommandSet::Admin, CommandSet::Fabrics]
            .into_iter()
            .find(|c| c.as_str() == set)
            .ok_or_else(bad)?;
        let code = match rest.strip_prefix("0x") {
            Some(hex) => u8::from_str_radix(hex, 16).map_err(|_| bad())?,
            None => Self::names(set).iter().find(|(_, n)| *n == rest).ok_or_else(bad)?.0,
        };
        Ok(Command { set, code })
    }
}

/// SQE flags: PSDT = 01b (SGL for data transfer), FUSE = 0.
pub const FLAGS_SGL: u8 = 0x40;

/// SGL descriptor identifiers (type in bits 7:4, subtype in bits 3:0).
pub mod sgl_id {
    /// Keyed SGL Data Block, address subtype.
    pub const KEYED: u8 = 0x40;
    /// Keyed SGL Data Block, asking the target to invalidate the key.
    pub const KEYED_INVALIDATE: u8 = 0x4F;
    /// SGL Data Block, offset subtype: data in the capsule.
    pub const IN_CAPSULE: u8 = 0x01;
}

fn le16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The data descriptor of a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sgl {
    /// The data lives in host memory at `address`, registered with `key`: the target moves
    /// it with RDMA WRITE (a read) or RDMA READ (a write) whose RETH carries the same
    /// address and key.
    Keyed { address: u64, length: u32, key: u32, invalidate: bool },
    /// The data follows the SQE in the capsule.
    InCapsule { offset: u64, length: u32 },
    /// Any other descriptor (not produced by NVMe/RDMA hosts).
    Other { identifier: u8 },
}

impl Sgl {
    pub fn parse(b: &[u8]) -> Self {
        let id = b[15];
        match id {
            sgl_id::KEYED | sgl_id::KEYED_INVALIDATE => Sgl::Keyed {
                address: le64(b, 0),
                length: u32::from_le_bytes([b[8], b[9], b[10], 0]),
                key: le32(b, 11),
                invalidate: id == sgl_id::KEYED_INVALIDATE,
            },
            sgl_id::IN_CAPSULE => Sgl::InCapsule { offset: le64(b, 0), length: le32(b, 8) },
            other => Sgl::Other { identifier: other },
        }
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[..SGL_LEN].fill(0);
        match *self {
            Sgl::Keyed { address, length, key, invalidate } => {
                out[0..8].copy_from_slice(&address.to_le_bytes());
                out[8..11].copy_from_slice(&length.to_le_bytes()[..3]);
                out[11..15].copy_from_slice(&key.to_le_bytes());
                out[15] = if invalidate { sgl_id::KEYED_INVALIDATE } else { sgl_id::KEYED };
            }
            Sgl::InCapsule { offset, length } => {
                out[0..8].copy_from_slice(&offset.to_le_bytes());
                out[8..12].copy_from_slice(&length.to_le_bytes());
                out[15] = sgl_id::IN_CAPSULE;
            }
            Sgl::Other { identifier } => out[15] = identifier,
        }
    }
}

/// A submission queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sqe {
    pub opcode: u8,
    pub flags: u8,
    pub cid: u16,
    pub nsid: u32,
    pub sgl: Sgl,
    pub slba: u64,
    /// Number of logical blocks, 0-based.
    pub nlb: u16,
}

impl Sqe {
    /// Parses the first 64 bytes of `b` (which must hold them).
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < SQE_LEN {
            return None;
        }
        Some(Self {
            opcode: b[0],
            flags: b[1],
            cid: le16(b, 2),
            nsid: le32(b, 4),
            sgl: Sgl::parse(&b[24..40]),
            slba: le64(b, 40),
            nlb: le16(b, 48),
        })
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[..SQE_LEN].fill(0);
        out[0] = self.opcode;
        out[1] = self.flags;
        out[2..4].copy_from_slice(&self.cid.to_le_bytes());
        out[4..8].copy_from_slice(&self.nsid.to_le_bytes());
        self.sgl.emit(&mut out[24..40]);
        out[40..48].copy_from_slice(&self.slba.to_le_bytes());
        out[48..50].copy_from_slice(&self.nlb.to_le_bytes());
    }
}

/// A completion queue entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cqe {
    pub dw0: u32,
    pub sq_head: u16,
    pub sq_id: u16,
    pub cid: u16,
    /// Status field (bits 15:1 of the last word); 0 = success.
    pub status: u16,
}

impl Cqe {
    pub fn parse(b: &[u8]) -> Option<Self> {
        if b.len() < CQE_LEN {
            return None;
        }
        Some(Self {
            dw0: le32(b, 0),
            sq_head: le16(b, 8),
            sq_id: le16(b, 10),
            cid: le16(b, 12),
            status: le16(b, 14) >> 1,
        })
    }
    pub fn emit(&self, out: &mut [u8]) {
        out[..CQE_LEN].fill(0);
        out[0..4].copy_from_slice(&self.dw0.to_le_bytes());
        out[8..10].copy_from_slice(&self.sq_head.to_le_bytes());
        out[10..12].copy_from_slice(&self.sq_id.to_le_bytes());
        out[12..14].copy_from_slice(&self.cid.to_le_bytes());
        out[14..16].copy_from_slice(&(self.status << 1).to_le_bytes());
    }
}

/// What a SEND payload is, by the rule in the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capsule {
    Command(Sqe),
    /// A completion by shape; the tracker confirms it against a command.
    Completion(Cqe),
    None,
}

fn starts_message(low: u8) -> bool {
    matches!(low, op::SEND_FIRST | op::SEND_ONLY | op::SEND_ONLY_IMM | op::SEND_ONLY_INV)
}

fn whole_message(low: u8) -> bool {
    matches!(low, op::SEND_ONLY | op::SEND_ONLY_IMM | op::SEND_ONLY_INV)
}

/// Classifies the payload of a RC/XRC SEND packet. `payload` is what was captured,
/// `payload_len` what the headers say the packet carries.
#[inline]
pub fn classify(opcode: u8, payload: &[u8], payload_len: u32) -> Capsule {
    let transport = opcode >> 5;
    if transport != 0 && transport != 5 {
        return Capsule::None;
    }
    let low = opcode & 0x1F;
    if !starts_message(low) {
        return Capsule::None;
    }
    classify_message(low, payload, payload_len)
}

/// [`classify`] for the first packet of a RC/XRC SEND.
#[inline(never)]
fn classify_message(low: u8, payload: &[u8], payload_len: u32) -> Capsule {
    if payload_len as usize >= SQE_LEN && payload.len() >= SQE_LEN {
        if payload[1] != FLAGS_SGL || le64(payload, 16) != 0 {
            return Capsule::None;
        }
        let Some(sqe) = Sqe::parse(payload) else { return Capsule::None };
        return match sqe.sgl {
            Sgl::Keyed { .. } => Capsule::Command(sqe),
            Sgl::InCapsule { offset, length } => {
                // In-capsule data must fit what this packet carries (a SEND Only) or at
                // least start in it (a SEND First: the rest follows in later packets).
                let data_end = (SQE_LEN as u64).saturating_add(offset).saturating_add(u64::from(length));
                let fits = if whole_message(low) {
                    data_end <= u64::from(payload_len)
                } else {
                    (SQE_LEN as u64).saturating_add(offset) <= u64::from(payload_len)
                };
                if fits {
                    Capsule::Command(sqe)
                } else {
                    Capsule::None
                }
            }
            Sgl::Other { .. } => Capsule::None,
        };
    }
    if whole_message(low) && payload_len as usize == CQE_LEN && payload.len() == CQE_LEN {
        if le32(payload, 4) != 0 || payload[14] & 1 != 0 {
            return Capsule::None;
        }
        return Cqe::parse(payload).map_or(Capsule::None, Capsule::Completion);
    }
    Capsule::None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_cmd() -> Sqe {
        Sqe {
            opcode: opcode::READ,
            flags: FLAGS_SGL,
            cid: 0x1234,
            nsid: 1,
            sgl: Sgl::Keyed { address: 0x7F00_1234_5000, length: 4096, key: 0x0012_3456, invalidate: false },
            slba: 0x1_0000_0000,
            nlb: 7,
        }
    }

    #[test]
    fn known_answer_sqe_bytes() {
        // A read of 8 blocks at LBA 2^32 into 4 KiB at 0x7f0012345000 (key 0x123456),
        // laid out per NVMe base 2.0 fig. 88 / NVMe-oF 1.1 §7.3.2 (keyed SGL, identifier 0x40).
        let mut b = [0u8; 64];
        read_cmd().emit(&mut b);
        assert_eq!(&b[0..8], &[0x02, 0x40, 0x34, 0x12, 0x01, 0, 0, 0]);
        assert_eq!(
            &b[24..40],
            &[0x00, 0x50, 0x34, 0x12, 0x00, 0x7F, 0, 0, 0x00, 0x10, 0x00, 0x56, 0x34, 0x12, 0x00, 0x40]
        );
        assert_eq!(&b[40..50], &[0, 0, 0, 0, 1, 0, 0, 0, 7, 0]);
        assert_eq!(Sqe::parse(&b), Some(read_cmd()));
    }

    #[test]
    fn commands_are_named_by_their_set_and_opcode() {
        let sqe = |opcode: u8, nsid: u32| Sqe { opcode, nsid, ..read_cmd() };
        let names: Vec<String> = [
            Command::of(&sqe(0x00, 1), false),
            Command::of(&sqe(0x02, 0), true),
            Command::of(&sqe(0x18, 0), true),
            // A Connect (type 0x01) on either queue; its byte 4 is the type.
            Command::of(&sqe(0x7F, 0x01), true),
            Command::of(&sqe(0x7F, 0x0104), false),
            Command::of(&sqe(0x83, 1), false),
            Command::of(&sqe(0xC1, 0), true),
        ]
        .iter()
        .map(|c| c.to_string())
        .collect();
        assert_eq!(
            names,
            [
                "io.flush",
                "admin.get_log_page",
                "admin.keep_alive",
                "fabrics.connect",
                "fabrics.property_get",
                "io.0x83",
                "admin.0xc1"
            ]
        );
        for n in names {
            assert_eq!(n.parse::<Command>().unwrap().to_string(), n);
        }
        for bad in ["flush", "io.", "nvm.flush", "io.0x1ff", "admin.flush"] {
            assert!(bad.parse::<Command>().is_err(), "{bad}");
        }
    }

    #[test]
    fn known_answer_cqe_bytes() {
        let c = Cqe { dw0: 0, sq_head: 5, sq_id: 1, cid: 0x1234, status: 0 };
        let mut b = [0u8; 16];
        c.emit(&mut b);
        assert_eq!(b, [0, 0, 0, 0, 0, 0, 0, 0, 5, 0, 1, 0, 0x34, 0x12, 0, 0]);
        assert_eq!(Cqe::parse(&b), Some(c));
        let err = Cqe { status: 0x0002, ..c }; // Invalid Field in Command
        err.emit(&mut b);
        assert_eq!(b[14], 0x04);
        assert_eq!(Cqe::parse(&b).unwrap().status, 2);
    }

    #[test]
    fn round_trips() {
        for sgl in [
            Sgl::Keyed { address: u64::MAX, length: 0xFF_FFFF, key: u32::MAX, invalidate: true },
            Sgl::InCapsule { offset: 0, length: 8192 },
            Sgl::Other { identifier: 0x5A },
        ] {
            let mut b = [0u8; 16];
            sgl.emit(&mut b);
            assert_eq!(Sgl::parse(&b), sgl);
        }
    }

    #[test]
    fn classification() {
        let mut sqe = [0u8; 64];
        read_cmd().emit(&mut sqe);
        assert_eq!(classify(0x04, &sqe, 64), Capsule::Command(read_cmd()));
        assert_eq!(classify(0xA4, &sqe, 64), Capsule::Command(read_cmd()), "XRC SEND Only");
        assert_eq!(classify(0x01, &sqe, 64), Capsule::None, "SEND Middle starts no message");
        assert_eq!(classify(0x24, &sqe, 64), Capsule::None, "UC is not NVMe/RDMA");
        let mut bad = sqe;
        bad[1] = 0x00; // PRP, not SGL
        assert_eq!(classify(0x04, &bad, 64), Capsule::None);
        let mut bad = sqe;
        bad[16] = 1; // metadata pointer
        assert_eq!(classify(0x04, &bad, 64), Capsule::None);
        let mut bad = sqe;
        bad[39] = 0x5A;
        assert_eq!(classify(0x04, &bad, 64), Capsule::None);

        // In-capsule write: 64 + 512 bytes.
        let w = Sqe { opcode: opcode::WRITE, sgl: Sgl::InCapsule { offset: 0, length: 512 }, ..read_cmd() };
        let mut cap = vec![0u8; 64 + 512];
        w.emit(&mut cap);
        assert_eq!(classify(0x04, &cap, 576), Capsule::Command(w));
        assert_eq!(classify(0x04, &cap[..575], 575), Capsule::None, "data does not fit");
        assert_eq!(classify(0x00, &cap[..200], 1024), Capsule::Command(w), "SEND First of a longer capsule");

        let mut cqe = [0u8; 16];
        Cqe { cid: 9, sq_head: 3, sq_id: 2, ..Default::default() }.emit(&mut cqe);
        assert!(matches!(classify(0x04, &cqe, 16), Capsule::Completion(c) if c.cid == 9));
        assert!(matches!(classify(0x17, &cqe, 16), Capsule::Completion(_)), "SEND Only w/ Invalidate");
        assert_eq!(classify(0x00, &cqe, 16), Capsule::None, "SEND First is not a whole CQE");
        assert_eq!(classify(0x04, &cqe, 17), Capsule::None);
        let mut bad = cqe;
        bad[5] = 1;
        assert_eq!(classify(0x04, &bad, 16), Capsule::None, "DW1 is reserved");
    }

    #[test]
    fn no_send_payload_of_the_real_captures_is_a_command() {
        let mut packets = 0;
        let mut cqe_shaped = 0;
        for name in ["pingpong_rc.pcap", "rdma_cm.pcap", "rdma_send_bw.pcap", "pingpong_uc.pcap"] {
            for f in crate::capture::pcap::read_all_frames(&crate::test_capture(name)).unwrap() {
                if let crate::wire::Decoded::Roce(p) = crate::wire::decode_frame(&f) {
                    packets += 1;
                    match classify(p.bth.opcode(), p.payload, p.payload_len) {
                        Capsule::Command(c) => panic!("{name}: {c:?}"),
                        Capsule::Completion(_) => cqe_shaped += 1,
                        Capsule::None => {}
                    }
                }
            }
        }
        assert!(packets > 100);
        // perftest's 16-byte exchange over RDMA-CM ("6020...") has a CQE's shape: why a
        // completion counts only when it matches a command seen the other way.
        assert_eq!(cqe_shaped, 2);
    }
}
