//! PSN analysis of one requester direction (docs/METRICS.md, "PSN analysis"): the expected next PSN, with serial
//! arithmetic modulo 2^24. A packet behind the expected PSN is a retransmission; one ahead
//! of it skipped PSNs (a gap: packets lost upstream of this vantage).
//!
//! A READ Request reserves ceil(DMA length / path MTU) PSNs. While the path MTU of the QP is
//! not known yet, the next PSN is expected anywhere in [ceil(len / 4096), ceil(len / 256)]
//! after it (the largest and smallest RoCE MTUs), so an unknown MTU never invents a gap.

pub const PSN_MOD: u32 = 1 << 24;
const MASK: u32 = PSN_MOD - 1;
/// Beyond a quarter of the PSN space a jump is not loss or retransmission but a restarted
/// QP (or a QPN reused by a new connection).
const WINDOW: u32 = 1 << 22;

/// The most PSNs a READ Request whose length is unknown is taken to reserve: 32 MiB at a
/// path MTU of 1,024 bytes, 128 MiB at 4,096. Its responses are then at most this far
/// behind the PSN expected after it, well within the window in which an answer is matched
/// to its request (2^16 PSNs).
pub const UNKNOWN_READ_SPAN: u32 = 1 << 15;

/// How many PSNs a request packet occupies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub min: u32,
    pub max: u32,
}

impl Span {
    pub const ONE: Span = Span { min: 1, max: 1 };

    /// The span of a READ Request for `dma_len` bytes with path MTU `mtu` (if known).
    pub fn read(dma_len: u32, mtu: Option<u32>) -> Span {
        let n = |m: u32| dma_len.div_ceil(m).max(1);
        match mtu {
            Some(m) => Span { min: n(m), max: n(m) },
            None => Span { min: n(4096), max: n(256) },
        }
    }

    /// The span of a READ Request whose DMA length was not captured (the capture or the
    /// mirror cut its RETH off): one PSN up to [`UNKNOWN_READ_SPAN`], so that the PSN after
    /// it is not taken for a gap unless the READ was longer than that.
    pub const UNKNOWN_READ: Span = Span { min: 1, max: UNKNOWN_READ_SPAN };
}

/// What a request packet's PSN says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The expected PSN (or the first packet seen).
    InOrder,
    /// Behind the expected PSN; `episode` if it starts a run of retransmissions.
    Retransmission { episode: bool },
    /// Ahead of the expected PSN by `skipped`.
    Gap { skipped: u32 },
    /// Too far from the expected PSN to be either; the analysis restarts here.
    OutOfWindow,
}

/// 8 bytes, so that it fits in a flow's first cache line: the PSN range (24 bits each) and
/// two flags in the top bits.
#[derive(Debug, Clone, Copy, Default)]
pub struct PsnTracker {
    /// The next PSN is expected in [lo, hi] (lo == hi unless a READ's span is unknown).
    /// Bit 31 of `lo`: a PSN was seen; bit 31 of `hi`: in a run of retransmissions.
    lo: u32,
    hi: u32,
}

const FLAG: u32 = 1 << 31;

#[inline]
fn dist(from: u32, to: u32) -> u32 {
    to.wrapping_sub(from) & MASK
}

impl PsnTracker {
    #[inline]
    fn started(&self) -> bool {
        self.lo & FLAG != 0
    }

    #[inline]
    fn set_in_retx(&mut self, on: bool) {
        self.hi = (self.hi & MASK) | if on { FLAG } else { 0 };
    }

    /// Expects the PSNs after `psn`'s span, out of a run of retransmissions.
    #[inline]
    fn expect_after(&mut self, psn: u32, span: Span) {
        self.lo = ((psn + span.min) & MASK) | FLAG;
        self.hi = (psn + span.max) & MASK;
    }

    /// Whether `psn` is one expected next (or the first), for prefetching: a request that
    /// is not changes the loss counters.
    #[inline]
    pub fn expects(&self, psn: u32) -> bool {
        let lo = self.lo & MASK;
        !self.started() || dist(lo, psn & MASK) <= dist(lo, self.hi & MASK)
    }

