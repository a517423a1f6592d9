//! The command line's contract: bad input is one line on stderr naming the problem and a
//! non-zero exit, before any work starts; RoCE is recognised by destination port only.

mod common;
use common::*;
use roceprobe::capture::pcap::{read_all_frames, Writer};
use std::path::{Path, PathBuf};

/// Asserts a failed run with exactly one line on stderr that contains `needle`, and no
/// output on stdout.
fn assert_one_line_error(args: &[&str], needle: &str) {
    let o = run(args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{args:?} succeeded");
    assert_eq!(err.lines().count(), 1, "{args:?}: stderr is not one line:\n{err}");
    assert!(err.contains(needle), "{args:?}: {err:?} does not name {needle:?}");
    assert!(o.stdout.is_empty(), "{args:?}: printed on stdout: {}", String::from_utf8_lossy(&o.stdout));
}

/// An option the subcommand does not have points at the subcommand's help; `live`'s EAL
/// arguments given without `--` say where they go; `plot` of a directory that is not
/// there says so.
#[test]
fn option_errors_point_at_the_subcommands_help() {
    assert_one_line_error(
        &["live", "-l", "0", "--no-huge"],
        "unexpected argument '-l' found (see roceprobe live --help; DPDK EAL arguments go after --)",
    );
    assert_one_line_error(
        &["replay", "--bogus", "x.pcap"],
        "unexpected argument '--bogus' found (see roceprobe replay --help)",
    );
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("none");
    let out = dir.path().join("out");
    assert_one_line_error(
        &["plot", "--csv-dir", missing.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &format!("--csv-dir {}: no such directory", missing.display()),
    );
    let file = capture("rdma_cm.pcap");
    assert_one_line_error(
        &["plot", "--csv-dir", file.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &format!("--csv-dir {}: not a directory", file.display()),
    );
}

/// A size past 64 bits of bytes is a size, too large; not "not a size".
#[test]
fn a_size_too_large_says_so() {
    let c = capture("rdma_cm.pcap");
    let args =
        ["replay", "-q", "--csv-dir", "/tmp/unused", "--csv-retain", "17179869184G", c.to_str().unwrap()];
    assert_one_line_error(&args, "'17179869184G' is too large (at most 17179869183G)");
    let args = [
        "replay",
        "-q",
        "--evidence-dir",
        "/tmp/unused",
        "--evidence-max-bytes",
        "99999999999999999999",
        c.to_str().unwrap(),
    ];
    assert_one_line_error(&args, "is too large");
}

/// `live OPTIONS -- EAL`, as arguments, and the same borrowed for `run`.
fn live_with(options: &[&str], eal: Vec<String>) -> Vec<String> {
    let mut args: Vec<String> = std::iter::once(&"live").chain(options).map(|s| s.to_string()).collect();
    args.push("--".into());
    args.extend(eal);
    args
}

fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}

#[test]
fn missing_file() {
    assert_one_line_error(&["replay", "no-such.pcap"], "no-such.pcap");
}

#[test]
fn not_a_capture_file() {
    let f = fixtures().join("Cargo.toml");
    assert_one_line_error(&["replay", f.to_str().unwrap()], "is not a pcap or pcapng file");
}

#[test]
fn unreadable_input() {
    // A directory cannot be read as a file (a permission test would not hold as root).
    let d = tempfile::tempdir().unwrap();
    assert_one_line_error(&["replay", d.path().to_str().unwrap()], "is a directory");
}

#[test]
fn empty_file() {
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("empty.pcap");
    std::fs::write(&f, b"").unwrap();
    assert_one_line_error(&["replay", f.to_str().unwrap()], "is empty");
}

#[test]
fn non_ethernet_capture() {
    // A pcap header with link type 101 (raw IP).
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("raw.pcap");
    let mut h = Vec::new();
    h.extend_from_slice(&0xA1B2_C3D4u32.to_le_bytes());
    h.extend_from_slice(&2u16.to_le_bytes());
    h.extend_from_slice(&4u16.to_le_bytes());
    h.extend_from_slice(&[0; 8]);
    h.extend_from_slice(&65535u32.to_le_bytes());
    h.extend_from_slice(&101u32.to_le_bytes());
    std::fs::write(&f, h).unwrap();
    assert_one_line_error(&["replay", f.to_str().unwrap()], "not Ethernet");
}

/// A pcapng file (little-endian, one section) built by hand from the format's block
/// layouts: an interface of each link type in `interfaces` (microsecond timestamps), and a
/// packet per `(interface, microseconds, bytes)`.
fn pcapng(interfaces: &[u16], packets: &[(u32, u64, &[u8])]) -> Vec<u8> {
    let block = |kind: u32, body: &[u8]| {
        let len = (12 + body.len()) as u32;
        [&kind.to_le_bytes()[..], &len.to_le_bytes(), body, &len.to_le_bytes()].concat()
    };
    let mut out =
        block(0x0A0D_0D0A, &[&0x1A2B_3C4Du32.to_le_bytes()[..], &[1, 0, 0, 0], &[0xFF; 8]].concat());
    for &linktype in interfaces {
        // Link type, reserved, snap length 0 (none); no options.
        out.extend(block(1, &[&linktype.to_le_bytes()[..], &[0, 0], &[0; 4]].concat()));
    }
    for &(interface, us, data) in packets {
        let len = data.len() as u32;
        let head: Vec<u8> = [interface, (us >> 32) as u32, us as u32, len, len]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let pad = vec![0u8; (4 - data.len() % 4) % 4];
        out.extend(block(6, &[&head[..], data, &pad].concat()));
    }
    out
}

#[test]
fn pcapng_packets_on_an_interface_that_is_not_ethernet_are_skipped() {
    // rdma_write_bw.pcap's 60 frames on interface 0 (Ethernet), and after every tenth a
    // frame on interface 1 (link type 113, Linux cooked capture): the run reads the 60,
    // skips the 6 and says so, where it used to stop at the first of them.
    let frames = read_all_frames(&capture("rdma_write_bw.pcap")).unwrap();
    let sll = [0u8; 20];
    let mut packets = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        packets.push((0, 1_000 + i as u64, f.as_slice()));
        if i % 10 == 9 {
            packets.push((1, 1_000 + i as u64, &sll[..]));
        }
    }
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("two-interfaces.pcapng");
    std::fs::write(&f, pcapng(&[1, 113], &packets)).unwrap();
    // tshark reads the file as built: 66 packets, 60 on interface 0.
    let count = |filter: &str| tshark_count(&f, filter);
    assert_eq!((count("frame"), count("frame.interface_id == 0")), (66, 60));
    let o = run(&["replay", "--summary", "-", "-q", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    // Of the 60 frames, those tshark finds to be RoCEv2 (UDP to 4791; perftest's TCP
    // exchange is the rest).
    let roce = count("udp.dstport == 4791");
    assert_eq!(roce, 20);
    assert_eq!((s["packets"].as_u64(), s["roce_packets"].as_u64()), (Some(60), Some(roce as u64)));
    assert!(
        err.contains(
            "6 packets on interfaces that are not Ethernet (the first: interface 1, link type 113) skipped"
        ),
        "{err}"
    );
    // Cut short in its last record, the sixth cooked frame (a capture still being
    // written): the frames before it are read, and the five cooked ones before it told.
    let bytes = std::fs::read(&f).unwrap();
    let cut = d.path().join("cut.pcapng");
    std::fs::write(&cut, &bytes[..bytes.len() - 10]).unwrap();
    let o = run(&["replay", "--summary", "-", "-q", cut.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["packets"].as_u64(), Some(60), "{err}");
    assert!(err.contains("5 packets on interfaces that are not Ethernet"), "{err}");
    // A file of no Ethernet interface is refused, in one line.
    let only = d.path().join("cooked.pcapng");
    std::fs::write(&only, pcapng(&[113], &[(0, 1, &sll[..])])).unwrap();
    assert_one_line_error(&["replay", only.to_str().unwrap()], "interface 0 has link type 113, not Ethernet");
}

#[test]
fn a_damaged_pcapng_block_ends_its_file_there_with_a_warning() {
    // rdma_write_bw.pcap's 60 frames as pcapng, the 31st packet block's closing length
    // changed (it no longer matches the opening one): what comes before it stands (tshark
    // too stops there: it reads 30 packets and names the damage), the rest cannot be
    // found. Told once on stderr; the run ends well.
    let frames = read_all_frames(&capture("rdma_write_bw.pcap")).unwrap();
    let packets: Vec<(u32, u64, &[u8])> =
        frames.iter().enumerate().map(|(i, f)| (0, 1_000 + i as u64, f.as_slice())).collect();
    let mut bytes = pcapng(&[1], &packets);
    // The blocks: the section header (28 bytes), the interface (20), then the packets.
    let mut at = 28 + 20;
    for _ in 0..30 {
        at += u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
    }
    let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
    bytes[at + len - 4] ^= 0x40;
    let d = tempfile::tempdir().unwrap();
    let f = d.path().join("damaged.pcapng");
    std::fs::write(&f, &bytes).unwrap();
    let t = std::process::Command::new("tshark").args(["-r", f.to_str().unwrap()]).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&t.stdout).lines().count(), 30);
    assert!(!t.status.success() && !t.stderr.is_empty(), "tshark names the damage");
    let o = run(&["replay", "--summary", "-", "-q", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["packets"].as_u64(), Some(30), "{err}");
    assert_eq!(s["ended"], "cut_short", "the summary says its input was not read whole");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("damaged record after 30 packets; stopping this file there"), "{err}");
}

/// SIGTERM to a running probe, and what it gave once it ended (within 30 s).
fn terminate(probe: std::process::Child) -> std::process::Output {
    unsafe { libc::kill(probe.id() as i32, libc::SIGTERM) };
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(probe.wait_with_output()));
    rx.recv_timeout(std::time::Duration::from_secs(30)).expect("the probe ended").unwrap()
}

#[test]
fn a_signal_ends_a_replay_whose_pipe_went_quiet_with_its_reports() {
    // A FIFO's writer sends a whole capture and keeps the FIFO open. SIGTERM then ends the
    // run as the end of the stream would: exit 0, every frame in the summary (tshark's
    // count). It used to wait in the read for ever, and the summary was lost with the kill.
    let c = capture("rdma_write_bw.pcap");
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("stream");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let probe = std::process::Command::new(bin())
        .args(["replay", "-q", "--summary", "-", fifo.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let bytes = std::fs::read(&c).unwrap();
    let mut writer = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
    std::io::Write::write_all(&mut writer, &bytes).unwrap();
    // Until the probe has read every byte (the pipe holds none), and a second more.
    let unread = || {
        let mut n: libc::c_int = 0;
        assert_eq!(
            unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&writer), libc::FIONREAD, &mut n) },
            0
        );
        n
    };
    let t0 = std::time::Instant::now();
    while unread() > 0 && t0.elapsed() < std::time::Duration::from_secs(60) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_secs(1));
    let o = terminate(probe);
    drop(writer);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["packets"].as_u64(), Some(tshark_count(&c, "frame") as u64), "{err}");
    assert_eq!(s["ended"], "stopped", "the summary says the run was stopped");
    assert!(
        err.contains("the replay was stopped before the end of its input: the summary and reports hold the 60 frames read before it"),
        "{err}"
    );
    // A FIFO no writer ever opened: the run waits for its first bytes, and a signal ends
    // the wait, in one line (it waited in the open, where a signal only restarted it).
    let quiet = d.path().join("quiet");
    let name = std::ffi::CString::new(quiet.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let probe = std::process::Command::new(bin())
        .args(["replay", "-q", quiet.to_str().unwrap()])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let o = terminate(probe);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("stopped before its first bytes came"), "{err}");
}

