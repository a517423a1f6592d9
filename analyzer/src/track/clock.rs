//! Switch clocks of ERSPAN III sessions. A 32-bit timestamp wraps: every 7 minutes in
//! 100 ns units, every 4.29 s in nanoseconds. It is unwrapped per session, with the capture
//! time (the probe's own clock) telling how many times it went round since the session's
//! previous packet: a session silent for longer than half a turn (2.1 s in nanoseconds)
//! comes back at the right time. A relative counter is anchored to the capture time of the
//! session's first packet, so intervals stay near wall time while every difference within
//! a session is in the switch's own clock (which is what the segment latencies subtract).
//! IEEE 1588 time is absolute and used as it is.
//!
//! A stamp out of step with its session's previous one by more than [`CLOCK_STEP_NS`] (it
//! moved that much more or less than the capture clock since) is not believed: one bogus
//! stamp would move the analysis's clock for every flow. Nor is a session's first absolute
//! stamp that far from its capture time (a lone packet of a session of its own could carry
//! any time). The packet is then timed by its capture, and the session goes on from that
//! stamp: a counter is anchored again there, and the stamps that follow in step with it
//! are believed (a switch that restarted its counter, or a switch clock a constant offset
//! from the probe's, loses one packet's time, not the session's).
//!
//! Within that second, a counter's stamp may still be bogus a few milliseconds ahead: it
//! would move the analysis's time, and the frames after it would read as late. A packet
//! reaches the probe some time after the switch stamped it, so a session's switch time is
//! ahead of its capture time (its *lead*) by at most what the anchoring packet's path took
//! more than this one's (and the two clocks' drift). A stamp whose lead passes the
//! session's highest so far by more than [`LEAD_SLACK_NS`] is not believed, unless the
//! next stamp's lead agrees with it (the path got that much faster: the session's lead
//! goes up then, and one packet lost its switch time). A lead that creeps up, as drift
//! makes it, moves the highest along.
//!
//! A free-running counter ticks at its own oscillator's rate, tens of parts per million off
//! the probe's: anchored once, two switches' counters drift apart by milliseconds a minute,
//! past the reorder window, and an I/O seen at both would be split by their drift. Each
//! counter is therefore steered to the probe's clock ([`Drift`]): the highest lead of each
//! second of switch time (its packets' shortest path) moves from one second to the next at
//! the counter's drift, whose median over the last seconds a correction that grows smoothly
//! with the switch's time takes out (a second behind, catching up at a bounded rate, never
//! a step). Differences within a session change by the drift's parts per million and that
//! bounded catch-up, a fraction of a nanosecond over a microsecond.

use super::bounded::FifoMap;
use crate::wire::erspan::{SessionKey, SwitchTime};

/// A frame this far from the latest time (either way) is no late mirror copy but a clock
/// that stepped (or a bogus timestamp); a switch time this far from its frame's capture
/// time is not believed. The longest reorder window.
pub const CLOCK_STEP_NS: u64 = 1_000_000_000;

/// How far a counter's stamp may lead its capture time beyond the session's highest lead
/// so far: the reorder window's default, within which a frame ahead makes no later frame
/// late.
pub const LEAD_SLACK_NS: i128 = 1_000_000;

/// Sessions are 10-bit ids: one slot each, allocated once, for the first switch that
/// mirrors under the id.
const SESSIONS: usize = 1024;

/// The clocks of sessions whose id another switch took first (switches configured alike,
/// each mirroring under session 1): at most this many, the least recently used forgotten
/// (its next stamp anchors it again).
const SHARED_IDS: usize = 1024;

/// `SessionClock::bits` of a session that stamps absolute time (counters have 16 to 64).
const ABSOLUTE: u8 = 0;

/// The span of switch time over which a counter's highest lead is taken ([`Drift`]).
const DRIFT_WINDOW_NS: i128 = 1_000_000_000;

/// Stamps a window must hold to measure the drift: the highest lead of a few packets is
/// no shortest path.
const DRIFT_MIN_STAMPS: u32 = 16;

/// Rates measured between consecutive windows that the drift is the median of; the
/// correction starts once [`DRIFT_MIN_RATES`] are in.
const DRIFT_RATES: usize = 9;
const DRIFT_MIN_RATES: usize = 3;

