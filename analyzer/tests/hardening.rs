//! Shutdown mid-run loses nothing; `unsafe` stays in the DPDK capture module.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Every row of a CSV file has the header's fields; returns the rows.
fn whole_rows(path: &Path) -> Vec<csv::StringRecord> {
    let text = std::fs::read_to_string(path).unwrap();
    assert!(text.ends_with("\r\n"), "{} ends mid-row", path.display());
    let mut r = csv::Reader::from_reader(text.as_bytes());
    let width = r.headers().unwrap().len();
    let rows: Vec<_> = r.records().map(|rec| rec.unwrap()).collect();
    assert!(rows.iter().all(|rec| rec.len() == width), "{}", path.display());
    rows
}

/// `roceprobe live` replaying a real capture endlessly through net_pcap, with the CSV reports
/// in `csv` and the summary in `summary`.
fn live_args(csv: &Path, summary: &Path, extra: &[&str]) -> Vec<String> {
    let pcap = capture("rdma_cm.pcap");
    let mut args: Vec<String> = ["live", "-q", "--interval", "10ms"].iter().map(|s| s.to_string()).collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    let outputs =
        ["--csv-dir".into(), csv.display().to_string(), "--summary".into(), summary.display().to_string()];
    args.extend(outputs);
    args.push("--".into());
    args.extend(eal_args(&[]));
    args.extend(["--vdev".into(), format!("net_pcap0,rx_pcap={},infinite_rx=1", pcap.display())]);
    args
}

/// Starts such a capture (extra options `extra`) and waits until its reports exist;
/// returns it with its CSV folder and summary path.
fn start_live(dir: &Path, extra: &[&str]) -> (Child, PathBuf, PathBuf) {
    start_live_at(&dir.join("csv"), &dir.join("summary.json"), extra)
}

fn start_live_at(csv: &Path, summary: &Path, extra: &[&str]) -> (Child, PathBuf, PathBuf) {
    let args = live_args(csv, summary, extra);
    let child = Command::new(bin()).args(&args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    wait_for(&csv.join("flows.csv"), "the probe did not start");
    (child, csv.to_owned(), summary.to_owned())
}

/// Waits (a minute at most) until `path` exists.
fn wait_for(path: &Path, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !path.exists() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_or_sigint_mid_capture_writes_every_report_whole() {
    for signal in [libc::SIGTERM, libc::SIGINT] {
        let dir = tempfile::tempdir().unwrap();
        let (mut child, csv, summary) = start_live(dir.path(), &[]);
        std::thread::sleep(Duration::from_millis(1500));
        // SAFETY: signalling our own child.
        assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
        let status = child.wait().unwrap();
        assert!(status.success(), "signal {signal}: {status:?}");
        reports_are_whole(&csv, &summary);
        let s: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        assert_eq!(s["ended"], "stopped", "signal {signal}");
    }
}

#[test]
fn sigterm_while_the_ports_start_ends_the_run_as_one_mid_capture_does() {
    // The first note (the looped file's mbufs) comes once the signals are caught, before EAL
    // and the port start: a SIGTERM then used to kill the process (exit 143, no summary).
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let (csv, summary) = (dir.path().join("csv"), dir.path().join("summary.json"));
    // Frames of 4 KiB, looped: the note says which mbufs they need.
    let mut args = live_args(&csv, &summary, &[]);
    let looped = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    *args.last_mut().unwrap() = format!("net_pcap0,rx_pcap={},infinite_rx=1", looped.display());
    let mut child =
        Command::new(bin()).args(&args).stderr(Stdio::piped()).stdout(Stdio::null()).spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    assert!(first.starts_with("roceprobe: mbufs of"), "{first}");
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["packets"], s["ports"]["0"]["ipackets"], "every received frame analysed");
}

/// After a live capture of a second or more was stopped: the summary and every CSV report
/// are whole and agree (every received frame analysed, the flows' rows add up to every
/// tracked packet, the ports' rows to every frame received).
fn reports_are_whole(csv: &Path, summary: &Path) {
    let s: Value = serde_json::from_str(&std::fs::read_to_string(summary).unwrap()).unwrap();
    let roce = s["roce_packets"].as_u64().unwrap();
    assert!(roce > 10_000, "only {roce} RoCE packets");
    assert_eq!(s["packets"], s["ports"]["0"]["ipackets"], "every received frame analysed");
    let flows = whole_rows(&csv.join("flows.csv"));
    let packets: u64 = flows.iter().map(|r| r[7].parse::<u64>().unwrap()).sum();
    assert_eq!(packets + s["untracked_packets"].as_u64().unwrap(), roce);
    let ports = whole_rows(&csv.join("ports.csv"));
    let received: u64 = ports.iter().map(|r| r[3].parse::<u64>().unwrap()).sum();
    assert_eq!(received, s["packets"].as_u64().unwrap());
    whole_rows(&csv.join("transmissions.csv"));
    whole_rows(&csv.join("latency.csv"));
}

/// The dashboard's `q` stops a live capture as SIGTERM does: in a real terminal (tmux).
#[test]
fn the_dashboards_q_mid_capture_writes_every_report_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, summary) = (dir.path().join("csv"), dir.path().join("summary.json"));
    let args = live_args(&csv, &summary, &["--dashboard"]);
    let command = format!("{} {}; echo EXIT=$?; sleep 60", bin(), args.join(" "));
    let term = Tmux::start(dir.path(), &command);
    wait_for(&csv.join("flows.csv"), "the probe did not start");
    term.wait_for("RoCEv2", "the dashboard did not show");
    // Quit once the dashboard has counted a good many packets (on a loaded machine that
    // takes longer than the usual second or two).
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let screen = term.screen();
        let counted = screen
            .split_whitespace()
            .skip_while(|w| *w != "RoCEv2")
            .nth(1)
            .and_then(|n| n.replace(',', "").parse::<u64>().ok())
            .unwrap_or(0);
        if counted > 20_000 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dashboard counted {counted} RoCEv2 packets in a minute:\n{screen}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    term.keys("q");
    term.wait_for("EXIT=0", "q did not end the capture");
    reports_are_whole(&csv, &summary);
}

