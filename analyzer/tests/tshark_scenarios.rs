//! tshark decodes the generator's packets with the same field values as roceprobe: BTH
//! opcode, destination QP and PSN, RETH, AETH, and the ICRC field, on every frame of every
//! scenario (ERSPAN and VLAN encapsulations included). tshark only shows the ICRC a frame
//! carries; whether it is right is scapy's answer (tests/icrc_scapy.rs).

mod common;
use common::*;
use roceprobe::capture::pcap::read_all_frames;
use roceprobe::wire::ib_ext::ExtHeaders;
use roceprobe::wire::{decode_frame, icrc, Decoded, NotRoce};
use std::process::Command;

const FIELDS: [&str; 9] = [
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.reth.va",
    "infiniband.reth.r_key",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "infiniband.aeth.msn",
    "infiniband.invariant.crc",
];

fn num(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let s = s.split(',').next().unwrap();
    if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Our view of a frame in tshark's terms: the nine fields, absent where not present.
fn ours(frame: &[u8]) -> Option<[Option<u64>; 9]> {
    let Decoded::Roce(p) = decode_frame(frame) else { return None };
    let x = ExtHeaders::parse(p.bth.opcode(), p.ext).unwrap();
    Some([
        Some(u64::from(p.bth.opcode())),
        Some(u64::from(p.bth.dest_qp())),
        Some(u64::from(p.bth.psn())),
        // tshark files AtomicETH's VA and R_Key under the RETH field names.
        x.reth.map(|r| r.va).or(x.atomic.map(|a| a.va)),
        x.reth.map(|r| u64::from(r.rkey)).or(x.atomic.map(|a| u64::from(a.rkey))),
        x.reth.map(|r| u64::from(r.dma_len)),
        x.aeth.map(|a| u64::from(a.syndrome)),
        x.aeth.map(|a| u64::from(a.msn)),
        // tshark shows the ICRC's wire bytes read big-endian; it is stored LSB first.
        icrc::stored(&p.icrc).map(|c| u64::from(c.swap_bytes())),
    ])
}

#[test]
fn tshark_agrees_on_every_generated_packet() {
    let dir = fixtures().join("scenarios");
    let mut compared = 0;
    let mut source_port_only = 0;
    let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for scenario in names {
        if scenario.file_name().unwrap() == "corrupted" {
            continue; // malformed on purpose; see pcap-fixtures/src/scenarios/corrupted.rs
        }
        let mut pcaps: Vec<_> = std::fs::read_dir(&scenario)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
            .collect();
        pcaps.sort();
        for pcap in pcaps {
            let mut cmd = Command::new("tshark");
            cmd.args(["-r", pcap.to_str().unwrap(), "--disable-protocol", "rpcordma", "-T", "fields"]);
            cmd.args(["-E", "separator=/t", "-E", "occurrence=f"]);
            for f in FIELDS {
                cmd.args(["-e", f]);
            }
            let out = cmd.output().expect("tshark (scripts/setup installs it)");
            assert!(
                out.status.success(),
                "tshark on {}: {}",
                pcap.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8(out.stdout).unwrap();
            let frames = read_all_frames(&pcap).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), frames.len(), "{}", pcap.display());
            for (i, (line, frame)) in lines.iter().zip(&frames).enumerate() {
                let theirs: Vec<Option<u64>> = line.split('\t').map(num).collect();
                match ours(frame) {
                    None if theirs[0].is_some() => {
                        // tshark takes UDP with 4791 as either port for RoCE; roceprobe only the
                        // destination (docs/METRICS.md, "What is RoCEv2"). The noise has such datagrams on purpose.
                        assert!(
                            matches!(decode_frame(frame), Decoded::NotRoce(NotRoce::OtherUdpPort)),
                            "{} frame {}: tshark sees RoCE",
                            pcap.display(),
                            i + 1
                        );
                        source_port_only += 1;
                    }
                    None => {}
                    Some(mut o) => {
                        // tshark 4.0 knows neither XRC's header sequence nor the CNP opcode
                        // ("Unknown Header Sequence") and decodes nothing after their BTH;
                        // there, BTH must agree.
                        if o[0].is_some_and(|op| op >> 5 == 5 || op == 0x81) {
                            assert!(
                                theirs[3..].iter().all(Option::is_none),
                                "tshark learned XRC: compare it all"
                            );
                            o[3..].fill(None);
                        }
                        assert_eq!(&theirs[..], &o[..], "{} frame {}: {FIELDS:?}", pcap.display(), i + 1);
                        compared += 1;
                    }
                }
            }
        }
    }
    assert!(compared > 5000, "compared {compared} packets");
    // misc, misc_erspan1 and misc_erspan2 each carry three datagrams from port 4791 to port 9999.
    assert_eq!(source_port_only, 9);
}

