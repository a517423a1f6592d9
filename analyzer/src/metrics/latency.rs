//! Latency series: one HDR histogram (nanoseconds, 3 significant digits) per (initiator,
//! target, op, segment). The worker records into its own; at every interval it copies the
//! non-empty buckets of the ones with samples into a [`LatencyBatch`] and clears them; the
//! stats side merges the batch into whole-run totals and hands it back emptied, so
//! recording never allocates in a steady state (a new series takes a spare, or allocates
//! once) and a series costs one dense histogram on the worker, not two.

use hdrhistogram::Histogram;
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

/// Histogram of one interval (counts per bucket fit 32 bits).
pub type IntervalHist = Histogram<u32>;
/// Whole-run histogram (stats side): it grows to the largest value recorded, so a series
/// whose samples stay under a millisecond holds a third of the full range's buckets.
pub type TotalHist = Histogram<u64>;

/// Recorded range: 1 ns to 1 hour; longer values are clamped to an hour.
pub const MAX_NS: u64 = 3_600_000_000_000;
pub const SIGFIG: u8 = 3;

pub fn interval_hist() -> IntervalHist {
    Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("valid histogram bounds")
}

pub fn total_hist() -> TotalHist {
    let mut h = Histogram::new_with_bounds(1, 2, SIGFIG).expect("valid histogram bounds");
    h.auto(true);
    h
}

/// Interval histograms as their non-empty buckets (value, count), every series in one
/// buffer: reused from interval to interval, it stops growing once it has held the largest
/// interval.
#[derive(Debug, Clone, Default)]
pub struct LatencyBatch {
    series: Vec<(SeriesKey, usize, usize)>,
    buckets: Vec<(u64, u64)>,
}

impl LatencyBatch {
    /// Appends the non-empty buckets of `h` as series `key`.
    pub fn push(&mut self, key: SeriesKey, h: &IntervalHist) {
        let start = self.buckets.len();
        self.buckets
            .extend(h.iter_recorded().map(|v| (v.value_iterated_to(), u64::from(v.count_at_value()))));
        self.series.push((key, start, self.buckets.len()));
    }

    /// Appends raw samples as series `key`, bucketed as `like` buckets them, so that the
    /// result is what [`LatencyBatch::push`] gives for a histogram holding them. Sorts
    /// `values`.
    pub fn push_values(&mut self, key: SeriesKey, like: &IntervalHist, values: &mut [u64]) {
        let start = self.buckets.len();
        values.sort_unstable();
        for &v in values.iter() {
            let b = like.highest_equivalent(v);
            let len = self.buckets.len();
            match self.buckets.last_mut() {
                Some((last, n)) if len > start && *last == b => *n += 1,
                _ => self.buckets.push((b, 1)),
            }
        }
        self.series.push((key, start, self.buckets.len()));
    }

    /// Each series with its buckets (value, count), in the order pushed or sorted.
    pub fn iter(&self) -> impl Iterator<Item = (SeriesKey, &[(u64, u64)])> + '_ {
        self.series.iter().map(|&(k, a, b)| (k, &self.buckets[a..b]))
    }

    pub fn sort(&mut self) {
        self.series.sort_unstable_by_key(|s| s.0);
    }

    pub fn len(&self) -> usize {
        self.series.len()
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    pub fn clear(&mut self) {
        self.series.clear();
        self.buckets.clear();
    }
}

/// Statistics of one series' buckets, rebuilt in `scratch` (which ends cleared).
pub fn bucket_stats(scratch: &mut IntervalHist, buckets: &[(u64, u64)]) -> Stats {
    for &(v, n) in buckets {
        scratch.saturating_record_n(v, n.min(u64::from(u32::MAX)) as u32);
    }
    let s = stats(scratch);
    scratch.reset();
    s
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    NvmeRead,
    NvmeWrite,
    NvmeOther,
    RdmaRead,
    RcAck,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::NvmeRead => "nvme_read",
            Op::NvmeWrite => "nvme_write",
            Op::NvmeOther => "nvme_other",
            Op::RdmaRead => "rdma_read",
            Op::RcAck => "rc_ack",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Segment {
    IoCompute,
    IoStorage,
    Compute,
    Network,
    Storage,
}

impl Segment {
    /// Every segment, in the order of [`Segment::index`].
    pub const ALL: [Segment; 5] =
        [Segment::IoCompute, Segment::IoStorage, Segment::Compute, Segment::Network, Segment::Storage];

    pub fn index(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Segment::IoCompute => "io@compute",
            Segment::IoStorage => "io@storage",
            Segment::Compute => "compute",
            Segment::Network => "network",
            Segment::Storage => "storage",
        }
    }
}

