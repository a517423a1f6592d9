//! The ICRC against a second implementation: scapy's RoCE layer (`scapy.contrib.roce`,
//! scapy 2.6.1 from PyPI, run by scripts/icrc-scapy) computes the ICRC of every RoCEv2 frame
//! of every committed capture and scenario (IPv4 and IPv6, untagged, VLAN and QinQ, inside
//! ERSPAN II and III), and roceprobe computes the same four bytes and the same verdict.

mod common;
use common::*;
use roceprobe::capture::pcap::read_all_frames;
use roceprobe::wire::{decode_frame, icrc, Decoded};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

/// scapy's answer per (file, frame number from 1): the ICRC in wire byte order, its status
/// (`ok`, `bad`, `short`, `malformed`, `unsupported`) and the layers it crossed.
fn scapy(files: &[PathBuf]) -> BTreeMap<(PathBuf, usize), (String, String, String)> {
    let script = fixtures().join("../scripts/icrc-scapy");
    let out = Command::new("python3").arg(script).arg("--encap").args(files).output().expect("python3");
    assert!(out.status.success(), "scripts/icrc-scapy: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            ((PathBuf::from(c[0]), c[1].parse().unwrap()), (c[2].into(), c[3].into(), c[4].into()))
        })
        .collect()
}

fn every_pcap() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(fixtures().join("captures"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    for d in std::fs::read_dir(fixtures().join("scenarios")).unwrap() {
        for f in std::fs::read_dir(d.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "pcap") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

#[test]
fn scapy_computes_the_icrc_roceprobe_computes_on_every_frame() {
    let files = every_pcap();
    let theirs = scapy(&files);
    let mut compared: BTreeMap<String, usize> = BTreeMap::new();
    let mut bad = Vec::new();
    for file in &files {
        for (i, frame) in read_all_frames(file).unwrap().iter().enumerate() {
            let Decoded::Roce(p) = decode_frame(frame) else { continue };
            let Some((icrc_hex, status, layers)) = theirs.get(&(file.clone(), i + 1)) else {
                panic!(
                    "{} frame {}: roceprobe decodes RoCEv2, scapy's walk found none",
                    file.display(),
                    i + 1
                );
            };
            let ours = icrc::compute(&p.icrc).map(|c| hex(&c.to_le_bytes()));
            match status.as_str() {
                "ok" | "bad" => {
                    assert_eq!(
                        ours.as_deref(),
                        Some(icrc_hex.as_str()),
                        "{} frame {}",
                        file.display(),
                        i + 1
                    );
                    assert_eq!(
                        icrc::check(&p.icrc),
                        Some(status == "ok"),
                        "{} frame {}",
                        file.display(),
                        i + 1
                    );
                    if status == "bad" {
                        bad.push(file.file_name().unwrap().to_string_lossy().into_owned());
                    }
                    *compared.entry(encapsulation(layers)).or_insert(0) += 1;
                }
                // Captured shorter than the packet: neither can compute it.
                "short" => assert_eq!(ours, None, "{} frame {}", file.display(), i + 1),
                other => {
                    panic!("{} frame {}: scapy says {other}, roceprobe decodes it", file.display(), i + 1)
                }
            }
        }
    }
    // The frames the corrupted scenario sends with a wrong ICRC on purpose (`corrupt_icrc`).
    let t = scenario_truth("corrupted");
    let wrong: u64 = t["flows"].as_array().unwrap().iter().map(|f| f["icrc_errors"].as_u64().unwrap()).sum();
    assert!(wrong > 0);
    assert_eq!(bad, vec!["corrupted.pcap"; wrong as usize]);
    for kind in [
        "ipv4",
        "ipv6",
        "vlan/ipv4",
        "vlan/vlan/ipv4",
        "erspan2/ipv6",
        "erspan2/vlan/vlan/ipv4",
        "erspan3/ipv4",
    ] {
        assert!(compared.get(kind).is_some_and(|&n| n >= 3), "too few {kind} frames compared: {compared:?}");
    }
}

/// The layers that matter to the ICRC's region: tags and tunnels, then the inner IP version.
fn encapsulation(layers: &str) -> String {
    let inner: Vec<&str> = layers
        .split('/')
        .skip_while(|l| *l != "gre")
        .filter(|l| !matches!(*l, "gre" | "eth" | "udp"))
        .collect();
    if !inner.is_empty() {
        return inner.join("/");
    }
    layers.split('/').filter(|l| !matches!(*l, "eth" | "udp")).collect::<Vec<_>>().join("/")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