#[test]
fn unknown_option() {
    let c = capture("rdma_write_bw.pcap");
    assert_one_line_error(&["replay", "--bogus", c.to_str().unwrap()], "--bogus");
    assert_one_line_error(&["frobnicate"], "frobnicate");
}

#[test]
fn bad_option_values() {
    let c = capture("rdma_write_bw.pcap");
    let c = c.to_str().unwrap();
    assert_one_line_error(&["replay", "--vantage", "disk=file:0", c], "disk");
    assert_one_line_error(&["replay", "--vantage", "storage=file:3", c], "no file 3");
    assert_one_line_error(&["replay", "--vantage", "storage=port:0", c], "port:0");
    assert_one_line_error(&["replay", "--interval", "soon", c], "soon");
    assert_one_line_error(&["replay", "--max-flows", "0", c], "--max-flows");
    assert_one_line_error(&["replay", "--summary", "/proc/no-such/s.json", c], "/proc/no-such");
}

#[test]
fn bad_eal_arguments() {
    assert_one_line_error(
        &["live", "--idle-exit", "1s", "--", "--no-such-eal-option"],
        "--no-such-eal-option",
    );
}

#[test]
fn vdev_file_that_does_not_exist() {
    assert_one_line_error(
        &[
            "live",
            "--idle-exit",
            "1s",
            "--",
            "-l",
            "0",
            "--no-huge",
            "--no-pci",
            "--no-shconf",
            "--vdev",
            "net_pcap0,rx_pcap=/no/such.pcap",
        ],
        "/no/such.pcap",
    );
}

/// `roceprobe live OPTIONS -- EAL` on one net_pcap port replaying rdma_write_bw.pcap must
/// fail in one line that contains `needle`.
fn assert_live_refused(options: &[&str], needle: &str) {
    let c = capture("rdma_write_bw.pcap");
    let mut args: Vec<String> =
        ["live", "--idle-exit", "1s"].iter().chain(options).map(|s| s.to_string()).collect();
    args.push("--".into());
    args.extend(eal_args(&[&c]));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_one_line_error(&refs, needle);
}

#[test]
fn live_refuses_outputs_that_are_its_vdevs_files() {
    // The files a net_pcap vdev reads are the run's inputs, as replay's files are: a summary
    // or a CSV report written over one is refused before DPDK starts, the file unchanged.
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("mine.pcap");
    std::fs::copy(capture("rdma_write_bw.pcap"), &copy).unwrap();
    let before = std::fs::read(&copy).unwrap();
    let live = |options: &[&str], input: &Path, needle: &str| {
        let mut args: Vec<String> =
            ["live", "--idle-exit", "1s"].iter().chain(options).map(|s| s.to_string()).collect();
        args.push("--".into());
        args.extend(eal_args(&[input]));
        assert_one_line_error(&args.iter().map(String::as_str).collect::<Vec<_>>(), needle);
    };
    let c = copy.to_str().unwrap();
    live(
        &["--summary", c],
        &copy,
        &format!("--summary {c} is the input file {c}: the run would write over it"),
    );
    let csv = dir.path().join("csv");
    std::fs::create_dir(&csv).unwrap();
    let report = csv.join("flows.csv");
    std::fs::copy(&copy, &report).unwrap();
    live(
        &["--csv-dir", csv.to_str().unwrap()],
        &report,
        &format!(
            "the input file {} is a file --csv-dir {} writes: the run would write over it",
            report.display(),
            csv.display()
        ),
    );
    assert_eq!(std::fs::read(&copy).unwrap(), before);
    assert_eq!(std::fs::read(&report).unwrap(), before);
    // `eth_pcap`, DPDK's other name for net_pcap, reads its file as an input as well.
    let mut eal = eal_args(&[]);
    eal.extend(["--vdev".to_string(), format!("eth_pcap0,rx_pcap={c}")]);
    let mut args: Vec<String> =
        ["live", "--idle-exit", "1s", "--summary", c].iter().map(|s| s.to_string()).collect();
    args.push("--".into());
    args.extend(eal);
    assert_one_line_error(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &format!("--summary {c} is the input file {c}"),
    );
    assert_eq!(std::fs::read(&copy).unwrap(), before);
}

/// A file cut short, read live by net_pcap once: the damage is told before the run, as a
/// replay tells it, and the summary says the run was cut short; the whole records before
/// it (counted here from the record headers) are analysed.
#[test]
fn live_over_a_file_cut_short_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let b = std::fs::read(capture("rdma_write_bw.pcap")).unwrap();
    let cut = dir.path().join("cut.pcap");
    std::fs::write(&cut, &b[..5000]).unwrap();
    let (mut whole, mut at) = (0u64, 24);
    while at + 16 <= 5000 {
        let next = at + 16 + u32::from_le_bytes(b[at + 8..at + 12].try_into().unwrap()) as usize;
        if next > 5000 {
            break;
        }
        whole += 1;
        at = next;
    }
    let summary = dir.path().join("s.json");
    let args =
        live_with(&["-q", "--idle-exit", "500ms", "--summary", summary.to_str().unwrap()], eal_args(&[&cut]));
    let o = run(&strs(&args));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("{}: ", cut.display())) && err.contains("stopping this file there"),
        "{err}"
    );
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!((s["packets"].as_u64(), s["ended"].as_str()), (Some(whole), Some("cut_short")));
}

/// An mbuf pool larger than EAL's memory: the error says what gives EAL more, or asks for
/// less.
#[test]
fn a_pool_larger_than_eals_memory_says_what_to_change() {
    let c = capture("rdma_cm.pcap");
    let args = live_with(&["-q", "--mbufs", "100000000", "--idle-exit", "500ms"], eal_args(&[&c]));
    let o = run(&strs(&args));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("roceprobe: error: creating mbuf pool of 100000000: Cannot allocate memory (EAL's memory is too small for it: give EAL more with -m MB or --socket-mem, or more hugepages, or ask for fewer with --mbufs)"),
        "{err}"
    );
}

/// ERSPAN under `--rss`: the NIC hashes the outer header, so the run says what that
/// means once it ends, with the count of mirrored packets (every RoCE packet of
/// misc_erspan2 came through ERSPAN II; none of a plain capture did).
#[test]
fn rss_over_erspan_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let file = fixtures().join("scenarios/misc_erspan2/misc_erspan2.pcap");
    let summary = dir.path().join("s.json");
    let mut eal = with_lcores(eal_args(&[]), 3);
    eal.extend(["--vdev".to_string(), format!("net_pcap0,rx_pcap={0},rx_pcap={0}", file.display())]);
    let options =
        ["-q", "--workers", "2", "--rss", "--idle-exit", "500ms", "--summary", summary.to_str().unwrap()];
    let o = run(&strs(&live_with(&options, eal)));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let n = s["erspan_packets"].as_u64().unwrap();
    assert!(n > 0 && s["roce_packets"] == n, "{s}");
    assert!(err.contains(&format!("--rss: {n} RoCE packets came through ERSPAN")), "{err}");
    let plain = replay_summary(&[&capture("rdma_write_bw.pcap")], &[]);
    assert_eq!(plain["erspan_packets"], 0);
}

/// One file on two vdevs would count its packets twice (replay refuses a file given twice),
/// unless `--vantage port:N` says the ports are two taps; a vdev name given twice would
/// leave its second file out without a word. Both refused before DPDK starts. One vdev
/// reading the file on two queues (`--rss`) is asked for, and runs.
#[test]
fn live_refuses_a_file_on_two_vdevs_and_a_vdev_given_twice() {
    let c = capture("rdma_write_bw.pcap");
    let other = capture("rdma_read_bw.pcap");
    let live = |options: &[&str], eal: Vec<String>| {
        live_with(&[&["--idle-exit", "500ms"][..], options].concat(), eal)
    };
    let twice = live(&[], eal_args(&[&c, &c]));
    assert_one_line_error(
        &strs(&twice),
        &format!(
            "{} is read by --vdev net_pcap0 ({0}) and --vdev net_pcap1: its packets would be counted twice",
            c.display()
        ),
    );
    let mut same_name = eal_args(&[&c]);
    same_name.extend(["--vdev".to_string(), format!("net_pcap0,rx_pcap={}", other.display())]);
    let same_name = live(&[], same_name);
    assert_one_line_error(&strs(&same_name), "--vdev net_pcap0 is given twice");
    // 128 workers and the capture thread: more lcores than DPDK runs.
    let many = live(&["--workers", "128"], eal_args(&[&c]));
    assert_one_line_error(
        &strs(&many),
        "--workers 128 needs 129 EAL lcores (the capture thread's and one per worker): DPDK runs at most 128, so live takes --workers 127 at most",
    );
    // Two taps: the second port is the storage vantage; its copies count there.
    let s = summary_of(&live(&["--vantage", "storage=port:1"], eal_args(&[&c, &c])));
    assert_eq!(s["packets"], 120, "{s}");
}

