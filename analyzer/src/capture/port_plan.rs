//! How a DPDK port is set up, decided from what its device says it can do and what the
//! traffic needs, before anything is configured: the MTU and scatter for the largest frame
//! (`--max-frame`), the RSS hash types that spread RoCEv2 over queues by IP pair alone (or
//! a refusal that names the driver and the alternative), whether the RX timestamp offload
//! is worth enabling, and the line the probe prints about it at start. No DPDK call here:
//! [`super::dpdk`] reads the capabilities and applies the plan.

/// DPDK 22.11's flag bits (`rte_ethdev.h`), checked against the library's own macros in
/// `dpdk.rs`'s tests.
pub mod flags {
    pub const RSS_IPV4: u64 = 1 << 2;
    pub const RSS_FRAG_IPV4: u64 = 1 << 3;
    pub const RSS_NONFRAG_IPV4_TCP: u64 = 1 << 4;
    pub const RSS_NONFRAG_IPV4_UDP: u64 = 1 << 5;
    pub const RSS_NONFRAG_IPV4_SCTP: u64 = 1 << 6;
    pub const RSS_NONFRAG_IPV4_OTHER: u64 = 1 << 7;
    pub const RSS_IPV6: u64 = 1 << 8;
    pub const RSS_FRAG_IPV6: u64 = 1 << 9;
    pub const RSS_NONFRAG_IPV6_TCP: u64 = 1 << 10;
    pub const RSS_NONFRAG_IPV6_UDP: u64 = 1 << 11;
    pub const RSS_NONFRAG_IPV6_SCTP: u64 = 1 << 12;
    pub const RSS_NONFRAG_IPV6_OTHER: u64 = 1 << 13;
    pub const RSS_L2_PAYLOAD: u64 = 1 << 14;
    pub const RSS_IPV6_EX: u64 = 1 << 15;
    pub const RSS_IPV6_TCP_EX: u64 = 1 << 16;
    pub const RSS_IPV6_UDP_EX: u64 = 1 << 17;
    pub const RSS_L3_SRC_ONLY: u64 = 1 << 63;
    pub const RSS_L3_DST_ONLY: u64 = 1 << 62;
    /// `RTE_ETH_RSS_IP`.
    pub const RSS_IP: u64 = RSS_IPV4
        | RSS_FRAG_IPV4
        | RSS_NONFRAG_IPV4_OTHER
        | RSS_IPV6
        | RSS_FRAG_IPV6
        | RSS_NONFRAG_IPV6_OTHER
        | RSS_IPV6_EX;
    pub const RX_OFFLOAD_SCATTER: u64 = 1 << 13;
    pub const RX_OFFLOAD_TIMESTAMP: u64 = 1 << 14;
}
use flags::*;

/// Ethernet header + FCS: what ethdev adds to the MTU when a device does not say.
const DEFAULT_OVERHEAD: u32 = 14 + 4;

/// What a device says about itself (`rte_eth_dev_info`), and whether its clock can be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Capabilities {
    pub driver: String,
    pub flow_type_rss_offloads: u64,
    pub rx_offload_capa: u64,
    pub max_rx_pktlen: u32,
    pub min_mtu: u16,
    pub max_mtu: u16,
    pub max_rx_queues: u16,
    /// `rte_eth_read_clock` answers (what maps RX timestamps onto the probe's clock).
    pub read_clock: bool,
    /// RSS key bytes and redirection table entries, for setting them.
    pub hash_key_size: u8,
    pub reta_size: u16,
}

/// What the probe needs from a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    pub rx_queues: u16,
    /// The largest frame to receive whole, Ethernet header to FCS (`--max-frame`).
    pub max_frame: u32,
    /// Bytes of frame one mbuf holds (its data room less the headroom).
    pub mbuf_frame: u32,
    /// `--probe-clock`: frames are timed by the probe, whatever the NIC stamps.
    pub probe_clock: bool,
}

/// How the port will be configured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortPlan {
    pub mtu: u16,
    /// The largest frame the port will take (MTU + the device's overhead).
    pub max_frame: u32,
    /// Frames larger than one mbuf arrive in chains.
    pub scatter: bool,
    /// RSS hash types (0: one queue, or a device that spreads frames by itself).
    pub rss_hf: u64,
    /// Enable the RX timestamp offload.
    pub timestamps: bool,
    /// Why timestamps are off although the device could stamp frames.
    pub timestamps_off: Option<&'static str>,
    /// Where frame times will come from, for the start-up line.
    pub times: String,
    /// What the probe should know: frames the port cannot take whole, and why.
    pub warnings: Vec<String>,
}

