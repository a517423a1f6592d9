//! ERSPAN headers (draft-foschiano-erspan), the encapsulation of remote mirrors: type I
//! has none (the mirrored frame follows a GRE header without sequence number), type II a
//! session id, type III the session id, the switch's timestamp, its granularity and the
//! optional platform-specific sub-header.

use super::{be16, put16, DecodeError, Result};

pub const TYPE_II_LEN: usize = 8;
pub const TYPE_III_LEN: usize = 12;
pub const PLATFORM_LEN: usize = 8;

/// Timestamp granularity of ERSPAN type III.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Granularity {
    /// 00: units of 100 microseconds.
    Micros100,
    /// 01: units of 100 nanoseconds.
    Nanos100,
    /// 10: IEEE 1588: nanoseconds, with seconds in the platform sub-header (ID 5 or 6);
    /// without it, a 32-bit count of nanoseconds that wraps every 4.29 s.
    Ieee1588,
    /// 11: platform specific.
    Platform,
}

impl Granularity {
    fn from_bits(b: u8) -> Self {
        match b & 3 {
            0 => Self::Micros100,
            1 => Self::Nanos100,
            2 => Self::Ieee1588,
            _ => Self::Platform,
        }
    }
    fn bits(self) -> u8 {
        self as u8
    }
    /// Nanoseconds per timestamp unit, where the unit is fixed.
    pub fn unit_ns(self) -> Option<u32> {
        match self {
            Self::Micros100 => Some(100_000),
            Self::Nanos100 => Some(100),
            Self::Ieee1588 => Some(1),
            Self::Platform => None,
        }
    }
}

/// The switch's time for a mirrored packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SwitchTime {
    /// A counter in `unit_ns` units, `bits` wide (32 alone, 64 with the platform ID 3
    /// sub-header's upper half): relative, and wrapping when 32 bits wide (every 4.29 s in
    /// nanoseconds, every 7 minutes in 100 ns units).
    Counter { ticks: u64, bits: u8, unit_ns: u32 },
    /// IEEE 1588 time: seconds from the platform sub-header (ID 5 or 6) and nanoseconds.
    Absolute { ns: u64 },
}

/// A mirror session: the switch that sends it (the tunnel's source address, IPv6 folded to
/// 32 bits) and its id. Two switches mirroring under one id are two sessions, each with its
/// own clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionKey {
    pub origin: u32,
    pub id: u16,
}

/// Parsed ERSPAN header, either type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// 1 for type I (no header), 2 for type II (version field 1), 3 for type III (version
    /// field 2).
    pub erspan_type: u8,
    pub vlan: u16,
    pub cos: u8,
    pub session: u16,
    /// The T bit: the switch cut the mirrored frame short (a session's truncation size), so
    /// the frame may end before its own headers say it does.
    pub truncated: bool,
    /// Type II: the port index. Type III: unused (0).
    pub index: u32,
    /// Type III only.
    pub timestamp: u32,
    pub granularity: Granularity,
    pub hw_id: u8,
    /// Type III: the platform sub-header (platform id, and its two words).
    pub platform: Option<(u8, u32, u32)>,
}

impl Repr {
    /// Parses the header at the start of `b`; returns it and its length.
    pub fn parse(b: &[u8], erspan_type: u8) -> Result<(Self, usize)> {
        if erspan_type == 1 {
            return Ok((Self::type_i(), 0));
        }
        let min = if erspan_type == 3 { TYPE_III_LEN } else { TYPE_II_LEN };
        if b.len() < min {
            return Err(DecodeError::ErspanTruncated);
        }
        let w0 = be16(b, 0);
        let version = (w0 >> 12) as u8;
        let expect = if erspan_type == 3 { 2 } else { 1 };
        if version != expect {
            return Err(DecodeError::ErspanBadVersion);
        }
        let w1 = be16(b, 2);
        let mut r = Repr {
            erspan_type,
            vlan: w0 & 0x0FFF,
            cos: (w1 >> 13) as u8,
            session: w1 & 0x03FF,
            truncated: w1 & 0x0400 != 0,
            index: 0,
            timestamp: 0,
            granularity: Granularity::Micros100,
            hw_id: 0,
            platform: None,
        };
        if erspan_type != 3 {
            r.index = u32::from_be_bytes([0, b[5] & 0x0F, b[6], b[7]]);
            return Ok((r, TYPE_II_LEN));
        }
        r.timestamp = u32::from_be_bytes(b[4..8].try_into().unwrap());
        let last = be16(b, 10);
        r.hw_id = ((last >> 4) & 0x3F) as u8;
        r.granularity = Granularity::from_bits((last >> 1) as u8);
        let mut len = TYPE_III_LEN;
        if last & 1 != 0 {
            if b.len() < TYPE_III_LEN + PLATFORM_LEN {
                return Err(DecodeError::ErspanTruncated);
            }
            let p0 = u32::from_be_bytes(b[12..16].try_into().unwrap());
            let p1 = u32::from_be_bytes(b[16..20].try_into().unwrap());
            r.platform = Some(((p0 >> 26) as u8, p0 & 0x03FF_FFFF, p1));
            len += PLATFORM_LEN;
        }
        Ok((r, len))
    }

    /// Type I: no header, so nothing but the type.
    pub fn type_i() -> Self {
        Self::of_session(1, 0)
    }

    /// A header of `erspan_type` for `session`, every other field zero (granularity 00, no
    /// platform sub-header): where a writer starts from.
    pub fn of_session(erspan_type: u8, session: u16) -> Self {
        Repr {
            erspan_type,
            vlan: 0,
            cos: 0,
            session,
            truncated: false,
            index: 0,
            timestamp: 0,
            granularity: Granularity::Micros100,
            hw_id: 0,
            platform: None,
        }
    }

