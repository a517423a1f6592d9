//! NIC RX timestamps in raw device-clock ticks (mlx5 outside real-time mode, and any PMD that
//! offers `RTE_ETH_RX_OFFLOAD_TIMESTAMP`), mapped onto the probe's time base.
//!
//! DPDK leaves the unit and epoch of an RX timestamp to each PMD; what it guarantees is that
//! `rte_eth_read_clock` reads the same clock. Reading it next to the TSC clock twice, a while
//! apart, gives the tick rate and the offset; the mapping is refreshed every second so that
//! the two oscillators' drift never accumulates beyond a second's worth (tens of ns at the
//! usual tens of ppm). What the NIC clock adds over the TSC at RX is precision: the time the
//! frame arrived, not the time the poll loop got to it.

/// One reading of the NIC clock and, at the same moment, of the TSC clock (ns since the epoch).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub ticks: u64,
    pub ns: u64,
}

/// Shortest span between two samples to derive a rate from (shorter: the reading jitter
/// weighs too much).
pub const MIN_SPAN_NS: u64 = 10_000_000;
/// How often the mapping is refreshed.
pub const REFRESH_NS: u64 = 1_000_000_000;

/// Whether a device clock reading is Unix time in nanoseconds: within a minute of the
/// probe's own clock read with it (a free-running counter counts from the device's start
/// and is nowhere near 1.7e18).
pub fn is_unix_time(s: Sample) -> bool {
    s.ticks.abs_diff(s.ns) < 60_000_000_000
}

/// Maps device-clock ticks onto nanoseconds of the TSC time base.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NicClock {
    base: Sample,
    ns_per_tick: f64,
    next_refresh_ns: u64,
}

impl NicClock {
    /// The mapping through two samples, or `None` if they are too close or either clock
    /// did not advance.
    pub fn from_samples(a: Sample, b: Sample) -> Option<Self> {
        let dt = b.ticks.checked_sub(a.ticks).filter(|&d| d > 0)?;
        let dn = b.ns.checked_sub(a.ns).filter(|&d| d >= MIN_SPAN_NS)?;
        let ns_per_tick = dn as f64 / dt as f64;
        // A device clock between 1 kHz and 100 GHz; anything else is not a clock.
        if !(0.01..=1_000_000.0).contains(&ns_per_tick) {
            return None;
        }
        Some(Self { base: b, ns_per_tick, next_refresh_ns: b.ns + REFRESH_NS })
    }

    /// The time of a timestamp of `ticks`.
    #[inline]
    pub fn to_ns(&self, ticks: u64) -> u64 {
        // The offset from the base in floating point (exact enough over days), the epoch
        // time in integers (an f64 holds ns since 1970 only to ~256 ns).
        let d = ticks.wrapping_sub(self.base.ticks) as i64 as f64 * self.ns_per_tick;
        self.base.ns.saturating_add_signed(d.round() as i64)
    }

    /// Whether a refresh is due at `now_ns` (one comparison: cheap enough per poll).
    #[inline]
    pub fn due(&self, now_ns: u64) -> bool {
        now_ns >= self.next_refresh_ns
    }