impl fmt::Display for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeriesKey {
    pub initiator: IpAddr,
    pub target: IpAddr,
    pub op: Op,
    pub segment: Segment,
}

/// Samples of a series kept as they are before they go into its histogram. Recording is
/// then an append; the buffer goes into the histogram sorted, one sweep through the counts
/// (a sample at a time, each would touch a line of a ~135 KiB histogram at random, a cache
/// miss per sample when many series are busy); and a series that saw no more than this in
/// an interval is handed over from its sorted values, without walking or clearing the
/// histogram at all.
const FEW: usize = 512;

/// One series on the worker: its interval's samples, the last ones as values, the rest in
/// the histogram.
struct Series {
    key: SeriesKey,
    few: Vec<u64>,
    hist: IntervalHist,
    /// Some of the interval's samples went into `hist`.
    spilled: bool,
}

impl Series {
    /// Moves the buffered values into the histogram, in order.
    fn spill(&mut self) {
        self.few.sort_unstable();
        for &x in &self.few {
            self.hist.saturating_record(x);
        }
        self.few.clear();
        self.spilled = true;
    }
}

/// The worker's histograms. A series keeps its slot for the whole run, so a tracker can
/// remember it ([`LatencyRecorder::slot`]) and record without a lookup.
pub struct LatencyRecorder {
    index: HashMap<SeriesKey, u32, ahash::RandomState>,
    series: Vec<Series>,
    /// Slots with samples in the open interval: draining visits only these.
    dirty: Vec<u32>,
    max_series: usize,
    /// Storage for new series, allocated at start-up: a histogram and room for its few.
    spares: Vec<(IntervalHist, Vec<u64>)>,
    /// Samples of series beyond the bound.
    pub dropped_samples: u64,
}

impl LatencyRecorder {
    /// Room for `max_series` series; `spares` histograms for new series are allocated now
    /// (series beyond them allocate theirs when they are first recorded).
    pub fn new(max_series: usize, spares: usize) -> Self {
        let pool = (0..spares.min(max_series)).map(|_| (interval_hist(), Vec::with_capacity(FEW))).collect();
        Self {
            index: HashMap::with_capacity_and_hasher(max_series, ahash::RandomState::new()),
            series: Vec::with_capacity(max_series),
            dirty: Vec::with_capacity(max_series),
            max_series,
            spares: pool,
            dropped_samples: 0,
        }
    }

    /// The slot of series `key`, made if there is room (`None` beyond the bound).
    pub fn slot(&mut self, key: SeriesKey) -> Option<u32> {
        if let Some(&i) = self.index.get(&key) {
            return Some(i);
        }
        if self.series.len() >= self.max_series {
            return None;
        }
        let (hist, few) = self.spares.pop().unwrap_or_else(|| (interval_hist(), Vec::with_capacity(FEW)));
        let i = self.series.len() as u32;
        self.series.push(Series { key, few, hist, spilled: false });
        self.index.insert(key, i);
        Some(i)
    }

    /// Records a sample of series `key`.
    #[inline]
    pub fn record(&mut self, key: SeriesKey, ns: u64) {
        match self.slot(key) {
            Some(i) => self.record_at(i, ns),
            None => self.dropped_samples += 1,
        }
    }

    /// Records a sample of the series in `slot` (from [`LatencyRecorder::slot`]).
    #[inline]
    pub fn record_at(&mut self, slot: u32, ns: u64) {
        let v = ns.clamp(1, MAX_NS);
        let s = &mut self.series[slot as usize];
        if !s.spilled && s.few.is_empty() {
            self.dirty.push(slot);
        }
        if s.few.len() == FEW {
            s.spill();
        }
        s.few.push(v);
    }

    /// Hands over every series with samples and clears it.
    pub fn drain(&mut self, out: &mut LatencyBatch) {
        for &i in &self.dirty {
            let s = &mut self.series[i as usize];
            if s.spilled {
                s.spill();
                out.push(s.key, &s.hist);
                s.hist.reset();
                s.spilled = false;
            } else {
                out.push_values(s.key, &s.hist, &mut s.few);
                s.few.clear();
            }
        }
        self.dirty.clear();
    }
}