    pub fn header_len(&self) -> usize {
        match (self.erspan_type, self.platform) {
            (1, _) => 0,
            (3, Some(_)) => TYPE_III_LEN + PLATFORM_LEN,
            (3, None) => TYPE_III_LEN,
            _ => TYPE_II_LEN,
        }
    }

    pub fn emit(&self, out: &mut [u8]) {
        if self.erspan_type == 1 {
            return;
        }
        let version: u16 = if self.erspan_type == 3 { 2 } else { 1 };
        put16(out, 0, (version << 12) | (self.vlan & 0x0FFF));
        let t = if self.truncated { 0x0400 } else { 0 };
        put16(out, 2, (u16::from(self.cos & 7) << 13) | t | (self.session & 0x03FF));
        if self.erspan_type != 3 {
            out[4..8].copy_from_slice(&(self.index & 0x000F_FFFF).to_be_bytes());
            return;
        }
        out[4..8].copy_from_slice(&self.timestamp.to_be_bytes());
        put16(out, 8, 0); // SGT
        let o = u16::from(self.platform.is_some());
        put16(out, 10, (u16::from(self.hw_id & 0x3F) << 4) | (u16::from(self.granularity.bits()) << 1) | o);
        if let Some((id, w0, w1)) = self.platform {
            out[12..16].copy_from_slice(&((u32::from(id) << 26) | (w0 & 0x03FF_FFFF)).to_be_bytes());
            out[16..20].copy_from_slice(&w1.to_be_bytes());
        }
    }

    /// The switch's time for the packet, if this is type III with a known granularity.
    pub fn switch_time(&self) -> Option<SwitchTime> {
        if self.erspan_type != 3 {
            return None;
        }
        match (self.granularity, self.platform) {
            (Granularity::Ieee1588, Some((5 | 6, _, secs))) => {
                Some(SwitchTime::Absolute { ns: u64::from(secs) * 1_000_000_000 + u64::from(self.timestamp) })
            }
            (Granularity::Platform, _) => None,
            (g, Some((3, _, upper))) => Some(SwitchTime::Counter {
                ticks: (u64::from(upper) << 32) | u64::from(self.timestamp),
                bits: 64,
                unit_ns: g.unit_ns()?,
            }),
            (g, _) => Some(SwitchTime::Counter {
                ticks: u64::from(self.timestamp),
                bits: 32,
                unit_ns: g.unit_ns()?,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn type3(g: Granularity, platform: Option<(u8, u32, u32)>) -> Repr {
        Repr {
            erspan_type: 3,
            vlan: 100,
            cos: 5,
            session: 0x3FF,
            truncated: false,
            index: 0,
            timestamp: 0xDEAD_BEEF,
            granularity: g,
            hw_id: 9,
            platform,
        }
    }

    #[test]
    fn type_ii_known_answer_and_round_trip() {
        // Ver 1, VLAN 10, COS 0, session 7, index 0x12345 (draft-foschiano-erspan §4.1).
        let r = Repr {
            erspan_type: 2,
            vlan: 10,
            cos: 0,
            session: 7,
            truncated: false,
            index: 0x12345,
            timestamp: 0,
            granularity: Granularity::Micros100,
            hw_id: 0,
            platform: None,
        };
        let mut b = [0u8; 8];
        r.emit(&mut b);
        assert_eq!(b, [0x10, 0x0A, 0x00, 0x07, 0x00, 0x01, 0x23, 0x45]);
        assert_eq!(Repr::parse(&b, 2).unwrap(), (r, 8));
        assert_eq!(r.switch_time(), None);
    }

    #[test]
    fn type_iii_round_trips_and_times() {
        for (r, t) in [
            (
                type3(Granularity::Nanos100, None),
                Some(SwitchTime::Counter { ticks: 0xDEAD_BEEF, bits: 32, unit_ns: 100 }),
            ),
            (
                type3(Granularity::Micros100, Some((3, 0x2A, 0x12))),
                Some(SwitchTime::Counter { ticks: 0x12_DEAD_BEEF, bits: 64, unit_ns: 100_000 }),
            ),
            (
                type3(Granularity::Ieee1588, Some((5, 0x1, 1_700_000_000))),
                Some(SwitchTime::Absolute { ns: 1_700_000_000 * 1_000_000_000 + 0xDEAD_BEEF }),
            ),
            (type3(Granularity::Platform, None), None),
            // 1 ns without the seconds: a 32-bit count of nanoseconds.
            (
                type3(Granularity::Ieee1588, None),
                Some(SwitchTime::Counter { ticks: 0xDEAD_BEEF, bits: 32, unit_ns: 1 }),
            ),
        ] {
            let mut b = [0u8; 20];
            r.emit(&mut b);
            let (back, len) = Repr::parse(&b, 3).unwrap();
            assert_eq!((back, len), (r, r.header_len()));
            assert_eq!(back.switch_time(), t);
            assert_eq!(Repr::parse(&b[..len - 1], 3).err(), Some(DecodeError::ErspanTruncated));
        }
        // Known answer: version 2, VLAN 100 → 0x2064; COS 5, session 0x3FF → 0xA3FF;
        // HW ID 9, granularity 01, O 0 → 0x0092.
        let mut b = [0u8; 12];
        type3(Granularity::Nanos100, None).emit(&mut b);
        assert_eq!(b, [0x20, 0x64, 0xA3, 0xFF, 0xDE, 0xAD, 0xBE, 0xEF, 0, 0, 0x00, 0x92]);
    }

    #[test]
    fn wrong_version_is_an_error() {
        let mut b = [0u8; 12];
        type3(Granularity::Nanos100, None).emit(&mut b);
        assert_eq!(Repr::parse(&b, 2).err(), Some(DecodeError::ErspanBadVersion));
    }
}
