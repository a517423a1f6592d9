//! Helpers shared by the integration tests: run the real `roceprobe` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// xorshift64*: deterministic, so a failure reproduces (a seed other than 0).
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

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

/// Replays a scenario with its options and `extra`, the CSV reports in `dir/csv` and the
/// summary in `dir`; returns stdout, the summary and the CSV folder.
pub fn replay_scenario(name: &str, extra: &[&str], dir: &Path) -> (String, serde_json::Value, PathBuf) {
    let t = scenario_truth(name);
    let (csv, summary) = (dir.join("csv"), dir.join("summary.json"));
    let mut a: Vec<String> = vec!["replay".into(), "--csv-dir".into(), csv.display().to_string()];
    a.extend(["--summary".into(), summary.display().to_string()]);
    a.extend(scenario_args(&t));
    a.extend(extra.iter().map(|s| s.to_string()));
    a.extend(scenario_files(name, &t).iter().map(|f| f.display().to_string()));
    let o = Command::new(bin()).args(&a).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    (String::from_utf8(o.stdout).unwrap(), s, csv)
}

/// A document of docs/, whole.
pub fn doc(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The text of `## heading` in a document, up to the next `## ` heading (its `###` parts
/// included).
pub fn doc_section<'a>(text: &'a str, heading: &str) -> &'a str {
    let start =
        text.find(&format!("\n## {heading}\n")).unwrap_or_else(|| panic!("no section '## {heading}'")) + 1;
    let end = text[start + 3..].find("\n## ").map_or(text.len(), |e| start + 3 + e);
    &text[start..end]
}

/// Whether `text` names `key` as a whole word (letters, digits, `_` and `@` make a word, so
/// `io` is not found in `io@compute_us`).
pub fn defines(text: &str, key: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '@';
    text.match_indices(key).any(|(i, _)| {
        !text[..i].chars().next_back().is_some_and(word)
            && !text[i + key.len()..].chars().next().is_some_and(word)
    })
}

/// Every one of `keys` is named in `text` (the part of the docs called `where_`).
pub fn assert_defined<'k>(text: &str, keys: impl IntoIterator<Item = &'k String>, where_: &str) {
    let missing: Vec<_> = keys.into_iter().filter(|k| !defines(text, k)).collect();
    assert!(missing.is_empty(), "not defined in {where_}: {missing:?}");
}

/// A TCP port free on the loopback interface a moment ago.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// tshark's fields (the first occurrence of each) of every frame of `file`, one row a
/// frame in file order.
pub fn tshark_fields(file: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    tshark_rows(file, None, fields)
}

/// [`tshark_fields`] of the frames the display filter `filter` selects.
pub fn tshark_fields_where(file: &Path, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    tshark_rows(file, Some(filter), fields)
}

