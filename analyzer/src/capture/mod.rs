//! Capture: where packets come from. Two sources behind one interface, [`Capture`], feed
//! one pipeline: DPDK ports ([`dpdk::DpdkCapture`], `roceprobe live`) and capture files
//! ([`pcap::Replay`], `roceprobe replay`). Each frame carries its timestamp and its source
//! (the DPDK port id, or the input file's index).

pub mod dpdk;
pub mod nic_clock;
pub mod pcap;
pub mod port_plan;

/// Frames handed to the pipeline per poll (DPDK's customary RX burst).
pub const BURST: usize = 32;

/// One received frame, borrowed from the source until the callback returns.
#[derive(Debug, Clone, Copy)]
pub struct Frame<'a> {
    /// The bytes captured (may be fewer than `wire_len` if the capture truncated it).
    pub data: &'a [u8],
    /// Frame length on the wire without FCS.
    pub wire_len: u32,
    /// Nanoseconds since the Unix epoch, in the time base of the source.
    pub ts_ns: u64,
    /// DPDK port id, or input file index (0-based).
    pub source: u16,
}

/// What one poll of a source found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// This many frames were delivered.
    Frames(usize),
    /// Nothing now; poll again.
    Idle,
    /// The source is finished (end of the files, or the live source's stop condition).
    End,
}

/// Receive statistics of one source (a DPDK port or an input file), as DPDK reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SourceStats {
    pub ipackets: u64,
    pub ibytes: u64,
    /// Dropped by the NIC because the RX queue was full (the probe did not keep up).
    pub imissed: u64,
    /// Erroneous frames received.
    pub ierrors: u64,
    /// RX mbuf allocation failures.
    pub rx_nombuf: u64,
    /// Frames of a capture file replayed at the time of the frame before them instead of
    /// their own: lone timestamps more than a second off both neighbours (see
    /// `capture::pcap::merge_ts`). Always 0 live.
    pub retimed: u64,
    /// The source was captured from: a file given, a port opened. The statistics are kept
    /// per source id (a DPDK port id), and `--port` can leave ids out; the reports list
    /// only the sources captured from.
    #[serde(skip)]
    pub captured: bool,
    /// A capture file that ended at a damaged record, or inside one (a file cut short):
    /// read up to it, the rest lost (told on stderr). Always false live.
    #[serde(skip)]
    pub cut_short: bool,
}

impl SourceStats {
    pub fn add(&mut self, o: &SourceStats) {
        self.ipackets += o.ipackets;
        self.ibytes += o.ibytes;
        self.imissed += o.imissed;
        self.ierrors += o.ierrors;
        self.rx_nombuf += o.rx_nombuf;
        self.retimed += o.retimed;
        self.captured |= o.captured;
        self.cut_short |= o.cut_short;
    }

    /// What was counted since `base` (a counter that went back, a reset port, gives 0).
    pub fn since(&self, base: &SourceStats) -> SourceStats {
        SourceStats {
            ipackets: self.ipackets.saturating_sub(base.ipackets),
            ibytes: self.ibytes.saturating_sub(base.ibytes),
            imissed: self.imissed.saturating_sub(base.imissed),
            ierrors: self.ierrors.saturating_sub(base.ierrors),
            rx_nombuf: self.rx_nombuf.saturating_sub(base.rx_nombuf),
            retimed: self.retimed.saturating_sub(base.retimed),
            captured: self.captured,
            cut_short: self.cut_short,
        }
    }
}

/// A packet source. `poll` hands up to [`BURST`] frames to `f`, in order.
pub trait Capture {
    fn poll<F: FnMut(Frame<'_>)>(&mut self, f: F) -> anyhow::Result<Poll>;
    /// Like `poll`, but hands the frames of a receive burst to `f` together, so that the
    /// analysis can look at all of them before it tracks any (see `Worker::handle_burst`).
    /// By default, one frame at a time.
    fn poll_burst<F: FnMut(&[Frame<'_>])>(&mut self, mut f: F) -> anyhow::Result<Poll> {
        self.poll(|fr| f(std::slice::from_ref(&fr)))
    }
    /// Statistics per source, indexed by port id / file index.
    fn stats(&mut self) -> Vec<SourceStats>;
    /// What the timestamps are made of, per source (`pcap`, `nic`, `tsc`).
    fn time_sources(&self) -> Vec<&'static str>;
    /// The time now in the frames' time base, when that base follows the probe's clock
    /// (live frames timed by the TSC, or by a NIC clock mapped onto it), so that a silent
    /// link still closes intervals; `None` when frames carry their own times (files).
    fn clock_ns(&self) -> Option<u64> {
        None
    }
    /// The capture time of the frame the next poll hands over first, when the capture
    /// knows it before (a file); `None` for a live port.
    fn next_ts(&self) -> Option<u64> {
        None
    }
    /// Asks that no poll hand over frames of two intervals of `interval_ns` of capture time
    /// together (a file's burst would otherwise span any number of them), so that the
    /// receive statistics read between polls split at the intervals' ends. A live burst
    /// spans microseconds: the default does nothing.
    fn split_bursts_at(&mut self, _interval_ns: u64) {}
    /// The most frames that may wait in the receive rings polled here when the run is
    /// stopped: frames the port has received (and counted) already, analysed before the
    /// run ends (a live port's ring descriptors). 0 for a file, which stops where it is.
    fn backlog(&self) -> u64 {
        0
    }
}
