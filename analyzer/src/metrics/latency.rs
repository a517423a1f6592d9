//! Latency series: one HDR histogram (nanoseconds, 3 significant digits) per (initiator,
//! target, op, segment). The worker records into its own; at every interval it swaps the
//! ones with samples for cleared spares and hands them over; the stats side merges them
//! into whole-run totals and hands them back cleared, so recording never allocates in a
//! steady state (a new series takes a spare, or allocates once).

use hdrhistogram::Histogram;
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;

/// Histogram of one interval (counts per bucket fit 32 bits).
pub type IntervalHist = Histogram<u32>;
/// Whole-run histogram.
pub type TotalHist = Histogram<u64>;

/// Recorded range: 1 ns to 1 hour; longer values are clamped to an hour.
pub const MAX_NS: u64 = 3_600_000_000_000;
pub const SIGFIG: u8 = 3;

pub fn interval_hist() -> IntervalHist {
    Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("valid histogram bounds")
}

pub fn total_hist() -> TotalHist {
    Histogram::new_with_bounds(1, MAX_NS, SIGFIG).expect("valid histogram bounds")
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

/// The worker's histograms.
pub struct LatencyRecorder {
    series: HashMap<SeriesKey, IntervalHist, ahash::RandomState>,
    max_series: usize,
    spares: Vec<IntervalHist>,
    /// Samples of series beyond the bound.
    pub dropped_samples: u64,
}

impl LatencyRecorder {
    /// Room for `max_series` series; `spares` histograms are allocated now, and the pool
    /// keeps every one handed back, up to one per series (so a steady state allocates none).
    pub fn new(max_series: usize, spares: usize) -> Self {
        let mut pool = Vec::with_capacity(max_series.max(spares));
        pool.extend((0..spares).map(|_| interval_hist()));
        Self {
            series: HashMap::with_capacity_and_hasher(max_series, ahash::RandomState::new()),
            max_series,
            spares: pool,
            dropped_samples: 0,
        }
    }

    #[inline]
    pub fn record(&mut self, key: SeriesKey, ns: u64) {
        let v = ns.clamp(1, MAX_NS);
        if let Some(h) = self.series.get_mut(&key) {
            h.saturating_record(v);
            return;
        }
        if self.series.len() >= self.max_series {
            self.dropped_samples += 1;
            return;
        }
        let mut h = self.spares.pop().unwrap_or_else(interval_hist);
        h.saturating_record(v);
        self.series.insert(key, h);
    }

    /// Hands over every series with samples, replacing each with a cleared spare.
    pub fn drain(&mut self, out: &mut Vec<(SeriesKey, IntervalHist)>) {
        for (k, h) in self.series.iter_mut() {
            if h.is_empty() {
                continue;
            }
            let fresh = self.spares.pop().unwrap_or_else(interval_hist);
            out.push((*k, std::mem::replace(h, fresh)));
        }
    }

    /// Takes back histograms the stats side is done with.
    pub fn give_back(&mut self, v: &mut Vec<(SeriesKey, IntervalHist)>) {
        for (_, mut h) in v.drain(..) {
            if self.spares.len() < self.spares.capacity() {
                h.reset();
                self.spares.push(h);
            }
        }
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
        let mut out = Vec::new();
        r.drain(&mut out);
        out.sort_by_key(|(k, _)| *k);
        let s = stats(&out[0].1);
        // Values come back as their bucket's bounds: within 0.1 % (3 significant digits).
        assert_eq!(s.count, 3);
        assert!((s.min_us - 1.0).abs() <= 1e-3 && (s.max_us - 3.0).abs() <= 3e-3, "{s:?}");
        assert!((s.p50_us - 2.0).abs() < 0.002);
        let mut again = Vec::new();
        r.drain(&mut again);
        assert!(again.is_empty(), "drained series are empty until new samples");
        r.give_back(&mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn three_significant_digits() {
        let mut h = interval_hist();
        h.record(123_456_789).unwrap();
        let s = stats(&h);
        assert!((s.max_us - 123_456.789).abs() / 123_456.789 < 1e-3);
    }
}