fn tshark_rows(file: &Path, filter: Option<&str>, fields: &[&str]) -> Vec<Vec<String>> {
    let mut a = vec!["-r", file.to_str().unwrap(), "-T", "fields", "-E", "occurrence=f"];
    if let Some(f) = filter {
        a.extend(["-Y", f]);
    }
    for f in fields {
        a.extend(["-e", f]);
    }
    let o = Command::new("tshark").args(&a).output().expect("tshark (scripts/setup installs it)");
    assert!(o.status.success(), "tshark {a:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().lines().map(|l| l.split('\t').map(str::to_owned).collect()).collect()
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

/// `eal` with `lcores` EAL lcores instead of `-l 0`: lcore i on CPU i modulo the CPUs this
/// machine has (the capture thread and `lcores - 1` workers, each on an lcore of its own).
pub fn with_lcores(eal: Vec<String>, lcores: usize) -> Vec<String> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let map: Vec<String> = (0..lcores).map(|l| format!("{l}@{}", l % cpus)).collect();
    let at = eal.iter().position(|a| a == "-l").expect("eal args with -l");
    let mut out = eal;
    out.splice(at..at + 2, ["--lcores".to_string(), map.join(",")]);
    out
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

/// `roceprobe live` through a net_pcap vdev per file, with an EAL lcore for every worker
/// `extra` asks for (`--workers N`) besides the capture thread's.
pub fn live_summary(files: &[&Path], extra: &[&str]) -> serde_json::Value {
    let mut a = vec!["live".to_string(), "--idle-exit".into(), "300ms".into()];
    a.extend(extra.iter().map(|s| s.to_string()));
    a.push("--".into());
    let workers: Option<usize> =
        extra.iter().position(|x| *x == "--workers").and_then(|i| extra.get(i + 1)?.parse().ok());
    a.extend(match workers {
        Some(n) if n > 1 => with_lcores(eal_args(files), n + 1),
        _ => eal_args(files),
    });
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
        self.wait(text, what, false)
    }

    /// Like [`Tmux::wait_for`], for a screen that stops changing (a finished run's): the
    /// text may show while the rest of the frame is still being drawn, so the screen counts
    /// once two captures 100 ms apart agree.
    pub fn wait_for_still(&self, text: &str, what: &str) -> String {
        self.wait(text, what, true)
    }

    fn wait(&self, text: &str, what: &str, still: bool) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        let mut last = String::new();
        loop {
            let screen = self.screen();
            if screen.contains(text) && (!still || screen == last) {
                return screen;
            }
            last = screen.clone();
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

/// RFC 3339 with nanoseconds, as the reports write it, to ns since the epoch.
pub fn rfc3339_ns(t: &str) -> u64 {
    let (date, frac) = t.trim_end_matches('Z').split_once('.').unwrap();
    let (d, hms) = date.split_once('T').unwrap();
    let p: Vec<i64> = d.split('-').chain(hms.split(':')).map(|x| x.parse().unwrap()).collect();
    // Days from the civil date (Howard Hinnant's algorithm), then seconds.
    let (y, m, day) = (if p[1] <= 2 { p[0] - 1 } else { p[0] }, p[1], p[2]);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + p[3] * 3600 + p[4] * 60 + p[5];
    secs as u64 * 1_000_000_000 + format!("{frac:0<9}").parse::<u64>().unwrap()
}

/// tshark's `frame.time_epoch` ("1795939210.000148502") to ns since the epoch.
pub fn epoch_ns(s: &str) -> u64 {
    let (secs, frac) = s.split_once('.').unwrap();
    secs.parse::<u64>().unwrap() * 1_000_000_000 + format!("{frac:0<9}")[..9].parse::<u64>().unwrap()
}

/// A CSV report's row: column name → value.
pub type Row = std::collections::BTreeMap<String, String>;

/// Copies the capture `from` to `to`, each record at the time `edit` gives it (`None`
/// leaves it out); returns the records written and those read.
pub fn copy_capture(
    from: &Path,
    to: &Path,
    mut edit: impl FnMut(u64, &[u8]) -> Option<u64>,
) -> (usize, usize) {
    let records = roceprobe::capture::pcap::read_all_records(from).unwrap();
    let mut w = Writer::new(std::fs::File::create(to).unwrap()).unwrap();
    let mut written = 0;
    for (ts, len, f) in &records {
        if let Some(ts) = edit(*ts, f) {
            w.write(ts, f, *len).unwrap();
            written += 1;
        }
    }
    (written, records.len())
}

/// What tshark reports for each real capture (`scripts/tshark-truth`).
pub fn pinned_truth() -> serde_json::Value {
    let text = std::fs::read_to_string(fixtures().join("captures/tshark-truth.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The summary's flows with the fields tshark reports, in a stable order.
pub fn flow_view(flows: &serde_json::Value) -> Vec<serde_json::Value> {
    let mut v: Vec<serde_json::Value> = flows
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            serde_json::json!({
                "src_ip": f["src_ip"], "dst_ip": f["dst_ip"], "dst_qpn": f["dst_qpn"],
                "packets": f["packets"], "bytes": f["bytes"], "payload_bytes": f["payload_bytes"],
                "opcodes": f["opcodes"],
            })
        })
        .collect();
    v.sort_by_key(|f| (f["src_ip"].to_string(), f["dst_ip"].to_string(), f["dst_qpn"].as_u64()));
    v
}

/// `from` as a capture taking at most `snap` bytes of each frame writes it (`editcap -s`,
/// as `tcpdump -s` would capture it: each record keeps its length on the wire), in `dir`.
pub fn cut_capture(from: &Path, snap: usize, dir: &Path) -> PathBuf {
    let to = dir.join(from.file_name().unwrap());
    let ok = Command::new("editcap").arg("-s").arg(snap.to_string()).arg(from).arg(&to).status().unwrap();
    assert!(ok.success(), "editcap -s {snap} {}", from.display());
    to
}

/// The rows of a CSV report.
pub fn read_csv(path: &Path) -> Vec<Row> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let h: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
    r.records().map(|rec| h.iter().cloned().zip(rec.unwrap().iter().map(str::to_owned)).collect()).collect()
}

use roceprobe::capture::pcap::Writer;
use roceprobe::wire::bth::{self, opcode as op};
use roceprobe::wire::build::RoceFrame;
use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
use std::net::{IpAddr, Ipv4Addr};

fn host_ip(h: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 20 + (h >> 8) as u8, (h & 0xFF) as u8, 1))
}

/// Fabric-like traffic for load tests: RC connections between 256 hosts, each frame of a
/// connection picked at random; one awaiting its ACK sends it, else it sends its next RDMA
/// WRITE Only (64 bytes of payload); frames `spacing_ns` apart in packet time.
pub fn write_many_qps(path: &Path, connections: u32, frames: usize, spacing_ns: u64) {
    const HOSTS: u32 = 256;
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move |n: u32| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % u64::from(n)) as u32
    };
    // (requester, responder, next PSN, MSN, awaiting an ACK)
    let mut conns: Vec<(u32, u32, u32, u32, bool)> = (0..connections)
        .map(|c| {
            let a = c % HOSTS;
            (a, (a + 1 + (c / HOSTS) % (HOSTS - 1)) % HOSTS, next(1 << 24), 0, false)
        })
        .collect();
    let payload = [0xA5u8; 64];
    let mut w = Writer::new(std::io::BufWriter::new(std::fs::File::create(path).unwrap())).unwrap();
    for i in 0..frames {
        let c = next(connections);
        let (req, resp, psn, msn, awaiting) = &mut conns[c as usize];
        let frame = if *awaiting {
            *awaiting = false;
            *msn = (*msn + 1) & 0xFF_FFFF;
            let bth = bth::Repr {
                opcode: op::ACKNOWLEDGE,
                dest_qp: 0x100 + 2 * c,
                psn: psn.wrapping_sub(1) & 0xFF_FFFF,
                ..Default::default()
            };
            let mut f = RoceFrame::new(host_ip(*resp), host_ip(*req), bth);
            f.ext = ExtHeaders { aeth: Some(Aeth::ack(31, *msn)), ..Default::default() };
            f.emit()
        } else {
            *awaiting = true;
            let bth = bth::Repr {
                opcode: op::WRITE_ONLY,
                dest_qp: 0x101 + 2 * c,
                psn: *psn,
                ack_req: true,
                ..Default::default()
            };
            let mut f = RoceFrame::new(host_ip(*req), host_ip(*resp), bth);
            let reth = Reth { va: 0x7f00_0000_0000 + u64::from(*psn) * 4096, rkey: 0x1000 + c, dma_len: 64 };
            f.ext = ExtHeaders { reth: Some(reth), ..Default::default() };
            f.payload = &payload;
            *psn = (*psn + 1) & 0xFF_FFFF;
            f.emit()
        };
        w.write(1_700_000_000_000_000_000 + i as u64 * spacing_ns, &frame, frame.len() as u32).unwrap();
    }
}