/// A terminal that goes away under the dashboard (an SSH connection that dropped; here
/// its tmux server killed, which hangs up the terminal: SIGHUP) ends the capture as SIGTERM
/// does: every report written whole, nothing lost.
#[test]
fn a_terminal_that_goes_away_under_the_dashboard_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, summary) = (dir.path().join("csv"), dir.path().join("summary.json"));
    let args = live_args(&csv, &summary, &["--dashboard"]);
    let term = Tmux::start(dir.path(), &format!("{} {}", bin(), args.join(" ")));
    wait_for(&csv.join("flows.csv"), "the probe did not start");
    term.wait_for("RoCEv2", "the dashboard did not show");
    std::thread::sleep(Duration::from_millis(500));
    drop(term);
    // The summary is renamed into place last, once the CSV reports are written.
    wait_for(&summary, "no summary after the terminal went away");
    reports_are_whole(&csv, &summary);
    let s: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    assert_eq!(s["ended"], "stopped");
    // And the process is gone (its screen's thread, polling a terminal that went away,
    // is not waited for): found by its CSV folder, a path of this test's own.
    let running = || {
        let mine = csv.to_str().unwrap().as_bytes();
        std::fs::read_dir("/proc").unwrap().flatten().any(|p| {
            std::fs::read(p.path().join("cmdline")).is_ok_and(|c| c.windows(mine.len()).any(|w| w == mine))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while running() {
        assert!(Instant::now() < deadline, "the probe still runs after its terminal went away");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Every line of code (comments cut off) of the library's sources: (path under src/, line
/// number, code).
fn source_lines() -> Vec<(String, usize, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut stack = vec![src.clone()];
    let mut lines = Vec::new();
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                let name = p.strip_prefix(&src).unwrap().display().to_string();
                for (i, line) in std::fs::read_to_string(&p).unwrap().lines().enumerate() {
                    lines.push((name.clone(), i + 1, line.split("//").next().unwrap().to_owned()));
                }
            }
        }
    }
    lines
}

#[test]
fn unsafe_code_lives_only_in_the_dpdk_capture_module() {
    let found: Vec<String> = source_lines()
        .into_iter()
        .filter(|(_, _, code)| code.split(|c: char| !c.is_alphanumeric() && c != '_').any(|w| w == "unsafe"))
        .map(|(f, n, _)| format!("{f}:{n}"))
        .collect();
    assert!(!found.is_empty(), "the scan finds the capture module's unsafe blocks");
    let elsewhere: Vec<_> = found.iter().filter(|f| !f.starts_with("capture/dpdk.rs:")).collect();
    assert!(elsewhere.is_empty(), "unsafe outside capture/dpdk.rs: {elsewhere:?}");
}

#[test]
fn layers_depend_only_on_the_layers_before_them() {
    // capture → wire → track → metrics → report, with runtime and cli above: the lower
    // layers name nothing above them, and the reports do not reach into the runtime. The
    // runtime knows no particular output: the live ones subscribe (report::Subscriber).
    let rules: [(&str, &[&str]); 5] = [
        ("wire/", &["crate::track", "crate::metrics", "crate::report", "crate::runtime", "crate::cli"]),
        ("track/", &["crate::report", "crate::runtime", "crate::cli"]),
        ("metrics/", &["crate::report", "crate::runtime", "crate::cli"]),
        ("report/", &["crate::runtime", "crate::cli"]),
        ("runtime/", &["crate::cli", "report::dashboard", "report::prometheus", "report::table"]),
    ];
    let lines = source_lines();
    assert!(lines.iter().any(|(f, _, c)| f.starts_with("report/") && c.contains("crate::metrics")));
    let mut upward = Vec::new();
    for (file, n, code) in &lines {
        for (layer, above) in &rules {
            if file.starts_with(layer) && above.iter().any(|a| code.contains(a)) {
                upward.push(format!("{file}:{n}: {}", code.trim()));
            }
        }
    }
    assert!(upward.is_empty(), "imports from a layer above: {upward:#?}");
}

#[test]
fn latency_samples_beyond_the_series_bound_are_counted() {
    use roceprobe::capture::pcap::Replay;
    use roceprobe::report::Summary;
    use roceprobe::runtime::{self, PipelineConfig};
    use roceprobe::track::vantage::{Rule, SourceKind};
    use roceprobe::track::VantageMap;
    let summary = |max_series: usize| {
        let mut replay = Replay::open(&[fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap")]).unwrap();
        let rules: Vec<Rule> =
            ["compute=vlan:10", "storage=vlan:20"].iter().map(|r| r.parse().unwrap()).collect();
        let cfg = PipelineConfig {
            max_latency_series: max_series,
            ..PipelineConfig::new(VantageMap::new(&rules, SourceKind::File, &[0]).unwrap())
        };
        let r =
            runtime::run(&mut replay, &cfg, &std::sync::atomic::AtomicBool::new(false), Default::default())
                .unwrap();
        Summary::build(&r.totals, &r.sources, &r.ios)
    };
    let samples = |s: &Summary| s.latency.iter().map(|l| l.count).sum::<u64>();
    let all = summary(1024);
    // The option reaches the workers: the binary, bounded the same way, drops as many.
    let pcap = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let vantages = ["--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"];
    let cli = replay_summary(&[&pcap], &[&vantages[..], &["--max-latency-series", "2"]].concat());
    assert_eq!(cli["latency_samples_dropped"], summary(2).latency_samples_dropped);
    assert_eq!(all.latency_samples_dropped, 0);
    let bounded = summary(2);
    assert!(bounded.latency_samples_dropped > 0);
    assert_eq!(samples(&bounded) + bounded.latency_samples_dropped, samples(&all));
}

#[test]
fn a_csv_folder_removed_mid_run_is_written_again() {
    // The summary goes into the CSV folder too, and goes with it.
    let dir = tempfile::tempdir().unwrap();
    let (mut child, csv, summary) =
        start_live_at(&dir.path().join("csv"), &dir.path().join("csv/summary.json"), &[]);
    // The eight reports without --evidence-dir (docs/CSV.md).
    let reports = ["flows", "transmissions", "latency", "io", "slow_ios", "steps", "stragglers", "ports"]
        .map(|r| format!("{r}.csv"));
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_dir_all(&csv).unwrap();
    // Back within a few intervals.
    wait_for(&csv.join("flows.csv"), "the reports were not started again");
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    assert!(child.wait().unwrap().success());
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let c = &s["csv_output"];
    assert!(c["files_recreated"].as_u64().unwrap() >= 2, "{c}");
    assert_eq!((c["failed_writes"].as_u64(), c["rows_lost"].as_u64()), (Some(0), Some(0)), "{c}");
    // The new files are whole reports from their header on, every one of them (io.csv
    // too, which this capture without NVMe never writes a row to).
    assert!(!whole_rows(&csv.join("flows.csv")).is_empty());
    for r in &reports {
        whole_rows(&csv.join(r));
    }
}

/// A tmpfs of `size`, unmounted when dropped. Mounting needs root, as CI runs: as another
/// user the test says it is skipped and passes (`None`).
struct Tmpfs(std::path::PathBuf);
impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Self> {
        // /proc/self belongs to the process's effective user.
        let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self").unwrap()) == 0;
        if !root {
            eprintln!("skipped: mounting a tmpfs needs root (CI runs as root)");
            return None;
        }
        std::fs::create_dir_all(at).unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .status();
        assert!(ok.is_ok_and(|s| s.success()), "mounting a tmpfs failed");
        Some(Self(at.to_owned()))
    }
}
impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[test]
fn a_full_disk_is_told_once_counted_and_leaves_whole_rows() {
    let dir = tempfile::tempdir().unwrap();
    let Some(small) = Tmpfs::mount(&dir.path().join("small"), "64k") else { return };
    let (csv, summary) = (small.0.join("csv"), dir.path().join("summary.json"));
    let args = live_args(&csv, &summary, &["--duration", "1500ms"]);
    let o = Command::new(bin()).args(&args).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(err.matches("writing CSV reports").count(), 1, "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let c = &s["csv_output"];
    assert!(c["failed_writes"].as_u64().unwrap() > 0 && c["rows_lost"].as_u64().unwrap() > 0, "{c}");
    assert!(s["roce_packets"].as_u64().unwrap() > 10_000, "capture went on");
    for report in ["flows", "latency", "ports", "transmissions"] {
        whole_rows(&csv.join(format!("{report}.csv")));
    }
}

/// The disk fills up under a running capture, then frees up: writing resumes, and the rows
/// written after are whole.
#[test]
fn a_full_disk_that_frees_up_is_written_again() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let Some(disk) = Tmpfs::mount(&dir.path().join("disk"), "4m") else { return };
    let (child, csv, summary) = start_live_at(&disk.0.join("csv"), &dir.path().join("summary.json"), &[]);
    let ports = csv.join("ports.csv");
    // Fill the disk.
    let ballast = disk.0.join("ballast");
    let mut f = std::fs::File::create(&ballast).unwrap();
    while f.write_all(&[0u8; 4096]).is_ok() {}
    drop(f);
    // Rows still fit in the slack of each file's last page for a while.
    std::thread::sleep(Duration::from_millis(1500));
    // Rows so far (read while the probe runs: only whole lines count).
    let rows = || std::fs::read_to_string(&ports).unwrap().matches("\r\n").count();
    let rows_while_full = rows();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(rows(), rows_while_full, "nothing written on a full disk");
    // Free it: the next intervals are written.
    std::fs::remove_file(&ballast).unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while rows() <= rows_while_full {
        assert!(Instant::now() < deadline, "writing did not resume");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("writing CSV reports").count(), 1, "told once: {err}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert!(s["csv_output"]["failed_writes"].as_u64().unwrap() > 0, "{}", s["csv_output"]);
    for report in ["flows", "latency", "ports", "transmissions"] {
        whole_rows(&csv.join(format!("{report}.csv")));
    }
}

/// A Prometheus client that connects and hangs under a live capture: the next scrape is
/// served, the failure is told once with its cause, and counted in the summary and on the
/// page.
#[test]
fn a_hanging_prometheus_client_is_told_once_and_counted() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().unwrap();
    let addr = format!("127.0.0.1:{}", free_port());
    let (child, _, summary) = start_live(dir.path(), &["--prometheus", &addr]);
    let scrape = || {
        let mut c = std::net::TcpStream::connect(&addr).unwrap();
        write!(c, "GET /metrics HTTP/1.0\r\n\r\n").unwrap();
        let mut r = String::new();
        c.read_to_string(&mut r).unwrap();
        r
    };
    let hanging = std::net::TcpStream::connect(&addr).unwrap();
    // Answered in the client's HTTP version.
    assert!(scrape().starts_with("HTTP/1.0 200 OK"), "served after the hanging client");
    // The page is rendered every interval: the count shows from the next one on.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = scrape();
        if page.contains("outcome=\"failed\"} 1\n") {
            break;
        }
        assert!(Instant::now() < deadline, "not counted on the page:\n{page}");
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(hanging);
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGTERM) }, 0);
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("a Prometheus scrape from").count(), 1, "told once: {err}");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["prometheus"]["failed"], 1);
    assert!(s["prometheus"]["served"].as_u64().unwrap() >= 2, "{}", s["prometheus"]);
}