/// Every NAK of every scenario, by tshark (its AETH syndrome: 011 in the top bits, the code
/// below), is counted by roceprobe on the flow that carries it (source, destination, the
/// destination QP), under its kind: a sequence error (code 0) as `nak_seq`, any other code
/// in `nak_other` and, for codes 1-4, under its own name.
#[test]
fn other_naks_are_counted_by_their_code_as_tshark_reads_them() {
    let names = [
        (1, "nak_invalid_request"),
        (2, "nak_remote_access_error"),
        (3, "nak_remote_operational_error"),
        (4, "nak_invalid_rd_request"),
    ];
    let mut seen_other = 0;
    for name in ["misc", "rc_loss_split"] {
        let t = scenario_truth(name);
        let fs = scenario_files(name, &t);
        // One vantage's file: its flows are that vantage's.
        let file = &fs[0];
        let out = Command::new("tshark")
            .args([
                "-r",
                file.to_str().unwrap(),
                "-Y",
                "infiniband.aeth.syndrome >= 96 && infiniband.aeth.syndrome < 128",
            ])
            .args(["-T", "fields", "-E", "separator=;", "-e", "ip.src", "-e", "ip.dst"])
            .args(["-e", "infiniband.bth.destqp", "-e", "infiniband.aeth.syndrome"])
            .output()
            .expect("tshark");
        let mut want: std::collections::BTreeMap<(String, String, u64, &str), u64> = Default::default();
        for l in String::from_utf8(out.stdout).unwrap().lines() {
            let f: Vec<&str> = l.split(';').collect();
            let (qpn, code) = (num(f[2]).unwrap(), num(f[3]).unwrap() & 0x1F);
            let key = |k| (f[0].to_owned(), f[1].to_owned(), qpn, k);
            if code == 0 {
                *want.entry(key("nak_seq")).or_default() += 1;
                continue;
            }
            *want.entry(key("nak_other")).or_default() += 1;
            seen_other += 1;
            if let Some(&(_, n)) = names.iter().find(|(c, _)| *c == code) {
                *want.entry(key(n)).or_default() += 1;
            }
        }
        let s = replay_summary(&[file.as_path()], &[]);
        let mut got: std::collections::BTreeMap<(String, String, u64, &str), u64> = Default::default();
        for fl in s["flows"].as_array().unwrap() {
            for k in ["nak_seq", "nak_other"].into_iter().chain(names.iter().map(|(_, n)| *n)) {
                let n = fl[k].as_u64().unwrap();
                if n > 0 {
                    let key = (
                        fl["src_ip"].as_str().unwrap().to_owned(),
                        fl["dst_ip"].as_str().unwrap().to_owned(),
                    );
                    got.insert((key.0, key.1, fl["dst_qpn"].as_u64().unwrap(), k), n);
                }
            }
        }
        assert_eq!(got, want, "{name}");
    }
    assert!(seen_other > 0, "a NAK other than a sequence error among the scenarios");
}
