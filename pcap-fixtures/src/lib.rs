//! Packet captures for roceprobe's tests, with what is known about them, and the seeded
//! scenario generator that makes the ones no real capture has.
//!
//! - `captures/`: real RoCEv2 traffic from Linux soft-RoCE (see `captures/README.md`, CC BY-SA
//!   4.0, attribution wanglinlin / linlinw5), committed unchanged, with tshark's figures in
//!   `captures/tshark-truth.json`.
//! - `scenarios/NAME/`: generated captures and `truth.json`, written by
//!   `cargo run -p pcap-fixtures --bin generate-fixtures`. The truth is computed from the
//!   packets each tap emitted (see [`truth`]), never from roceprobe's own analysis.

pub mod conn;
pub mod fabric;
pub mod render;
pub mod rng;
pub mod scenarios;
pub mod sim;
pub mod truth;

use anyhow::{Context, Result};
use render::{Delivery, MirrorPath, DIRECT};
use roceprobe::capture::pcap::Writer;
use roceprobe::wire::erspan::Granularity;
use std::path::{Path, PathBuf};

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

/// Where committed scenarios live.
pub fn scenarios_dir() -> PathBuf {
    root().join("scenarios")
}

/// One scenario: a name, what builds its wire, and how the taps reach the probe.
pub struct Scenario {
    pub name: &'static str,
    pub seed: u64,
    pub build: fn(u64) -> scenarios::Built,
    pub delivery: Delivery,
}

const ERSPAN3: Delivery = Delivery::Erspan {
    erspan_type: 3,
    sessions: [101, 202],
    // Each switch's clock is its own; both mirror paths take 7 µs.
    clock_offset_ns: [3_000_000_017, 77_000_000_500],
    mirror: [MirrorPath::fixed(7_000), MirrorPath::fixed(7_000)],
    granularity: Granularity::Nanos100,
};
/// Type III stamped in nanoseconds without the seconds (the 32-bit stamp wraps every 4.29 s).
const ERSPAN3_NS: Delivery = Delivery::Erspan {
    erspan_type: 3,
    sessions: [101, 202],
    clock_offset_ns: [3_000_000_017, 77_000_000_500],
    mirror: [MirrorPath::fixed(7_000), MirrorPath::fixed(7_000)],
    granularity: Granularity::Ieee1588,
};
/// Type I (GRE without sequence number, no ERSPAN header), one probe port per tap.
const ERSPAN1: Delivery = Delivery::Erspan {
    erspan_type: 1,
    sessions: [0, 0],
    clock_offset_ns: [0, 0],
    mirror: [MirrorPath::fixed(4_000), MirrorPath::fixed(9_000)],
    granularity: Granularity::Micros100,
};
const ERSPAN2: Delivery = Delivery::Erspan {
    erspan_type: 2,
    sessions: [11, 22],
    clock_offset_ns: [0, 0],
    mirror: [MirrorPath::fixed(4_000), MirrorPath::fixed(9_000)],
    granularity: Granularity::Nanos100,
};
const VLAN: Delivery = Delivery::Vlan { compute: 10, storage: 20 };
/// Both ports of a routed hop mirrored: each packet twice, 0.5-2 µs apart.
const ROUTED: Delivery = Delivery::RoutedHop { egress_ns: (500, 2_000) };
const SPLIT: Delivery = Delivery::Split { mirror: DIRECT };
/// Mirror paths as ERSPAN takes them to the probe over ECMP: the storage mirror's 50 µs
/// longer than the compute mirror's; every packet waits up to 4 µs more, and 1 % of them
/// 60-250 µs, overtaken by the packets after them.
const SKEWED: [MirrorPath; 2] = [
    MirrorPath { delay_ns: 7_000, typical_ns: 4_000, tail_ns: 250_000, tail_per_mille: 10, fifo: false },
    MirrorPath { delay_ns: 57_000, typical_ns: 4_000, tail_ns: 250_000, tail_per_mille: 10, fifo: false },
];
/// The same delays to two capture ports, each path one queue: a port's frames keep their
/// order, the storage port's trail the compute port's by 50 µs and more.
const SKEWED_PORTS: [MirrorPath; 2] =
    [MirrorPath { fifo: true, ..SKEWED[0] }, MirrorPath { fifo: true, ..SKEWED[1] }];
