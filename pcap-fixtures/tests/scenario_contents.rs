//! The scenarios contain what they claim to (checked on the wire and the truth), so a test
//! that passes on them has exercised those cases.

use pcap_fixtures::scenarios;
use pcap_fixtures::sim::{Packet, COMPUTE, STORAGE};
use pcap_fixtures::truth::FlowTruth;
use std::collections::{HashMap, HashSet};

fn truth(name: &str) -> serde_json::Value {
    let p = pcap_fixtures::scenarios_dir().join(name).join("truth.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn flows(name: &str) -> Vec<FlowTruth> {
    truth(name)["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| FlowTruth {
            vantage: f["vantage"].as_str().unwrap().into(),
            src_ip: f["src_ip"].as_str().unwrap().into(),
            dst_ip: f["dst_ip"].as_str().unwrap().into(),
            dst_qpn: f["dst_qpn"].as_u64().unwrap() as u32,
            gap_psns: f["gap_psns"].as_u64().unwrap(),
            retx_packets: f["retx_packets"].as_u64().unwrap(),
            nak_seq: f["nak_seq"].as_u64().unwrap(),
            nak_rnr: f["nak_rnr"].as_u64().unwrap(),
            nak_other: f["nak_other"].as_u64().unwrap(),
            cnp: f["cnp"].as_u64().unwrap(),
            ecn_ce: f["ecn_ce"].as_u64().unwrap(),
            fabric_loss_psns: f["fabric_loss_psns"].as_u64(),
            dropped_between_taps: f["dropped_between_taps"].as_u64(),
            ..Default::default()
        })
        .collect()
}

#[test]
fn nvme_has_queue_depth_out_of_order_completions_and_cid_reuse() {
    let b = scenarios::nvme(1);
    let time = |i: usize| b.wire.packets[i].seen()[COMPUTE].unwrap();
    let mut max_depth = 0;
    let mut out_of_order = 0;
    let mut reused = 0;
    let mut by_conn: HashMap<(String, String), Vec<&pcap_fixtures::truth::IoRecord>> = HashMap::new();
    for io in &b.ios {
        by_conn.entry((io.host.to_string(), io.target.to_string())).or_default().push(io);
    }
    for ios in by_conn.values() {
        for io in ios {
            let (s, e) = (time(io.sqe_first), time(io.cqe));
            let depth = ios.iter().filter(|o| time(o.sqe_first) <= s && time(o.cqe) > s).count();
            max_depth = max_depth.max(depth);
            // A later command completed before this one.
            if ios.iter().any(|o| time(o.sqe_first) > s && time(o.cqe) < e) {
                out_of_order += 1;
            }
        }
        let mut cids = HashSet::new();
        reused += ios.iter().filter(|io| !cids.insert(io.cid)).count();
    }
    assert!(max_depth >= 3, "queue depth {max_depth}");
    assert!(out_of_order >= 10, "{out_of_order} completions out of order");
    assert!(reused >= 10, "{reused} CIDs reused");
    let kinds: HashSet<(&str, bool)> = b.ios.iter().map(|io| (io.op, io.in_capsule)).collect();
    assert_eq!(kinds.len(), 4, "reads, writes, in-capsule writes and other commands: {kinds:?}");
    assert!(b.ios.iter().all(|io| io.sqe_first != io.sqe_last || !io.in_capsule || io.cqe > 0));
    assert!(b.ios.iter().any(|io| io.sqe_first != io.sqe_last), "a command capsule spanning packets");
}

