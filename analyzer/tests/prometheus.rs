//! A real Prometheus server (Debian's `prometheus`, installed by scripts/setup) scrapes the
//! probe replaying a fixture; its HTTP API then answers with the fixture's truth. Clients
//! that stall or send too much do not delay a scrape, and `promtool` accepts the page.

mod common;
use common::*;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// One instant query against Prometheus' HTTP API: the values of the series it returns.
fn query(port: u16, q: &str) -> Vec<f64> {
    let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else { return Vec::new() };
    // HTTP/1.0: a plain body, closed at the end.
    let _ = write!(c, "GET /api/v1/query?query={} HTTP/1.0\r\nHost: localhost\r\n\r\n", url_encode(q));
    let mut r = String::new();
    if c.read_to_string(&mut r).is_err() {
        return Vec::new();
    }
    let Some((_, body)) = r.split_once("\r\n\r\n") else { return Vec::new() };
    let Ok(v) = serde_json::from_str::<Value>(body) else { return Vec::new() };
    v["data"]["result"]
        .as_array()
        .map(|a| a.iter().filter_map(|s| s["value"][1].as_str()?.parse().ok()).collect())
        .unwrap_or_default()
}

/// Kills a child on the way out, whatever happens.
struct Reap(Child);
impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_real_prometheus_scrapes_the_truth() {
    let t: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures().join("scenarios/nvme_vlan/truth.json")).unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (probe_port, prom_port) = (free_port(), free_port());
    let pcap = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let probe = Command::new(bin())
        .args(["replay", "-q", "--probe-id", "probe-a", "--prometheus", &format!("127.0.0.1:{probe_port}")])
        .args(["--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"])
        .arg(&pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut probe = Reap(probe);
    let config = dir.path().join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: roceprobe\n    static_configs:\n      - targets: ['127.0.0.1:{probe_port}']\n"
        ),
    )
    .unwrap();
    let prom = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("prometheus is installed (scripts/setup)");
    let _prom = Reap(prom);

    // A flow counter: the bytes of the first flow of the truth.
    let f = &t["flows"][0];
    let flow_q = format!(
        "roceprobe_flow_bytes_total{{probe=\"probe-a\",vantage=\"{}\",src=\"{}\",dst=\"{}\",dst_qpn=\"{}\"}}",
        f["vantage"].as_str().unwrap(),
        f["src_ip"].as_str().unwrap(),
        f["dst_ip"].as_str().unwrap(),
        f["dst_qpn"]
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let bytes = loop {
        let v = query(prom_port, &flow_q);
        if !v.is_empty() {
            break v;
        }
        // A probe that could not serve (its port taken in the meantime) says why.
        if let Ok(Some(status)) = probe.0.try_wait() {
            let mut why = String::new();
            let _ = probe.0.stderr.take().map(|mut e| e.read_to_string(&mut why));
            panic!("the probe ended ({status}) before Prometheus had {flow_q}: {why}");
        }
        assert!(Instant::now() < deadline, "Prometheus never had {flow_q}");
        std::thread::sleep(Duration::from_millis(250));
    };
    assert_eq!(bytes, [f["bytes"].as_u64().unwrap() as f64]);

    // A segment latency: the network segment of one (initiator, target, read), whose every
    // I/O in the truth took the same time.
    let ios: Vec<&Value> = t["ios"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|io| {
            io["op"] == "nvme_read" && io["initiator_ip"] == "10.0.1.1" && io["target_ip"] == "10.0.2.1"
        })
        .collect();
    let network = ios[0]["network_ns"].as_u64().unwrap();
    assert!(ios.iter().all(|io| io["network_ns"].as_u64() == Some(network)));
    let labels =
        "probe=\"probe-a\",initiator=\"10.0.1.1\",target=\"10.0.2.1\",op=\"nvme_read\",segment=\"network\"";
    assert_eq!(
        query(prom_port, &format!("roceprobe_io_latency_seconds_count{{{labels}}}")),
        [ios.len() as f64]
    );
    let p50 = query(prom_port, &format!("roceprobe_io_latency_seconds{{{labels},quantile=\"0.5\"}}"));
    assert_eq!(p50.len(), 1);
    // Within the histograms' precision (3 significant digits).
    let want = network as f64 / 1e9;
    assert!((p50[0] - want).abs() <= want * 1e-3, "p50 {} s, truth {want} s", p50[0]);
    // Probe health: every frame of the fixture.
    assert_eq!(
        query(prom_port, "sum(roceprobe_packets_total{probe=\"probe-a\"})"),
        [t["packets"].as_u64().unwrap() as f64]
    );

    // SIGTERM ends the probe's serving, successfully.
    // SAFETY: signalling our own child.
    unsafe { libc::kill(probe.0.id() as i32, libc::SIGTERM) };
    let status = probe.0.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let mut err = String::new();
    probe.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(
        err.contains(&format!("serving the final metrics at http://127.0.0.1:{probe_port}/metrics")),
        "{err}"
    );
}