/// Drivers whose RSS on the IP types alone (`RTE_ETH_RSS_IPV4`/`IPV6`) hashes UDP packets on
/// their address pair too. Elsewhere the IP types leave UDP to UDP types, which add the
/// ports, and RoCEv2's UDP source port differs per QP and per direction.
const IP_HASH_COVERS_UDP: [&str; 2] = ["mlx5_pci", "net_ixgbe"];

/// The MTU that lets frames of `max_frame` bytes in, as far as the device allows.
fn mtu_for(c: &Capabilities, max_frame: u32, warnings: &mut Vec<String>) -> (u16, u32) {
    // ethdev's own rule for the overhead between MTU and frame.
    let overhead = if c.max_mtu != u16::MAX && c.max_rx_pktlen > u32::from(c.max_mtu) {
        c.max_rx_pktlen - u32::from(c.max_mtu)
    } else {
        DEFAULT_OVERHEAD
    };
    let want = max_frame.saturating_sub(overhead).max(u32::from(c.min_mtu));
    let limit = u32::from(c.max_mtu).min(c.max_rx_pktlen.saturating_sub(overhead));
    let mtu = want.min(limit).min(u32::from(u16::MAX)) as u16;
    let frame = u32::from(mtu) + overhead;
    if frame < max_frame {
        warnings.push(format!(
            "{} takes frames of at most {frame} bytes (MTU {mtu}), less than --max-frame {max_frame}: larger frames are dropped by the NIC (counted in ierrors or imissed)",
            c.driver
        ));
    }
    (mtu, frame)
}

/// The RSS hash types for `rx_queues` > 1: RoCEv2 by IP pair alone, or why not.
pub fn rss_types(c: &Capabilities, rx_queues: u16) -> Result<u64, String> {
    if rx_queues <= 1 || c.driver == "net_pcap" {
        // net_pcap cannot hash: its queues are its rx_pcap files, split beforehand.
        return Ok(0);
    }
    let refuse = |why: &str| {
        Err(format!(
            "{} cannot spread RoCEv2 over RX queues by IP pair ({why}); run without --rss: the capture thread then dispatches frames to the workers by IP pair",
            c.driver
        ))
    };
    if !IP_HASH_COVERS_UDP.contains(&c.driver.as_str()) {
        let udp = c.flow_type_rss_offloads & (RSS_NONFRAG_IPV4_UDP | RSS_NONFRAG_IPV6_UDP) != 0;
        return if udp {
            refuse("its RSS hashes UDP on the ports as well as the addresses, and RoCEv2's UDP source port differs per QP and per direction")
        } else {
            refuse("it hashes no UDP")
        };
    }
    let hf = c.flow_type_rss_offloads & (RSS_IPV4 | RSS_FRAG_IPV4 | RSS_IPV6 | RSS_FRAG_IPV6);
    if hf & RSS_IPV4 == 0 {
        return refuse("it cannot hash IPv4 addresses");
    }
    Ok(hf)
}