#[test]
fn rc_loss_has_fabric_loss_nak_rnr_cnp_ecn_and_wrap() {
    let f = flows("rc_loss_split");
    let get = |v: &str, qpn: u32| f.iter().find(|x| x.vantage == v && x.dst_qpn == qpn).unwrap().clone();
    // QP A: one packet lost in the fabric (a gap at storage only), one lost before both taps.
    let (c, s) = (get("compute", 0x0B01), get("storage", 0x0B01));
    assert_eq!((c.gap_psns, s.gap_psns), (1, 2), "fabric loss shows at storage only");
    // Here the packet lost between the taps is followed by others before it is resent, so
    // The gap-based fabric loss (docs/METRICS.md) sees exactly what the fabric dropped.
    assert_eq!((s.fabric_loss_psns, s.dropped_between_taps), (Some(1), Some(1)));
    assert_eq!((c.fabric_loss_psns, c.dropped_between_taps), (Some(0), Some(0)));
    assert!(c.retx_packets >= 5 && s.retx_packets == c.retx_packets, "go-back-N at both taps");
    assert_eq!(get("storage", 0x0A01).nak_seq, 2, "a NAK for each loss");
    assert_eq!(get("compute", 0x0A02).nak_rnr, 2, "two RNR NAKs");
    // QP C: CE marks in the fabric and once upstream; CNPs on the throttled flow.
    let (c, s) = (get("compute", 0x0B03), get("storage", 0x0B03));
    // Messages 1, 5, 9, 13, 17, 21 (2 packets each) marked in the fabric; message 10's first
    // packet marked upstream of both taps.
    assert_eq!((c.ecn_ce, s.ecn_ce), (1, 6 * 2 + 1));
    assert_eq!((c.cnp, s.cnp), (7, 7));
    // QP A starts at PSN 0xFFFFF0 and QP D at 0xFFFFF4: both wrap.
    let b = scenarios::rc_loss(2);
    let psns: Vec<u32> = b
        .wire
        .packets
        .iter()
        .filter_map(|p| match p {
            Packet::Roce { spec, seen, .. } if spec.bth.dest_qp == 0x0B04 && seen[STORAGE].is_some() => {
                Some(spec.bth.psn)
            }
            _ => None,
        })
        .collect();
    assert!(psns.contains(&0xFF_FFF4) && psns.contains(&0), "READ requests across the wrap: {psns:?}");
    assert!(psns.windows(2).all(|w| (w[1].wrapping_sub(w[0]) & 0xFF_FFFF) == 4), "each READ reserves 4 PSNs");
}

#[test]
fn nvme_faults_loses_completions_between_the_taps_without_a_gap() {
    // The target resends a lost completion before sending anything else: a tail loss, which
    // no gap reveals (and which the I/O tracker sees as a retransmitted I/O instead).
    let f = flows("nvme_faults");
    let back =
        f.iter().find(|x| x.vantage == "compute" && x.src_ip == "10.0.2.9" && x.dst_qpn == 0x0301).unwrap();
    assert_eq!((back.dropped_between_taps, back.fabric_loss_psns, back.gap_psns), (Some(2), Some(0), 0));
}

#[test]
fn misc_has_every_transport_and_encapsulation() {
    let t = truth("misc");
    let transports: HashSet<&str> =
        t["flows"].as_array().unwrap().iter().map(|f| f["transport"].as_str().unwrap()).collect();
    for want in ["RC", "UC", "UD", "XRC"] {
        assert!(transports.contains(want), "{want} in {transports:?}");
    }
    let flows = t["flows"].as_array().unwrap();
    assert!(flows.iter().any(|f| f["src_ip"].as_str().unwrap().contains(':')), "IPv6");
    assert!(flows.iter().any(|f| f["dst_qpn"] == 1), "CM MADs to QP 1");
    assert!(t["non_roce_packets"].as_u64().unwrap() >= 12, "noise");
}

#[test]
fn skewed_scenarios_are_their_base_traffic_out_of_order_by_up_to_hundreds_of_us() {
    use pcap_fixtures::render::{without_skew, Delivery};
    let all = pcap_fixtures::all();
    let skewed: Vec<_> = all.iter().filter(|s| s.name.ends_with("_skewed")).collect();
    assert_eq!(skewed.len(), 4);
    for s in skewed {
        let base = all.iter().find(|b| b.name == s.name.trim_end_matches("_skewed")).unwrap();
        // The same wire, delivered over equal and jitter-free paths by the base scenario.
        assert_eq!((s.seed, s.build as usize), (base.seed, base.build as usize), "{}", s.name);
        assert_eq!(without_skew(s.delivery), base.delivery, "{}", s.name);
        assert_ne!(s.delivery, base.delivery);
        // Out of order on arrival: per tap, frames that came after a frame the tap saw later,
        // and how far back in time they reach.
        let built = (s.build)(s.seed);
        let delivered = s.delivery.render(&built.wire);
        let (mut overtaken, mut deepest, mut latest) = (0, 0u64, [0u64; 2]);
        let mut slowest = 0u64;
        for d in &delivered {
            if d.tap_ns < latest[d.tap] {
                overtaken += 1;
                deepest = deepest.max(latest[d.tap] - d.tap_ns);
            }
            latest[d.tap] = latest[d.tap].max(d.tap_ns);
            slowest = slowest.max(d.arrival_ns - d.tap_ns);
        }
        let ports = matches!(s.delivery, Delivery::Split { mirror } if mirror[0].fifo);
        if ports {
            // Each port's queue keeps its order.
            assert_eq!(overtaken, 0, "{}", s.name);
        } else {
            assert!(overtaken > 50 && deepest > 50_000, "{}: {overtaken} overtaken, {deepest} ns", s.name);
        }
        // The slow path: 57 µs, plus jitter up to 250 µs.
        assert!((57_000..=311_000).contains(&slowest), "{}: {slowest} ns", s.name);
    }
}

