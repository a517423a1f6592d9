//! Latency series: HDR histograms (nanoseconds, 3 significant digits) per (initiator,
//! target, op, segment). The worker keeps each series' samples of the interval as values,
//! and beyond a few hundred as the non-empty buckets of the histogram they would make
//! (bucketed by one histogram's arithmetic, [`LatencyRecorder`]); at every interval it hands
//! them over in a [`LatencyBatch`]; the stats side merges the batch into whole-run histograms
//! and hands it back emptied, so recording never allocates in a steady state (a new series
//! takes a spare, or allocates once) and a series costs a few KiB on the worker, not a
//! dense histogram of ~135 KiB that every interval would clear whole.

use crate::track::bounded::Refused;
use crate::track::memory::prefetch;
use hdrhistogram::Histogram;
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

/// Histogram of one interval (counts per bucket fit 32 bits).
pub type IntervalHist = Histogram<u32>;
/// Recorded range: 1 ns to 1 hour; longer values are clamped to an hour.
pub const MAX_NS: u64 = 3_600_000_000_000;
pub const SIGFIG: u8 = 3;

pub fn interval_hist() -> IntervalHist {
    Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("valid histogram bounds")
}

/// One histogram whose bucket arithmetic (a bucket's bounds and middle) every series
/// shares; its counts stay empty.
pub fn arithmetic() -> &'static IntervalHist {
    static LIKE: std::sync::OnceLock<IntervalHist> = std::sync::OnceLock::new();
    LIKE.get_or_init(interval_hist)
}

/// The place of `value`'s bucket in a histogram of 1 ns to [`MAX_NS`] at [`SIGFIG`]
/// significant digits (2,048 sub-buckets: the first bucket holds 0 to 2,047 one by one,
/// every further one the next power of two's range in 1,024 steps), as hdrhistogram
/// numbers them.
fn bucket_index(value: u64) -> usize {
    let bucket = 53 - (value | 2047).leading_zeros();
    ((bucket as usize + 1) << 10) + (value >> bucket) as usize - 1024
}

/// The lowest value of the bucket at `index` ([`bucket_index`] reversed).
fn bucket_value(index: usize) -> u64 {
    match index >> 10 {
        0 | 1 => index as u64,
        b => ((index & 1023) as u64 + 1024) << (b - 1),
    }
}

/// Buckets of a whole-run series: every bucket up to [`MAX_NS`].
const RUN_BUCKETS: usize = (53 - (MAX_NS | 2047).leading_zeros() as usize + 2) << 10;

/// A whole-run series (stats side): a histogram of every sample the run gave it, over the
/// whole range (1 ns to an hour) from its first sample on, so that its memory does not
/// move after that: 66 KiB, written once when it is made. Each bucket counts in 16 bits;
/// a bucket that passes 65,535 carries the multiples of 65,536 to a list of the few that
/// did (one entry of 16 bytes each, once). A histogram that grows to each new largest value
/// instead costs its whole range up to that value (270 KiB at an hour), and grows by
/// megabytes at once when a pause gives many series an outlier together.
pub struct RunHist {
    low: Box<[u16]>,
    /// (bucket index, count / 65,536), ascending by index.
    carries: Vec<(u32, u64)>,
    total: u64,
    /// The samples' sum as the histogram holds them (each its bucket's middle value, as
    /// the mean takes it), in ns: exact, and it only grows (Prometheus's `_sum`).
    sum_ns: u64,
    /// The first and last buckets holding a sample (first > last while empty).
    first: usize,
    last: usize,
}

impl Default for RunHist {
    fn default() -> Self {
        let mut low = vec![0u16; RUN_BUCKETS].into_boxed_slice();
        // The zeroed allocation may be pages the system has yet to provide: touch each one
        // now (through a reference the compiler cannot see into), not with a later sample.
        let pages = std::hint::black_box(&mut low[..]);
        for i in (0..RUN_BUCKETS).step_by(1024) {
            pages[i] = 0;
        }
        RunHist { low, carries: Vec::new(), total: 0, sum_ns: 0, first: usize::MAX, last: 0 }
    }
}

