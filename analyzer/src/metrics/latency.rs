//! Latency series: HDR histograms (nanoseconds, 3 significant digits) per (initiator,
//! target, op, segment). The worker keeps each series' samples of the interval as values,
//! and beyond a few hundred as the non-empty buckets of the histogram they would make
//! (bucketed by one histogram's arithmetic, [`LatencyRecorder`]); at every interval it hands
//! them over in a [`LatencyBatch`]; the stats side merges the batch into whole-run histograms
//! and hands it back emptied, so recording never allocates in a steady state (a new series
//! takes a spare, or allocates once) and a series costs a few KiB on the worker, not a
//! dense histogram of ~135 KiB that every interval would clear whole.

use crate::track::bounded::Refused;
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

/// Adds `n` samples of bucket `value` to ascending buckets, the last of which (if at `from`
/// or after) may be that bucket already.
fn add_bucket(buckets: &mut Vec<(u64, u64)>, from: usize, value: u64, n: u64) {
    let len = buckets.len();
    match buckets.last_mut() {
        Some((last, count)) if len > from && *last == value => *count += n,
        _ => buckets.push((value, n)),
    }
}

impl LatencyBatch {
    /// Appends buckets (value, count), ascending, as series `key`.
    pub fn push_buckets(&mut self, key: SeriesKey, buckets: &[(u64, u64)]) {
        let start = self.buckets.len();
        self.buckets.extend_from_slice(buckets);
        self.series.push((key, start, self.buckets.len()));
    }