    /// Refits the rate from the last base to `now`, and re-anchors there. A reading that
    /// makes no sense (the clock stepped back, was reset) keeps the mapping and tries again
    /// at the next refresh.
    pub fn refresh(&mut self, now: Sample) {
        match Self::from_samples(self.base, now) {
            Some(c) => *self = c,
            None => self.next_refresh_ns = now.ns + REFRESH_NS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A free-running device clock: `hz` ticks per second from `ticks0` at `ns0`, running
    /// `ppm` fast against the TSC.
    fn device(hz: f64, ticks0: u64, ns0: u64, ppm: f64) -> impl Fn(u64) -> u64 {
        move |ns| ticks0 + ((ns - ns0) as f64 * hz / 1e9 * (1.0 + ppm * 1e-6)) as u64
    }

    #[test]
    fn unix_time_stamps_are_told_from_free_running_ticks() {
        let now = 1_795_939_200_000_000_000u64;
        // mlx5 in real-time mode: the device's PTP-disciplined clock, 40 µs off the host's.
        assert!(is_unix_time(Sample { ticks: now - 40_000, ns: now }));
        // A 156.25 MHz counter a month after power-on, or a 1 GHz one a year after.
        assert!(!is_unix_time(Sample { ticks: 156_250_000 * 86_400 * 30, ns: now }));
        assert!(!is_unix_time(Sample { ticks: 1_000_000_000 * 86_400 * 365, ns: now }));
    }

    #[test]
    fn maps_a_free_running_clock_to_within_tens_of_ns_over_a_second() {
        // 156.25 MHz (6.4 ns per tick) starting at an arbitrary count, 40 ppm fast.
        let ns0 = 1_700_000_000_000_000_000u64;
        let clock = device(156.25e6, 123_456_789_012, ns0, 40.0);
        let at = |ns| Sample { ticks: clock(ns), ns };
        let mut c = NicClock::from_samples(at(ns0), at(ns0 + 20_000_000)).unwrap();
        for step in 1..=5u64 {
            let now = ns0 + 20_000_000 + step * REFRESH_NS;
            assert!(c.due(now));
            c.refresh(at(now));
            assert!(!c.due(now + 1));
            // A frame stamped 0.9 s after the refresh.
            let frame = now + 900_000_000;
            let err = c.to_ns(clock(frame)) as i64 - frame as i64;
            assert!(err.abs() <= 20, "error {err} ns after refresh {step}");
        }
        // Before the base too (a frame stamped just before the last refresh).
        let now = ns0 + 20_000_000 + 5 * REFRESH_NS;
        let err = c.to_ns(clock(now - 1_000_000)) as i64 - (now - 1_000_000) as i64;
        assert!(err.abs() <= 20, "error {err} ns");
    }

    #[test]
    fn a_nanosecond_clock_maps_one_to_one() {
        // mlx5 in real-time mode stamps nanoseconds of a PTP-disciplined clock (TAI, here 37 s
        // ahead of the TSC's UTC).
        let ns0 = 1_700_000_000_000_000_000u64;
        let tai = |ns: u64| ns + 37_000_000_000;
        let c = NicClock::from_samples(
            Sample { ticks: tai(ns0), ns: ns0 },
            Sample { ticks: tai(ns0 + 50_000_000), ns: ns0 + 50_000_000 },
        )
        .unwrap();
        assert_eq!(c.to_ns(tai(ns0 + 70_000_123)), ns0 + 70_000_123);
    }

    #[test]
    fn readings_that_are_not_a_clock_are_refused() {
        let s = |ticks, ns| Sample { ticks, ns };
        // Too close together, a clock that stood still or went back, a TSC that went back.
        assert_eq!(NicClock::from_samples(s(0, 0), s(1000, 1_000_000)), None);
        assert_eq!(NicClock::from_samples(s(5, 0), s(5, 50_000_000)), None);
        assert_eq!(NicClock::from_samples(s(9, 0), s(5, 50_000_000)), None);
        assert_eq!(NicClock::from_samples(s(0, 50_000_000), s(5, 0)), None);
        // 1 tick in 50 ms: 20 Hz is no device clock.
        assert_eq!(NicClock::from_samples(s(0, 0), s(1, 50_000_000)), None);
        // A reset clock keeps the old mapping and retries a second later.
        let mut c = NicClock::from_samples(s(0, 0), s(5_000_000, 50_000_000)).unwrap();
        let before = c.to_ns(6_000_000);
        c.refresh(s(3, 1_050_000_000));
        assert_eq!(c.to_ns(6_000_000), before);
        assert!(!c.due(1_050_000_000) && c.due(2_050_000_000));
    }
}