impl RunHist {
    /// Adds buckets (value, count) as an interval hands them over: each value is its
    /// bucket's, at most [`MAX_NS`] (workers clamp).
    pub fn merge(&mut self, add: &[(u64, u64)]) {
        for &(v, n) in add {
            let i = bucket_index(v.min(MAX_NS));
            let c = u64::from(self.low[i]) + n;
            self.low[i] = c as u16;
            if c >> 16 != 0 {
                let at = self.carries.partition_point(|e| (e.0 as usize) < i);
                match self.carries.get_mut(at) {
                    Some(e) if e.0 as usize == i => e.1 = e.1.saturating_add(c >> 16),
                    _ => self.carries.insert(at, (i as u32, c >> 16)),
                }
            }
            self.total = self.total.saturating_add(n);
            let mid = arithmetic().median_equivalent(bucket_value(i));
            self.sum_ns = self.sum_ns.saturating_add(mid.saturating_mul(n));
            self.first = self.first.min(i);
            self.last = self.last.max(i);
        }
    }

    /// The non-empty buckets (value, count), ascending.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + Clone + '_ {
        let (from, to) = if self.first > self.last { (0, 0) } else { (self.first, self.last + 1) };
        let mut carries = self.carries.iter().peekable();
        (from..to).filter_map(move |i| {
            let carry = carries.next_if(|e| e.0 as usize == i).map_or(0, |e| e.1 << 16);
            let n = u64::from(self.low[i]) | carry;
            (n != 0).then(|| (bucket_value(i), n))
        })
    }

    /// The sum of the samples as the histogram holds them, in ns (see `sum_ns`).
    pub fn sum_ns(&self) -> u64 {
        self.sum_ns
    }

    /// The series' statistics, as a histogram holding its samples gives them.
    pub fn stats(&self) -> Stats {
        stats_of(self.total, self.buckets())
    }
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

/// Statistics of one interval's buckets (value, count), ascending, as a histogram holding
/// those counts would give them, computed from the buckets alone: hdrhistogram's
/// rules (the quantile: the first bucket whose running count reaches ⌈q × count⌉; the mean
/// of each bucket's middle value, summed in order) without filling and clearing a histogram
/// of ~135 KiB per series and interval.
pub fn bucket_stats(buckets: &[(u64, u64)]) -> Stats {
    // An interval histogram counts at most u32::MAX per bucket.
    let capped = buckets.iter().map(|&(v, n)| (v, n.min(u64::from(u32::MAX))));
    stats_of(capped.clone().fold(0, |t: u64, (_, n)| t.saturating_add(n)), capped)
}