/// A RoCE frame from roceprobe's builder, its parts given (hand-set values whose truth is
/// the test's own).
pub fn roce(
    src: std::net::IpAddr,
    dst: std::net::IpAddr,
    opcode: u8,
    dest_qp: u32,
    psn: u32,
    ext: roceprobe::wire::ib_ext::ExtHeaders,
    payload: &[u8],
) -> Vec<u8> {
    use roceprobe::wire::bth;
    let mut f = roceprobe::wire::build::RoceFrame::new(
        src,
        dst,
        bth::Repr { opcode, dest_qp, psn, ..Default::default() },
    );
    f.ext = ext;
    f.payload = payload;
    f.emit()
}

/// The time [`write_pcap`]'s frame times count from (ns since the epoch, in 2027).
pub const PCAP_BASE_NS: u64 = 1_800_000_000_000_000_000;

/// Frames written to `dir`/`name` as a pcap, each at its time in ns after
/// [`PCAP_BASE_NS`].
pub fn write_pcap(dir: &Path, name: &str, frames: &[(u64, Vec<u8>)]) -> PathBuf {
    let path = dir.join(name);
    let mut w = roceprobe::capture::pcap::Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    for (t, f) in frames {
        w.write(PCAP_BASE_NS + t, f, f.len() as u32).unwrap();
    }
    path
}

/// The 64-byte SQE of an NVMe command of `opcode` with a keyed SGL (`len` bytes at `va`,
/// R_Key `key`), CID `cid`.
pub fn keyed_sqe(opcode: u8, cid: u16, va: u64, len: u32, key: u32) -> [u8; roceprobe::wire::nvme::SQE_LEN] {
    use roceprobe::wire::nvme::{Sgl, Sqe, FLAGS_SGL, SQE_LEN};
    let sqe = Sqe {
        opcode,
        flags: FLAGS_SGL,
        cid,
        nsid: 1,
        sgl: Sgl::Keyed { address: va, length: len, key, invalidate: false },
        slba: 0,
        nlb: (len / 512).saturating_sub(1) as u16,
    };
    let mut c = [0u8; SQE_LEN];
    sqe.emit(&mut c);
    c
}

/// An NVMe completion (CQE) for command `cid`, its submission queue `sq_id` at head
/// `sq_head`, as a SEND's payload.
pub fn completion_capsule(cid: u16, sq_head: u16, sq_id: u16) -> [u8; roceprobe::wire::nvme::CQE_LEN] {
    let mut c = [0u8; roceprobe::wire::nvme::CQE_LEN];
    roceprobe::wire::nvme::Cqe { cid, sq_head, sq_id, ..Default::default() }.emit(&mut c);
    c
}

/// Records (time in ns, length on the wire, bytes) written to `path` as a pcap, in order.
pub fn write_records(path: &Path, records: &[(u64, u32, Vec<u8>)]) {
    let mut w = Writer::new(std::fs::File::create(path).unwrap()).unwrap();
    for (ts, len, f) in records {
        w.write(*ts, f, *len).unwrap();
    }
}