/// The most a counter is taken to drift (an oscillator a thousand parts per million off is
/// broken), and the most the correction may run beyond the drift to catch up with it, both
/// in parts per billion: times within a session then never run backwards, and a wrong
/// measurement moves them by at most this rate.
const DRIFT_MAX_PPB: i128 = 1_000_000;
const CATCH_UP_PPB: i128 = 500_000;

/// A counter's correction to the probe's clock: nanoseconds to take off its time. The
/// highest lead of a window of [`DRIFT_WINDOW_NS`] of at least [`DRIFT_MIN_STAMPS`] stamps
/// is its packet of the shortest path; the rate at which that lead moves from one such
/// window to the next is a measurement of the counter's drift, and the drift is the median
/// of the last [`DRIFT_RATES`] of them (one stamp ahead of its window's others, or a path
/// that became slower or faster for good, moves one or two of them, not the median). At the
/// end of each window the correction is set to meet the drift's line from the anchoring
/// packet (which keeps its lead) by the end of the next window, its slope within
/// [`CATCH_UP_PPB`] of the drift's; it never steps, and silences keep it on the drift's
/// slope.
#[derive(Debug, Clone, Copy, Default)]
struct Drift {
    /// The switch time of the anchoring packet.
    anchor: i128,
    /// The last window that measured: its highest lead and that stamp's switch time.
    last: Option<(i128, i128)>,
    /// The rates measured (parts per billion), the latest at `next_rate - 1`.
    rates: [i32; DRIFT_RATES],
    n_rates: u8,
    next_rate: u8,
    /// The open window's start, its stamps, and its highest lead so far and that stamp's
    /// switch time.
    start: i128,
    stamps: u32,
    lead: i128,
    lead_at: i128,
    /// The correction is `corr` at switch time `base`, grows at `slope` (parts per billion)
    /// until `base` + a window, then at `rate`.
    base: i128,
    corr: i128,
    slope: i128,
    rate: i128,
}

impl Drift {
    fn new(ns: i128) -> Self {
        Self { anchor: ns, start: ns, stamps: 1, lead_at: ns, base: ns, ..Self::default() }
    }

    /// The correction at switch time `ns` (the counter's time before it).
    #[inline]
    fn at(&self, ns: i128) -> i128 {
        let d = ns - self.base;
        if d <= DRIFT_WINDOW_NS {
            self.corr + self.slope * d / 1_000_000_000
        } else {
            self.corr + (self.slope * DRIFT_WINDOW_NS + self.rate * (d - DRIFT_WINDOW_NS)) / 1_000_000_000
        }
    }

    /// A stamp believed: switch time `ns` (before the correction), `lead` ahead of its
    /// capture time.
    #[inline]
    fn observe(&mut self, ns: i128, lead: i128) {
        if ns - self.start >= DRIFT_WINDOW_NS {
            self.close(ns);
            (self.start, self.stamps, self.lead, self.lead_at) = (ns, 1, lead, ns);
        } else {
            self.stamps += 1;
            if lead > self.lead {
                (self.lead, self.lead_at) = (lead, ns);
            }
        }
    }

    /// The open window ends at `ns`: a rate measured, and the correction set for what
    /// follows.
    #[cold]
    #[inline(never)]
    fn close(&mut self, ns: i128) {
        if self.stamps < DRIFT_MIN_STAMPS {
            return;
        }
        let Some((lead0, at0)) = self.last else {
            self.last = Some((self.lead, self.lead_at));
            return;
        };
        // Two points too close together say little of a rate: this one waits for the next.
        let span = self.lead_at - at0;
        if span < DRIFT_WINDOW_NS / 2 {
            return;
        }
        self.last = Some((self.lead, self.lead_at));
        let rate = ((self.lead - lead0) * 1_000_000_000 / span).clamp(-DRIFT_MAX_PPB, DRIFT_MAX_PPB);
        self.rates[usize::from(self.next_rate)] = rate as i32;
        self.next_rate = (self.next_rate + 1) % DRIFT_RATES as u8;
        self.n_rates = (self.n_rates + 1).min(DRIFT_RATES as u8);
        let n = usize::from(self.n_rates);
        if n < DRIFT_MIN_RATES {
            return;
        }
        let mut sorted = self.rates;
        sorted[..n].sort_unstable();
        let drift = i128::from(sorted[n / 2]);
        let (corr, next) = (self.at(ns), ns + DRIFT_WINDOW_NS);
        // How far the counter will have run ahead of the probe's clock (a positive
        // correction) since the anchoring packet, by the next window's end.
        let drifted = drift * (next - self.anchor) / 1_000_000_000;
        let meet = (drifted - corr) * 1_000_000_000 / DRIFT_WINDOW_NS;
        (self.base, self.corr) = (ns, corr);
        self.slope = meet.clamp(drift - CATCH_UP_PPB, drift + CATCH_UP_PPB);
        self.rate = drift;
    }
}