    /// Whether `psn` is behind the expected one (already seen, or skipped): what
    /// [`Self::observe`] would call a retransmission.
    #[inline]
    pub fn is_behind(&self, psn: u32) -> bool {
        if !self.started() {
            return false;
        }
        let (lo, hi, psn) = (self.lo & MASK, self.hi & MASK, psn & MASK);
        dist(lo, psn) > dist(lo, hi) && dist(hi, psn) >= WINDOW && dist(psn, lo) <= WINDOW
    }

    /// Expects `psn` next, out of any run of retransmissions: a new connection on the QP
    /// (CM announced the PSN its requests start at).
    pub fn restart_at(&mut self, psn: u32) {
        self.lo = (psn & MASK) | FLAG;
        self.hi = psn & MASK;
    }

    /// A request packet of `span` came whose PSN cannot be trusted (its ICRC failed): taken
    /// as the one expected next, which it most likely was, so that the PSNs after it stay in
    /// order (the next one expected anywhere in its span's range on; nothing before the
    /// first packet: the next one starts the analysis).
    pub fn skip(&mut self, span: Span) {
        if self.started() {
            let (lo, hi) = (self.lo & MASK, self.hi & MASK);
            self.lo = ((lo + span.min) & MASK) | FLAG;
            self.hi = ((hi + span.max) & MASK) | (self.hi & FLAG);
        }
    }

    /// The highest PSN expected next while a READ of unknown span leaves a range of them
    /// (see [`Span::read`]); `None` when one PSN is expected.
    #[inline]
    pub fn widest_expected(&self) -> Option<u32> {
        (self.started() && (self.lo ^ self.hi) & MASK != 0).then_some(self.hi & MASK)
    }

    /// The highest PSN expected next (for matching acknowledgements).
    pub fn next_expected(&self) -> Option<u32> {
        self.started().then_some(self.hi & MASK)
    }

    /// How many PSNs `psn` is before the highest one expected next (0 for that one; modulo
    /// 2^24, so a PSN past it is far behind), once a PSN was seen.
    #[inline]
    pub fn before_next(&self, psn: u32) -> Option<u32> {
        self.next_expected().map(|next| dist(psn, next))
    }