/// The plan for one port.
pub fn plan(c: &Capabilities, w: &Wanted) -> Result<PortPlan, String> {
    if w.rx_queues > c.max_rx_queues {
        let s = if c.max_rx_queues == 1 { "" } else { "s" };
        // Only --rss asks for more than one (a queue per worker).
        let instead = match c.driver.as_str() {
            "net_pcap" => "one rx_pcap file per worker, each holding whole IP pairs, or run without --rss",
            _ => "run without --rss: the capture thread then dispatches frames to the workers by IP pair",
        };
        return Err(format!(
            "{} has at most {} RX queue{s}, {} asked by --rss: {instead}",
            c.driver, c.max_rx_queues, w.rx_queues
        ));
    }
    if c.driver == "net_pcap" && c.max_rx_queues > w.rx_queues {
        // Its queues are its rx_pcap files: one left unpolled would be lost without a word.
        return Err(format!(
            "net_pcap has {} rx_pcap files, one per RX queue, and {} would be read: give each file a --vdev of its own, or --rss --workers {} (one worker per file)",
            c.max_rx_queues, w.rx_queues, c.max_rx_queues
        ));
    }
    let mut warnings = Vec::new();
    let (mtu, max_frame) = mtu_for(c, w.max_frame, &mut warnings);
    // net_pcap chains a frame larger than one mbuf by itself (but for infinite_rx=1, whose
    // mbufs are sized for the file's largest frame beforehand).
    let scatter = max_frame > w.mbuf_frame && c.driver != "net_pcap";
    if scatter && c.rx_offload_capa & RX_OFFLOAD_SCATTER == 0 {
        return Err(format!(
            "{} cannot receive a frame in several mbufs and frames of up to {max_frame} bytes do not fit one of {}: use --mbuf-size {} or a smaller --max-frame",
            c.driver,
            w.mbuf_frame,
            max_frame + 128
        ));
    }
    let rss_hf = rss_types(c, w.rx_queues)?;
    let can_stamp = c.rx_offload_capa & RX_OFFLOAD_TIMESTAMP != 0;
    // net_pcap stamps every frame with its file's time, offload or not.
    let pcap = c.driver == "net_pcap";
    let timestamps_off = if w.probe_clock && (can_stamp || pcap) {
        Some("--probe-clock")
    } else if can_stamp && !c.read_clock && !pcap {
        // Stamps in an unknown unit and epoch, and the offload costs (ice leaves its
        // vector receive path for it, mlx5 its CQE compression).
        Some("the device clock cannot be read to map its stamps")
    } else {
        None
    };
    let timestamps = can_stamp && timestamps_off.is_none();
    let times = match timestamps_off {
        Some(why) => format!("times from the probe's clock ({why})"),
        None if pcap => "times from its file".to_owned(),
        None if timestamps => "NIC timestamps".to_owned(),
        None => "times from the probe's clock (the NIC does not stamp frames)".to_owned(),
    };
    Ok(PortPlan { times, mtu, max_frame, scatter, rss_hf, timestamps, timestamps_off, warnings })
}