#[derive(Debug, Clone, Copy)]
struct SessionClock {
    unit_ns: u64,
    bits: u8,
    last_raw: u64,
    /// Capture time of the previous packet.
    last_capture_ns: u64,
    /// Unwrapped ticks since the first packet.
    ticks: i128,
    /// Nanoseconds at tick 0 (the first packet's capture time).
    anchor_ns: i128,
    /// The highest lead (switch time less capture time) of a stamp believed; the lead of
    /// the previous stamp if it passed that by more than [`LEAD_SLACK_NS`].
    max_lead: i128,
    suspect_lead: Option<i128>,
    /// A counter's steering to the probe's clock.
    drift: Drift,
}

impl SessionClock {
    /// A session's clock from its stamp `raw`, anchored at the packet's capture time.
    fn at(unit_ns: u64, bits: u8, raw: u64, capture_ns: u64) -> Self {
        Self {
            unit_ns,
            bits,
            last_raw: raw,
            last_capture_ns: capture_ns,
            ticks: 0,
            anchor_ns: i128::from(capture_ns),
            max_lead: 0,
            suspect_lead: None,
            drift: Drift::new(i128::from(capture_ns)),
        }
    }
}

pub struct MirrorClocks {
    /// By session id, for the first switch that used it (`origins`).
    sessions: Box<[Option<SessionClock>]>,
    origins: Box<[u32]>,
    /// The other switches' sessions under ids taken.
    shared: FifoMap<SessionKey, Option<SessionClock>>,
    /// The lead (switch time less capture time) of the latest stamp believed, 0 while none
    /// was: what [`MirrorClocks::unstamped`] adds to a capture time.
    lead: i64,
    /// Some stamp was believed (`lead` is one).
    led: bool,
}

impl Default for MirrorClocks {
    fn default() -> Self {
        Self {
            sessions: vec![None; SESSIONS].into_boxed_slice(),
            origins: vec![0; SESSIONS].into_boxed_slice(),
            shared: FifoMap::new(SHARED_IDS),
            lead: 0,
            led: false,
        }
    }
}

impl MirrorClocks {
    /// The packet's time from its switch timestamp; `capture_ns` anchors a new session.
    /// `None` if the stamp is not believed (see the module's comment).
    #[inline]
    pub fn time(&mut self, session: SessionKey, t: SwitchTime, capture_ns: u64) -> Option<u64> {
        let ns = self.session_time(session, t, capture_ns)?;
        // Signed 64 bits hold any lead a clock can have (292 years either way).
        self.lead = ns.wrapping_sub(capture_ns) as i64;
        self.led = true;
        Some(ns)
    }

    /// The time of a frame without a switch time it could use (not mirrored, not a RoCE
    /// packet, a stamp not believed) captured at `capture_ns`: where the switch-timed frames
    /// around it stand, by the lead of the latest stamp believed; its capture time while no
    /// stamp was. A switch clock behind the probe's (absolute time from a clock of its own, a
    /// counter that drifts) would otherwise put every such frame that far ahead of the
    /// mirrored traffic, moving the analysis's time on, and the mirrored frames after it
    /// would be late.
    #[inline]
    pub fn unstamped(&self, capture_ns: u64) -> u64 {
        // Every plain frame comes here: without a switch clock, one compare.
        if self.lead == 0 {
            capture_ns
        } else {
            capture_ns.saturating_add_signed(self.lead)
        }
    }