    #[inline]
    pub fn observe(&mut self, psn: u32, span: Span) -> Outcome {
        let psn = psn & MASK;
        if !self.started() {
            self.expect_after(psn, span);
            return Outcome::InOrder;
        }
        let (lo, hi) = (self.lo & MASK, self.hi & MASK);
        let width = dist(lo, hi);
        let ahead_of_lo = dist(lo, psn);
        if ahead_of_lo <= width {
            self.expect_after(psn, span);
            return Outcome::InOrder;
        }
        let ahead_of_hi = dist(hi, psn);
        if ahead_of_hi < WINDOW {
            self.expect_after(psn, span);
            return Outcome::Gap { skipped: ahead_of_hi };
        }
        let behind = dist(psn, lo);
        if behind <= WINDOW {
            let episode = self.hi & FLAG == 0;
            self.set_in_retx(true);
            return Outcome::Retransmission { episode };
        }
        self.expect_after(psn, span);
        Outcome::OutOfWindow
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_is_what_observe_calls_a_retransmission() {
        let mut t = PsnTracker::default();
        assert!(!t.is_behind(7), "nothing seen yet");
        t.observe(MASK - 1, Span::ONE);
        t.observe(MASK, Span::ONE);
        t.observe(0, Span::ONE);
        for psn in [MASK - 5, MASK - 1, MASK, 0, 1, 2, 5000, 1 << 23] {
            let mut u = t;
            let outcome = u.observe(psn, Span::ONE);
            assert_eq!(
                t.is_behind(psn),
                matches!(outcome, Outcome::Retransmission { .. }),
                "{psn}: {outcome:?}"
            );
        }
    }

    #[test]
    fn expects_what_observe_calls_in_order() {
        let mut t = PsnTracker::default();
        assert!(t.expects(500), "anything first");
        t.observe(MASK, Span::ONE);
        assert!(t.expects(0) && !t.expects(1) && !t.expects(MASK));
        // Unknown MTU: a READ of 3000 bytes is 1 to 12 PSNs.
        t.observe(0, Span::read(3000, None));
        assert!(t.expects(1) && t.expects(12) && !t.expects(13));
    }

    #[test]
    fn a_read_of_unknown_length_reserves_one_psn_up_to_the_largest_read() {
        let mut t = PsnTracker::default();
        t.observe(100, Span::ONE);
        t.observe(101, Span::UNKNOWN_READ);
        assert!(t.expects(102) && t.expects(101 + 32_768) && !t.expects(102 + 32_768));
        assert_eq!(t.before_next(103), Some(32_768 - 2), "a response to it, 2 PSNs in");
        assert_eq!(t.observe(104, Span::ONE), Outcome::InOrder, "a READ of three packets");
        assert_eq!(t.observe(107, Span::ONE), Outcome::Gap { skipped: 2 });
        assert_eq!(t.observe(101, Span::ONE), Outcome::Retransmission { episode: true });
    }

    #[test]
    fn in_order_across_the_wrap() {
        let mut t = PsnTracker::default();
        for psn in [MASK - 1, MASK, 0, 1] {
            assert_eq!(t.observe(psn, Span::ONE), Outcome::InOrder);
        }
    }

    #[test]
    fn gap_then_go_back_n() {
        let mut t = PsnTracker::default();
        assert_eq!(t.observe(10, Span::ONE), Outcome::InOrder);
        assert_eq!(t.observe(13, Span::ONE), Outcome::Gap { skipped: 2 });
        assert_eq!(t.observe(14, Span::ONE), Outcome::InOrder);
        assert_eq!(t.observe(11, Span::ONE), Outcome::Retransmission { episode: true });
        assert_eq!(t.observe(12, Span::ONE), Outcome::Retransmission { episode: false });
        assert_eq!(t.observe(13, Span::ONE), Outcome::Retransmission { episode: false });
        assert_eq!(t.observe(14, Span::ONE), Outcome::Retransmission { episode: false });
        assert_eq!(t.observe(15, Span::ONE), Outcome::InOrder);
        assert_eq!(t.observe(15, Span::ONE), Outcome::Retransmission { episode: true }, "a duplicate");
    }

    #[test]
    fn read_spans_known_and_unknown_mtu() {
        let mut t = PsnTracker::default();
        // 3000 bytes at MTU 1024: 3 PSNs (rdma_read_bw's READ Requests).
        assert_eq!(t.observe(100, Span::read(3000, Some(1024))), Outcome::InOrder);
        assert_eq!(t.observe(103, Span::read(3000, Some(1024))), Outcome::InOrder);
        assert_eq!(t.observe(107, Span::ONE), Outcome::Gap { skipped: 1 });
        // Unknown MTU: anything from 1 (MTU 4096) to 12 (MTU 256) PSNs later is in order.
        let mut t = PsnTracker::default();
        assert_eq!(t.observe(MASK - 1, Span::read(3000, None)), Outcome::InOrder);
        assert_eq!(t.observe(1, Span::read(3000, None)), Outcome::InOrder, "3 later, across the wrap");
        assert_eq!(t.observe(20, Span::ONE), Outcome::Gap { skipped: 20 - 13 });
    }

    #[test]
    fn far_jumps_are_out_of_window_not_loss() {
        let mut t = PsnTracker::default();
        t.observe(5, Span::ONE);
        assert_eq!(t.observe(5 + WINDOW + 1, Span::ONE), Outcome::OutOfWindow);
        assert_eq!(t.observe(6 + WINDOW + 1, Span::ONE), Outcome::InOrder, "restarted there");
        assert_eq!(Span::read(0, None), Span::ONE);
    }
}