#[test]
fn collective_steps_name_each_held_back_host_with_its_cause() {
    use pcap_fixtures::truth::collective::Cause;
    let s = pcap_fixtures::all().into_iter().find(|s| s.name == "collective_vlan").unwrap();
    let built = (s.build)(s.seed);
    let injections = &built.collectives.as_ref().unwrap().injections;
    let t = truth("collective_vlan");
    let jobs = t["jobs"].as_array().unwrap();
    let names: Vec<&str> = jobs.iter().map(|j| j["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["10.1.0.1", "10.2.0.1"]);
    let hosts = |j: &serde_json::Value| -> Vec<String> {
        j["hosts"].as_array().unwrap().iter().map(|h| h.as_str().unwrap().to_owned()).collect()
    };
    assert_eq!(hosts(&jobs[0]), (1..=8).map(|i| format!("10.1.0.{i}")).collect::<Vec<_>>());
    assert_eq!(hosts(&jobs[1]), (1..=4).map(|i| format!("10.2.0.{i}")).collect::<Vec<_>>());
    // As designed: 30 steps of 8 flows, 36 of 4, every flow in every step.
    for (job, steps, flows) in [(&jobs[0], 30, 8), (&jobs[1], 36, 4)] {
        let s = job["steps"].as_array().unwrap();
        assert_eq!(s.len(), steps, "{}: steps", job["name"]);
        assert!(s.iter().all(|x| x["flows"] == flows), "{}: flows per step", job["name"]);
        // The steps are apart by the compute pause, far more than the step gap.
        for w in s.windows(2) {
            let gap = w[1]["start_ns"].as_u64().unwrap() - w[0]["end_ns"].as_u64().unwrap();
            assert!(gap > 4_000_000, "{}: {gap} ns between steps", job["name"]);
        }
    }
    // Each held-back host is its step's straggler, for the reason its cause gives, by far.
    let mut held = 0;
    for inj in injections {
        let host = inj.host.to_string();
        let job = jobs.iter().find(|j| hosts(j).contains(&host)).unwrap();
        let step = &job["steps"][inj.step];
        assert_eq!(step["injected"], inj.cause.name(), "{} step {}", job["name"], inj.step);
        assert_eq!(step["straggler_host"], host.as_str(), "{} step {}", job["name"], inj.step);
        assert_eq!(step["straggler"]["src_ip"], host.as_str());
        assert_eq!(step["reason"], inj.cause.reason(), "{} step {}", job["name"], inj.step);
        let lag = step["lag_ns"].as_u64().unwrap();
        assert!(lag >= 100_000, "{} step {}: lag {lag} ns", job["name"], inj.step);
        held += 1;
    }
    let causes = |c: Cause| injections.iter().filter(|i| i.cause == c).count();
    assert_eq!((causes(Cause::Loss), causes(Cause::Congestion), causes(Cause::SlowHost)), (8, 8, 8));
    // The other steps: the naturally slowest flow, a few µs behind, for no reason.
    let mut natural = 0;
    for job in jobs {
        for (k, step) in job["steps"].as_array().unwrap().iter().enumerate() {
            if step["injected"].is_null() {
                assert_eq!(step["reason"], "none", "{} step {k}", job["name"]);
                let lag = step["lag_ns"].as_u64().unwrap();
                assert!(lag < 20_000, "{} step {k}: lag {lag} ns", job["name"]);
                natural += 1;
            }
        }
    }
    assert_eq!((held, natural), (24, 30 + 36 - 24));
    // The per-flow truth saw what each cause does at the compute tap: go-back-N after a NAK,
    // CNPs and CE marks.
    let f = flows("collective_vlan");
    let sum = |pick: &dyn Fn(&FlowTruth) -> u64| -> u64 {
        f.iter().filter(|x| x.vantage == "compute").map(pick).sum()
    };
    assert_eq!(sum(&|x| x.nak_seq), 8, "a NAK for each loss");
    assert_eq!(sum(&|x| x.retx_packets), 16, "go-back-N resends the lost chunk and the next");
    assert!(
        sum(&|x| x.cnp) >= 8 * 3 && sum(&|x| x.ecn_ce) == 4,
        "CNPs, and a CE mark upstream every other step"
    );
    // Four hosts lose a chunk in two steps each; the storage tap misses them.
    let lossy: Vec<Option<u64>> =
        f.iter().filter(|x| x.fabric_loss_psns.is_some_and(|n| n > 0)).map(|x| x.fabric_loss_psns).collect();
    assert_eq!(lossy, [Some(2); 4], "the fabric lost them");
}