    /// The clock of a session: in its id's slot if the slot is free or the session's switch
    /// took it first (one compare, nearly always); else among the shared ids' (out of line).
    #[inline]
    fn clock_of(&mut self, session: SessionKey) -> &mut Option<SessionClock> {
        let at = usize::from(session.id) % SESSIONS;
        if self.sessions[at].is_none() {
            self.origins[at] = session.origin;
        }
        if self.origins[at] == session.origin {
            &mut self.sessions[at]
        } else {
            self.shared_clock(session)
        }
    }

    #[cold]
    #[inline(never)]
    fn shared_clock(&mut self, session: SessionKey) -> &mut Option<SessionClock> {
        self.shared.get_or_insert_recent(session, || None)
    }

    /// [`MirrorClocks::time`] of one session.
    #[inline]
    fn session_time(&mut self, session: SessionKey, t: SwitchTime, capture_ns: u64) -> Option<u64> {
        let in_step = |moved: i128, c: &SessionClock| {
            (moved - (i128::from(capture_ns) - i128::from(c.last_capture_ns))).abs()
                <= i128::from(CLOCK_STEP_NS)
        };
        // How far ahead of the switch-timed traffic so far a session's first absolute stamp
        // may lead (see below).
        let latest = self.led.then_some(i128::from(self.lead) + LEAD_SLACK_NS);
        let slot = self.clock_of(session);
        let (ticks, bits, unit_ns) = match t {
            SwitchTime::Absolute { ns } => {
                // A session's first stamp: within a second of its capture, and no further
                // ahead of the latest stamp believed than the reorder window's default (a
                // lone packet of a session of its own, a millisecond or more ahead, would
                // move every flow's time and make the next frames late). Otherwise the next
                // stamp in step with it is believed.
                let lead = i128::from(ns) - i128::from(capture_ns);
                let believed = match slot {
                    Some(c) if c.bits == ABSOLUTE => in_step(i128::from(ns) - i128::from(c.last_raw), c),
                    _ => ns.abs_diff(capture_ns) <= CLOCK_STEP_NS && latest.is_none_or(|l| lead <= l),
                };
                *slot = Some(SessionClock::at(1, ABSOLUTE, ns, capture_ns));
                return believed.then_some(ns);
            }
            SwitchTime::Counter { ticks, bits, unit_ns } => (ticks, bits, u64::from(unit_ns)),
        };
        let anchor = |slot: &mut Option<SessionClock>| {
            *slot = Some(SessionClock::at(unit_ns, bits, ticks, capture_ns))
        };
        let c = match slot {
            Some(c) if c.unit_ns == unit_ns && c.bits == bits => c,
            _ => {
                // A new session, or one whose switch changed granularity: anchored here.
                anchor(slot);
                return Some(capture_ns);
            }
        };
        let delta: i128 = if bits >= 64 {
            i128::from(ticks) - i128::from(c.last_raw)
        } else {
            // Round the 32-bit circle as many times as the capture clock says went by, to
            // the nearest turn: forward across wraps, or a little back for a reordered
            // packet. Right while the two clocks disagree by less than half a turn over the
            // silence (2.1 s in nanoseconds).
            const TURN: i128 = 1 << 32;
            let short = i128::from((ticks as u32).wrapping_sub(c.last_raw as u32) as i32);
            let gap = i128::from(capture_ns) - i128::from(c.last_capture_ns);
            // In 64 bits whenever the gap fits (a 128-bit division is a library call of some
            // sixty instructions, for every mirrored packet); the same quotient either way.
            let elapsed = match (i64::try_from(gap), i64::try_from(c.unit_ns)) {
                (Ok(g), Ok(u)) => i128::from(g / u),
                _ => gap / i128::from(c.unit_ns),
            };
            let turns = (elapsed - short + TURN / 2).div_euclid(TURN);
            short + turns * TURN
        };
        if !in_step(delta * i128::from(c.unit_ns), c) {
            anchor(slot);
            return None;
        }
        c.ticks += delta;
        c.last_raw = ticks;
        c.last_capture_ns = capture_ns;
        let raw = c.anchor_ns + c.ticks * i128::from(c.unit_ns);
        let ns = raw - c.drift.at(raw);
        let lead = ns - i128::from(capture_ns);
        if lead > c.max_lead + LEAD_SLACK_NS {
            let confirmed = c.suspect_lead.is_some_and(|s| (lead - s).abs() <= LEAD_SLACK_NS);
            if !confirmed {
                c.suspect_lead = Some(lead);
                return None;
            }
        }
        c.max_lead = c.max_lead.max(lead);
        c.suspect_lead = None;
        c.drift.observe(raw, raw - i128::from(capture_ns));
        Some(ns.clamp(0, i128::from(u64::MAX)) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Session `id` of one switch.
    fn s(id: u16) -> SessionKey {
        SessionKey { origin: 0xC0A8_0001, id }
    }

    fn t32(ticks: u32) -> SwitchTime {
        SwitchTime::Counter { ticks: u64::from(ticks), bits: 32, unit_ns: 100 }
    }

    #[test]
    fn unwraps_a_32_bit_counter_and_keeps_differences_exact() {
        let mut c = MirrorClocks::default();
        let base = 1_700_000_000_000_000_000;
        assert_eq!(c.time(s(5), t32(u32::MAX - 10), base), Some(base));
        // 20 ticks later, across the wrap: 2 µs.
        assert_eq!(c.time(s(5), t32(9), base + 999_999), Some(base + 2_000));
        // A reordered packet 5 ticks earlier.
        assert_eq!(c.time(s(5), t32(4), base + 999_999), Some(base + 1_500));
        // Another session is anchored on its own capture time.
        assert_eq!(c.time(s(6), t32(7), base + 42), Some(base + 42));
        assert_eq!(c.time(s(6), t32(8), base + 150), Some(base + 142));
    }

    #[test]
    fn a_silence_longer_than_64_bits_of_nanoseconds_divides_the_same() {
        // The capture clock jumps by 2^63 + 12,345 ns (past what 64 signed bits hold):
        // 92,233,720,368,547,881 ticks of 100 ns, whose low 32 bits the switch stamps,
        // 2,061,584,425 (worked out with Python's integers): the same time, to the tick.
        let mut c = MirrorClocks::default();
        let base = 1_000_000_000_000_000_000_u64;
        assert_eq!(c.time(s(3), t32(0), base), Some(base));
        assert_eq!(
            c.time(s(3), t32(2_061_584_425), base + (1 << 63) + 12_345),
            Some(10_223_372_036_854_788_100)
        );
    }

    #[test]
    fn many_wraps_forward() {
        let mut c = MirrorClocks::default();
        assert_eq!(c.time(s(1), t32(0), 1_000), Some(1_000));
        let mut raw: u32 = 0;
        let mut expect: u64 = 1_000;
        for _ in 0..10 {
            // 1.5e9 ticks (150 s) per step.
            raw = raw.wrapping_add(3_000_000_000 / 2);
            expect += 1_500_000_000 * 100;
            assert_eq!(c.time(s(1), t32(raw), expect + 3_000), Some(expect));
        }
    }

    #[test]
    fn a_frame_without_a_switch_time_takes_the_latest_stamps_lead() {
        let mut c = MirrorClocks::default();
        // No stamp believed yet: its capture time.
        assert_eq!(c.unstamped(10_000_000), 10_000_000);
        // A switch clock 5 ms behind (absolute time): 5 ms less, either way of the stamp.
        let abs = |ns| SwitchTime::Absolute { ns };
        assert_eq!(c.time(s(1), abs(5_000_000_000), 5_005_000_000), Some(5_000_000_000));
        assert_eq!(c.unstamped(5_006_000_000), 5_001_000_000);
        assert_eq!(c.unstamped(5_004_000_000), 4_999_000_000);
        // A stamp not believed (10 s off) leaves the lead as it was.
        assert_eq!(c.time(s(1), abs(15_000_000_000), 5_007_000_000), None);
        assert_eq!(c.unstamped(5_008_000_000), 5_003_000_000);
    }

    #[test]
    fn absolute_and_64_bit_times() {
        let mut c = MirrorClocks::default();
        assert_eq!(c.time(s(1), SwitchTime::Absolute { ns: 77 }, 5), Some(77));
        let t = |ticks| SwitchTime::Counter { ticks, bits: 64, unit_ns: 100_000 };
        assert_eq!(c.time(s(2), t(1 << 40), 9_000), Some(9_000));
        assert_eq!(c.time(s(2), t((1 << 40) + 3), 0), Some(309_000));
    }

    #[test]
    fn a_stamp_out_of_step_with_its_session_is_not_believed_and_the_session_goes_on() {
        let mut c = MirrorClocks::default();
        let base = 1_700_000_000_000_000_000;
        let abs = |ns| SwitchTime::Absolute { ns };
        // A lone packet of a session of its own, 10 s ahead of its capture: not believed.
        assert_eq!(c.time(s(1), abs(base + 10_000_000_000), base), None);
        // A switch clock 37 s ahead of the probe's (TAI against UTC): its first packet is
        // timed by the capture, the next in step with it by the switch.
        assert_eq!(c.time(s(2), abs(base + 37_000_000_000), base), None);
        assert_eq!(c.time(s(2), abs(base + 37_000_001_000), base + 1_200), Some(base + 37_000_001_000));
        // Within a second of its capture, a session's first absolute stamp is believed; a
        // stamp 10 s out of step is not, nor the next (out of step with that one), and the
        // one after goes on.
        assert_eq!(c.time(s(3), abs(base - 1_000_000_000), base), Some(base - 1_000_000_000));
        assert_eq!(c.time(s(3), abs(base + 10_000_000_000), base + 1_000), None);
        assert_eq!(c.time(s(3), abs(base - 999_998_000), base + 2_000), None);
        assert_eq!(c.time(s(3), abs(base - 999_997_000), base + 3_000), Some(base - 999_997_000));
        // A counter that jumps 10 s in 1 ms of capture time (a bogus stamp, or a switch that
        // restarted its counter): timed by the capture and anchored there; the stamps in
        // step with it are timed from it.
        let t = |ticks| SwitchTime::Counter { ticks, bits: 64, unit_ns: 1 };
        assert_eq!(c.time(s(4), t(5_000), base), Some(base));
        assert_eq!(c.time(s(4), t(5_000 + 2_000_000), base + 2_000_100), Some(base + 2_000_000));
        assert_eq!(c.time(s(4), t(9_000_000_000_000), base + 3_000_000), None);
        assert_eq!(c.time(s(4), t(9_000_000_500_000), base + 3_600_000), Some(base + 3_500_000));
    }

    /// A switch's IEEE 1588 clock 2 ms behind the probe's (session 5), then a lone packet of
    /// a session of its own (77) stamped 5 ms ahead of its capture: not believed (it would
    /// move the time 7 ms ahead of the mirrored traffic); the next in step with it is. A new
    /// session in step with the others (6, 2 ms behind too) is believed at once.
    #[test]
    fn a_new_sessions_first_stamp_ahead_of_the_others_waits_for_the_next() {
        let mut c = MirrorClocks::default();
        let base = 1_700_000_000_000_000_000;
        let abs = |ns| SwitchTime::Absolute { ns };
        assert_eq!(c.time(s(5), abs(base - 2_000_000), base), Some(base - 2_000_000));
        assert_eq!(c.time(s(77), abs(base + 5_010_000), base + 10_000), None);
        assert_eq!(c.time(s(77), abs(base + 5_020_000), base + 20_000), Some(base + 5_020_000));
        assert_eq!(c.time(s(6), abs(base - 1_970_000), base + 30_000), Some(base - 1_970_000));
    }

    #[test]
    fn a_stamp_milliseconds_ahead_is_not_believed_unless_the_next_agrees() {
        let mut c = MirrorClocks::default();
        let base = 1_700_000_000_000_000_000;
        // 100 ns ticks; every packet reaches the probe 4 µs after the switch stamped it.
        assert_eq!(c.time(s(7), t32(1_000), base + 4_000), Some(base + 4_000));
        assert_eq!(c.time(s(7), t32(1_010), base + 5_000), Some(base + 5_000));
        // A stamp 5 ms ahead of its neighbours (50,000 ticks): timed by its capture.
        assert_eq!(c.time(s(7), t32(51_020), base + 6_000), None);
        // The next ones in step with the earlier stamps are believed, to the tick.
        assert_eq!(c.time(s(7), t32(1_030), base + 7_000), Some(base + 7_000));
        assert_eq!(c.time(s(7), t32(1_040), base + 8_000), Some(base + 8_000));
        // The path 3 ms faster from here on (the session began behind a queue): the first
        // stamp so far ahead is not believed, the second agreeing with it is, and so are the
        // next.
        assert_eq!(c.time(s(7), t32(31_050), base + 9_000), None);
        assert_eq!(c.time(s(7), t32(31_060), base + 10_000), Some(base + 3_010_000));
        assert_eq!(c.time(s(7), t32(31_070), base + 11_000), Some(base + 3_011_000));
        // A switch counter running 200 ppm fast for 10 s, a packet every ms: its lead creeps
        // up by 0.2 µs a packet, 2 ms in all if it were not steered, and every stamp is
        // believed. Steered, it is within 5 µs of the probe's clock from the eighth second.
        let mut c = MirrorClocks::default();
        for k in 0..10_000u64 {
            let capture = base + k * 1_000_000;
            let ticks = k * 10_002; // 1 ms and 200 ns of the switch's 100 ns ticks
            let got = c.time(s(8), t32(ticks as u32), capture).unwrap_or_else(|| panic!("packet {k}"));
            assert!(got.abs_diff(capture) <= 1_000_000, "packet {k}");
            if k >= 8_000 {
                assert!(got.abs_diff(capture) <= 5_000, "packet {k}");
            }
        }
    }

    #[test]
    fn nanoseconds_across_silences_longer_than_half_a_turn() {
        let ns = |ticks: u64| SwitchTime::Counter { ticks: ticks & 0xFFFF_FFFF, bits: 32, unit_ns: 1 };
        let mut c = MirrorClocks::default();
        let (switch0, capture0) = (123_456_789_u64, 1_700_000_000_000_000_000_u64);
        assert_eq!(c.time(s(9), ns(switch0), capture0), Some(capture0));
        // Silences of 10 s (two turns and 1.41 s: the shortest way round says 1.41 s),
        // 2.5 s, 4.3 s and 100 s, each packet reaching the probe 2 to 900 µs after the
        // switch stamped it.
        let mut switch = switch0;
        for (silence, path) in [
            (10_000_000_000, 2_000),
            (2_500_000_000, 900_000),
            (4_300_000_000, 7_000),
            (100_000_000_000, 50_000),
        ] {
            switch += silence;
            let capture = capture0 + (switch - switch0) + path;
            assert_eq!(
                c.time(s(9), ns(switch), capture),
                Some(capture0 + (switch - switch0)),
                "after {silence} ns"
            );
            // And the next packet 300 ns later, captured a little earlier (less queueing).
            switch += 300;
            assert_eq!(c.time(s(9), ns(switch), capture - 1_000), Some(capture0 + (switch - switch0)));
        }
    }

    /// Two switches mirroring under one session id, their 32-bit counters 2^31 ticks apart,
    /// their packets interleaved: each switch's counter is its own clock, anchored at its
    /// first packet (both paths take 1 µs: every packet at its capture time).
    #[test]
    fn two_switches_under_one_id_keep_two_clocks() {
        let mut c = MirrorClocks::default();
        let (a, b) = (SessionKey { origin: 1, id: 1 }, SessionKey { origin: 2, id: 1 });
        let base = 1_700_000_000_000_000_000u64;
        for k in 0..100u32 {
            let capture = base + u64::from(k) * 10_000;
            assert_eq!(c.time(a, t32(k * 100), capture), Some(capture), "switch a, packet {k}");
            let b_ticks = (1u32 << 31).wrapping_add(k * 100);
            assert_eq!(
                c.time(b, t32(b_ticks), capture + 5_000),
                Some(capture + 5_000),
                "switch b, packet {k}"
            );
        }
    }

    /// A 32-bit counter of 100 ns ticks `ppm` parts per million off the probe's clock, one
    /// packet a `sent` time (probe's clock, ns from the first), `delay` on its way to the
    /// probe, its stamp `ahead` ns ahead of the switch's time: each packet's time less where
    /// it belongs (its sending time plus the first packet's delay, at which the session is
    /// anchored), and how far its time moved from the one before less the switch's own
    /// ticks (parts per billion of those).
    fn steered(ppm: i128, packets: &[(u64, u64, u64)]) -> Vec<(u64, i128, i128)> {
        let mut c = MirrorClocks::default();
        let base = 1_700_000_000_000_000_000u64;
        let d0 = packets[0].1;
        let mut out = Vec::new();
        let mut last: Option<(u64, u64)> = None;
        for &(sent, delay, ahead) in packets {
            let ticks = ((i128::from(sent) * (1_000_000 + ppm) / 1_000_000 + i128::from(ahead)) / 100) as u64;
            // A stamp whose lead jumped more than 1 ms waits for the next to agree.
            let Some(got) = c.time(s(9), t32(ticks as u32), base + sent + delay) else { continue };
            let err = got as i128 - i128::from(base + sent + d0);
            let moved = last.map_or(0, |(t, switch)| {
                let ticked = (ticks - switch) as i128 * 100;
                ((got - t) as i128 - ticked) * 1_000_000_000 / ticked.max(1)
            });
            out.push((sent, err, moved));
            last = Some((got, ticks));
        }
        out
    }

    /// Counters 100 ppm fast and 100 ppm slow, a packet every ms for two minutes, each 1-3 µs
    /// on its way (the shortest once in each ten). Anchored once, they would end 12 ms ahead
    /// and behind; steered, each packet's time is within 500 µs of where it belongs while the
    /// drift is being measured and within 5 µs from the eighth second on, and its time moves
    /// as the switch's clock does to within the drift and the catch-up (600 ppm).
    #[test]
    fn a_counter_that_drifts_is_steered_to_the_probes_clock() {
        let packets: Vec<_> =
            (0..120_000u64).map(|k| (k * 1_000_000, 1_000 + (k % 10).min(2) * 1_000, 0)).collect();
        for ppm in [100i128, -100] {
            for (sent, err, moved) in steered(ppm, &packets) {
                assert!(err.abs() <= 500_000, "{ppm} ppm at {sent}: {err} ns off");
                assert!(sent < 8_000_000_000 || err.abs() <= 5_000, "{ppm} ppm at {sent}: {err} ns off");
                assert!(moved.abs() <= 600_000 + 100_000, "{ppm} ppm at {sent}: moved {moved} ppb off");
            }
        }
    }

    /// What is no drift moves no time: a counter on time whose path gets 900 µs slower for
    /// good at the 2.5th second, or one stamp 900 µs ahead at the 0.5th second (neither out
    /// of step enough to be refused): every other packet keeps its place (within 3 µs, its
    /// path's jitter). Each moves one rate measured between two windows, not their median.
    #[test]
    fn a_path_that_changes_or_one_stamp_ahead_is_no_drift() {
        let slower: Vec<_> = (0..60_000u64)
            .map(|k| {
                (k * 1_000_000, 1_000 + (k % 10).min(2) * 1_000 + if k >= 2_500 { 900_000 } else { 0 }, 0)
            })
            .collect();
        let got = steered(0, &slower);
        assert_eq!(got.len(), slower.len(), "every stamp believed");
        for (sent, err, _) in got {
            assert!(err.abs() <= 3_000, "path slower, at {sent}: {err} ns off");
        }
        let ahead: Vec<_> = (0..60_000u64)
            .map(|k| (k * 1_000_000, 1_000 + (k % 10).min(2) * 1_000, if k == 500 { 900_000 } else { 0 }))
            .collect();
        for (sent, err, _) in steered(0, &ahead) {
            if sent != 500_000_000 {
                assert!(err.abs() <= 3_000, "one stamp ahead, at {sent}: {err} ns off");
            }
        }
    }

    /// A lone packet, five minutes of silence, then a packet every ms for 90 s, the counter
    /// 100 ppm fast: 30 ms of drift accumulated before it can be measured. The correction
    /// takes it out at most 500 ppm faster than the drift (no time runs backwards, no
    /// latency shrinks by more than that), and is done within 70 s.
    #[test]
    fn drift_found_late_is_taken_out_gradually() {
        let mut packets = vec![(0u64, 1_000u64, 0u64)];
        packets.extend(
            (0..90_000u64).map(|k| (300_000_000_000 + k * 1_000_000, 1_000 + (k % 10).min(2) * 1_000, 0)),
        );
        let got = steered(100, &packets);
        assert_eq!(got.len(), packets.len() - 1, "the first stamp after the silence waits for the next");
        for &(sent, err, moved) in &got[1..] {
            assert!(moved.abs() <= 600_000 + 100_000, "at {sent}: moved {moved} ppb off");
            assert!(sent < 370_000_000_000 || err.abs() <= 5_000, "at {sent}: {err} ns off");
        }
        assert!(got[1].1 > 29_000_000, "before any measurement: {} ns ahead", got[1].1);
    }
}
