//! What a first day on real hardware needs that net_pcap can show: jumbo frames received
//! whole, the port set-up line, and the threads that do not touch packets kept off the
//! capture lcore.

mod common;
use common::*;
use roceprobe::capture::pcap::Writer;
use roceprobe::wire::bth::{self, opcode as op};
use roceprobe::wire::build::RoceFrame;
use roceprobe::wire::ib_ext::{ExtHeaders, Reth};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// RDMA WRITE Only packets of `payload` bytes from 10.9.0.1 to 10.9.0.2 on QP 0x99.
fn write_only_frames(path: &Path, payload: usize, n: u32) -> usize {
    let mut w = Writer::new(std::io::BufWriter::new(std::fs::File::create(path).unwrap())).unwrap();
    let data: Vec<u8> = (0..payload).map(|i| (i * 7 % 251) as u8).collect();
    let mut len = 0;
    for i in 0..n {
        let mut f = RoceFrame::new(
            "10.9.0.1".parse().unwrap(),
            "10.9.0.2".parse().unwrap(),
            bth::Repr { opcode: op::WRITE_ONLY, dest_qp: 0x99, psn: i, ..Default::default() },
        );
        f.ext = ExtHeaders {
            reth: Some(Reth { va: 0x1000, rkey: 7, dma_len: payload as u32 }),
            ..Default::default()
        };
        f.payload = &data;
        let frame = f.emit();
        len = frame.len();
        w.write(1_795_939_200_000_000_000 + u64::from(i) * 10_000, &frame, frame.len() as u32).unwrap();
    }
    use std::io::Write;
    w.into_inner().flush().unwrap();
    len
}

#[test]
fn nine_kib_frames_arrive_whole_through_dpdk() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("jumbo.pcap");
    // Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + RETH 16 + payload + ICRC 4: 9,210 bytes (the
    // payload a multiple of 4, so no pad), 9,214 with the FCS, within the default
    // --max-frame of 9,216.
    let payload = 9210 - (14 + 20 + 8 + 12 + 16 + 4);
    let len = write_only_frames(&pcap, payload, 20);
    assert_eq!(len, 9210);
    // scapy (a second implementation) finds every frame's ICRC right in the file.
    let script = fixtures().join("../scripts/icrc-scapy");
    let out = Command::new("python3").arg(script).arg(&pcap).output().expect("python3");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let verdicts = String::from_utf8(out.stdout).unwrap();
    assert_eq!(verdicts.lines().filter(|l| l.split('\t').nth(3) == Some("ok")).count(), 20, "{verdicts}");

    // Through a net_pcap port with DPDK's default 2,176-byte mbufs: each frame arrives in a
    // chain of five, and the probe finds every ICRC right, so every byte made it.
    let mut args: Vec<String> =
        ["live", "-q", "--idle-exit", "300ms", "--check-icrc"].iter().map(|s| s.to_string()).collect();
    let summary = dir.path().join("s.json");
    args.extend(["--summary".into(), summary.display().to_string(), "--".into()]);
    args.extend(eal_args(&[&pcap]));
    let o = Command::new(bin()).args(&args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // The port's set-up, in one line.
    assert!(
        err.lines().any(|l| l.starts_with("roceprobe: port 0: net_pcap, MTU 9198 (frames up to 9216 bytes), 1 RX queue, no RSS, times from its file, flow control")),
        "{err}"
    );
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!((s["packets"].as_u64(), s["roce_packets"].as_u64()), (Some(20), Some(20)));
    let f = &s["flows"][0];
    assert_eq!(f["icrc_errors"], 0, "{f}");
    assert_eq!(f["bytes"].as_u64(), Some(20 * 9210));
    assert_eq!(f["payload_bytes"].as_u64(), Some(20 * payload as u64));
}

/// Each thread of process `pid`: its name and the CPUs it may run on.
fn threads(pid: u32) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return v };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        let cpus = status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).unwrap_or("").trim();
        v.push((comm.trim().to_owned(), cpus.to_owned()));
    }
    v.sort();
    v
}

#[test]
fn threads_that_do_not_touch_packets_stay_off_the_capture_lcore() {
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert!(cpus >= 2, "this test needs two CPUs (it has {cpus}): capture on CPU 0, the rest on the others");
    let dir = tempfile::tempdir().unwrap();
    let pcap = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let pidfile = dir.path().join("pid");
    let port = free_port();
    // Capture and analysis on lcore 0 (CPU 0); reports, CSV writer, Prometheus and the
    // dashboard (in a terminal of its own) everywhere else.
    let command = format!(
        "echo $$ > {pid}; exec {bin} live --dashboard --duration 6s --csv-dir {csv} --prometheus 127.0.0.1:{port} -- -l 0 --no-huge -m 256 --no-pci --no-shconf --no-telemetry --log-level=lib.eal:warning --vdev net_pcap0,rx_pcap={pcap},infinite_rx=1",
        pid = pidfile.display(),
        bin = bin(),
        csv = dir.path().join("csv").display(),
        pcap = pcap.display(),
    );
    let _term = Tmux::start(dir.path(), &command);
    let deadline = Instant::now() + Duration::from_secs(30);
    let others = format!("1-{}", cpus - 1);
    let others = if cpus == 2 { "1".to_owned() } else { others };
    let want = |seen: &[(String, String)]| {
        ["roceprobe-stats", "roceprobe-csv", "roceprobe-prome", "roceprobe-ui"]
            .iter()
            .all(|name| seen.iter().any(|(n, _)| n == name))
    };
    let seen = loop {
        let pid = std::fs::read_to_string(&pidfile).ok().and_then(|p| p.trim().parse::<u32>().ok());
        let seen = pid.map(threads).unwrap_or_default();
        if want(&seen) {
            break seen;
        }
        assert!(Instant::now() < deadline, "the probe's threads did not all start: {seen:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    for (name, allowed) in &seen {
        match name.as_str() {
            "roceprobe-stats" | "roceprobe-csv" | "roceprobe-prome" | "roceprobe-ui" => {
                assert_eq!(allowed, &others, "{name} may run on {allowed}: {seen:?}")
            }
            // The capture thread (the analysis too, with one worker) on its lcore.
            "roceprobe" => assert_eq!(allowed, "0", "the capture thread: {seen:?}"),
            _ => {}
        }
    }
}
