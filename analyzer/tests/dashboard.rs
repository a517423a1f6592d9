//! The dashboard shows the numbers of the ground truth: rendered on ratatui's test backend
//! from a replayed fixture, and on a real 80x24 terminal (tmux) from the real binary.

mod common;
use common::*;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use roceprobe::capture::pcap::Replay;
use roceprobe::report::dashboard::{draw, SortBy, UiState, View, ViewBuilder};
use roceprobe::report::Summary;
use roceprobe::runtime::{self, PipelineConfig};
use roceprobe::track::vantage::{Rule, SourceKind};
use roceprobe::track::VantageMap;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

const VLAN_VANTAGES: [&str; 2] = ["compute=vlan:10", "storage=vlan:20"];

fn truth(scenario: &str) -> Value {
    let p = fixtures().join("scenarios").join(scenario).join("truth.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The final view of a replay of a fixture, as the binary builds it.
fn final_view(scenario: &str) -> View {
    let path = fixtures().join("scenarios").join(scenario).join(format!("{scenario}.pcap"));
    let mut replay = Replay::open(&[path]).unwrap();
    let rules: Vec<Rule> = VLAN_VANTAGES.iter().map(|r| r.parse().unwrap()).collect();
    let cfg = PipelineConfig::new(VantageMap::new(&rules, SourceKind::File, &[0]).unwrap());
    let r = runtime::run(&mut replay, &cfg, &AtomicBool::new(false), Default::default()).unwrap();
    let mut s = Summary::build(&r.totals, &r.sources, &r.ios);
    s.set_time_sources(&r.time_use, &r.time_sources);
    ViewBuilder::over_run(r.totals.first_ts_ns).build(s, r.totals.last_ts_ns, true)
}

fn render(view: &View, ui: UiState) -> Vec<String> {
    render_at(view, ui, 80, 24)
}

fn render_at(view: &View, ui: UiState, width: u16, height: u16) -> Vec<String> {
    let mut t = Terminal::new(TestBackend::new(width, height)).unwrap();
    t.draw(|f| draw(f, Some(view), &ui)).unwrap();
    let buf = t.backend().buffer().clone();
    (0..buf.area.height)
        .map(|y| (0..buf.area.width).map(|x| buf[(x, y)].symbol().to_owned()).collect::<String>())
        .collect()
}

/// Nearest-rank percentile (what an HDR histogram reports, to its precision).
fn percentile(sorted: &[u64], q: f64) -> u64 {
    sorted[((q * sorted.len() as f64).ceil() as usize).max(1) - 1]
}

/// The network cell of every NVMe read/write row, p50/p99 in µs, from the truth's I/Os
/// (all under 10 µs in this fixture: two decimals).
fn expected_network_cells(t: &Value) -> BTreeMap<String, String> {
    let mut by: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for io in t["ios"].as_array().unwrap() {
        let op = io["op"].as_str().unwrap();
        if let (Some(ns), "nvme_read" | "nvme_write") = (io["network_ns"].as_u64(), op) {
            let row = format!(
                "{}>{} {:<6}",
                io["initiator_ip"].as_str().unwrap(),
                io["target_ip"].as_str().unwrap(),
                op.trim_start_matches("nvme_")
            );
            by.entry(row).or_default().push(ns);
        }
    }
    by.into_iter()
        .map(|(row, mut v)| {
            v.sort();
            let (p50, p99) = (percentile(&v, 0.5) as f64 / 1e3, percentile(&v, 0.99) as f64 / 1e3);
            assert!(p99 < 9.99);
            (row, format!("{p50:.2}/{p99:.2}"))
        })
        .collect()
}

fn assert_shows_truth(screen: &[String], t: &Value) {
    let all = screen.join("\n");
    let packets = t["packets"].as_u64().unwrap();
    assert!(
        all.contains(&format!("frames {}  RoCEv2 {}  other 0  malformed 0", fmt_n(packets), fmt_n(packets))),
        "{all}"
    );
    assert!(all.contains(&format!("top flows of {}", t["flows"].as_array().unwrap().len())), "{all}");
    assert!(all.contains("time: compute pcap, storage pcap"), "{all}");
    // The I/O table has room for 6 rows at 80x24: those shown carry the truth's values.
    let cells = expected_network_cells(t);
    let mut checked = 0;
    for line in screen {
        let body = line.trim_start_matches('│');
        if let Some((row, cell)) = cells.iter().find(|(row, _)| body.starts_with(row.as_str())) {
            // Columns: pair, op, IO/s, I/O, compute, network (MB/s only on a wider screen).
            let cols: Vec<&str> = body[row.len()..].split_whitespace().collect();
            assert_eq!(cols[3], cell, "network p50/p99 of {row}");
            checked += 1;
        }
    }
    assert!(checked >= 4, "only {checked} I/O rows checked:\n{all}");
}

fn fmt_n(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[test]
fn the_dashboard_shows_the_truth_of_a_fixture() {
    let t = truth("nvme_vlan");
    let screen = render(&final_view("nvme_vlan"), UiState::default());
    assert!(screen[0].starts_with("roceprobe finished"), "{}", screen[0]);
    assert_shows_truth(&screen, &t);
    assert!(screen.iter().any(|l| l.contains("drops: rx missed 0  errors 0  no mbuf 0  reports 0")));
    // The final view's rates are over the run's packets, not an interval: its title says so.
    assert!(screen.iter().any(|l| l.contains("(Gbit/s and counts: run)")), "{screen:#?}");
}

#[test]
fn reached_bounds_show() {
    let mut v = final_view("nvme_vlan");
    let quiet = render(&v, UiState::default());
    assert!(!quiet.iter().any(|l| l.contains("limits")), "nothing reached: nothing shown");
    v.summary.forgotten.nvme_commands = 1_200;
    v.summary.forgotten.idle_flows = 34;
    v.summary.latency_samples_dropped = 7;
    let screen = render(&v, UiState::default());
    assert!(screen.iter().any(|l| l.contains("limits: 1,234 forgotten, 7 samples dropped")), "{screen:#?}");
}

#[test]
fn totals_are_never_cut_at_80_columns() {
    // Counts as a busy live run has them, a bound that lost something, evidence: every
    // item whole, on as many lines as it takes.
    let mut v = final_view("nvme_vlan");
    v.summary.packets = 21_602_144;
    v.summary.roce_packets = 21_602_144;
    v.summary.untracked_packets = 1_234_567;
    v.summary.reorder.late_packets.compute = 12_345;
    v.summary.mirror_duplicates.compute = 370;
    let bound = |option: &str, limit, lost, what: &str, needed| roceprobe::metrics::snapshot::BoundAdvice {
        option: option.into(),
        limit,
        lost,
        what: what.into(),
        needed: Some(needed),
        needed_at_least: false,
    };
    v.summary.bounds = vec![
        bound("--max-ios", 8, 8, "NVMe command sightings not followed (ios.overflowed)", 16),
        // Wider than an 80-column line: it goes on word by word.
        bound("--max-flows", 65_536, 1_234_567, "RoCE packets of flows not tracked", 131_072),
    ];
    for (w, h) in [(80, 24), (100, 30), (200, 50)] {
        let screen = render_at(&v, UiState::default(), w, h);
        let all = screen.join("\n");
        for item in [
            "frames 21,602,144",
            "untracked 1,234,567",
            "late 12,345/0",
            "dup 370/0",
            "drops: rx missed 0  errors 0  no mbuf 0  reports 0",
            "limits: --max-ios 8: 8 NVMe command sightings not followed, raise to 16",
        ] {
            assert!(all.contains(item), "{w}x{h}: {item:?} cut:\n{all}");
        }
        let words: Vec<&str> = all.split(|c: char| c.is_whitespace() || c == '│').collect();
        for number in ["--max-flows", "65536:", "1,234,567", "131072"] {
            assert!(words.contains(&number), "{w}x{h}: {number:?} cut:\n{all}");
        }
        assert!(!all.contains('…'), "{w}x{h}: something cut:\n{all}");
    }
}

#[test]
fn receive_drops_show() {
    let mut view = final_view("nvme_vlan");
    let port = view.summary.ports.get_mut("0").unwrap();
    (port.imissed, port.ierrors, port.rx_nombuf) = (7_654, 2, 1);
    view.summary.report_drops = 3;
    let screen = render(&view, UiState::default());
    assert!(
        screen.iter().any(|l| l.contains("drops: rx missed 7,654  errors 2  no mbuf 1  reports 3")),
        "{}",
        screen.join("\n")
    );
}

#[test]
fn flows_sorted_by_congestion_put_the_most_marked_flow_first() {
    let t = truth("rc_loss_vlan");
    let flows = t["flows"].as_array().unwrap();
    let marks = |f: &Value| f["cnp"].as_u64().unwrap() + f["ecn_ce"].as_u64().unwrap();
    let top = flows.iter().max_by_key(|f| marks(f)).unwrap();
    assert!(marks(top) > 0);
    // Unique, or the order among equals would decide.
    assert_eq!(flows.iter().filter(|f| marks(f) == marks(top)).count(), 1);
    let screen = render(&final_view("rc_loss_vlan"), UiState { sort: SortBy::Congestion, paused: false });
    let header = screen.iter().position(|l| l.contains("flow (vantage src>dst qpn)")).unwrap();
    let first: Vec<&str> = screen[header + 1].trim_matches('│').split_whitespace().collect();
    let v = top["vantage"].as_str().unwrap();
    assert_eq!(
        first[..2],
        [&v[..1], &format!("{}>{}", top["src_ip"].as_str().unwrap(), top["dst_ip"].as_str().unwrap())[..]]
    );
    assert_eq!(first[2], format!("{:#08x}", top["dst_qpn"].as_u64().unwrap()));
    assert_eq!(first[7], top["cnp"].as_u64().unwrap().to_string());
    assert_eq!(first[8], top["ecn_ce"].as_u64().unwrap().to_string());
}

#[test]
fn the_real_binary_in_an_80x24_terminal() {
    let t = truth("nvme_vlan");
    let dir = tempfile::tempdir().unwrap();
    let summary = dir.path().join("s.json");
    let pcap = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let command = format!(
        "{} replay --dashboard -q --summary {} --vantage {} --vantage {} {}; echo EXIT=$?; sleep 60",
        bin(),
        summary.display(),
        VLAN_VANTAGES[0],
        VLAN_VANTAGES[1],
        pcap.display()
    );
    let term = Tmux::start(dir.path(), &command);
    let screen = term.wait_for_still("roceprobe finished", "the dashboard did not finish");
    let lines: Vec<String> = screen.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 24, "{screen}");
    assert_shows_truth(&lines, &t);
    // The summary is written while the final view waits for `q`.
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["packets"], t["packets"]);
    // `s` re-sorts, `q` quits with success.
    term.keys("s");
    term.wait_for_still("by retx rate", "s did not change the order");
    term.keys("q");
    term.wait_for("EXIT=0", "q did not end the run");
}

#[test]
fn notes_wait_until_the_dashboard_gives_the_terminal_back() {
    // nvme_faults with --max-ios 8 warns of the commands it could not follow: written over
    // the dashboard, the warning would garble it; it comes once the terminal is back.
    let t = scenario_truth("nvme_faults");
    let dir = tempfile::tempdir().unwrap();
    let err = dir.path().join("stderr.txt");
    let files: Vec<String> =
        scenario_files("nvme_faults", &t).iter().map(|f| f.display().to_string()).collect();
    let command = format!(
        "{} replay --dashboard -q {} {} 2> {}; echo EXIT=$?; sleep 60",
        bin(),
        scenario_args(&t).join(" "),
        files.join(" "),
        err.display()
    );
    let term = Tmux::start(dir.path(), &command);
    let screen = term.wait_for_still("roceprobe finished", "the dashboard did not finish");
    assert!(!screen.contains("warning"), "{screen}");
    assert!(screen.contains("--max-ios 8: 8 NVMe command sightings not followed, raise to 16"), "{screen}");
    assert_eq!(std::fs::read_to_string(&err).unwrap(), "", "nothing written while the dashboard is on");
    term.keys("q");
    term.wait_for("EXIT=0", "q did not end the run");
    let told = std::fs::read_to_string(&err).unwrap();
    assert!(
        told.starts_with("roceprobe: warning: --max-ios 8: 8 NVMe command sightings not followed"),
        "{told}"
    );
}

#[test]
fn one_vantage_draws_no_split_bar() {
    // The compute vantage alone gives the compute segment, not the network or storage
    // one: the bar drew it as the whole I/O (all █). No bar without the three.
    let path = fixtures().join("scenarios/nvme_split/nvme_split_compute.pcap");
    let mut replay = Replay::open(&[path]).unwrap();
    let cfg = PipelineConfig::new(VantageMap::default());
    let r = runtime::run(&mut replay, &cfg, &AtomicBool::new(false), Default::default()).unwrap();
    let s = Summary::build(&r.totals, &r.sources, &r.ios);
    assert!(
        s.latency.iter().any(|l| l.segment == "compute") && !s.latency.iter().any(|l| l.segment == "network")
    );
    let view = ViewBuilder::over_run(r.totals.first_ts_ns).build(s, r.totals.last_ts_ns, true);
    let screen = render_at(&view, UiState::default(), 120, 30);
    let rows: Vec<&String> =
        screen.iter().filter(|l| l.contains(" read ") || l.contains(" write ")).collect();
    assert!(!rows.is_empty(), "{screen:#?}");
    for row in rows {
        assert!(!row.contains('█') && !row.contains('▓') && !row.contains('░'), "{row}");
    }
    // With the two vantages the bar is there.
    let both = final_view("nvme_vlan");
    let screen = render_at(&both, UiState::default(), 120, 30);
    assert!(screen.iter().any(|l| l.contains(" read ") && l.contains('█')), "{screen:#?}");
}

#[test]
fn the_final_view_says_how_the_run_ended() {
    // "finished" showed for a replay stopped by a signal and for one whose file was cut.
    let mut view = final_view("nvme_vlan");
    for (ended, said) in [
        ("complete", "roceprobe finished "),
        ("stopped", "roceprobe stopped "),
        ("cut_short", "roceprobe finished, an input file cut short "),
        ("failed", "roceprobe stopped by an error (told on exit) "),
    ] {
        view.summary.ended = serde_json::from_value(serde_json::json!(ended)).unwrap();
        let screen = render_at(&view, UiState::default(), 120, 30);
        assert!(screen[0].starts_with(said), "{ended}: {}", screen[0]);
    }
}

/// The probe whose command line holds `unique` (not the shell that started it).
fn pid_of(unique: &str) -> i32 {
    let pattern = format!("^{} replay .*{unique}", bin());
    let o = std::process::Command::new("pgrep").args(["-f", "--", &pattern]).output().unwrap();
    let pids: Vec<i32> = String::from_utf8_lossy(&o.stdout).lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(pids.len(), 1, "{pids:?}");
    pids[0]
}

#[test]
fn a_signal_ends_a_dashboard_run_mid_capture_and_while_its_final_view_waits() {
    // SIGTERM used to end the capture and leave the final view waiting for q: a supervisor
    // or `timeout` that signals the probe waited for ever.
    let dir = tempfile::tempdir().unwrap();
    let pcap = capture("rdma_write_bw.pcap");
    // Mid capture: a pipe that stays open after the capture's 60 frames.
    let fifo = dir.path().join("stream");
    let name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    let summary = dir.path().join("mid.json");
    let command = format!(
        "(cat {}; sleep 120) > {} & {} replay --dashboard -q --interval 1ms --summary {} {}; echo EXIT=$?; sleep 60",
        pcap.display(),
        fifo.display(),
        bin(),
        summary.display(),
        fifo.display()
    );
    let term = Tmux::start(dir.path(), &command);
    term.wait_for("frames", "the dashboard did not start");
    std::thread::sleep(std::time::Duration::from_secs(1));
    assert_eq!(unsafe { libc::kill(pid_of(summary.to_str().unwrap()), libc::SIGTERM) }, 0);
    term.wait_for("EXIT=0", "SIGTERM did not end the run");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!((s["packets"].as_u64(), s["ended"].as_str()), (Some(60), Some("stopped")));
    drop(term);
    // A replay that ended: its final view waits for q, or for a signal.
    let summary = dir.path().join("end.json");
    let command = format!(
        "{} replay --dashboard -q --summary {} {}; echo EXIT=$?; sleep 60",
        bin(),
        summary.display(),
        pcap.display()
    );
    let other = tempfile::tempdir().unwrap();
    let term = Tmux::start(other.path(), &command);
    term.wait_for_still("roceprobe finished", "the dashboard did not finish");
    assert_eq!(unsafe { libc::kill(pid_of(summary.to_str().unwrap()), libc::SIGTERM) }, 0);
    term.wait_for("EXIT=0", "SIGTERM did not end the final view");
    let s: Value = serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    assert_eq!(s["ended"], "complete");
}

#[test]
fn dashboard_without_a_terminal_is_refused_before_any_work() {
    let pcap = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let o = run(&["replay", "--dashboard", pcap.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--dashboard needs a terminal"), "{err}");
    assert!(o.stdout.is_empty());
}

/// The rows of the panel whose title contains `title`: below its header row, up to its
/// bottom border.
fn panel<'a>(screen: &'a [String], title: &str) -> Vec<&'a str> {
    let Some(at) = screen.iter().position(|l| l.starts_with('┌') && l.contains(title)) else {
        return Vec::new();
    };
    screen[at + 2..]
        .iter()
        .take_while(|l| !l.starts_with('└'))
        .map(|l| l.trim_start_matches('│').trim_end_matches('│'))
        .filter(|l| !l.trim().is_empty())
        .collect()
}

/// An IPv4 address or a piece of one (digits and at least two dots), or an IPv6 one (hex
/// digits and colons); not a number of the tables ("3.58/4.89", "0.000").
fn looks_like_an_address(word: &str) -> bool {
    let v4 = word.matches('.').count() >= 2 && word.chars().all(|c| c.is_ascii_digit() || c == '.');
    let v6 = word.contains(':') && word.chars().all(|c| c.is_ascii_hexdigit() || c == ':');
    v4 || v6
}

/// Every address in the I/O, slowest-I/O and flow panels is whole: each pair cell is one of
/// the summary's (initiator, target) pairs or flows, and QPNs are in hex.
fn assert_addresses_whole(view: &View, width: u16, height: u16) -> usize {
    let s = &view.summary;
    let pairs: std::collections::BTreeSet<String> =
        s.latency.iter().map(|l| format!("{}>{}", l.initiator_ip, l.target_ip)).collect();
    let flows: std::collections::BTreeSet<String> =
        s.flows.iter().map(|f| format!("{}>{} {:#08x}", f.src_ip, f.dst_ip, f.dst_qpn)).collect();
    let screen = render_at(view, UiState::default(), width, height);
    let all = screen.join("\n");
    let mut seen = 0;
    for title in ["I/O latency", "slowest I/Os"] {
        for row in panel(&screen, title) {
            let pair = row.split_whitespace().next().unwrap_or_default();
            assert!(pairs.contains(pair), "{width}x{height}: {pair:?} is cut or unknown:\n{all}");
            seen += 1;
        }
    }
    // A flow's row may take two lines when its addresses are long: every address-like word
    // is a whole address of a flow, every QPN eight characters of hex.
    let addresses: std::collections::BTreeSet<&str> =
        s.flows.iter().flat_map(|f| [f.src_ip.as_str(), f.dst_ip.as_str()]).collect();
    for row in panel(&screen, "top flows") {
        for word in row.split(|c: char| c.is_whitespace() || c == '>').filter(|w| !w.is_empty()) {
            if looks_like_an_address(word) {
                assert!(addresses.contains(word), "{width}x{height}: {word:?} is cut or unknown:\n{all}");
                seen += 1;
            } else if let Some(hex) = word.strip_prefix("0x") {
                assert_eq!(hex.len(), 6, "{width}x{height}: {word}");
            }
        }
    }
    assert!(!flows.is_empty());
    seen
}

#[test]
fn addresses_are_never_cut_at_80x24_or_160x48() {
    for scenario in ["nvme_vlan", "misc"] {
        let view = final_view(scenario);
        for (w, h) in [(80, 24), (160, 48)] {
            assert!(assert_addresses_whole(&view, w, h) >= 6, "{scenario} {w}x{h}");
        }
    }
    // misc's IPv6 RC connection has ACK latency: its addresses show whole.
    let misc = render_at(&final_view("misc"), UiState::default(), 80, 24).join("\n");
    assert!(misc.contains("fd00:1::5>fd00:2::5"), "{misc}");
    // Addresses as long as IPv6 gets: the numbers give way, the addresses stay whole.
    let mut view = final_view("nvme_vlan");
    let long = |ip: &str| format!("2001:db8:aaaa:bbbb:cccc:dddd:{}", ip.replace('.', ":"));
    for l in &mut view.summary.latency {
        (l.initiator_ip, l.target_ip) = (long(&l.initiator_ip), long(&l.target_ip));
    }
    for f in &mut view.summary.flows {
        (f.src_ip, f.dst_ip) = (long(&f.src_ip), long(&f.dst_ip));
    }
    for io in &mut view.summary.ios.latest_interval_slowest {
        (io.initiator_ip, io.target_ip) = (long(&io.initiator_ip), long(&io.target_ip));
    }
    view.flow_gbps.clear();
    for (w, h) in [(80, 24), (160, 48)] {
        assert!(assert_addresses_whole(&view, w, h) >= 4, "long IPv6 at {w}x{h}");
    }
}

#[test]
fn trouble_stands_out_in_the_flows() {
    // rc_loss_vlan sorted by retransmission rate: the first flow retransmitted. Its
    // non-zero counters of trouble are yellow, its zero ones and its throughput are not.
    let view = final_view("rc_loss_vlan");
    let mut t = Terminal::new(TestBackend::new(100, 30)).unwrap();
    let ui = UiState { sort: SortBy::Retransmissions, paused: false };
    t.draw(|f| draw(f, Some(&view), &ui)).unwrap();
    let buf = t.backend().buffer().clone();
    let line = |y: u16| (0..buf.area.width).map(|x| buf[(x, y)].symbol().to_owned()).collect::<String>();
    let header = (0..buf.area.height).find(|&y| line(y).contains("flow (vantage src>dst qpn)")).unwrap();
    let y = header + 1;
    let row = line(y);
    // Words and where they start: vantage, pair, QPN, Gbit/s, retx%, gaps, NAK, CNP, ECN.
    let mut words = Vec::new();
    let mut at = None;
    for (x, ch) in row.chars().enumerate() {
        match (ch == ' ' || ch == '│', at) {
            (false, None) => at = Some(x),
            (true, Some(a)) => {
                words.push((a, row.chars().skip(a).take(x - a).collect::<String>()));
                at = None;
            }
            _ => {}
        }
    }
    assert_eq!(words.len(), 9, "{row}");
    assert!(words[4].1.parse::<f64>().unwrap() > 0.0, "the first flow retransmitted: {row}");
    let mut seen = (0, 0);
    for (i, (x, w)) in words.iter().enumerate().skip(3) {
        let yellow = buf[(*x as u16, y)].fg == ratatui::style::Color::Yellow;
        let zero = w.parse::<f64>().unwrap() == 0.0;
        let trouble = i >= 4 && !zero;
        assert_eq!(yellow, trouble, "{w} in {row}");
        if trouble {
            seen.0 += 1
        } else {
            seen.1 += 1
        }
    }
    assert!(seen.0 >= 1 && seen.1 >= 2, "{seen:?}: {row}");
}

#[test]
fn every_op_shows_whole() {
    // rc_loss_vlan's RDMA READs have their latency series: `rdma_read` in the op column,
    // at every width that shows the column.
    let view = final_view("rc_loss_vlan");
    assert!(view.summary.latency.iter().any(|l| l.op == "rdma_read"));
    for (w, h) in [(80, 24), (120, 40)] {
        let screen = render_at(&view, UiState::default(), w, h);
        let rows = panel(&screen, "I/O latency");
        let ops: Vec<&str> = rows.iter().filter_map(|r| r.split_whitespace().nth(1)).collect();
        assert!(ops.contains(&"rdma_read"), "{w}x{h}: {ops:?}\n{}", screen.join("\n"));
        let known: std::collections::BTreeSet<&str> =
            view.summary.latency.iter().map(|l| l.op.trim_start_matches("nvme_")).collect();
        assert!(ops.iter().all(|op| known.contains(op)), "{w}x{h}: {ops:?} against {known:?}");
    }
}

#[test]
fn a_tall_terminal_shows_the_slowest_ios_of_the_last_interval() {
    let view = final_view("nvme_vlan");
    let slowest = &view.summary.ios.latest_interval_slowest;
    assert!(!slowest.is_empty());
    let screen = render_at(&view, UiState::default(), 160, 48);
    let all = screen.join("\n");
    assert!(all.contains("slowest I/Os of the last interval"), "{all}");
    let rows = panel(&screen, "slowest I/Os");
    assert_eq!(rows.len(), slowest.len().min(5), "{all}");
    for (row, io) in rows.iter().zip(slowest) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[0], format!("{}>{}", io.initiator_ip, io.target_ip));
        assert_eq!(cells[2], format!("{:#08x}", io.qpn));
        assert_eq!(cells[3], io.cid.to_string());
    }
    // 80x24 keeps its rows for the latencies and the flows.
    let small = render(&view, UiState::default()).join("\n");
    assert!(!small.contains("slowest I/Os"), "{small}");
}