/// A live link that goes silent: with frames timed by the probe's clock, intervals still
/// close (ports.csv has a row for every interval of the silence, with nothing received) and
/// everything received is in the reports, with one worker, with software dispatch and with a
/// worker per RX queue; with the file's own times, nothing moves time on.
#[test]
fn a_silent_link_still_closes_intervals() {
    // (workers, frames timed by the probe's clock, RSS: a queue per worker, the file on each)
    for (workers, probe_clock, rss) in
        [("1", true, false), ("2", true, false), ("2", true, true), ("1", false, false)]
    {
        let dir = tempfile::tempdir().unwrap();
        let (csv, summary) = (dir.path().join("csv"), dir.path().join("summary.json"));
        let pcap = capture("rdma_write_bw.pcap");
        let mut args: Vec<String> = ["live", "-q", "--interval", "100ms", "--idle-exit", "2s"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        if probe_clock {
            args.push("--probe-clock".into());
        }
        if rss {
            args.push("--rss".into());
        }
        args.extend(["--workers".into(), workers.into(), "--csv-dir".into(), csv.display().to_string()]);
        args.extend(["--summary".into(), summary.display().to_string(), "--".into()]);
        let lcores = 1 + if workers == "1" { 0 } else { workers.parse::<usize>().unwrap() };
        if rss {
            args.extend(with_lcores(eal_args(&[]), lcores));
            args.push("--vdev".into());
            args.push(format!("net_pcap0,rx_pcap={0},rx_pcap={0}", pcap.display()));
        } else {
            args.extend(with_lcores(eal_args(&[&pcap]), lcores));
        }
        let frames = if rss { 120 } else { 60 };
        let o = Command::new(bin()).args(&args).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert_eq!(s["packets"], frames, "the whole file on every queue");
        // net_pcap's stamps are its file's times.
        let time = if probe_clock { "tsc" } else { "pcap" };
        assert_eq!(s["time_sources"]["compute"], serde_json::json!([time]));
        // The file arrives at once; then 2 s of silence, 100 ms intervals.
        let ports = whole_rows(&csv.join("ports.csv"));
        let received: u64 = ports.iter().map(|r| r[3].parse::<u64>().unwrap()).sum();
        assert_eq!(received, frames);
        let silent = ports.iter().filter(|r| &r[3] == "0").count();
        if probe_clock {
            assert!(
                silent >= 15,
                "{workers} workers (RSS {rss}): {silent} silent intervals reported, {} rows",
                ports.len()
            );
        } else {
            // The file's times stop with its last frame: only the probe's clock moves time on.
            assert!(silent <= 1, "file times: {silent} silent intervals reported");
        }
        let flows = whole_rows(&csv.join("flows.csv"));
        let packets: u64 = flows.iter().map(|r| r[7].parse::<u64>().unwrap()).sum();
        assert_eq!(packets, s["roce_packets"].as_u64().unwrap());
    }
}