#[test]
fn the_grafana_dashboard_queries_only_exported_series() {
    use roceprobe::capture::pcap::Replay;
    use roceprobe::report::{prometheus, Summary};
    use roceprobe::runtime::{self, PipelineConfig};
    use roceprobe::track::vantage::{Rule, SourceKind};
    use roceprobe::track::VantageMap;
    use std::collections::BTreeSet;
    // Loss and congestion on RC, then NVMe I/Os: the series of both kinds of traffic.
    let pages: Vec<String> = ["rc_loss_vlan", "nvme_vlan"]
        .iter()
        .map(|name| {
            let mut replay =
                Replay::open(&[fixtures().join(format!("scenarios/{name}/{name}.pcap"))]).unwrap();
            let rules: Vec<Rule> =
                ["compute=vlan:10", "storage=vlan:20"].iter().map(|r| r.parse().unwrap()).collect();
            let cfg = PipelineConfig::new(VantageMap::new(&rules, SourceKind::File, &[0]).unwrap());
            let stop = std::sync::atomic::AtomicBool::new(false);
            let r = runtime::run(&mut replay, &cfg, &stop, Default::default()).unwrap();
            prometheus::render(&Summary::build(&r.totals, &r.sources, &r.ios), "p", 1000)
        })
        .collect();
    let exported: BTreeSet<&str> = pages
        .iter()
        .flat_map(|page| page.lines())
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split('{').next())
        .collect();
    let names = |text: &str| -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for (i, _) in text.match_indices("roceprobe_") {
            let name: String =
                text[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            out.insert(name);
        }
        out
    };
    let dash: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/grafana/roceprobe.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut queried = BTreeSet::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().unwrap() {
            queried.extend(names(t["expr"].as_str().unwrap()));
        }
    }
    assert!(queried.len() >= 10, "{queried:?}");
    for q in &queried {
        assert!(exported.contains(q.as_str()), "the dashboard queries {q}, which is not exported");
    }
}

/// A probe replaying a generated scenario with `--prometheus` on a free loopback port,
/// serving its final page; its stderr is read to the end on a thread of its own (so that a
/// warning it writes later finds the pipe open).
struct Serving {
    _probe: Reap,
    addr: String,
    stderr: std::sync::mpsc::Receiver<String>,
}

fn replay_serving(scenario: &str, extra: &[&str]) -> Serving {
    use std::io::BufRead;
    let t = scenario_truth(scenario);
    let addr = format!("127.0.0.1:{}", free_port());
    let mut probe = Command::new(bin())
        .args(["replay", "-q", "--probe-id", "probe-a", "--prometheus", &addr])
        .args(scenario_args(&t))
        .args(extra)
        .args(scenario_files(scenario, &t))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = std::io::BufReader::new(probe.stderr.take().unwrap()).lines();
    let (tx, stderr) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let probe = Reap(probe);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match stderr.recv_timeout(left) {
            Ok(line) if line.contains("serving the final metrics") => break,
            Ok(_) => {}
            Err(e) => panic!("{scenario}: the probe did not serve its final metrics ({e})"),
        }
    }
    Serving { _probe: probe, addr, stderr }
}

/// Sends `request` and reads the answer to the end: its head and its body.
fn ask(addr: &str, request: &[u8]) -> (String, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    c.write_all(request).unwrap();
    let mut r = String::new();
    c.read_to_string(&mut r).unwrap_or_else(|e| panic!("no whole answer within 30 s: {e}"));
    let (head, body) = r.split_once("\r\n\r\n").unwrap_or((&r, ""));
    (head.to_owned(), body.to_owned())
}

/// A whole page: answered 200, with the length it announces, ending with a line.
fn whole_page(head: &str, body: &str) {
    assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
    let len = format!("\r\ncontent-length: {}\r\n", body.len());
    assert!(
        format!("{}\r\n", head.to_ascii_lowercase()).contains(&len),
        "{head}\n(body {} bytes)",
        body.len()
    );
    assert!(body.ends_with('\n') && body.contains("roceprobe_flow_bytes_total{"), "{body}");
}

const SCRAPE: &[u8] = b"GET /metrics HTTP/1.1\r\nHost: probe\r\nAccept: text/plain\r\n\r\n";