#[test]
fn eal_usage_asked_for_is_shown() {
    // `live -- -h` is EAL's usage, printed by EAL (it ends the process): it used to be
    // captured with EAL's other output, and the run printed nothing.
    let o = run(&["live", "--", "-h"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("EAL common options:") && out.contains("-l CORELIST"), "{out}");
}

#[test]
fn port_that_does_not_exist() {
    assert_live_refused(&["--port", "5"], "port 5 does not exist");
}

#[test]
fn a_vantage_rule_that_cannot_match_a_port_is_refused_before_the_ports_start() {
    assert_live_refused(&["--vantage", "storage=file:0"], "--vantage file:0 applies to replay");
    assert_live_refused(&["--vantage", "storage=port:3"], "there is no port 3");
}

#[test]
fn port_given_twice() {
    assert_live_refused(&["--port", "0", "--port", "0"], "--port 0 is given twice");
}

#[test]
fn only_the_ports_captured_from_are_reported() {
    // Two net_pcap ports (ids 0 and 1), only port 1 captured: the summary, ports.csv and
    // the exit report list source 1 alone (port 0 used to show as a source with nothing
    // received and "no receive drops"). Port 1's file is rdma_cm.pcap, whose frames tshark
    // counts.
    let (idle, cm) = (capture("rdma_write_bw.pcap"), capture("rdma_cm.pcap"));
    let frames = tshark_count(&cm, "frame") as u64;
    let d = tempfile::tempdir().unwrap();
    let csv = d.path().join("csv");
    let summary = d.path().join("s.json");
    let mut args: Vec<String> = ["live", "--idle-exit", "300ms", "--port", "1", "--csv-dir"]
        .iter()
        .map(|s| s.to_string())
        .chain([csv.display().to_string(), "--summary".into(), summary.display().to_string(), "--".into()])
        .collect();
    args.extend(eal_args(&[&idle, &cm]));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&refs);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let ports: Vec<&String> = s["ports"].as_object().unwrap().keys().collect();
    assert_eq!(ports, ["1"], "{}", s["ports"]);
    assert_eq!(s["ports"]["1"]["ipackets"].as_u64(), Some(frames));
    let rows = std::fs::read_to_string(csv.join("ports.csv")).unwrap();
    let sources: std::collections::BTreeSet<&str> =
        rows.lines().skip(1).filter_map(|l| l.split(',').nth(2)).collect();
    assert_eq!(sources.into_iter().collect::<Vec<_>>(), ["1"], "{rows}");
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(!table.contains("source 0"), "{table}");
    assert!(table.contains(&format!("source 1: {frames} frames received")), "{table}");
}

/// More `--job` names than `--max-jobs` (each named job always has its run totals): refused
/// before any work, with the value that would do; as many is fine.
#[test]
fn more_job_names_than_max_jobs_are_refused() {
    let c = capture("rdma_cm.pcap");
    let c = c.to_str().unwrap();
    let jobs = ["--job", "a=10.1.0.0/16", "--job", "b=10.2.0.0/16", "--job", "a=10.3.0.0/16"];
    let mut args = vec!["replay", "-q", "--max-jobs", "1"];
    args.extend(jobs);
    args.push(c);
    assert_one_line_error(
        &args,
        "--job names 2 jobs, more than --max-jobs 1: raise --max-jobs to at least 2",
    );
    args[3] = "2";
    let out = run(&args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Every option with a value, given a bad one: a one-line error that names the option,
/// before any work (no EAL output, nothing on stdout).
#[test]
fn every_option_refuses_bad_values() {
    let c = capture("rdma_cm.pcap");
    let c = c.to_str().unwrap();
    let common: &[(&str, &str)] = &[
        ("--interval", "0"),
        ("--interval", "1y"),
        ("--summary", "/proc/no-such/s.json"),
        ("--vantage", "disk=file:0"),
        ("--max-flows", "0"),
        ("--csv-dir", "/proc/no-such/csv"),
        ("--csv-rotate-size", "10"),
        ("--csv-rotate-age", "soon"),
        ("--csv-compress", "brotli"),
        ("--csv-retain", "0x"),
        ("--csv-retain", "8K"),
        ("--flow-idle", "x"),
        ("--min-transmission-packets", "0"),
        ("--flow-expire", "0"),
        ("--mtu", "1000"),
        ("--io-timeout", "0"),
        ("--reorder-window", "2s"),
        ("--duplicate-window", "2s"),
        // Not 0, but below a nanosecond: it was taken for 0, the window off.
        ("--reorder-window", "0.0000000001s"),
        ("--duplicate-window", "0.1ns"),
        ("--max-ios", "0"),
        ("--max-latency-series", "0"),
        ("--max-pending-commands", "0"),
        ("--max-cm-requests", "lots"),
        ("--max-announced-flows", "99999999999"),
        ("--workers", "129"),
        ("--prometheus", "not-an-address"),
        ("--probe-id", ""),
        ("--prometheus-max-flows", "many"),
        ("--slow-ios", "1001"),
        ("--top", "many"),
        ("--job", "nonsense"),
        ("--step-gap", "0"),
        ("--max-jobs", "0"),
        ("--evidence-dir", "/proc/version/evidence"),
        ("--evidence-before", "257"),
        ("--evidence-after", "0"),
        ("--evidence-snaplen", "32"),
        ("--evidence-slow-io", "0"),
        ("--evidence-max-per-minute", "many"),
        ("--evidence-max-bytes", "1"),
    ];
    let live_only: &[(&str, &str)] = &[
        ("--port", "x"),
        ("--duration", "0"),
        ("--idle-exit", "x"),
        ("--mbufs", "x"),
        // DPDK's pool needs one and a half times its per-lcore cache of 256.
        ("--mbufs", "383"),
        ("--mbuf-size", "10"),
        ("--mbuf-size", "70000"),
        ("--max-frame", "63"),
        ("--max-frame", "20000"),
        ("--flow-control", "auto"),
        ("--control-cpus", "1-"),
        ("--control-cpus", "3-1"),
    ];
    // Every option that takes a value is in these tables.
    let covered =
        |opt: &str, tables: &[&[(&str, &str)]]| tables.iter().any(|t| t.iter().any(|(o, _)| *o == opt));
    for (cmd, tables) in [("replay", vec![common]), ("live", vec![common, live_only])] {
        let help = run(&[cmd, "--help"]);
        for line in String::from_utf8_lossy(&help.stdout).lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let opt = words.iter().position(|w| w.starts_with("--")).map(|i| (words[i], words.get(i + 1)));
            if let Some((opt, Some(value))) = opt {
                if value.starts_with('<') {
                    assert!(covered(opt, &tables), "{cmd} {opt} has no bad value in the table");
                }
            }
        }
    }
    for (opt, bad) in common {
        let needle =
            if *opt == "--csv-dir" || *opt == "--summary" { bad.to_string() } else { opt.to_string() };
        assert_one_line_error(&["replay", opt, bad, c], &needle);
        let mut live = vec!["live", "--idle-exit", "1s", opt, bad, "--"];
        let eal = eal_args(&[Path::new(c)]);
        live.extend(eal.iter().map(String::as_str));
        assert_one_line_error(&live, &needle);
    }
    for (opt, bad) in live_only {
        let mut live = vec!["live", opt, bad, "--"];
        let eal = eal_args(&[Path::new(c)]);
        live.extend(eal.iter().map(String::as_str));
        assert_one_line_error(&live, opt);
    }
    assert_one_line_error(&["plot", "--csv-dir", "/no/such", "--out", "/tmp/x"], "--csv-dir /no/such");
    assert_one_line_error(&["plot", "--csv-dir", "/no/such"], "--out");
}

/// A rotation size the retained total cannot hold eight times over: one line naming both
/// options, before any work (no CSV folder made).
#[test]
fn a_rotation_size_beyond_an_eighth_of_the_retained_total() {
    let c = capture("rdma_write_bw.pcap");
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("csv");
    let needle = "--csv-rotate-size 256K is larger than an eighth of --csv-retain 1M";
    let csv_args = ["--csv-dir", csv.to_str().unwrap(), "--csv-retain", "1M", "--csv-rotate-size", "256K"];
    assert_one_line_error(&[&["replay"], &csv_args[..], &[c.to_str().unwrap()]].concat(), needle);
    let eal = eal_args(&[&c]);
    let mut live = vec!["live", "--idle-exit", "1s"];
    live.extend_from_slice(&csv_args);
    live.push("--");
    live.extend(eal.iter().map(String::as_str));
    assert_one_line_error(&live, needle);
    assert!(!csv.exists(), "refused before any work");
    // An eighth is allowed.
    let o = replay_with_csv(&csv, &["--csv-retain", "1M", "--csv-rotate-size", "128K"], &c);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `roceprobe replay -q --csv-dir CSV EXTRA... CAPTURE`.
fn replay_with_csv(csv: &Path, extra: &[&str], capture: &Path) -> std::process::Output {
    let mut args = vec!["replay", "-q", "--csv-dir", csv.to_str().unwrap()];
    args.extend_from_slice(extra);
    args.push(capture.to_str().unwrap());
    run(&args)
}

/// `--help` shows the CSV files' defaults, and a run with `--csv-dir` tells them in one line.
#[test]
fn the_csv_defaults_are_shown_and_announced() {
    let help = String::from_utf8(run(&["replay", "--help"]).stdout).unwrap();
    let flat = help.split_whitespace().collect::<Vec<_>>().join(" ");
    for shown in [
        "--csv-rotate-size <SIZE>",
        "[default: 64M, or --csv-retain/16 when smaller]",
        "--csv-rotate-age <DUR>",
        "[default: 1h]",
        "--csv-compress <MODE>",
        "[default: zstd]",
        "--csv-retain <SIZE>",
        "[default: 1G]",
    ] {
        assert!(flat.contains(shown), "--help lacks {shown}: {help}");
    }
    let c = capture("rdma_write_bw.pcap");
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("csv");
    let o = replay_with_csv(&csv, &[], &c);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "roceprobe: CSV reports in {}: a new file at 64M or after 1h of packet time, rotated files compressed with zstd, at most 1G kept in all (the oldest rotated files removed first)",
            csv.display()
        )
    );
    let o = replay_with_csv(
        &csv,
        &["--csv-retain", "8M", "--csv-compress", "none", "--csv-rotate-age", "10m"],
        &c,
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("a new file at 512K or after 10m of packet time, rotated files not compressed, at most 8M kept in all"), "{err}");
    // No announcement without --csv-dir.
    assert!(run(&["replay", "-q", c.to_str().unwrap()]).stderr.is_empty());
}

