//! Helpers shared by the integration tests: run the real `roceprobe` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_roceprobe")
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../pcap-fixtures")
}

pub fn capture(name: &str) -> PathBuf {
    fixtures().join("captures").join(name)
}

/// A generated scenario's `truth.json`.
pub fn scenario_truth(name: &str) -> serde_json::Value {
    let p = fixtures().join("scenarios").join(name).join("truth.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// A scenario's capture files, as its truth lists them.
pub fn scenario_files(name: &str, t: &serde_json::Value) -> Vec<PathBuf> {
    t["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| fixtures().join("scenarios").join(name).join(f.as_str().unwrap()))
        .collect()
}

/// A flow field summed over a vantage's flows (of a summary or a truth).
pub fn vantage_sum(s: &serde_json::Value, vantage: &str, field: &str) -> u64 {
    s["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["vantage"] == vantage)
        .map(|f| f[field].as_u64().unwrap())
        .sum()
}

/// The options a scenario's truth holds (its `--vantage` rules and the like).
pub fn scenario_args(t: &serde_json::Value) -> Vec<String> {
    t["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap().to_owned()).collect()
}

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

/// An NVMe Write command whose `data_len` bytes of data travel in its capsule (after the
/// 64-byte SQE).
pub fn in_capsule_write(cid: u16, data_len: u32) -> roceprobe::wire::nvme::Sqe {
    use roceprobe::wire::nvme::{opcode, Sgl, Sqe, FLAGS_SGL};
    Sqe {
        opcode: opcode::WRITE,
        flags: FLAGS_SGL,
        cid,
        nsid: 1,
        sgl: Sgl::InCapsule { offset: 0, length: data_len },
        slba: 0,
        nlb: 0,
    }
}

/// A TCP port free on the loopback interface a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

pub fn run(args: &[&str]) -> Output {
    Command::new(bin()).args(args).output().expect("running roceprobe")
}

/// EAL arguments that work without hugepages or a NIC, one net_pcap port per file.
pub fn eal_args(files: &[&Path]) -> Vec<String> {
    let mut v: Vec<String> = [
        "-l",
        "0",
        "--no-huge",
        "-m",
        "128",
        "--no-pci",
        "--no-shconf",
        "--no-telemetry",
        "--log-level=lib.eal:warning",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (i, f) in files.iter().enumerate() {
        v.push("--vdev".into());
        v.push(format!("net_pcap{i},rx_pcap={}", f.display()));
    }
    v
}

/// Runs roceprobe with `args` plus `--summary FILE -q` and returns the parsed summary.
pub fn summary_of(args: &[String]) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("summary.json");
    let mut full: Vec<String> =
        vec![args[0].clone(), "-q".into(), "--summary".into(), out.display().to_string()];
    full.extend_from_slice(&args[1..]);
    let o = Command::new(bin()).args(&full).output().expect("running roceprobe");
    assert!(o.status.success(), "roceprobe {full:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

pub fn replay_summary(files: &[&Path], extra: &[&str]) -> serde_json::Value {
    let mut a = vec!["replay".to_string()];
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend(files.iter().map(|f| f.display().to_string()));
    summary_of(&a)
}

pub fn live_summary(files: &[&Path], extra: &[&str]) -> serde_json::Value {
    let mut a = vec!["live".to_string(), "--idle-exit".into(), "300ms".into()];
    a.extend(extra.iter().map(|s| s.to_string()));
    a.push("--".into());
    a.extend(eal_args(files));
    summary_of(&a)
}

/// A tmux server of its own (so a test neither needs nor disturbs the user's tmux) running
/// `command` in one session (80x24 unless sized); killed when dropped.
pub struct Tmux {
    socket: PathBuf,
    session: String,
}

impl Tmux {
    pub fn start(dir: &Path, command: &str) -> Self {
        Self::start_sized(dir, command, 80, 24)
    }

    pub fn start_sized(dir: &Path, command: &str, width: u16, height: u16) -> Self {
        let t =
            Tmux { socket: dir.join("tmux.sock"), session: format!("roceprobe-test-{}", std::process::id()) };
        let (w, h) = (width.to_string(), height.to_string());
        let started = Command::new("tmux")
            .arg("-S")
            .arg(&t.socket)
            .args(["new-session", "-d", "-x", &w, "-y", &h, "-s", &t.session, command])
            .env_remove("TMUX")
            .status()
            .expect("tmux is installed (scripts/setup)");
        assert!(started.success());
        t
    }

    fn run(&self, args: &[&str]) -> String {
        let o = Command::new("tmux").arg("-S").arg(&self.socket).args(args).output().expect("running tmux");
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// What the terminal shows.
    pub fn screen(&self) -> String {
        self.run(&["capture-pane", "-p", "-t", &self.session])
    }

    pub fn keys(&self, keys: &str) {
        self.run(&["send-keys", "-t", &self.session, keys]);
    }

    /// Waits (a minute at most) until the terminal shows `text`; returns the screen.
    pub fn wait_for(&self, text: &str, what: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(std::time::Instant::now() < deadline, "{what}:\n{screen}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        self.run(&["kill-server"]);
    }
}

/// A latency series: (initiator, target, op, segment).
pub type Series = (String, String, String, String);

/// Each segment and the field of a truth I/O that holds it.
pub const SEGMENTS: [(&str, &str); 5] = [
    ("io@compute", "io_compute_ns"),
    ("io@storage", "io_storage_ns"),
    ("compute", "compute_ns"),
    ("network", "network_ns"),
    ("storage", "storage_ns"),
];

/// Per series, the truth's samples in ns, sorted.
pub fn truth_series(t: &serde_json::Value, keep: &[&str]) -> std::collections::BTreeMap<Series, Vec<u64>> {
    let mut out: std::collections::BTreeMap<Series, Vec<u64>> = std::collections::BTreeMap::new();
    for io in t["ios"].as_array().unwrap() {
        for (segment, field) in SEGMENTS.iter().filter(|(s, _)| keep.contains(s)) {
            if let Some(v) = io[field].as_i64() {
                let k = (
                    io["initiator_ip"].as_str().unwrap().to_owned(),
                    io["target_ip"].as_str().unwrap().to_owned(),
                    io["op"].as_str().unwrap().to_owned(),
                    segment.to_string(),
                );
                out.entry(k).or_default().push(v.max(1) as u64);
            }
        }
    }
    for v in out.values_mut() {
        v.sort();
    }
    out
}

/// A CSV report's row: column name → value.
pub type Row = std::collections::BTreeMap<String, String>;

/// The rows of a CSV report.
pub fn read_csv(path: &Path) -> Vec<Row> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let h: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
    r.records().map(|rec| h.iter().cloned().zip(rec.unwrap().iter().map(str::to_owned)).collect()).collect()
}