/// NVMe commands other than reads and writes, by command: the generator's nvme_other I/Os
/// are its Flushes, so the page's `io.flush` series sum to the truth's nvme_other I/Os, per
/// (initiator, target).
#[test]
fn other_nvme_commands_are_on_the_page_by_command() {
    let t = scenario_truth("nvme_vlan");
    let mut want = std::collections::BTreeMap::<(String, String), f64>::new();
    for io in t["ios"].as_array().unwrap().iter().filter(|io| io["op"] == "nvme_other") {
        let k =
            (io["initiator_ip"].as_str().unwrap().to_owned(), io["target_ip"].as_str().unwrap().to_owned());
        *want.entry(k).or_default() += 1.0;
    }
    assert!(!want.is_empty());
    let probe = replay_serving("nvme_vlan", &[]);
    let (_, page) = ask(&probe.addr, SCRAPE);
    let mut got = std::collections::BTreeMap::<(String, String), f64>::new();
    for l in page.lines().filter(|l| l.starts_with("roceprobe_nvme_commands_total{")) {
        let label =
            |name: &str| l.split(&format!("{name}=\"")).nth(1).unwrap().split('"').next().unwrap().to_owned();
        assert_eq!(label("op"), "nvme_other", "{l}");
        assert_eq!(label("command"), "io.flush", "{l}");
        *got.entry((label("initiator"), label("target"))).or_default() +=
            l.rsplit(' ').next().unwrap().parse::<f64>().unwrap();
    }
    assert_eq!(got, want);
}

/// Live, a page never counts more frames analysed than received: each interval is shown
/// once both its snapshot and its receive counters are in. A looped capture, 200 ms
/// intervals, pages read every 70 ms while the 4 s run lasts.
#[test]
fn a_live_page_counts_no_more_frames_analysed_than_received() {
    let addr = format!("127.0.0.1:{}", free_port());
    let pcap = capture("rdma_write_bw.pcap");
    let mut args: Vec<String> = ["live", "-q", "--probe-clock", "--interval", "200ms", "--duration", "4s"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(["--prometheus".into(), addr.clone(), "--".into()]);
    let mut eal = eal_args(&[&pcap]);
    let vdev = eal.last_mut().unwrap();
    vdev.push_str(",infinite_rx=1");
    args.extend(eal);
    let probe =
        Reap(Command::new(bin()).args(&args).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let sum = |page: &str, family: &str| -> Option<f64> {
        let lines: Vec<f64> = page
            .lines()
            .filter(|l| l.starts_with(&format!("{family}{{")))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
            .collect();
        (!lines.is_empty()).then(|| lines.iter().sum())
    };
    // The run's 4 s, after EAL's start-up (slower on a busy machine).
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut compared = 0;
    while Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(70));
        let Ok(mut c) = TcpStream::connect(&addr) else { continue };
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        if c.write_all(SCRAPE).is_err() {
            continue;
        }
        let mut r = String::new();
        let _ = c.read_to_string(&mut r);
        let page = r.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        // Every page that counts frames analysed counts those received, the first one too.
        if let Some(analysed) = sum(page, "roceprobe_packets_total") {
            let received = sum(page, "roceprobe_receive_packets_total");
            let received =
                received.unwrap_or_else(|| panic!("{analysed} frames analysed, none received:\n{page}"));
            assert!(analysed <= received, "{analysed} frames analysed, {received} received, on one page");
            compared += 1;
        }
    }
    drop(probe);
    assert!(compared >= 5, "only {compared} pages with both counts");
}