#[test]
fn unwritable_output_paths() {
    let c = capture("rdma_write_bw.pcap");
    let c = c.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("csv");
    let u = under_file.to_str().unwrap();
    let f = file.to_str().unwrap();
    assert_one_line_error(
        &["replay", "--csv-dir", u, c],
        &format!("--csv-dir: cannot create {u} ({f} is not a directory)"),
    );
    assert_one_line_error(&["replay", "--summary", u, c], u);
    assert_one_line_error(
        &["replay", "--evidence-dir", f, c],
        &format!("--evidence-dir: cannot create {f} (it is there and is not a directory)"),
    );
    assert_one_line_error(
        &["replay", "--summary", dir.path().to_str().unwrap(), c],
        &format!("--summary: cannot write {} (it is a directory)", dir.path().display()),
    );
    let csv = dir.path().join("csv");
    let o = run(&["replay", "-q", "--csv-dir", csv.to_str().unwrap(), c]);
    assert!(o.status.success());
    assert_one_line_error(
        &["plot", "--csv-dir", csv.to_str().unwrap(), "--out", u],
        &format!("--out: cannot create {u}"),
    );
}

#[test]
fn outputs_in_a_directory_are_never_written_through_a_link_or_into_a_fifo() {
    // A link named like a report in --csv-dir (the probe often runs as root) would have the
    // report written over whatever it points to; a FIFO would block the run before any work.
    // Each is refused by name before any work starts; the file linked to, and an earlier
    // run's reports (flows.csv is made before ports.csv), are left as they were.
    let c = capture("rdma_write_bw.pcap");
    let c = c.to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let csv = dir.path().join("csv");
    let d = csv.to_str().unwrap();
    assert!(run(&["replay", "-q", "--csv-dir", d, c]).status.success());
    let flows = std::fs::read(csv.join("flows.csv")).unwrap();
    assert!(flows.len() > 200, "an earlier run's rows");
    let link = csv.join("ports.csv");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    assert_one_line_error(
        &["replay", "-q", "--csv-dir", d, c],
        &format!("--csv-dir: cannot write {}: it is a symbolic link, not a regular file", link.display()),
    );
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    assert_eq!(std::fs::read(csv.join("flows.csv")).unwrap(), flows);
    std::fs::remove_file(&link).unwrap();
    let fifo = std::ffi::CString::new(link.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    assert_one_line_error(
        &["replay", "-q", "--csv-dir", d, c],
        &format!(
            "--csv-dir: cannot write {}: it is a FIFO, socket, device or directory, not a regular file",
            link.display()
        ),
    );
    assert_eq!(std::fs::read(csv.join("flows.csv")).unwrap(), flows);
}

#[test]
fn a_taken_prometheus_port() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let c = capture("rdma_write_bw.pcap");
    let c = c.to_str().unwrap();
    assert_one_line_error(
        &["replay", "--prometheus", &addr, c],
        &format!("--prometheus {addr}: cannot listen there"),
    );
    assert_one_line_error(&["replay", "--prometheus", "nowhere", c], "--prometheus nowhere");
}

