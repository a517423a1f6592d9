//! Packet captures for roceprobe's tests, with what is known about them.
//!
//! `captures/`: real RoCEv2 traffic from Linux soft-RoCE (see `captures/README.md`, CC BY-SA
//! 4.0, attribution wanglinlin / linlinw5), committed unchanged.

use std::path::PathBuf;

/// The folder of this crate.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The real captures, by file name.
pub const REAL_CAPTURES: [&str; 10] = [
    "pingpong_rc.pcap",
    "pingpong_uc.pcap",
    "pingpong_ud.pcap",
    "rdma_atomic_bw.pcap",
    "rdma_cm.pcap",
    "rdma_read_bw.pcap",
    "rdma_read_lat.pcap",
    "rdma_send_bw.pcap",
    "rdma_write_bw.pcap",
    "rdma_write_lat.pcap",
];

/// Path of a real capture.
pub fn capture_path(name: &str) -> PathBuf {
    root().join("captures").join(name)
}