/// The statistics of buckets (value, count), ascending, `total` samples in all, in one
/// walk.
fn stats_of(total: u64, buckets: impl Iterator<Item = (u64, u64)>) -> Stats {
    let like = arithmetic();
    let us = |ns: u64| ns as f64 / 1000.0;
    const QUANTILES: [f64; 4] = [0.50, 0.90, 0.99, 0.999];
    let targets = QUANTILES.map(|q| ((q * total as f64).ceil() as u64).max(1));
    let (mut at, mut running, mut mean) = ([0; 4], 0u64, 0.0_f64);
    let (mut reached, mut first, mut last) = (0, None, 0);
    for (v, n) in buckets {
        first = first.or(Some(v));
        last = v;
        running = running.saturating_add(n);
        while reached < 4 && running >= targets[reached] {
            at[reached] = like.highest_equivalent(v);
            reached += 1;
        }
        mean += like.median_equivalent(v) as f64 * n as f64 / total as f64;
    }
    let Some(first) = first else {
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
    Stats {
        count: total,
        min_us: us(like.lowest_equivalent(first)),
        mean_us: mean / 1000.0,
        p50_us: us(at[0]),
        p90_us: us(at[1]),
        p99_us: us(at[2]),
        p999_us: us(at[3]),
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

/// Samples the recorder holds in arrival order before it files them in their series (see
/// [`LatencyRecorder::record_at`]): 4 KiB, a few lines the packet path keeps in the cache.
const LOG: usize = 256;
/// How far ahead of the sample it files [`LatencyRecorder::file_log`] asks for a series'
/// record, and half as far for the place in its values the sample goes to.
const FILE_AHEAD: usize = 16;

/// The worker's histograms. A series keeps its slot for the whole run, so a tracker can
/// remember it ([`LatencyRecorder::slot`]) and record without a lookup.
pub struct LatencyRecorder {
    index: HashMap<SeriesKey, u32, ahash::RandomState>,
    series: Vec<Series>,
    /// Samples recorded and not yet filed in their series, oldest first: (slot, value).
    log: Vec<(u32, u64)>,
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
    /// Memory [`LatencyRecorder::new`] allocates for `max_series` series, `spares` of them
    /// with their sample buffers made ahead.
    pub const fn allocated_bytes(max_series: usize, spares: usize) -> usize {
        let spares = if spares < max_series { spares } else { max_series };
        crate::track::bounded::hash_map_bytes(max_series, std::mem::size_of::<(SeriesKey, u32)>())
            + max_series * (std::mem::size_of::<Series>() + std::mem::size_of::<u32>())
            + spares * (FEW * std::mem::size_of::<u64>() + BUCKETS * std::mem::size_of::<(u64, u64)>())
    }

    /// Room for `max_series` series; `spares` sample buffers for new series are allocated
    /// now (series beyond them allocate theirs when they are first recorded).
    pub fn new(max_series: usize, spares: usize) -> Self {
        let pool = (0..spares.min(max_series)).map(|_| Series::room()).collect();
        Self {
            index: HashMap::with_capacity_and_hasher(max_series, ahash::RandomState::new()),
            series: Vec::with_capacity(max_series),
            log: Vec::with_capacity(LOG),
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

    /// Whether [`LatencyRecorder::needed`] is a floor (see `Refused::saturated`).
    pub fn needed_is_floor(&self) -> bool {
        self.refused.saturated()
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
    ///
    /// The sample goes to the log, a short array written in order, and the log is filed in
    /// the series when it is full or handed over ([`LatencyRecorder::file_log`]). Filed one
    /// by one as they came, a packet's sample waited on its series' record and then on the
    /// line its values end at: with thousands of series (an ACK's series is its host
    /// pair's), both are cache misses, one after the other, in the middle of the packet.
    #[inline]
    pub fn record_at(&mut self, slot: u32, ns: u64) {
        if self.log.len() == LOG {
            self.file_log();
        }
        self.log.push((slot, ns.min(MAX_NS)));
    }

    /// Files the logged samples in their series, in the order they were recorded (so the
    /// series, and the order they are handed over in, are what recording each at once
    /// makes), asking for each series' record [`FILE_AHEAD`] samples ahead and for the
    /// line its sample goes to half as far: the misses of many samples overlap.
    #[inline(never)]
    fn file_log(&mut self) {
        let log = &self.log;
        for (j, &(slot, v)) in log.iter().enumerate() {
            if let Some(s) = log.get(j + FILE_AHEAD).and_then(|&(a, _)| self.series.get(a as usize)) {
                prefetch(s as *const Series, 2);
            }
            if let Some(s) = log.get(j + FILE_AHEAD / 2).and_then(|&(a, _)| self.series.get(a as usize)) {
                prefetch(s.few.as_ptr().wrapping_add(s.few.len()), 1);
            }
            let s = &mut self.series[slot as usize];
            if s.spilled.is_empty() && s.few.is_empty() {
                self.dirty.push(slot);
            }
            if s.few.len() == FEW {
                s.spill(&self.like, &mut self.merged);
            }
            s.few.push(v);
        }
        self.log.clear();
    }

    /// Hands over every series with samples and clears it.
    pub fn drain(&mut self, out: &mut LatencyBatch) {
        self.file_log();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// hdrhistogram's statistics of `h`: the second opinion.
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

    /// Pseudo-random numbers (xorshift64) from `seed`, the same on every run.
    fn xorshift(mut seed: u64) -> impl FnMut() -> u64 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        }
    }

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
        let s = bucket_stats(out.iter().next().unwrap().1);
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
        // Values spread over many buckets, some in the same bucket, one of 0, some beyond
        // the range (clamped).
        let values: Vec<u64> = (0..1200u64).map(|i| (i * 7919 % 1013) * (1 + i % 5) * 997 + i % 3).collect();
        // Handed over as values, and (beyond FEW) partly through the histogram.
        for n in [1, 5, 200, FEW, FEW + 1, 2 * FEW + 3] {
            let mut r = LatencyRecorder::new(4, 1);
            let mut h = interval_hist();
            for &v in &values[..n] {
                r.record(key(Segment::Network), v);
                h.saturating_record(v.min(MAX_NS));
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
    fn logged_samples_reach_their_series_in_order_across_many_logs() {
        // Three series' samples interleaved unevenly, more than three logs' worth (the last
        // log part full at the hand-over), then a hand-over with fewer than a log.
        let segs = [Segment::Network, Segment::Storage, Segment::IoCompute];
        let mut next = xorshift(0x9E37_79B9);
        let mut r = LatencyRecorder::new(4, 4);
        let slots = segs.map(|s| r.slot(key(s)).unwrap());
        let mut hists = [interval_hist(), interval_hist(), interval_hist()];
        for round in [3 * LOG + 7, 5] {
            let mut first_seen = Vec::new();
            for i in 0..round {
                // Series 2 only from the 100th sample on: handed over last.
                let k = if i < 100 { (next() % 2) as usize } else { (next() % 3) as usize };
                let v = next() % 5_000_000 + 1;
                r.record_in(slots[k], v);
                hists[k].saturating_record(v);
                if !first_seen.contains(&k) {
                    first_seen.push(k);
                }
            }
            let mut got = LatencyBatch::default();
            r.drain(&mut got);
            let mut want = LatencyBatch::default();
            for &k in &first_seen {
                push_histogram(&mut want, key(segs[k]), &hists[k]);
                hists[k].reset();
            }
            let got: Vec<_> = got.iter().map(|(k, b)| (k, b.to_vec())).collect();
            let want: Vec<_> = want.iter().map(|(k, b)| (k, b.to_vec())).collect();
            assert_eq!(got, want, "{round} samples");
        }
    }

    #[test]
    fn bucket_stats_are_what_the_histogram_says() {
        // hdrhistogram itself is the second opinion: the same samples recorded into a
        // histogram give the same count, min, mean, percentiles and max.
        let like = interval_hist();
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
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
            assert_eq!(bucket_stats(buckets), stats(&h), "case {case}: {n} samples below {scale}");
        }
        // One sample; samples in one bucket.
        for values in [vec![1], vec![5_000_000; 7]] {
            let mut h = interval_hist();
            values.iter().for_each(|&v| h.record(v).unwrap());
            let mut batch = LatencyBatch::default();
            batch.push_values(key(Segment::Storage), &like, &mut values.clone());
            assert_eq!(bucket_stats(batch.iter().next().unwrap().1), stats(&h));
        }
    }

    #[test]
    fn bucket_places_are_hdrhistograms() {
        let h = Histogram::<u64>::new_with_bounds(1, MAX_NS, SIGFIG).unwrap();
        assert_eq!(h.distinct_values(), RUN_BUCKETS, "one place per bucket up to an hour");
        // Every bucket's place follows the one before: its lowest value is the value just
        // above the last bucket's highest.
        let mut value = 0;
        for index in 0..RUN_BUCKETS {
            assert_eq!((bucket_value(index), bucket_index(value)), (value, index), "bucket {index}");
            assert_eq!(h.lowest_equivalent(value), value);
            assert_eq!(bucket_index(h.highest_equivalent(value)), index, "the top of bucket {index}");
            value = h.highest_equivalent(value) + 1;
        }
        assert!(value > MAX_NS);
    }

    #[test]
    fn whole_run_series_hold_what_one_histogram_of_every_interval_would() {
        // hdrhistogram is the second opinion: intervals of samples merged one by one give
        // the buckets and statistics of one histogram that recorded every sample.
        let like = interval_hist();
        let mut next = xorshift(0x2545_F491_4F6C_DD1D);
        for case in 0..40 {
            let mut run = RunHist::default();
            let mut h = Histogram::<u64>::new_with_bounds(1, MAX_NS, SIGFIG).unwrap();
            for interval in 0..30 {
                let n = if interval % 3 == 0 { 1 + next() % 4 } else { next() % 600 };
                let scale = [100, 10_000, 1_000_000, MAX_NS][(case + interval) % 4];
                let mut values: Vec<u64> = (0..n).map(|_| (next() % scale).max(1)).collect();
                values.iter().for_each(|&v| h.record(v).unwrap());
                let mut batch = LatencyBatch::default();
                batch.push_values(key(Segment::Storage), &like, &mut values);
                run.merge(batch.iter().next().map_or(&[][..], |s| s.1));
            }
            let want: Vec<(u64, u64)> = h
                .iter_recorded()
                .map(|v| (h.lowest_equivalent(v.value_iterated_to()), v.count_at_value()))
                .collect();
            assert_eq!(run.buckets().collect::<Vec<_>>(), want, "case {case}");
            assert_eq!(run.stats(), stats(&h), "case {case}");
            // hdrhistogram's mean times its count: the sum of the buckets' middle values.
            let sum = h.mean() * h.len() as f64;
            assert!(
                (run.sum_ns() as f64 - sum).abs() <= sum * 1e-9 + 1.0,
                "case {case}: {} {sum}",
                run.sum_ns()
            );
        }
    }

    #[test]
    fn whole_run_counts_go_past_16_bits() {
        // Counts that pass 65,535 in a bucket, once, many times over and by many at once,
        // next to buckets that do not, and the last bucket (an hour): as hdrhistogram counts
        // them.
        let mut run = RunHist::default();
        let mut h = Histogram::<u64>::new_with_bounds(1, MAX_NS, SIGFIG).unwrap();
        let like = arithmetic();
        let (a, b, c, top) =
            (1_000, like.highest_equivalent(250_000), 7_000_000, like.highest_equivalent(MAX_NS));
        for (i, n) in [60_000, 9_999, 65_535, 1, 1 << 40, 3, 65_536].into_iter().enumerate() {
            let add = [(a, n), (b, 1 + i as u64), (c, n / 2 + 1), (top, n)];
            run.merge(&add);
            for (v, n) in add {
                h.record_n(v, n).unwrap();
            }
        }
        let want: Vec<(u64, u64)> = h
            .iter_recorded()
            .map(|v| (h.lowest_equivalent(v.value_iterated_to()), v.count_at_value()))
            .collect();
        assert_eq!(run.buckets().collect::<Vec<_>>(), want);
        assert_eq!(run.stats(), stats(&h));
        assert_eq!(run.carries.len(), 3, "the buckets that passed 65,535");
        let s = run.stats();
        assert!((s.max_us - MAX_NS as f64 / 1e3).abs() / (MAX_NS as f64 / 1e3) < 1e-3, "{s:?}");
        assert_eq!(RunHist::default().stats().count, 0);
    }

    #[test]
    fn three_significant_digits() {
        let mut h = interval_hist();
        h.record(123_456_789).unwrap();
        let s = stats(&h);
        assert!((s.max_us - 123_456.789).abs() / 123_456.789 < 1e-3);
    }
}