    /// Appends raw samples as series `key`, bucketed as `like` buckets them, so that the
    /// result is the non-empty buckets of a histogram holding them. Sorts `values`.
    pub fn push_values(&mut self, key: SeriesKey, like: &IntervalHist, values: &mut [u64]) {
        let start = self.buckets.len();
        values.sort_unstable();
        for &v in values.iter() {
            add_bucket(&mut self.buckets, start, like.highest_equivalent(v), 1);
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

/// Statistics of one series' buckets (value, count), ascending, as a histogram `like` would
/// give them holding those counts ([`stats`]), computed from the buckets alone: hdrhistogram's
/// rules (the quantile: the first bucket whose running count reaches ⌈q × count⌉; the mean
/// of each bucket's middle value, summed in order) without filling and clearing a histogram
/// of ~135 KiB per series and interval.
pub fn bucket_stats(like: &IntervalHist, buckets: &[(u64, u64)]) -> Stats {
    // An interval histogram counts at most u32::MAX per bucket.
    let count = |n: u64| n.min(u64::from(u32::MAX));
    let total: u64 = buckets.iter().map(|&(_, n)| count(n)).sum();
    let (Some(&(first, _)), Some(&(last, _))) = (buckets.first(), buckets.last()) else {
        return Stats {
            count: 0,
            min_us: 0.0,
            mean_us: 0.0,
            p50_us: 0.0,
            p90_us: 0.0,
            p99_us: 0.0,
            p999_us: 0.0,
            max_us: 0.0,
        };
    };
    let quantile = |q: f64| {
        let target = ((q * total as f64).ceil() as u64).max(1);
        let mut running = 0;
        for &(v, n) in buckets {
            running += count(n);
            if running >= target {
                return like.highest_equivalent(v);
            }
        }
        0
    };
    let mean = buckets.iter().fold(0.0_f64, |sum, &(v, n)| {
        sum + like.median_equivalent(v) as f64 * count(n) as f64 / total as f64
    });
    let us = |ns: u64| ns as f64 / 1000.0;
    Stats {
        count: total,
        min_us: us(like.lowest_equivalent(first)),
        mean_us: mean / 1000.0,
        p50_us: us(quantile(0.50)),
        p90_us: us(quantile(0.90)),
        p99_us: us(quantile(0.99)),
        p999_us: us(quantile(0.999)),
        max_us: us(like.highest_equivalent(last)),
    }
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

/// A series slot not looked up yet (see [`LatencyRecorder::cached_slot`]).
pub const SLOT_UNKNOWN: u32 = u32::MAX;
/// A series the recorder had no room for.
pub const SLOT_NO_ROOM: u32 = u32::MAX - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct SeriesKey {
    pub initiator: IpAddr,
    pub target: IpAddr,
    pub op: Op,
    pub segment: Segment,
}

impl std::hash::Hash for SeriesKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        let rest = (self.op as u64) << 8 | self.segment as u64;
        crate::track::index::hash_hosts(&self.initiator, &self.target, rest, h);
    }
}

/// Samples of a series kept as they are before they are bucketed. Recording is then an
/// append; a full buffer is sorted and merged into the series' buckets in one sweep; and a
/// series that saw no more than this in an interval is handed over from its sorted values.
const FEW: usize = 512;
/// Buckets a series has room for from the start (a series whose samples of an interval
/// fill more grows its list once, and keeps it).
const BUCKETS: usize = 256;

/// Room for a series' samples (values) and buckets (value, count).
type Room = (Vec<u64>, Vec<(u64, u64)>);

/// One series on the worker: its interval's samples, the last ones as values, the rest as
/// buckets.
struct Series {
    key: SeriesKey,
    few: Vec<u64>,
    /// The interval's other samples as the non-empty buckets of their histogram: (the
    /// bucket's highest equivalent value, count), ascending.
    spilled: Vec<(u64, u64)>,
}

impl Series {
    /// Room for a series' samples and buckets.
    fn room() -> Room {
        (Vec::with_capacity(FEW), Vec::with_capacity(BUCKETS))
    }

    /// Merges the buffered values into the buckets, through `merged` (a scratch buffer),
    /// bucketed as `like` buckets them.
    fn spill(&mut self, like: &IntervalHist, merged: &mut Vec<(u64, u64)>) {
        self.few.sort_unstable();
        merged.clear();
        let mut old = self.spilled.iter().copied().peekable();
        for &x in &self.few {
            let b = like.highest_equivalent(x);
            while let Some((v, n)) = old.next_if(|&(v, _)| v < b) {
                add_bucket(merged, 0, v, n);
            }
            add_bucket(merged, 0, b, 1);
        }
        for (v, n) in old {
            add_bucket(merged, 0, v, n);
        }
        // Copied back rather than swapped, so that each series' buffer keeps the room it
        // grew to (and stops growing).
        self.spilled.clear();
        self.spilled.extend_from_slice(merged);
        self.few.clear();
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
    /// Storage for new series, allocated at start-up: room for their few and their buckets.
    spares: Vec<Room>,
    /// The bucket arithmetic of every series (never recorded into).
    like: IntervalHist,
    /// Scratch for merging a series' values into its buckets.
    merged: Vec<(u64, u64)>,
    /// Samples of series beyond the bound.
    pub dropped_samples: u64,
    /// The series beyond the bound (see [`LatencyRecorder::needed`]).
    refused: Refused,
}

impl LatencyRecorder {
    /// Room for `max_series` series; `spares` sample buffers for new series are allocated
    /// now (series beyond them allocate theirs when they are first recorded).
    pub fn new(max_series: usize, spares: usize) -> Self {
        let pool = (0..spares.min(max_series)).map(|_| Series::room()).collect();
        Self {
            index: HashMap::with_capacity_and_hasher(max_series, ahash::RandomState::new()),
            series: Vec::with_capacity(max_series),
            dirty: Vec::with_capacity(max_series),
            max_series,
            spares: pool,
            like: interval_hist(),
            merged: Vec::with_capacity(FEW + BUCKETS),
            dropped_samples: 0,
            refused: Refused::default(),
        }
    }

    /// The slot of series `key`, made if there is room (`None` beyond the bound).
    pub fn slot(&mut self, key: SeriesKey) -> Option<u32> {
        if let Some(&i) = self.index.get(&key) {
            return Some(i);
        }
        if self.series.len() >= self.max_series {
            self.refused.note_key(&key);
            return None;
        }
        let (few, spilled) = self.spares.pop().unwrap_or_else(Series::room);
        let i = self.series.len() as u32;
        self.series.push(Series { key, few, spilled });
        self.index.insert(key, i);
        Some(i)
    }

    /// The bound on series that would have kept every series: 0 when none was turned away.
    pub fn needed(&self) -> u64 {
        match self.refused.estimate() {
            0 => 0,
            n => self.max_series as u64 + n,
        }
    }

    /// The slot of a series whose slot the caller keeps in `cache`, set to
    /// [`SLOT_UNKNOWN`] at first: the series is looked up once (`key` gives it), not per
    /// sample. Series are never removed, so a recorder without room for one stays without
    /// it ([`SLOT_NO_ROOM`]). For [`LatencyRecorder::record_in`].
    #[inline]
    pub fn cached_slot(&mut self, cache: &mut u32, key: impl FnOnce() -> SeriesKey) -> u32 {
        if *cache == SLOT_UNKNOWN {
            *cache = self.slot(key()).unwrap_or(SLOT_NO_ROOM);
        }
        *cache
    }

    /// Records a sample in the series of a slot from [`LatencyRecorder::cached_slot`].
    #[inline]
    pub fn record_in(&mut self, slot: u32, ns: u64) {
        match slot {
            SLOT_NO_ROOM | SLOT_UNKNOWN => self.dropped_samples += 1,
            slot => self.record_at(slot, ns),
        }
    }

    /// Records a sample of series `key`, looked up now (a caller that records in the same
    /// series again keeps its slot: [`LatencyRecorder::cached_slot`]).
    #[inline]
    pub fn record(&mut self, key: SeriesKey, ns: u64) {
        let mut uncached = SLOT_UNKNOWN;
        let slot = self.cached_slot(&mut uncached, || key);
        self.record_in(slot, ns);
    }

    /// Records a sample of the series in `slot` (from [`LatencyRecorder::slot`]).
    #[inline]
    pub fn record_at(&mut self, slot: u32, ns: u64) {
        let v = ns.clamp(1, MAX_NS);
        let s = &mut self.series[slot as usize];
        if s.spilled.is_empty() && s.few.is_empty() {
            self.dirty.push(slot);
        }
        if s.few.len() == FEW {
            s.spill(&self.like, &mut self.merged);
        }
        s.few.push(v);
    }

    /// Hands over every series with samples and clears it.
    pub fn drain(&mut self, out: &mut LatencyBatch) {
        for &i in &self.dirty {
            let s = &mut self.series[i as usize];
            if s.spilled.is_empty() {
                out.push_values(s.key, &self.like, &mut s.few);
                s.few.clear();
            } else {
                if !s.few.is_empty() {
                    s.spill(&self.like, &mut self.merged);
                }
                out.push_buckets(s.key, &s.spilled);
                s.spilled.clear();
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

    /// hdrhistogram's own non-empty buckets of `h`, as series `key`: the second opinion.
    fn push_histogram(batch: &mut LatencyBatch, key: SeriesKey, h: &IntervalHist) {
        let start = batch.buckets.len();
        batch
            .buckets
            .extend(h.iter_recorded().map(|v| (v.value_iterated_to(), u64::from(v.count_at_value()))));
        batch.series.push((key, start, batch.buckets.len()));
    }

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
        let s = bucket_stats(&interval_hist(), out.iter().next().unwrap().1);
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
            push_histogram(&mut want, key(Segment::Network), &h);
            let got: Vec<_> = got.iter().map(|(k, b)| (k, b.to_vec())).collect();
            let want: Vec<_> = want.iter().map(|(k, b)| (k, b.to_vec())).collect();
            assert_eq!(got, want, "{n} samples");
        }
    }

    #[test]
    fn bucket_stats_are_what_the_histogram_says() {
        // hdrhistogram itself is the second opinion: the same samples recorded into a
        // histogram give the same count, min, mean, percentiles and max.
        let like = interval_hist();
        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for case in 0..200 {
            let n = 1 + next() % 3000;
            let scale = [10, 1_000, 100_000, 10_000_000, MAX_NS][case % 5];
            let mut h = interval_hist();
            let mut values: Vec<u64> = (0..n).map(|_| (next() % scale).max(1)).collect();
            for &v in &values {
                h.record(v).unwrap();
            }
            let mut batch = LatencyBatch::default();
            batch.push_values(key(Segment::Storage), &like, &mut values);
            let buckets = batch.iter().next().unwrap().1;
            assert_eq!(bucket_stats(&like, buckets), stats(&h), "case {case}: {n} samples below {scale}");
        }
        // One sample; samples in one bucket.
        for values in [vec![1], vec![5_000_000; 7]] {
            let mut h = interval_hist();
            values.iter().for_each(|&v| h.record(v).unwrap());
            let mut batch = LatencyBatch::default();
            batch.push_values(key(Segment::Storage), &like, &mut values.clone());
            assert_eq!(bucket_stats(&like, batch.iter().next().unwrap().1), stats(&h));
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