/// Fifty clients that each sent half a request and stay connected, and one that sends a
/// request head of 1 MiB, do not delay a well-behaved scrape: it gets the whole page in
/// well under a second. The stalled ones are cut off after the request timeout, unanswered.
#[test]
fn stalled_and_oversized_clients_do_not_delay_a_scrape() {
    let probe = replay_serving("nvme_vlan", &[]);
    let (head, page) = ask(&probe.addr, SCRAPE);
    whole_page(&head, &page);

    let mut stalled: Vec<TcpStream> = (0..50)
        .map(|_| {
            let mut c = TcpStream::connect(&probe.addr).unwrap();
            c.write_all(b"GET /metr").unwrap();
            c
        })
        .collect();
    let timed = || {
        let start = Instant::now();
        let (head, body) = ask(&probe.addr, SCRAPE);
        (start.elapsed(), head, body)
    };
    let (took, head, body) = timed();
    assert!(took < Duration::from_secs(1), "the scrape behind 50 stalled clients took {took:?}");
    whole_page(&head, &body);
    assert_eq!(body, page, "the final page, whole");

    // A request head of 1 MiB: refused (431, or the connection closed under the sender).
    let mut big = TcpStream::connect(&probe.addr).unwrap();
    big.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    big.set_write_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut request = b"GET /metrics HTTP/1.1\r\nHost: probe\r\nX-Filler: ".to_vec();
    request.resize(request.len() + (1 << 20), b'a');
    request.extend_from_slice(b"\r\n\r\n");
    let _ = big.write_all(&request);
    let mut answer = Vec::new();
    let _ = big.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 431 "), "{answer}");
    let (took, head, body) = timed();
    assert!(took < Duration::from_secs(1), "the scrape after the oversized request took {took:?}");
    whole_page(&head, &body);
    assert_eq!(body, page);

    // The stalled clients are cut off (after 2 s), without an answer.
    for c in &mut stalled {
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut rest = Vec::new();
        let _ = c.read_to_end(&mut rest);
        assert!(!String::from_utf8_lossy(&rest).contains(" 200 OK"));
    }
    // The first failure is told once on stderr.
    let deadline = Instant::now() + Duration::from_secs(10);
    let told = loop {
        match probe.stderr.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(line) if line.contains("a Prometheus scrape from") => break line,
            Ok(_) => {}
            Err(e) => panic!("no warning of the failed scrapes ({e})"),
        }
    };
    assert!(told.contains("failed scrapes are counted"), "{told}");
    assert!(probe.stderr.try_iter().all(|l| !l.contains("a Prometheus scrape from")), "told once");
}

/// `promtool check metrics` (Debian's `prometheus`, installed by scripts/setup) finds
/// nothing to say about the page of real replays: one with I/O latency, one with loss,
/// retransmissions and NAKs, one with malformed frames, one with collective steps.
#[test]
fn promtool_accepts_the_page() {
    for scenario in ["nvme_vlan", "rc_loss_vlan", "corrupted", "collective_vlan"] {
        let probe = replay_serving(scenario, &[]);
        let (head, page) = ask(&probe.addr, SCRAPE);
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"), "{head}");
        assert!(page.contains("# TYPE roceprobe_packets_total counter\n"), "{page}");
        let mut check = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("promtool is installed (scripts/setup)");
        check.stdin.take().unwrap().write_all(page.as_bytes()).unwrap();
        let out = check.wait_with_output().unwrap();
        let said =
            format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success() && said.trim().is_empty(), "{scenario}: promtool: {said}\n{page}");
    }
}

/// Every series the page has is defined in docs/PROMETHEUS.md, "Series": the pages of an NVMe
/// scenario with evidence and of a collective scenario have every family.
#[test]
fn every_series_is_defined_in_the_docs() {
    let dir = tempfile::tempdir().unwrap();
    let evidence = dir.path().join("evidence").display().to_string();
    let mut series = std::collections::BTreeSet::new();
    for (scenario, extra) in [("nvme_faults", vec!["--evidence-dir", &evidence]), ("collective_vlan", vec![])]
    {
        let probe = replay_serving(scenario, &extra);
        let (_, page) = ask(&probe.addr, SCRAPE);
        if scenario == "nvme_faults" {
            // Its truth's outcomes, on the page too: `--max-ios 8` leaves 8 commands not
            // followed, which a fleet watched through Prometheus alone must see.
            let t: serde_json::Value = serde_json::from_str(
                &std::fs::read_to_string(fixtures().join("scenarios/nvme_faults/truth.json")).unwrap(),
            )
            .unwrap();
            for (outcome, n) in t["io_outcomes"].as_object().unwrap() {
                if outcome == "retransmitted" {
                    continue;
                }
                let sum: f64 = page
                    .lines()
                    .filter(|l| {
                        l.starts_with("roceprobe_nvme_ios_total{")
                            && l.contains(&format!("outcome=\"{outcome}\"}}"))
                    })
                    .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
                    .sum();
                assert_eq!(sum, n.as_f64().unwrap(), "{outcome}");
            }
        }
        series.extend(
            page.lines().filter_map(|l| l.strip_prefix("# HELP ")?.split(' ').next().map(String::from)),
        );
    }
    for family in
        ["roceprobe_io_latency_seconds", "roceprobe_step_duration_seconds", "roceprobe_evidence_events_total"]
    {
        assert!(series.contains(family), "{family} not on the pages: {series:?}");
    }
    let docs = doc("PROMETHEUS.md");
    assert_defined(doc_section(&docs, "Series"), &series, "docs/PROMETHEUS.md, 'Series'");
}
