//! Evidence on demand, counted over the run (docs/EVIDENCE.md): per event kind, the events,
//! the files written and why the others got none; the disk's bounds; the events listed.

use crate::track::evidence::EventKind;

/// Events listed in the summary at most (all are in events.csv and counted).
pub const MAX_LISTED: usize = 10_000;

/// Per event kind: events, files written, and why the others got none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KindCounts {
    pub events: u64,
    pub files: u64,
    /// Over `--evidence-max-per-minute` for the kind in that minute.
    pub capped_per_minute: u64,
    /// Every record of the worker was busy with other events.
    pub no_room: u64,
    /// Writing the file failed (a full or failing disk).
    pub write_failed: u64,
}

/// How evidence went over the run.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EvidenceTotals {
    pub dir: String,
    /// By kind (`loss`, `rnr_nak`, `congestion`, `slow_io`, `io_timeout`, `icrc_error`).
    pub kinds: std::collections::BTreeMap<String, KindCounts>,
    pub files_written: u64,
    pub bytes_written: u64,
    /// Files removed (oldest first) to stay within `--evidence-max-bytes`.
    pub files_removed: u64,
    pub bytes_removed: u64,
    /// Evidence files in the directory now and their bytes.
    pub files_on_disk: u64,
    pub bytes_on_disk: u64,
    /// Times the directory was made again, having been removed under the running probe
    /// (what was in it went with it).
    #[serde(default)]
    pub dir_recreated: u64,
    /// Packets of events that did not fit in their file.
    pub packets_truncated: u64,
    /// Events whose record the stats side had no room for, and signals beyond a packet's
    /// buffer (a flood): not listed.
    pub events_dropped: u64,
    /// The events, in the order they were reported (at most [`MAX_LISTED`]: the first
    /// reported; the summary lists them by time).
    pub events: Vec<EventRow>,
    pub events_not_listed: u64,
}

impl EvidenceTotals {
    pub fn kind(&self, k: EventKind) -> KindCounts {
        self.kinds.get(k.as_str()).copied().unwrap_or_default()
    }

    pub fn kind_mut(&mut self, k: EventKind) -> &mut KindCounts {
        self.kinds.entry(k.as_str().to_owned()).or_default()
    }
}

/// One event as listed (summary, events.csv).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EventRow {
    pub time: String,
    #[serde(skip)]
    pub ts_ns: u64,
    pub kind: String,
    pub vantage: String,
    pub src_ip: String,
    pub dst_ip: String,
    pub dst_qpn: u32,
    pub verdict: String,
    /// The file's name in the directory (empty when none was written).
    pub file: String,
    /// `written`, or why not: `capped_per_minute`, `no_room`, `write_failed`.
    pub status: String,
    pub packets: usize,
}