/// Summary statistics of a histogram, in microseconds as the reports write them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats {
    pub count: u64,
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

pub fn stats<T: hdrhistogram::Counter>(h: &Histogram<T>) -> Stats {
    let us = |ns: u64| ns as f64 / 1000.0;
    Stats {
        count: h.len(),
        min_us: us(h.min()),
        mean_us: h.mean() / 1000.0,
        p50_us: us(h.value_at_quantile(0.50)),
        p90_us: us(h.value_at_quantile(0.90)),
        p99_us: us(h.value_at_quantile(0.99)),
        p999_us: us(h.value_at_quantile(0.999)),
        max_us: us(h.max()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seg: Segment) -> SeriesKey {
        SeriesKey {
            initiator: "10.0.0.1".parse().unwrap(),
            target: "10.0.0.2".parse().unwrap(),
            op: Op::NvmeRead,
            segment: seg,
        }
    }

    #[test]
    fn records_drains_and_recycles() {
        let mut r = LatencyRecorder::new(2, 2);
        for v in [1_000, 2_000, 3_000] {
            r.record(key(Segment::IoCompute), v);
        }
        r.record(key(Segment::Storage), 50_000);
        r.record(key(Segment::Network), 1); // a third series: beyond the bound
        assert_eq!(r.dropped_samples, 1);
        let mut out = LatencyBatch::default();
        r.drain(&mut out);
        out.sort();
        let mut scratch = interval_hist();
        let s = bucket_stats(&mut scratch, out.iter().next().unwrap().1);
        assert!(scratch.is_empty());
        // Values come back as their bucket's bounds: within 0.1 % (3 significant digits).
        assert_eq!(s.count, 3);
        assert!((s.min_us - 1.0).abs() <= 1e-3 && (s.max_us - 3.0).abs() <= 3e-3, "{s:?}");
        assert!((s.p50_us - 2.0).abs() < 0.002);
        let mut again = LatencyBatch::default();
        r.drain(&mut again);
        assert!(again.is_empty(), "drained series are empty until new samples");
        r.record(key(Segment::IoCompute), 4_000_000);
        r.drain(&mut out);
        assert_eq!(out.len(), 3, "appended to what the batch held");
        let (k, b) = out.iter().last().unwrap();
        assert_eq!((k, b.len(), b[0].1), (key(Segment::IoCompute), 1, 1));
        out.clear();
        assert!(out.is_empty());
    }

    #[test]
    fn few_samples_hand_over_the_buckets_a_histogram_would() {
        // Values spread over many buckets, some in the same bucket, some clamped.
        let values: Vec<u64> = (0..1200u64).map(|i| (i * 7919 % 1013) * (1 + i % 5) * 997 + i % 3).collect();
        // Handed over as values, and (beyond FEW) partly through the histogram.
        for n in [1, 5, 200, FEW, FEW + 1, 2 * FEW + 3] {
            let mut r = LatencyRecorder::new(4, 1);
            let mut h = interval_hist();
            for &v in &values[..n] {
                r.record(key(Segment::Network), v);
                h.saturating_record(v.clamp(1, MAX_NS));
            }
            let mut got = LatencyBatch::default();
            r.drain(&mut got);
            let mut want = LatencyBatch::default();
            want.push(key(Segment::Network), &h);
            let got: Vec<_> = got.iter().map(|(k, b)| (k, b.to_vec())).collect();
            let want: Vec<_> = want.iter().map(|(k, b)| (k, b.to_vec())).collect();
            assert_eq!(got, want, "{n} samples");
        }
    }

    #[test]
    fn whole_run_histograms_grow_to_the_largest_value() {
        let mut t = total_hist();
        t.record_n(999, 2).unwrap();
        let small = t.distinct_values();
        t.record_n(MAX_NS, 1).unwrap();
        assert!(t.distinct_values() > 10 * small, "grown to an hour");
        let s = stats(&t);
        assert_eq!(s.count, 3);
        assert!((s.min_us - 0.999).abs() < 1e-3, "{s:?}");
        assert!((s.max_us - MAX_NS as f64 / 1e3).abs() / (MAX_NS as f64 / 1e3) < 1e-3, "{s:?}");
    }

    #[test]
    fn three_significant_digits() {
        let mut h = interval_hist();
        h.record(123_456_789).unwrap();
        let s = stats(&h);
        assert!((s.max_us - 123_456.789).abs() / 123_456.789 < 1e-3);
    }
}