const ERSPAN3_SKEWED: Delivery = Delivery::Erspan {
    erspan_type: 3,
    sessions: [101, 202],
    clock_offset_ns: [3_000_000_017, 77_000_000_500],
    mirror: SKEWED,
    granularity: Granularity::Nanos100,
};
/// Two capture ports stamped by the switches' synchronised clocks, reached over skewed paths.
const SPLIT_SKEWED: Delivery = Delivery::Split { mirror: SKEWED_PORTS };
/// Reached over ECMP, with the compute mirror the slower one.
const SPLIT_SKEWED_ECMP: Delivery = Delivery::Split { mirror: SKEWED };
const SPLIT_SKEWED_BACK: Delivery = Delivery::Split { mirror: [SKEWED[1], SKEWED[0]] };

/// Every committed scenario.
pub fn all() -> Vec<Scenario> {
    vec![
        Scenario { name: "nvme_vlan", seed: 1, build: scenarios::nvme, delivery: VLAN },
        Scenario { name: "nvme_split", seed: 1, build: scenarios::nvme, delivery: SPLIT },
        Scenario { name: "nvme_erspan3", seed: 1, build: scenarios::nvme, delivery: ERSPAN3 },
        Scenario { name: "rc_loss_split", seed: 2, build: scenarios::rc_loss, delivery: SPLIT },
        Scenario { name: "rc_loss_vlan", seed: 2, build: scenarios::rc_loss, delivery: VLAN },
        Scenario { name: "rc_loss_routed", seed: 2, build: scenarios::rc_loss, delivery: ROUTED },
        Scenario { name: "misc", seed: 3, build: scenarios::misc, delivery: Delivery::ComputeOnly },
        Scenario { name: "misc_erspan2", seed: 3, build: scenarios::misc, delivery: ERSPAN2 },
        Scenario { name: "misc_erspan1", seed: 3, build: scenarios::misc, delivery: ERSPAN1 },
        // Ten seconds of silence in the middle, across which the nanosecond stamps wrap.
        Scenario { name: "nvme_erspan3_ns", seed: 1, build: scenarios::nvme_silent, delivery: ERSPAN3_NS },
        Scenario { name: "corrupted", seed: 3, build: scenarios::corrupted, delivery: Delivery::ComputeOnly },
        Scenario { name: "nvme_faults", seed: 4, build: scenarios::nvme_faults, delivery: SPLIT },
        Scenario { name: "collective_vlan", seed: 5, build: scenarios::collective, delivery: VLAN },
        // The same traffic over skewed, jittery mirror paths: the same results.
        Scenario { name: "nvme_erspan3_skewed", seed: 1, build: scenarios::nvme, delivery: ERSPAN3_SKEWED },
        Scenario { name: "nvme_split_skewed", seed: 1, build: scenarios::nvme, delivery: SPLIT_SKEWED },
        Scenario {
            name: "rc_loss_split_skewed",
            seed: 2,
            build: scenarios::rc_loss,
            delivery: SPLIT_SKEWED_ECMP,
        },
        Scenario {
            name: "nvme_faults_skewed",
            seed: 4,
            build: scenarios::nvme_faults,
            delivery: SPLIT_SKEWED_BACK,
        },
    ]
}

/// Writes a scenario's capture files and `truth.json` into `dir`.
pub fn write_scenario(s: &Scenario, dir: &Path) -> Result<truth::Truth> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let built = (s.build)(s.seed);
    let delivered = s.delivery.render(&built.wire);
    let names: Vec<String> = match s.delivery.files() {
        1 => vec![format!("{}.pcap", s.name)],
        _ => vec![format!("{}_compute.pcap", s.name), format!("{}_storage.pcap", s.name)],
    };
    let mut writers = names
        .iter()
        .map(|n| Ok(Writer::new(std::io::BufWriter::new(std::fs::File::create(dir.join(n))?))?))
        .collect::<Result<Vec<_>>>()?;
    for d in &delivered {
        writers[d.file].write(d.capture_ns, &d.frame, d.frame.len() as u32)?;
    }
    for w in writers {
        use std::io::Write;
        w.into_inner().flush()?;
    }
    let mut args = s.delivery.vantage_args();
    args.extend(built.args.iter().cloned());
    let meta = truth::Meta {
        io_outcomes: built.outcomes,
        scenario: s.name.into(),
        seed: s.seed,
        files: names,
        args,
        path_mtu: built.mtu,
    };
    let t = truth::compute(meta, &built.wire, &delivered, &built.ios, built.collectives.as_ref());
    std::fs::write(dir.join("truth.json"), serde_json::to_string_pretty(&t)? + "\n")?;
    Ok(t)
}