/// RSS hash types as ethdev's names.
pub fn rss_names(hf: u64) -> String {
    const NAMES: [(u64, &str); 16] = [
        (RSS_IPV4, "ipv4"),
        (RSS_FRAG_IPV4, "ipv4-frag"),
        (RSS_NONFRAG_IPV4_TCP, "ipv4-tcp"),
        (RSS_NONFRAG_IPV4_UDP, "ipv4-udp"),
        (RSS_NONFRAG_IPV4_SCTP, "ipv4-sctp"),
        (RSS_NONFRAG_IPV4_OTHER, "ipv4-other"),
        (RSS_IPV6, "ipv6"),
        (RSS_FRAG_IPV6, "ipv6-frag"),
        (RSS_NONFRAG_IPV6_TCP, "ipv6-tcp"),
        (RSS_NONFRAG_IPV6_UDP, "ipv6-udp"),
        (RSS_NONFRAG_IPV6_SCTP, "ipv6-sctp"),
        (RSS_NONFRAG_IPV6_OTHER, "ipv6-other"),
        (RSS_L2_PAYLOAD, "l2-payload"),
        (RSS_IPV6_EX, "ipv6-ex"),
        (RSS_IPV6_TCP_EX, "ipv6-tcp-ex"),
        (RSS_IPV6_UDP_EX, "ipv6-udp-ex"),
    ];
    let names: Vec<&str> = NAMES.iter().filter(|(b, _)| hf & b != 0).map(|(_, n)| *n).collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(" ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What DPDK 22.11's drivers report (their `dev_infos_get`), for a ConnectX-6, an
    /// XL710 and an E810.
    fn mlx5() -> Capabilities {
        Capabilities {
            driver: "mlx5_pci".into(),
            // ~MLX5_RSS_HF_MASK: IP, UDP, TCP, ESP and the L3/L4 selectors.
            flow_type_rss_offloads: RSS_IP
                | RSS_NONFRAG_IPV4_UDP
                | RSS_NONFRAG_IPV6_UDP
                | RSS_IPV6_UDP_EX
                | RSS_NONFRAG_IPV4_TCP
                | RSS_NONFRAG_IPV6_TCP
                | RSS_IPV6_TCP_EX
                | RSS_L3_SRC_ONLY
                | RSS_L3_DST_ONLY,
            rx_offload_capa: RX_OFFLOAD_SCATTER | RX_OFFLOAD_TIMESTAMP | 0x1f,
            // MLX5_ETH_OVERHEAD is 18 + 2 VLAN tags.
            max_rx_pktlen: 9978 + 26,
            min_mtu: 68,
            max_mtu: 9978,
            max_rx_queues: 1024,
            read_clock: true,
            hash_key_size: 40,
            reta_size: 512,
        }
    }

    /// The IPv4 flow types of Intel's packet-type tables, and the IPv6 ones but plain IPv6.
    const INTEL_IPV4: u64 = RSS_IPV4
        | RSS_FRAG_IPV4
        | RSS_NONFRAG_IPV4_TCP
        | RSS_NONFRAG_IPV4_UDP
        | RSS_NONFRAG_IPV4_SCTP
        | RSS_NONFRAG_IPV4_OTHER;
    const INTEL_IPV6: u64 = RSS_FRAG_IPV6
        | RSS_NONFRAG_IPV6_TCP
        | RSS_NONFRAG_IPV6_UDP
        | RSS_NONFRAG_IPV6_SCTP
        | RSS_NONFRAG_IPV6_OTHER;

    fn i40e() -> Capabilities {
        Capabilities {
            driver: "net_i40e".into(),
            // The pctype table's flow types: no plain IPv6, IPv6-ex nor L3 selectors.
            flow_type_rss_offloads: INTEL_IPV4 | INTEL_IPV6 | RSS_L2_PAYLOAD,
            rx_offload_capa: RX_OFFLOAD_SCATTER | 0x1f,
            // I40E_FRAME_SIZE_MAX, and an overhead of 14 + 4 + 2 VLAN tags.
            max_rx_pktlen: 9728,
            min_mtu: 68,
            max_mtu: 9728 - 26,
            max_rx_queues: 320,
            read_clock: false,
            hash_key_size: 52,
            reta_size: 512,
        }
    }

    fn ice() -> Capabilities {
        Capabilities {
            driver: "net_ice".into(),
            // ICE_RSS_OFFLOAD_ALL.
            flow_type_rss_offloads: INTEL_IPV4 | RSS_IPV6 | INTEL_IPV6,
            rx_offload_capa: RX_OFFLOAD_SCATTER | RX_OFFLOAD_TIMESTAMP | 0x1f,
            max_rx_pktlen: 9728,
            min_mtu: 68,
            max_mtu: 9728 - 26,
            max_rx_queues: 256,
            // No read_clock in 22.11.
            read_clock: false,
            hash_key_size: 52,
            reta_size: 2048,
        }
    }

    fn pcap() -> Capabilities {
        Capabilities {
            driver: "net_pcap".into(),
            flow_type_rss_offloads: 0,
            rx_offload_capa: 0,
            max_rx_pktlen: u32::MAX,
            // ethdev's defaults where the driver says nothing.
            min_mtu: 68,
            max_mtu: u16::MAX,
            max_rx_queues: 1,
            read_clock: false,
            hash_key_size: 0,
            reta_size: 0,
        }
    }

    /// 4 KiB RoCE inside ERSPAN and 9 KiB jumbo frames, mbufs of DPDK's default size.
    fn wanted(rx_queues: u16) -> Wanted {
        Wanted { rx_queues, max_frame: 9216, mbuf_frame: 2048, probe_clock: false }
    }

    #[test]
    fn every_rx_pcap_file_of_a_net_pcap_port_is_read() {
        // net_pcap has as many RX queues as rx_pcap files: one queue polled of two would
        // leave the second file unread.
        let two = Capabilities { max_rx_queues: 2, ..pcap() };
        let err = plan(&two, &wanted(1)).unwrap_err();
        assert!(err.contains("net_pcap has 2 rx_pcap files, one per RX queue, and 1 would be read"), "{err}");
        assert!(plan(&two, &wanted(2)).is_ok());
        assert!(plan(&pcap(), &wanted(2))
            .unwrap_err()
            .starts_with("net_pcap has at most 1 RX queue, 2 asked by --rss: one rx_pcap file per worker"));
        assert!(plan(&two, &wanted(3))
            .unwrap_err()
            .starts_with("net_pcap has at most 2 RX queues, 3 asked by --rss"));
    }

    #[test]
    fn a_4k_fabric_gets_its_mtu_and_scatter() {
        for c in [mlx5(), i40e(), ice()] {
            let p = plan(&c, &wanted(1)).unwrap();
            let overhead = c.max_rx_pktlen - u32::from(c.max_mtu);
            assert_eq!((u32::from(p.mtu), p.max_frame), (9216 - overhead, 9216), "{}", c.driver);
            assert!(p.scatter, "{}: a 9216-byte frame needs 5 mbufs of 2 KiB", c.driver);
            assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        }
        // A frame of 4,170 bytes (a 4 KiB RDMA WRITE First or Only, its RETH included) plus
        // 54 of ERSPAN III fits, with room to spare.
        let p = plan(&mlx5(), &Wanted { max_frame: 4170 + 54, ..wanted(1) }).unwrap();
        assert_eq!((p.mtu, p.scatter), (4224 - 26, true));
        // Mbufs large enough: no scatter.
        let p = plan(&ice(), &Wanted { mbuf_frame: 9216, ..wanted(1) }).unwrap();
        assert!(!p.scatter);
        // net_pcap (ethdev's defaults: overhead 18) chains large frames by itself.
        let p = plan(&pcap(), &wanted(1)).unwrap();
        assert_eq!((p.mtu, p.max_frame, p.scatter), (9198, 9216, false));
    }

    #[test]
    fn a_frame_larger_than_the_device_takes_is_told() {
        let p = plan(&i40e(), &Wanted { max_frame: 16_000, ..wanted(1) }).unwrap();
        assert_eq!((p.mtu, p.max_frame), (9702, 9728));
        assert_eq!(p.warnings.len(), 1);
        assert!(p.warnings[0].contains("net_i40e takes frames of at most 9728 bytes"), "{:?}", p.warnings);
        // Without scatter, frames must fit one mbuf.
        let no_scatter = Capabilities { rx_offload_capa: 0, ..ice() };
        let e = plan(&no_scatter, &wanted(1)).unwrap_err();
        assert!(e.contains("--mbuf-size 9344"), "{e}");
    }

    #[test]
    fn rss_hashes_the_ip_pair_or_refuses_naming_the_driver() {
        // mlx5: the IP types hash every IPv4/IPv6 packet, UDP included, on its addresses.
        let hf = rss_types(&mlx5(), 4).unwrap();
        assert_eq!(hf, RSS_IPV4 | RSS_FRAG_IPV4 | RSS_IPV6 | RSS_FRAG_IPV6);
        assert_eq!(hf & (RSS_NONFRAG_IPV4_UDP | RSS_NONFRAG_IPV6_UDP), 0, "never the ports");
        assert_eq!(rss_names(hf), "ipv4 ipv4-frag ipv6 ipv6-frag");
        // i40e and ice hash UDP only with its ports: refused, with the way out.
        for c in [i40e(), ice()] {
            let e = rss_types(&c, 4).unwrap_err();
            assert!(e.starts_with(&format!("{} cannot spread RoCEv2", c.driver)), "{e}");
            assert!(e.contains("run without --rss"), "{e}");
            assert!(plan(&c, &wanted(4)).is_err());
        }
        // A device that hashes no UDP at all.
        let e = rss_types(&Capabilities { flow_type_rss_offloads: RSS_L2_PAYLOAD, ..i40e() }, 2).unwrap_err();
        assert!(e.contains("hashes no UDP"), "{e}");
        // One queue needs no hash; net_pcap's queues are files.
        assert_eq!(rss_types(&i40e(), 1), Ok(0));
        assert_eq!(rss_types(&pcap(), 4), Ok(0));
        assert!(plan(&mlx5(), &wanted(2000)).unwrap_err().contains("at most 1024 RX queues"));
    }

    #[test]
    fn timestamps_only_where_they_can_be_mapped() {
        let p = plan(&mlx5(), &wanted(1)).unwrap();
        assert_eq!((p.timestamps, p.timestamps_off), (true, None));
        let p = plan(&mlx5(), &Wanted { probe_clock: true, ..wanted(1) }).unwrap();
        assert_eq!((p.timestamps, p.timestamps_off), (false, Some("--probe-clock")));
        // ice stamps frames but its clock cannot be read in 22.11.
        let p = plan(&ice(), &wanted(1)).unwrap();
        assert!(!p.timestamps);
        assert!(p.timestamps_off.unwrap().contains("cannot be read"));
        // i40e does not stamp: nothing to say.
        assert_eq!(plan(&i40e(), &wanted(1)).unwrap().timestamps_off, None);
    }
}
