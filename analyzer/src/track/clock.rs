//! Switch clocks of ERSPAN III sessions. A 32-bit timestamp in 100 ns units wraps every
//! 7 minutes, so it is unwrapped per session; a relative counter is anchored to the capture
//! time of the session's first packet, so intervals stay near wall time while every
//! difference within a session is in the switch's own clock (which is what the segment
//! latencies subtract). IEEE 1588 time is absolute and used as it is.

use crate::wire::erspan::SwitchTime;

/// Sessions are 10-bit ids: one slot each, allocated once.
const SESSIONS: usize = 1024;

#[derive(Debug, Clone, Copy)]
struct SessionClock {
    unit_ns: u64,
    bits: u8,
    last_raw: u64,
    /// Unwrapped ticks since the first packet.
    ticks: i128,
    /// Nanoseconds at tick 0 (the first packet's capture time).
    anchor_ns: i128,
}

pub struct MirrorClocks {
    sessions: Box<[Option<SessionClock>]>,
}

impl Default for MirrorClocks {
    fn default() -> Self {
        Self { sessions: vec![None; SESSIONS].into_boxed_slice() }
    }
}

impl MirrorClocks {
    /// The packet's time from its switch timestamp; `capture_ns` anchors a new session.
    #[inline]
    pub fn time(&mut self, session: u16, t: SwitchTime, capture_ns: u64) -> u64 {
        let (ticks, bits, unit_ns) = match t {
            SwitchTime::Absolute { ns } => return ns,
            SwitchTime::Counter { ticks, bits, unit_ns } => (ticks, bits, unit_ns),
        };
        let slot = &mut self.sessions[usize::from(session) % SESSIONS];
        let c = match slot {
            Some(c) if c.unit_ns == unit_ns && c.bits == bits => c,
            _ => {
                // A new session, or one whose switch changed granularity: re-anchor.
                *slot = Some(SessionClock {
                    unit_ns,
                    bits,
                    last_raw: ticks,
                    ticks: 0,
                    anchor_ns: i128::from(capture_ns),
                });
                return capture_ns;
            }
        };
        let delta: i128 = if bits >= 64 {
            i128::from(ticks) - i128::from(c.last_raw)
        } else {
            // The shortest way round the 32-bit circle: forward across a wrap, or a little
            // back for a reordered packet.
            i128::from((ticks as u32).wrapping_sub(c.last_raw as u32) as i32)
        };
        c.ticks += delta;
        c.last_raw = ticks;
        let ns = c.anchor_ns + c.ticks * i128::from(c.unit_ns);
        ns.clamp(0, i128::from(u64::MAX)) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t32(ticks: u32) -> SwitchTime {
        SwitchTime::Counter { ticks: u64::from(ticks), bits: 32, unit_ns: 100 }
    }

    #[test]
    fn unwraps_a_32_bit_counter_and_keeps_differences_exact() {
        let mut c = MirrorClocks::default();
        let base = 1_700_000_000_000_000_000;
        assert_eq!(c.time(5, t32(u32::MAX - 10), base), base);
        // 20 ticks later, across the wrap: 2 µs.
        assert_eq!(c.time(5, t32(9), base + 999_999), base + 2_000);
        // A reordered packet 5 ticks earlier.
        assert_eq!(c.time(5, t32(4), 0), base + 1_500);
        // Another session is anchored on its own capture time.
        assert_eq!(c.time(6, t32(7), base + 42), base + 42);
        assert_eq!(c.time(6, t32(8), 0), base + 142);
    }

    #[test]
    fn many_wraps_forward() {
        let mut c = MirrorClocks::default();
        c.time(1, t32(0), 1_000);
        let mut raw: u32 = 0;
        let mut expect: u64 = 1_000;
        for _ in 0..10 {
            // 3e9 ticks (300 s) per step: less than half the circle, so it is forward.
            raw = raw.wrapping_add(3_000_000_000 / 2);
            expect += 1_500_000_000 * 100;
            assert_eq!(c.time(1, t32(raw), 0), expect);
        }
    }

    #[test]
    fn absolute_and_64_bit_times() {
        let mut c = MirrorClocks::default();
        assert_eq!(c.time(1, SwitchTime::Absolute { ns: 77 }, 5), 77);
        let t = |ticks| SwitchTime::Counter { ticks, bits: 64, unit_ns: 100_000 };
        assert_eq!(c.time(2, t(1 << 40), 9_000), 9_000);
        assert_eq!(c.time(2, t((1 << 40) + 3), 0), 309_000);
    }
}
