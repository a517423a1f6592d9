//! The scalar counters of a flow. Kept cumulative per flow; an interval's or a
//! transmission's counters are the difference from a saved base, so a packet updates one
//! set of counters only.

macro_rules! flow_counts {
    ($( $(#[$doc:meta])* $field:ident ),* $(,)?) => {
        /// Counters of a flow (cumulative, or the difference between two points in time).
        /// `repr(C)`: counter k (in the order declared) is the k-th word (see
        /// [`FlowCounts::index_of`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
        #[serde(default)]
        #[repr(C)]
        pub struct FlowCounts {
            $( $(#[$doc])* pub $field: u64, )*
        }

        impl FlowCounts {
            /// `self - base` for the counters whose bit (their index) is set in `mask`, 0
            /// for the others.
            // The last counter's index is counted past, never read.
            #[allow(unused_assignments)]
            pub fn since_masked(&self, base: &FlowCounts, mask: u32) -> FlowCounts {
                let mut k = 0u32;
                FlowCounts {
                    $( $field: {
                        let d = if mask & (1 << k) != 0 { self.$field - base.$field } else { 0 };
                        k += 1;
                        d
                    }, )*
                }
            }
            pub fn add(&mut self, o: &FlowCounts) {
                $( self.$field += o.$field; )*
            }
            /// `self - base`, field by field (counters only grow).
            pub fn since(&self, base: &FlowCounts) -> FlowCounts {
                FlowCounts { $( $field: self.$field - base.$field, )* }
            }
        }
    };
}

flow_counts! {
    packets,
    /// Frame bytes on the wire, without FCS (for a mirrored frame: the mirrored frame's).
    bytes,
    /// RoCE payload bytes (after extension headers, before pad and ICRC).
    payload_bytes,
    /// Request messages completed (the Last or Only packet of a SEND or WRITE, READ
    /// Requests, atomics).
    messages,
    /// Request packets whose PSN was behind the expected one, and their payload bytes.
    retx_packets,
    retx_bytes,
    /// Runs of retransmissions (go-back-N episodes): a retransmission after a packet that
    /// was not one.
    retx_episodes,
    /// PSNs skipped: packets lost upstream of this vantage.
    gap_psns,
    /// Request PSNs more than 2^22 away from the expected one (a reset QP or a reused QPN):
    /// not counted as loss or retransmission; the analysis restarts there.
    out_of_window,
    /// NAK PSN sequence error, RNR NAK, and other NAK codes, on the flow that carries them.
    nak_seq,
    nak_rnr,
    nak_other,
    /// CNPs that throttle this flow.
    cnp,
    /// CNPs on this flow whose throttled flow is not known (its QP pairing was not learned).
    cnp_unattributed,
    /// Packets with ECN Congestion Experienced.
    ecn_ce,
    /// Packets whose ICRC was wrong (with `--check-icrc`).
    icrc_errors,
    /// NVMe/RDMA commands (SQEs) sent on this flow.
    nvme_commands,
    /// NVMe/RDMA completions on this flow that matched a command seen the other way.
    nvme_completions,
    /// Packets that reached the probe after the reorder window had passed them: counted
    /// (packets, bytes, opcodes, ECN) but left out of PSN analysis, latencies and I/Os.
    late_packets,
    /// Second copies of a packet from the same mirror (the copy a mirrored router sent on,
    /// TTL one less, after the copy it received): counted here, nowhere else.
    mirror_duplicates,
    /// `nak_other` by its code (AETH syndrome 011 with the NAK code in its low five bits):
    /// 1 invalid request, 2 remote access error, 3 remote operational error, 4 invalid RD
    /// request. Kept last, past the counters a transmission tracks (its mask has 16 bits):
    /// only flows and intervals count them. A reserved code counts in `nak_other` alone.
    nak_invalid_request,
    nak_remote_access_error,
    nak_remote_operational_error,
    nak_invalid_rd_request,
}

impl FlowCounts {
    /// The index of the counter `field` picks (its word in the struct), for masks of
    /// counters: `field` is an accessor such as `|c| &mut c.retx_packets`.
    #[inline(always)]
    pub fn index_of(&mut self, field: impl Fn(&mut FlowCounts) -> &mut u64) -> u32 {
        let base = self as *const FlowCounts as usize;
        let at = field(self) as *const u64 as usize;
        ((at - base) / std::mem::size_of::<u64>()) as u32
    }
}

// A mask of counters fits in a u32.
const _: () = assert!(std::mem::size_of::<FlowCounts>() <= 32 * std::mem::size_of::<u64>());

/// Transmissions too short to be reported one by one (fewer packets than
/// `--min-transmission-packets`, and no NAK), counted per flow: how many ended, and their
/// packets and wire bytes (docs/METRICS.md, "Short transmissions").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct ShortTransmissions {
    #[serde(rename = "short_transmissions")]
    pub count: u64,
    #[serde(rename = "short_transmission_packets")]
    pub packets: u64,
    #[serde(rename = "short_transmission_bytes")]
    pub bytes: u64,
}

impl ShortTransmissions {
    pub fn add(&mut self, o: &ShortTransmissions) {
        self.count += o.count;
        self.packets += o.packets;
        self.bytes += o.bytes;
    }
}