#[test]
fn rss_options_that_cannot_work() {
    let c = capture("rdma_write_bw.pcap");
    let live = |extra: &[&str], lcores: usize, needle: &str| {
        let mut args: Vec<String> = ["live", "--idle-exit", "1s"].iter().map(|s| s.to_string()).collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push("--".into());
        args.extend(with_lcores(eal_args(&[&c]), lcores));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_one_line_error(&refs, needle);
    };
    live(&["--rss"], 2, "--rss needs --workers 2");
    live(&["--rss", "--workers", "2", "--vantage", "storage=erspan:1"], 3, "ERSPAN");
    // A port with one rx_pcap file has one RX queue.
    live(&["--rss", "--workers", "2"], 3, "has at most 1 RX queue, 2 asked");
    // A port with two rx_pcap files has two RX queues: without --rss, one would be left.
    let mut args: Vec<String> = ["live", "--idle-exit", "1s", "--"].iter().map(|s| s.to_string()).collect();
    args.extend(eal_args(&[]));
    args.push("--vdev".into());
    args.push(format!("net_pcap0,rx_pcap={},rx_pcap={}", c.display(), c.display()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_one_line_error(&refs, "net_pcap has 2 rx_pcap files, one per RX queue, and 1 would be read");
    // Every worker needs an lcore of its own besides the capture thread's.
    live(
        &["--rss", "--workers", "2"],
        2,
        "--workers 2 --rss needs 3 EAL lcores (the capture thread's and one per worker), EAL was given 2",
    );
    live(&["--workers", "3"], 1, "--workers 3 needs 4 EAL lcores");
    live(&["--rx-core"], 1, "--rx-core needs 2 EAL lcores");
    live(&["--rx-core", "--workers", "2"], 2, "--workers 2 --rx-core needs 3 EAL lcores");
    // The control threads' CPUs must not be an lcore's.
    live(&["--control-cpus", "0"], 1, "--control-cpus 0 is an EAL lcore's CPU");
}

#[test]
fn help_documents_every_option() {
    for (sub, opts) in [
        ("replay", &["--interval", "--summary", "--vantage", "--max-flows", "--quiet"][..]),
        (
            "live",
            &[
                "--interval",
                "--summary",
                "--vantage",
                "--max-flows",
                "--port",
                "--duration",
                "--idle-exit",
                "--rss",
            ][..],
        ),
    ] {
        let o = run(&[sub, "--help"]);
        assert!(o.status.success());
        let text = String::from_utf8_lossy(&o.stdout);
        for opt in opts {
            assert!(text.contains(opt), "{sub} --help lacks {opt}");
        }
    }
}

/// A RoCE frame from a real capture with its UDP ports rewritten.
fn with_ports(frame: &[u8], src: u16, dst: u16) -> Vec<u8> {
    let mut f = frame.to_vec();
    // Ethernet 14 + IPv4 20: UDP ports at 34..38. The checksum is 0 in RoCEv2 here.
    f[34..36].copy_from_slice(&src.to_be_bytes());
    f[36..38].copy_from_slice(&dst.to_be_bytes());
    f
}

#[test]
fn roce_is_recognised_by_destination_port_whatever_the_source_port() {
    let frames = read_all_frames(&capture("rdma_write_lat.pcap")).unwrap();
    let roce = frames.iter().find(|f| f.len() > 38 && f[36..38] == 4791u16.to_be_bytes()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ports.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    // Source port 69 (a NIC that uses the source QPN), destination 4791: RoCE.
    w.write(1_000, &with_ports(roce, 69, 4791), roce.len() as u32).unwrap();
    // Source port 4791, destination elsewhere: not RoCE.
    w.write(2_000, &with_ports(roce, 4791, 69), roce.len() as u32).unwrap();
    w.write(3_000, &with_ports(roce, 4791, 50000), roce.len() as u32).unwrap();
    drop(w);
    for s in [replay_summary(&[&path], &[]), live_summary(&[&path], &[])] {
        assert_eq!(s["packets"], 3);
        assert_eq!(s["roce_packets"], 1);
        assert_eq!(s["non_roce_packets"], 2);
        assert_eq!(s["flows"].as_array().unwrap().len(), 1);
    }
}

#[test]
fn summary_to_stdout_keeps_stdout_pure_json() {
    let c = capture("rdma_read_bw.pcap");
    let o = run(&["replay", "--summary", "-", c.to_str().unwrap()]);
    assert!(o.status.success());
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("stdout is the JSON summary");
    assert_eq!(v["packets"], 60);
    assert!(String::from_utf8_lossy(&o.stderr).contains("RoCEv2"), "the table goes to stderr");
}

#[test]
fn table_lists_every_flow() {
    let c = capture("rdma_read_bw.pcap");
    let o = run(&["replay", c.to_str().unwrap()]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.starts_with("60 frames: 20 RoCEv2, 40 other, 0 malformed"), "{text}");
    // tshark: READ Requests to QP 0x1c, READ Responses First/Middle/Last to QP 0x1e.
    assert!(text.contains("0x00001c") && text.contains("READ_REQUEST:5"), "{text}");
    assert!(text.contains("0x00001e") && text.contains("READ_RESPONSE_FIRST:5"), "{text}");
}

/// rdma_write_bw.pcap (a real NIC's ICRCs; tshark: WRITE First/Middle/Last to QP 0x1b,
/// PSNs 5454383 on in order, each message ACKed) with two WRITE Middles' PSNs flipped on
/// the way, one a million PSNs behind, one two million ahead (their ICRCs then fail): with
/// `--check-icrc` those packets are counted and their ICRC errors too, their PSNs taken as
/// the ones expected, so the flow's PSNs stay in order: no gap, no retransmission, and
/// every message's ACK latency still measured.
/// The real capture `name` written to `dir`/psn.pcap, its frames 1 µs apart, each RoCEv2
/// frame's bytes given to `edit` with its index first (by UDP port 4791 at 36, IPv4
/// without options: the BTH at 42, its opcode there, the PSN's three bytes at 51).
fn edit_roce_frames(name: &str, dir: &Path, mut edit: impl FnMut(usize, &mut Vec<u8>)) -> PathBuf {
    let path = dir.join("psn.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    for (i, f) in read_all_frames(&capture(name)).unwrap().iter().enumerate() {
        let mut f = f.clone();
        if f.len() > 54 && f[36..38] == 4791u16.to_be_bytes() {
            edit(i, &mut f);
        }
        w.write(1_000 * (i as u64 + 1), &f, f.len() as u32).unwrap();
    }
    path
}

#[test]
fn check_icrc_keeps_a_corrupted_psn_out_of_the_analysis() {
    let c = capture("rdma_write_bw.pcap");
    let dir = tempfile::tempdir().unwrap();
    let mut flipped = 0;
    let path = edit_roce_frames("rdma_write_bw.pcap", dir.path(), |i, f| {
        // A WRITE Middle's PSN: its bit 20 (it falls 1,048,576 behind), then bit 21
        // (2,097,152 ahead).
        if flipped < 2 && f[42] == 7 && i > 30 {
            f[51] ^= [0x10, 0x20][flipped];
            flipped += 1;
        }
    });
    assert_eq!(flipped, 2);
    let untouched = replay_summary(&[&c], &[]);
    let s = replay_summary(&[&path], &["--check-icrc"]);
    let flow = |s: &serde_json::Value| {
        s["flows"].as_array().unwrap().iter().find(|f| f["dst_qpn"] == 0x1b).unwrap().clone()
    };
    let (f, u) = (flow(&s), flow(&untouched));
    assert_eq!((f["packets"].clone(), f["icrc_errors"].as_u64()), (u["packets"].clone(), Some(2)), "{f}");
    for k in ["gap_psns", "retx_packets", "out_of_window"] {
        assert_eq!(f[k], 0, "{k}: {f}");
    }
    let acks = |s: &serde_json::Value| {
        s["latency"].as_array().unwrap().iter().find(|l| l["op"] == "rc_ack").map(|l| l["count"].clone())
    };
    assert_eq!(acks(&s), Some(serde_json::json!(5)), "tshark: five messages, each ACKed");
}

/// A corrupted READ (PSN bit 20 flipped, the ICRC then fails) in rdma_read_bw.pcap, whose
/// requests tshark shows in order: the second READ Request, of 3,000 bytes; the next READ
/// is 3 PSNs on (its span at `--mtu 1024`). With `--check-icrc` it is taken as the READ
/// expected, of a length that cannot be trusted: no gap, no retransmission (it was taken
/// as one PSN, a gap of 2 before the next READ).
#[test]
fn check_icrc_keeps_a_corrupted_read_out_of_the_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = 0;
    let path = edit_roce_frames("rdma_read_bw.pcap", dir.path(), |_, f| {
        // Opcode 12, READ Request.
        if f[42] == 12 {
            if seen == 1 {
                f[51] ^= 0x10;
            }
            seen += 1;
        }
    });
    assert_eq!(seen, 5, "tshark: five READs");
    let s = replay_summary(&[&path], &["--check-icrc", "--mtu", "1024"]);
    let f = s["flows"].as_array().unwrap().iter().find(|f| f["dst_qpn"] == 0x1c).unwrap().clone();
    assert_eq!(f["icrc_errors"], 1, "{f}");
    for k in ["gap_psns", "retx_packets", "out_of_window"] {
        assert_eq!(f[k], 0, "{k}: {f}");
    }
}

/// Corrupted requests (bits flipped after the frames were built, so their ICRCs fail),
/// hand-built: (1) a 4 KiB READ at PSN 102 (`--mtu 1024`: PSNs 102-105) with its PSN's bit
/// 20 and its DMA length's bit 31 hit, then SEND 106, a NAK for 102, READ 102 and SEND 106
/// sent again and twenty SENDs in order: the two copies sent again are retransmissions and
/// nothing else is (the READ's hit length trusted made the expected PSN leap 2^21 on, and
/// every later request a retransmission); (2) SEND 100 sent three times with a payload bit
/// hit, then whole, then ACKed: three copies sent again (the first starts the sequence);
/// (3) below.
#[test]
fn check_icrc_trusts_neither_a_corrupted_read_s_length_nor_loses_corrupted_copies() {
    use roceprobe::wire::bth::opcode as op;
    use roceprobe::wire::ib_ext::{Aeth, ExtHeaders, Reth};
    use std::net::IpAddr;
    let (a, b): (IpAddr, IpAddr) = ("10.16.0.1".parse().unwrap(), "10.16.0.2".parse().unwrap());
    let none = ExtHeaders::default;
    let send = |psn| roce(a, b, op::SEND_ONLY, 0x20, psn, none(), &[7u8; 64]);
    let read = || {
        let reth =
            ExtHeaders { reth: Some(Reth { va: 0x1000, rkey: 1, dma_len: 4096 }), ..Default::default() };
        roce(a, b, op::READ_REQUEST, 0x20, 102, reth, &[])
    };
    let nak = roce(
        b,
        a,
        op::ACKNOWLEDGE,
        0x10,
        102,
        ExtHeaders { aeth: Some(Aeth::nak(0, 1)), ..Default::default() },
        &[],
    );
    let ack = |psn| {
        roce(
            b,
            a,
            op::ACKNOWLEDGE,
            0x10,
            psn,
            ExtHeaders { aeth: Some(Aeth::ack(31, 1)), ..Default::default() },
            &[],
        )
    };
    // Ethernet, IPv4 and UDP take 42 bytes: the PSN's high byte at 51, the RETH's DMA length at 66.
    let mut hit = read();
    hit[51] ^= 0x10;
    hit[66] ^= 0x80;
    let mut frames = vec![send(100), send(101), hit, send(106), nak, read(), send(106)];
    frames.extend((107..127).map(send));
    frames.push(ack(126));
    let dir = tempfile::tempdir().unwrap();
    let us = 1_000u64;
    // The requests' flow with `--check-icrc`; its ICRC errors, retransmissions and gaps.
    let flow = |path: &Path, args: &[&str]| {
        let s = replay_summary(&[path], &[&["--check-icrc"], args].concat());
        s["flows"].as_array().unwrap().iter().find(|f| f["dst_qpn"] == 0x20).unwrap().clone()
    };
    let counts = |f: &serde_json::Value| {
        let n = |k: &str| f[k].as_u64().unwrap();
        (n("icrc_errors"), n("retx_packets"), n("gap_psns"))
    };
    let path = write_pcap(
        dir.path(),
        "read_hit.pcap",
        &frames.into_iter().enumerate().map(|(i, f)| (i as u64 * us, f)).collect::<Vec<_>>(),
    );
    let f = flow(&path, &["--mtu", "1024"]);
    assert_eq!(counts(&f), (1, 2, 0), "{f}");

    // A payload byte 10 from the end (before the 4-byte ICRC) hit in three copies.
    let mut bad = send(100);
    let n = bad.len();
    bad[n - 10] ^= 0x01;
    let frames = [
        (0, bad.clone()),
        (100 * us, bad.clone()),
        (200 * us, bad),
        (300 * us, send(100)),
        (303 * us, ack(100)),
    ];
    let path = write_pcap(dir.path(), "copies.pcap", &frames);
    let f = flow(&path, &[]);
    assert_eq!(counts(&f), (3, 3, 0), "{f}");

    // (3) A READ of 64 MiB at PSN 1000 (65,536 PSNs at `--mtu 1024`) with an address bit
    // hit, then SEND 1000 + 65,536, where the READ ends: no gap (it was given 2^15 PSNs at
    // most, a gap of 32,768).
    let reth =
        ExtHeaders { reth: Some(Reth { va: 0x1000, rkey: 1, dma_len: 64 << 20 }), ..Default::default() };
    let mut big = roce(a, b, op::READ_REQUEST, 0x20, 1000, reth, &[]);
    big[58] ^= 0x01;
    let frames = [(0, send(999)), (us, big), (2 * us, send(1000 + 65_536)), (3 * us, send(1001 + 65_536))];
    let path = write_pcap(dir.path(), "big_read.pcap", &frames);
    let f = flow(&path, &["--mtu", "1024"]);
    assert_eq!(counts(&f), (1, 0, 0), "{f}");
}

#[test]
fn check_icrc_counts_a_corrupted_payload_per_flow() {
    let frames = read_all_frames(&capture("rdma_write_lat.pcap")).unwrap();
    let roce: Vec<&Vec<u8>> =
        frames.iter().filter(|f| f.len() > 38 && f[36..38] == 4791u16.to_be_bytes()).collect();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("icrc.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    let mut bad = roce[0].clone();
    let n = bad.len();
    bad[n - 10] ^= 0xFF; // a payload byte, as a flaky link would flip it
    w.write(1_000, &bad, n as u32).unwrap();
    w.write(2_000, roce[0], roce[0].len() as u32).unwrap();
    drop(w);
    let s = replay_summary(&[&path], &["--check-icrc"]);
    assert_eq!(s["flows"][0]["packets"], 2);
    assert_eq!(s["flows"][0]["icrc_errors"], 1);
    // The exit report lists the flow for it, and shows the count (a column only then).
    let o = run(&["replay", "--check-icrc", path.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&o.stdout);
    let problems: Vec<&str> = table.lines().skip_while(|l| !l.starts_with("flows with")).take(3).collect();
    let header: Vec<&str> = problems[1].split_whitespace().collect();
    let row: Vec<&str> = problems[2].split_whitespace().collect();
    let at = header.iter().position(|c| *c == "icrc").unwrap_or_else(|| panic!("{table}"));
    assert_eq!((row[at], header.len(), row.len()), ("1", 15, 15), "{table}");
    assert!(!table.contains("out_of_window"), "{table}");
    let s = replay_summary(&[&path], &[]);
    assert_eq!(s["flows"][0]["icrc_errors"], 0, "not checked unless asked");
}

#[test]
fn erspan_iii_switch_time_is_the_packet_time() {
    use roceprobe::wire::bth;
    use roceprobe::wire::build::{erspan_wrap, RoceFrame};
    use roceprobe::wire::erspan::{Granularity, Repr};
    use std::net::Ipv4Addr;
    // Three mirrored packets whose switch timestamps are 1 µs apart (10 ticks of 100 ns,
    // across the 32-bit wrap), captured after a mirror path whose delay varies by 300 µs.
    let inner = RoceFrame::new(
        "10.0.0.1".parse().unwrap(),
        "10.0.0.2".parse().unwrap(),
        bth::Repr { opcode: 0x04, dest_qp: 7, ..Default::default() },
    )
    .emit();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("erspan3.pcap");
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    let capture0 = 1_800_000_000_000_000_000u64;
    for (k, (ticks, capture_delay)) in
        [(u32::MAX - 4, 0u64), (5, 300_000), (15, 1_000)].into_iter().enumerate()
    {
        let h = Repr { timestamp: ticks, granularity: Granularity::Nanos100, ..Repr::of_session(3, 9) };
        let f = erspan_wrap(&inner, &h, Ipv4Addr::new(1, 1, 1, 1), Ipv4Addr::new(2, 2, 2, 2), k as u32);
        w.write(capture0 + k as u64 * 1_000 + capture_delay, &f, f.len() as u32).unwrap();
    }
    drop(w);
    let s = replay_summary(&[&path], &["--vantage", "storage=erspan:9"]);
    let t = |ns: u64| roceprobe::report::time::rfc3339_nanos(ns);
    assert_eq!(s["first_packet"], t(capture0), "the session is anchored at its first capture");
    assert_eq!(s["last_packet"], t(capture0 + 2_000), "then it runs on the switch clock");
    assert_eq!(s["flows"][0]["vantage"], "storage");
    assert_eq!(
        s["flows"][0]["bytes"].as_u64().unwrap(),
        inner.len() as u64 * 3,
        "the mirrored frames' bytes"
    );
}

#[test]
fn summary_into_a_missing_directory_makes_it_as_csv_dir_does() {
    let c = capture("rdma_write_bw.pcap");
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("runs/today/summary.json");
    let o = run(&["replay", "-q", "--summary", summary.to_str().unwrap(), c.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    // pcap-fixtures/captures/tshark-truth.json: 60 frames.
    assert_eq!(s["packets"], 60);
}

#[test]
fn help_says_what_the_probe_measures() {
    let o = run(&["--help"]);
    let text = String::from_utf8(o.stdout).unwrap();
    for what in ["NVMe-oF I/O latency", "host, network and storage", "retransmissions", "congestion"] {
        assert!(text.contains(what), "--help: {what}: {text}");
    }
}

/// A capture of `n` Ethernet frames of `len` bytes each (their content does not matter).
fn frames_of(path: &Path, len: usize, n: usize) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = Writer::new(std::io::BufWriter::new(f)).unwrap();
    for i in 0..n {
        let mut frame = vec![0u8; len];
        frame[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental EtherType
        w.write(1_700_000_000_000_000_000 + i as u64 * 1000, &frame, len as u32).unwrap();
    }
}

/// `roceprobe live --duration 1s OPTIONS` on a net_pcap vdev looping `pcap`.
fn looping(pcap: &Path, options: &[&str]) -> Vec<String> {
    let mut args: Vec<String> =
        ["live", "--duration", "1s"].iter().chain(options).map(|s| s.to_string()).collect();
    args.push("--".into());
    args.extend(eal_args(&[]));
    args.extend(["--vdev".into(), format!("net_pcap0,rx_pcap={},infinite_rx=1", pcap.display())]);
    args
}

/// Frames tshark reads in `path` that match display filter `filter`.
fn tshark_count(path: &Path, filter: &str) -> usize {
    let o = std::process::Command::new("tshark")
        .args(["-r", path.to_str().unwrap(), "-Y", filter, "-T", "fields", "-e", "frame.number"])
        .output()
        .expect("tshark (scripts/setup installs it)");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).lines().count()
}

#[test]
fn infinite_rx_of_large_frames_sizes_the_mbufs_or_names_the_size_needed() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("jumbo.pcap");
    frames_of(&pcap, 4000, 50);
    let live = |extra: &[&str]| looping(&pcap, extra);
    // Without --mbuf-size: mbufs sized for the file's 4000-byte frames, plus DPDK's 128-byte headroom.
    let s = summary_of(&live(&[]));
    assert!(s["packets"].as_u64().unwrap() > 50, "the file was replayed: {}", s["packets"]);
    assert_eq!(s["ended"], "complete", "--duration reached");
    assert_eq!(s["non_roce_packets"], s["packets"]);
    // A size given too small: one line naming the option and the size needed.
    let args = live(&["--mbuf-size", "2176"]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_one_line_error(&refs, "--mbuf-size 4128");
}

#[test]
fn infinite_rx_of_many_frames_sizes_the_pool_or_names_the_size_needed() {
    // net_pcap with infinite_rx=1 keeps every frame of its file in an mbuf of the pool: a
    // file of 6,000 frames did not fit the default pool (4,095 mbufs for one port), and the
    // run failed setting up the RX queue in DPDK's words. (frames_of writes the frames;
    // tshark counts them.)
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("many.pcap");
    frames_of(&pcap, 64, 6_000);
    assert_eq!(tshark_count(&pcap, "frame"), 6_000);
    let live = |extra: &[&str]| looping(&pcap, extra);
    // Without --mbufs: a pool with room for the file's frames as well.
    let s = summary_of(&live(&[]));
    assert!(s["packets"].as_u64().unwrap() > 6_000, "the file was replayed: {}", s["packets"]);
    // Too few given: one line naming the option, the frames and the least that works (the
    // frames and a burst of 32 to receive into).
    let args = live(&["--mbufs", "5000"]);
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    assert_one_line_error(&refs, "--mbufs 5000 is too small");
    assert_one_line_error(&refs, "(6000 frames in");
    assert_one_line_error(&refs, "use --mbufs 6032 or more");
}

#[test]
fn a_refused_run_leaves_the_outputs_of_the_run_before() {
    // A first run writes its CSV reports and summary; a second, refused for its input,
    // must leave them byte for byte: outputs are opened only once the inputs are checked.
    let d = tempfile::tempdir().unwrap();
    let (csv, summary) = (d.path().join("reports"), d.path().join("reports/summary.json"));
    let (csv_s, summary_s) = (csv.to_str().unwrap(), summary.to_str().unwrap());
    let cap = capture("rdma_write_bw.pcap");
    let o = run(&["replay", "-q", "--csv-dir", csv_s, "--summary", summary_s, cap.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let snapshot = || {
        let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&csv)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(&p).unwrap()))
            .collect();
        files.sort();
        files
    };
    let before = snapshot();
    let missing = d.path().join("no-such.pcap");
    assert_one_line_error(
        &["replay", "-q", "--csv-dir", csv_s, "--summary", summary_s, missing.to_str().unwrap()],
        "no-such.pcap",
    );
    assert_one_line_error(
        &[
            "replay",
            "-q",
            "--csv-dir",
            csv_s,
            "--summary",
            summary_s,
            "--vantage",
            "storage=file:5",
            cap.to_str().unwrap(),
        ],
        "file:5",
    );
    assert_eq!(snapshot(), before, "the refused runs changed the earlier run's outputs");
}

#[test]
fn a_summary_path_that_would_write_over_an_input_or_a_report_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let input = d.path().join("in.pcap");
    std::fs::copy(capture("rdma_write_bw.pcap"), &input).unwrap();
    let original = std::fs::read(&input).unwrap();
    let i = input.to_str().unwrap();
    assert_one_line_error(&["replay", "-q", "--summary", i, i], "is the input file");
    assert_eq!(std::fs::read(&input).unwrap(), original, "the input was written over");
    let csv = d.path().join("c");
    let into_report = csv.join("flows.csv");
    assert_one_line_error(
        &["replay", "-q", "--csv-dir", csv.to_str().unwrap(), "--summary", into_report.to_str().unwrap(), i],
        "is a file --csv-dir",
    );
    assert!(!csv.exists(), "the refused run created --csv-dir");
}

#[test]
fn outputs_that_land_on_an_input_or_on_each_other_are_refused_before_anything_is_made() {
    let d = tempfile::tempdir().unwrap();
    let at = |p: &str| d.path().join(p).to_str().unwrap().to_owned();
    let input = capture("rdma_write_bw.pcap");
    let i = input.to_str().unwrap();
    // The same place written two ways, the folder not made yet.
    let (csv, dotted) = (at("out"), format!("{}/./out/../out/flows.csv", d.path().display()));
    assert_one_line_error(
        &["replay", "-q", "--csv-dir", &csv, "--summary", &dotted, i],
        "is a file --csv-dir",
    );
    // The summary on the folder of the CSV reports or of the evidence, or on a folder.
    assert_one_line_error(&["replay", "-q", "--csv-dir", &csv, "--summary", &csv, i], "the folder --csv-dir");
    let ev = at("ev");
    assert_one_line_error(
        &["replay", "-q", "--evidence-dir", &ev, "--summary", &ev, i],
        "the folder --evidence-dir",
    );
    assert_one_line_error(&["replay", "-q", "--summary", &format!("{}/", at("new")), i], "names a folder");
    assert!(std::fs::read_dir(d.path()).unwrap().next().is_none(), "a refused run made something");
    // An input where the run writes its reports (`flows.csv`) or keeps its evidence: the
    // run would empty it, or remove it to keep within --evidence-max-bytes.
    std::fs::create_dir(at("out")).unwrap();
    let copied = at("out/flows.csv");
    std::fs::copy(&input, &copied).unwrap();
    assert_one_line_error(&["replay", "-q", "--csv-dir", &csv, &copied], "is a file --csv-dir");
    std::fs::create_dir(&ev).unwrap();
    let kept = format!("{ev}/20261129T080000.000000000Z_loss_10.0.0.1-10.0.0.2-qp5.pcapng");
    std::fs::copy(&input, &kept).unwrap();
    assert_one_line_error(&["replay", "-q", "--evidence-dir", &ev, &kept], "evidence files");
    for f in [&copied, &kept] {
        assert_eq!(std::fs::read(f).unwrap(), std::fs::read(&input).unwrap(), "{f} changed");
    }
    // Through links: a --csv-dir reached by `..` after a folder not made yet, that is a link
    // to another folder; an input that is a link to a report.
    std::fs::create_dir(at("target")).unwrap();
    std::os::unix::fs::symlink(at("target"), at("link")).unwrap();
    let via = format!("{}/not-yet/../link", d.path().display());
    assert_one_line_error(
        &["replay", "-q", "--csv-dir", &via, "--summary", &at("target/flows.csv"), i],
        "is a file --csv-dir",
    );
    std::os::unix::fs::symlink(&copied, at("in.pcap")).unwrap();
    assert_one_line_error(&["replay", "-q", "--csv-dir", &csv, &at("in.pcap")], "is a file --csv-dir");
}

#[test]
fn a_standard_error_that_cannot_be_written_loses_its_lines_not_the_run() {
    let d = tempfile::tempdir().unwrap();
    let (csv, summary) = (d.path().join("csv"), d.path().join("s.json"));
    let o = std::process::Command::new(bin())
        .args(["replay", "--csv-dir", csv.to_str().unwrap(), "--summary", summary.to_str().unwrap()])
        .arg(capture("rdma_write_bw.pcap"))
        .stderr(std::fs::File::options().write(true).open("/dev/full").unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "exit {:?}", o.status);
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert!(s["roce_packets"].as_u64().unwrap() > 0);
    let flows = std::fs::read_to_string(csv.join("flows.csv")).unwrap();
    assert!(flows.lines().count() > 1, "flows.csv has no rows");
}

#[test]
fn an_option_without_the_one_it_refines_is_refused() {
    let c = capture("rdma_cm.pcap");
    let c = c.to_str().unwrap();
    assert_one_line_error(&["replay", "--evidence-before", "4", c], "--evidence-before needs --evidence-dir");
    assert_one_line_error(
        &["replay", "--evidence-max-bytes=1M", c],
        "--evidence-max-bytes needs --evidence-dir",
    );
    assert_one_line_error(&["replay", "--probe-id", "a", c], "--probe-id needs --prometheus");
    assert_one_line_error(
        &["replay", "--prometheus-max-flows", "5", c],
        "--prometheus-max-flows needs --prometheus",
    );
    for (opt, value) in [
        ("--csv-compress", "gzip"),
        ("--csv-rotate-size", "1M"),
        ("--csv-rotate-age", "1m"),
        ("--csv-retain", "2G"),
    ] {
        assert_one_line_error(&["replay", opt, value, c], &format!("{opt} needs --csv-dir"));
    }
}

#[test]
fn no_subcommand_says_one_is_needed() {
    assert_one_line_error(&[], "a subcommand is needed: replay, live, plot or evidence");
}

#[test]
fn a_flow_idle_as_long_as_the_step_gap_is_warned_of() {
    // Transmissions then span the pauses between steps: a review's run with --flow-idle
    // 10ms made each job one step, without a word.
    let c = capture("rdma_write_bw.pcap");
    let o = run(&["replay", "-q", "--flow-idle", "2ms", c.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        err.trim_end(),
        "roceprobe: warning: --flow-idle 2ms is not shorter than --step-gap 2ms: a transmission spans the pauses between a job's steps, which run together"
    );
    let o = run(&["replay", "-q", "--flow-idle", "2ms", "--step-gap", "3ms", c.to_str().unwrap()]);
    assert_eq!(String::from_utf8_lossy(&o.stderr), "");
}

#[test]
fn a_file_damaged_partway_still_reports_what_came_before() {
    // The real capture's first 40 records, then a record header claiming 512 MiB: the
    // file is read up to the damage, which is told, and the run says it was cut short;
    // a second file, another vantage's, is read to its end all the same. (Records counted
    // by hand from the files' record headers, not by roceprobe.)
    let d = tempfile::tempdir().unwrap();
    let b = std::fs::read(capture("rdma_write_bw.pcap")).unwrap();
    let mut off = 24;
    for _ in 0..40 {
        let caplen = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
        off += 16 + caplen;
    }
    let mut damaged = b[..off].to_vec();
    damaged.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0]);
    damaged.extend_from_slice(&(512u32 << 20).to_le_bytes());
    damaged.extend_from_slice(&(512u32 << 20).to_le_bytes());
    let input = d.path().join("damaged.pcap");
    std::fs::write(&input, &damaged).unwrap();
    let summary = d.path().join("s.json");
    let o = run(&["replay", "-q", "--summary", summary.to_str().unwrap(), input.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "a record larger than 256 KiB (no frame is), after 40 packets; stopping this file there"
        ),
        "{err}"
    );
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert_eq!(s["packets"], 40);
    assert_eq!(s["ended"], "cut_short");
    // With a whole file as the other vantage: that file is read to its end.
    let other = std::fs::read(capture("rdma_read_bw.pcap")).unwrap();
    let (mut records, mut at) = (0u64, 24);
    while at + 16 <= other.len() {
        at += 16 + u32::from_le_bytes(other[at + 8..at + 12].try_into().unwrap()) as usize;
        records += 1;
    }
    let o = run(&[
        "replay",
        "-q",
        "--vantage",
        "storage=file:1",
        "--summary",
        summary.to_str().unwrap(),
        input.to_str().unwrap(),
        capture("rdma_read_bw.pcap").to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert_eq!(s["ports"]["1"]["ipackets"], records, "{}", s["ports"]);
    assert_eq!(s["packets"], 40 + records);
    assert_eq!(s["ended"], "cut_short");
}

#[test]
fn a_classic_pcap_cut_short_is_told() {
    // The first 5,000 bytes of the real capture: 23 whole records (by its record headers,
    // counted here), then part of the 24th.
    let d = tempfile::tempdir().unwrap();
    let b = std::fs::read(capture("rdma_write_bw.pcap")).unwrap();
    let (mut off, mut whole) = (24, 0);
    while off + 16 <= 5000 {
        let caplen = u32::from_le_bytes(b[off + 8..off + 12].try_into().unwrap()) as usize;
        if off + 16 + caplen > 5000 {
            break;
        }
        off += 16 + caplen;
        whole += 1;
    }
    assert_eq!(whole, 23);
    let input = d.path().join("cut.pcap");
    std::fs::write(&input, &b[..5000]).unwrap();
    let summary = d.path().join("s.json");
    let o = run(&["replay", "-q", "--summary", summary.to_str().unwrap(), input.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("the last record is cut short after 23 packets"), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert_eq!(s["packets"], 23);
    assert_eq!(s["ended"], "cut_short");
    // The same bytes through a pipe (standard input, read as a stream, not mapped): told
    // the same (before, as a damaged record).
    let mut child = std::process::Command::new(bin())
        .args(["replay", "-q", "--summary", summary.to_str().unwrap(), "/dev/stdin"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut child.stdin.take().unwrap(), &b[..5000]).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("/dev/stdin: the last record is cut short after 23 packets"), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert_eq!((s["packets"].as_u64(), s["ended"].as_str()), (Some(23), Some("cut_short")));
    // Cut inside its second or third record (among those read ahead when the file is
    // opened): the same, said once.
    for whole in [1, 2] {
        let mut end = 24;
        for _ in 0..whole {
            end += 16 + u32::from_le_bytes(b[end + 8..end + 12].try_into().unwrap()) as usize;
        }
        std::fs::write(&input, &b[..end + 20]).unwrap();
        let o = run(&["replay", "-q", "--summary", summary.to_str().unwrap(), input.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        let said = format!("the last record is cut short after {whole} packets");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&said), "{err}");
        let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        assert_eq!(s["packets"], whole);
    }
}

#[test]
fn negative_values_name_their_option() {
    // A value that starts with '-' is the option's value, refused by the option's own
    // check, not taken for an unknown option.
    let c = capture("rdma_write_bw.pcap");
    let c = c.to_str().unwrap();
    // Past the longest duration: the option's own bound named, not the duration's.
    assert_one_line_error(
        &["replay", "--step-gap", "99999999999s", c],
        "'99999999999s' is too long (at most 10s: a step is written once its job has paused that long)",
    );
    assert_one_line_error(
        &["evidence", "/nonexistent/evidence"],
        "evidence: /nonexistent/evidence does not exist",
    );
    for (opt, value) in
        [("--interval", "-1s"), ("--max-flows", "-5"), ("--csv-retain", "-1G"), ("--top", "-3")]
    {
        assert_one_line_error(&["replay", opt, value, c], &format!("invalid value '{value}' for '{opt} "));
    }
}

#[test]
fn the_same_input_twice_is_refused() {
    // Its packets would be counted twice: every flow doubled, every request a
    // retransmission of itself.
    let f = capture("rdma_write_bw.pcap");
    let p = f.to_str().unwrap();
    assert_one_line_error(&["replay", "-q", p, p], "is given twice");
    let dir = tempfile::tempdir().unwrap();
    let link = dir.path().join("again.pcap");
    std::os::unix::fs::symlink(&f, &link).unwrap();
    assert_one_line_error(&["replay", "-q", p, link.to_str().unwrap()], "are the same file");
}

#[test]
fn bounds_beyond_the_machine_s_memory_are_refused_before_the_outputs_are_touched() {
    // 2^26 (the bound each option takes) on 64 workers: terabytes of tables. `--max-ios`
    // was not checked: the run aborted on the allocation after the earlier run's CSV files
    // had been emptied, or took a machine's memory with more workers.
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("csv");
    let f = capture("rdma_write_bw.pcap");
    let (c, p) = (csv.to_str().unwrap(), f.to_str().unwrap());
    assert!(run(&["replay", "-q", "--csv-dir", c, p]).status.success());
    let before = std::fs::read(csv.join("flows.csv")).unwrap();
    assert!(before.len() > 100);
    for option in ["--max-flows", "--max-ios", "--max-cm-requests"] {
        assert_one_line_error(
            &["replay", "-q", "--csv-dir", c, option, "67108864", "--workers", "64", p],
            &format!("{option} 67108864 takes"),
        );
        assert_eq!(
            std::fs::read(csv.join("flows.csv")).unwrap(),
            before,
            "{option}: the earlier run's report was touched"
        );
    }
}

/// A pcapng file (editcap's: its section header carries options, 100 bytes or more) sent
/// through a FIFO in pieces shorter than that header: read as the file is.
#[test]
fn a_pcapng_header_sent_in_pieces_through_a_fifo_is_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let ng = dir.path().join("opts.pcapng");
    let f = capture("rdma_write_bw.pcap");
    let ok = std::process::Command::new("editcap").args(["-F", "pcapng"]).arg(&f).arg(&ng).status().unwrap();
    assert!(ok.success());
    let bytes = std::fs::read(&ng).unwrap();
    assert!(u32::from_le_bytes(bytes[4..8].try_into().unwrap()) > 40, "a section header with options");
    let fifo = dir.path().join("ng.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
            for (a, b) in [(0, 10), (10, 40)] {
                w.write_all(&bytes[a..b]).unwrap();
                w.flush().unwrap();
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            w.write_all(&bytes[40..]).unwrap();
        })
    };
    let o = run(&["replay", "-q", "--summary", "-", fifo.to_str().unwrap()]);
    writer.join().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let from_fifo: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let from_file = replay_summary(&[&f], &[]);
    assert_eq!(from_fifo["packets"], from_file["packets"]);
    assert_eq!(from_fifo["flows"], from_file["flows"]);
}

#[test]
fn a_capture_read_from_a_fifo_is_analysed_as_the_file_is() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("capture.fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let f = capture("rdma_write_bw.pcap");
    // Its first write shorter than the file header (a writer that sends it in pieces):
    // the format is told once the header is in.
    let writer = {
        let (f, fifo) = (f.clone(), fifo.clone());
        std::thread::spawn(move || {
            use std::io::Write;
            let bytes = std::fs::read(&f).unwrap();
            let mut w = std::fs::OpenOptions::new().write(true).open(&fifo).unwrap();
            w.write_all(&bytes[..2]).unwrap();
            w.flush().unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
            w.write_all(&bytes[2..]).unwrap();
        })
    };
    let summary = dir.path().join("s.json");
    let mut child = std::process::Command::new(bin())
        .args(["replay", "-q", "--summary", summary.to_str().unwrap(), fifo.to_str().unwrap()])
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > std::time::Duration::from_secs(60) {
            child.kill().unwrap();
            panic!("replay of a FIFO did not end");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    writer.join().unwrap();
    assert!(status.success());
    let from_fifo: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let from_file = replay_summary(&[&f], &[]);
    assert_eq!(from_fifo["packets"], from_file["packets"]);
    assert_eq!(from_fifo["flows"], from_file["flows"]);
}

#[test]
fn a_closed_or_full_standard_output_loses_nothing_measured() {
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let f = capture("rdma_write_bw.pcap");
    // A reader that went away (`| head -1`): the table stops quietly, the summary is written.
    let summary = dir.path().join("closed.json");
    let mut child = Command::new(bin())
        .args(["replay", "--summary", summary.to_str().unwrap(), f.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(std::fs::read_to_string(&summary).unwrap().contains("\"packets\""));
    // A full disk under stdout: one line that says so, and the summary written all the same.
    let summary = dir.path().join("full.json");
    let o = Command::new(bin())
        .args(["replay", "--summary", summary.to_str().unwrap(), f.to_str().unwrap()])
        .stdout(std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("writing to standard output"), "{err}");
    assert!(std::fs::read_to_string(&summary).unwrap().contains("\"packets\""));
}

/// A summary file that cannot take the summary (a full disk: /dev/full) does not lose it:
/// the whole summary goes to standard error, after a line that says why, and the run ends
/// with an error that says where it went. The summary's counts are the capture's (tshark's,
/// pinned).
#[test]
fn a_summary_the_disk_cannot_take_goes_to_standard_error() {
    let f = capture("rdma_cm.pcap");
    let o = run(&["replay", "-q", "--summary", "/dev/full", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    let mut lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.remove(0), "roceprobe: the summary, which /dev/full could not take:", "{err}");
    let last = lines.pop().unwrap();
    assert!(
        last.contains("the summary went to standard error instead") && last.contains("/dev/full"),
        "{last}"
    );
    let s: serde_json::Value = serde_json::from_str(&lines.join("\n")).unwrap();
    let t = &pinned_truth()["captures"]["rdma_cm.pcap"];
    assert_eq!((&s["packets"], &s["roce_packets"]), (&t["packets"], &t["roce_packets"]), "{s}");
}

#[test]
fn a_record_s_original_length_is_taken_only_where_a_frame_could_have_had_it() {
    // Three records of one RDMA WRITE flow: one claiming 4 GiB on the wire, one claiming
    // fewer bytes than it holds, one truncated by a snap length (original 1,086 of which
    // 100 captured, which a frame can be). The flow counts the frames' own lengths for the
    // first two and the original length for the third.
    use roceprobe::wire::bth;
    use roceprobe::wire::build::RoceFrame;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lengths.pcap");
    let frame = |psn: u32| {
        RoceFrame::new(
            "10.9.0.1".parse().unwrap(),
            "10.9.0.2".parse().unwrap(),
            bth::Repr { opcode: 0x0a, dest_qp: 5, psn, ..Default::default() },
        )
        .emit()
    };
    let (a, b, c) = (frame(0), frame(1), frame(2));
    let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
    w.write(1_000, &a, u32::MAX).unwrap();
    w.write(2_000, &b, 10).unwrap();
    w.write(3_000, &c[..c.len().min(100)], 1_086).unwrap();
    drop(w);
    let s = replay_summary(&[&path], &[]);
    let flows = s["flows"].as_array().unwrap();
    assert_eq!(flows.len(), 1, "{flows:?}");
    assert_eq!(flows[0]["bytes"].as_u64().unwrap(), (a.len() + b.len()) as u64 + 1_086);
}

/// Frames around the IP layer's edges, each between two intact ones, read as tshark reads
/// them: an IPv6 header whose version field says 4 (tshark: "Bogus IPv6 version", no
/// RoCE), an IPv6 RoCE packet behind 16 Destination Options headers (RoCE to QP 0x30), and
/// an ERSPAN II mirror whose outer IPv4 datagram (total length 40) ends inside the ERSPAN
/// header, its mirrored RoCE packet in the frame's trailer (no RoCE). The RoCE packets the
/// probe counts are tshark's, QP by QP.
#[test]
fn frames_at_the_ip_layers_edges_are_read_as_tshark_reads_them() {
    use roceprobe::wire::bth;
    use std::net::IpAddr;
    let frame = |src: &str, dst: &str, qp: u32| {
        let (s, d): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
        let r = bth::Repr { opcode: bth::opcode::SEND_ONLY, dest_qp: qp, psn: 1, ..Default::default() };
        let mut f = roceprobe::wire::build::RoceFrame::new(s, d, r);
        f.payload = &[0u8; 16];
        f.emit()
    };
    let intact = frame("fd00::1", "fd00::2", 0x10);
    let mut bogus = frame("fd00::1", "fd00::2", 0x20);
    bogus[14] = (bogus[14] & 0x0F) | 0x40;
    // 16 Destination Options headers of 8 bytes (next header, length 0, a PadN of 4) between
    // the IPv6 header and UDP.
    let plain = frame("fd00::1", "fd00::2", 0x30);
    let mut deep = plain[..54].to_vec();
    deep[20] = 60;
    for k in 0..16 {
        deep.extend([if k == 15 { 17 } else { 60 }, 0, 1, 4, 0, 0, 0, 0]);
    }
    deep.extend(&plain[54..]);
    let len = u16::from_be_bytes([deep[18], deep[19]]) + 128;
    deep[18..20].copy_from_slice(&len.to_be_bytes());
    // ERSPAN II: IPv4 (protocol 47), GRE with a sequence number (protocol 0x88BE), the
    // 8-byte ERSPAN header (version 1, session 5), then the mirrored frame, all in the
    // frame, but the outer total length 40: 20 of IP, 8 of GRE, 8 of ERSPAN and 4 more.
    let inner = frame("10.20.0.1", "10.20.0.2", 0x40);
    let mut mirror = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    mirror.extend([0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 47, 0, 0, 10, 30, 0, 1, 10, 30, 0, 2]);
    mirror.extend([0x10, 0, 0x88, 0xBE, 0, 0, 0, 7]);
    mirror.extend([0x10, 0, 0, 5, 0, 0, 0, 0]);
    mirror.extend(&inner);
    let dir = tempfile::tempdir().unwrap();
    for (name, odd) in [("bogus_v6", bogus), ("deep_v6", deep), ("short_erspan", mirror)] {
        let path = dir.path().join(format!("{name}.pcap"));
        let mut w = Writer::new(std::fs::File::create(&path).unwrap()).unwrap();
        for (i, f) in [&intact, &odd, &intact].into_iter().enumerate() {
            w.write(1_000 * (i as u64 + 1), f, f.len() as u32).unwrap();
        }
        drop(w);
        let o = std::process::Command::new("tshark")
            .args([
                "-r",
                path.to_str().unwrap(),
                "-Y",
                "infiniband.bth",
                "-T",
                "fields",
                "-e",
                "infiniband.bth.destqp",
            ])
            .output()
            .expect("tshark (scripts/setup installs it)");
        let mut want: Vec<u64> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .map(|q| u64::from_str_radix(q.trim_start_matches("0x"), 16).unwrap())
            .collect();
        want.sort();
        let s = replay_summary(&[&path], &[]);
        let mut got: Vec<u64> = s["flows"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|f| {
                std::iter::repeat_n(f["dst_qpn"].as_u64().unwrap(), f["packets"].as_u64().unwrap() as usize)
            })
            .collect();
        got.sort();
        assert_eq!(got, want, "{name}: RoCE packets by QP, tshark's");
        assert_eq!(s["packets"], 3, "{name}");
    }
}

/// EAL's informational lines (its multi-process socket's path, printed when EAL keeps
/// shared config, that is without `--no-shconf`) are left out unless the operator gives a
/// `--log-level`: with `--log-level=lib.eal:info` the line is there, as DPDK prints it.
#[test]
fn eal_informational_lines_only_when_asked_for() {
    let c = capture("rdma_cm.pcap");
    for (prefix, extra, shown) in
        [("rp_quiet", None, false), ("rp_info", Some("--log-level=lib.eal:info"), true)]
    {
        let mut a: Vec<String> =
            ["live", "-q", "--idle-exit", "300ms", "--"].iter().map(|s| s.to_string()).collect();
        a.extend(["-l", "0", "--no-huge", "-m", "128", "--no-pci", "--no-telemetry"].map(String::from));
        // A run-time directory of its own (EAL keeps its socket there without --no-shconf),
        // removed afterwards (root's, or the user's).
        let prefix = format!("{prefix}_{}", std::process::id());
        a.extend(["--file-prefix".into(), prefix.clone()]);
        a.extend(extra.map(String::from));
        a.extend(["--vdev".into(), format!("net_pcap0,rx_pcap={}", c.display())]);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        let o = run(&refs);
        let runtime = std::env::var("XDG_RUNTIME_DIR").unwrap_or_default();
        for d in [format!("/var/run/dpdk/{prefix}"), format!("{runtime}/dpdk/{prefix}")] {
            let _ = std::fs::remove_dir_all(d);
        }
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        assert_eq!(out.contains("EAL: Multi-process socket"), shown, "{extra:?}: {out}");
    }
}