#[test]
fn the_real_binary_at_160x48_shows_every_address_whole() {
    // misc: IPv4 and IPv6 RC connections (their ACK latency rows), UC, UD and XRC flows.
    let t = truth("misc");
    let dir = tempfile::tempdir().unwrap();
    let pcap = fixtures().join("scenarios/misc/misc.pcap");
    let command = format!("{} replay --dashboard -q {}; sleep 60", bin(), pcap.display());
    let term = Tmux::start_sized(dir.path(), &command, 160, 48);
    let screen = term.wait_for_still("roceprobe finished", "the dashboard did not finish");
    let lines: Vec<String> = screen.lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), 48, "{screen}");
    assert!(screen.contains("fd00:1::5>fd00:2::5"), "{screen}");
    let addresses: std::collections::BTreeSet<&str> = t["flows"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|f| [f["src_ip"].as_str().unwrap(), f["dst_ip"].as_str().unwrap()])
        .collect();
    let mut seen = 0;
    for title in ["I/O latency", "top flows"] {
        for row in panel(&lines, title) {
            for word in row.split(|c: char| c.is_whitespace() || c == '>').filter(|w| !w.is_empty()) {
                if looks_like_an_address(word) {
                    assert!(addresses.contains(word), "{word:?} is cut or unknown:\n{screen}");
                    seen += 1;
                }
            }
        }
    }
    // Every flow of misc fits at 160x48: each shows with both its addresses.
    assert!(seen >= 2 * t["flows"].as_array().unwrap().len(), "{seen} addresses:\n{screen}");
    term.keys("q");
}

#[test]
fn the_jobs_panel_shows_each_jobs_last_step_at_80x24_and_160x48() {
    let t = truth("collective_vlan");
    let view = final_view("collective_vlan");
    for (w, h) in [(80, 24), (160, 48)] {
        let screen = render_at(&view, UiState::default(), w, h);
        let rows = panel(&screen, "collective jobs");
        assert_eq!(rows.len(), 2, "{w}x{h}:\n{}", screen.join("\n"));
        for j in t["jobs"].as_array().unwrap() {
            let last = j["steps"].as_array().unwrap().last().unwrap();
            let row = rows
                .iter()
                .find(|r| r.split_whitespace().next() == j["name"].as_str())
                .unwrap_or_else(|| panic!("{w}x{h}: no row for {}", j["name"]));
            let cells: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(cells[1], j["steps"].as_array().unwrap().len().to_string());
            assert_eq!(cells[4], last["straggler_host"].as_str().unwrap());
            assert_eq!(cells[6], last["reason"].as_str().unwrap());
        }
    }
}
