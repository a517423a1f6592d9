//! `--prometheus ADDR`: the run's metrics in the Prometheus text exposition format (0.0.4),
//! served over HTTP at `/metrics` on exactly the address given.
//!
//! The stats thread renders the page every interval from the summary so far and swaps it in;
//! a scrape only copies out the latest page, so a slow or stuck scraper never touches the
//! measurement. Every series carries `probe` (`--probe-id`, default the host name) so that
//! a fleet of probes lands in one Prometheus. Names follow the conventions: base units
//! (`_seconds`, `_bytes`), `_total` for counters. Per-flow series are capped (the flows
//! with the most bytes first) and the number left out is itself a series.

use super::summary::{FlowSummary, LateByVantage, Summary};
use crate::track::io::SIZE_CLASS_BOUNDS;
use anyhow::{Context, Result};
use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::fmt::Write as _;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;

/// How long a client has to send its whole request (request line and headers) from the
/// moment it is accepted. A client that sends half a request is cut off then.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a connection may last in all, the request and the page: a client that reads
/// the page too slowly is cut off then.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once. A connection beyond them is closed as soon as it is
/// accepted, and counted as a failed scrape.
pub const MAX_CONNECTIONS: usize = 256;
/// The largest request head (request line and headers) read, in bytes: a longer one is
/// answered 431 and the connection closed. Prometheus sends a few hundred bytes.
pub const MAX_REQUEST_BYTES: usize = 8192;
/// The media type of the text exposition format.
const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Scrapes of the endpoint so far. Served: a request answered in full (the page, or a 404
/// or 405). Failed: a connection that did not get its answer: the client sent no whole
/// request within the request timeout, sent a request head too large or malformed, went
/// away before the answer was written, did not read it within the connection timeout, or
/// came while the bound on connections was reached (it is closed at once). A connection
/// that closes without sending a byte (a port check) is neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ScrapeStats {
    pub served: u64,
    pub failed: u64,
}

#[derive(Debug, Default)]
struct Scrapes {
    served: AtomicU64,
    failed: AtomicU64,
}

impl Scrapes {
    fn served(&self) {
        self.served.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a failed scrape; the first one is told on stderr with its cause.
    fn failed(&self, peer: &str, cause: &dyn std::fmt::Display) {
        if self.failed.fetch_add(1, Ordering::Relaxed) == 0 {
            crate::note!(
                "roceprobe: warning: a Prometheus scrape from {peer} failed ({cause}); failed scrapes are counted while the run lasts (roceprobe_scrapes_total, summary prometheus) and the next is served"
            );
        }
    }
}

/// The latest page, shared between the stats thread (writer) and the HTTP thread (reader),
/// with the HTTP thread's count of scrapes.
#[derive(Debug, Clone, Default)]
pub struct Page {
    text: Arc<Mutex<Bytes>>,
    scrapes: Arc<Scrapes>,
}

impl Page {
    pub fn set(&self, text: String) {
        *self.text.lock().unwrap_or_else(|e| e.into_inner()) = Bytes::from(text);
    }
    /// The latest page (shared, not copied).
    pub fn get(&self) -> Bytes {
        self.text.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
    pub fn scrapes(&self) -> ScrapeStats {
        ScrapeStats {
            served: self.scrapes.served.load(Ordering::Relaxed),
            failed: self.scrapes.failed.load(Ordering::Relaxed),
        }
    }
}

/// What the stats thread needs to publish pages.
#[derive(Debug, Clone)]
pub struct Exporter {
    pub page: Page,
    /// The `probe` label.
    pub probe: String,
    /// Most flows exported as series.
    pub max_flows: usize,
}

impl Exporter {
    /// Renders `s` (whose `prometheus` scrape counts it fills in) as the page to serve.
    pub fn publish(&self, s: &mut Summary) {
        s.prometheus = Some(self.page.scrapes());
        self.page.set(render(s, &self.probe, self.max_flows));
    }
}

impl super::Subscriber for Exporter {
    fn update(&mut self, mut summary: Summary, _interval: (u64, u64)) {
        self.publish(&mut summary);
    }
}

/// Binds exactly `addr` (before any work, so that a taken port is a start-up error).
pub fn bind(addr: &str) -> Result<TcpListener> {
    TcpListener::bind(addr).with_context(|| format!("--prometheus {addr}: cannot listen there"))
}

/// Serves `page` at `/metrics` on its own thread for as long as the process lives.
///
/// The thread runs a single-threaded event loop (tokio) with HTTP/1 from hyper: every
/// connection is a task, so a client that stalls holds a socket and a timer, not the
/// server. Each connection has [`REQUEST_TIMEOUT`] to send its request and
/// [`CONNECTION_TIMEOUT`] in all; at most [`MAX_CONNECTIONS`] are open at once, and a
/// request head may be [`MAX_REQUEST_BYTES`] long. One request per connection, as before
/// (`Connection: close`). A scrape that fails is counted, the first one told on stderr
/// with its cause.
pub fn serve(listener: TcpListener, page: Page) -> Result<()> {
    listener.set_nonblocking(true)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().enable_time().build()?;
    // Registered with the event loop here, so that a failure is a start-up error.
    let listener = {
        let _entered = rt.enter();
        tokio::net::TcpListener::from_std(listener)?
    };
    std::thread::Builder::new()
        .name("roceprobe-prometheus".into())
        .spawn(move || rt.block_on(accept(listener, page)))?;
    Ok(())
}

/// Accepts connections for ever, each served on a task of its own while a slot is free.
async fn accept(listener: tokio::net::TcpListener, page: Page) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(c) => c,
            Err(e) => {
                page.scrapes.failed("a client not accepted", &e);
                // Out of file descriptors, for one: wait a little rather than spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
            page.scrapes
                .failed(&peer.to_string(), &format!("{MAX_CONNECTIONS} connections were open already"));
            continue;
        };
        let page = page.clone();
        tokio::spawn(async move {
            connection(stream, &peer.to_string(), &page).await;
            drop(slot);
        });
    }
}

/// Serves one connection (one request) and counts how it went.
async fn connection(stream: tokio::net::TcpStream, peer: &str, page: &Page) {
    let asked = AtomicBool::new(false);
    let service = hyper::service::service_fn(|req: Request<Incoming>| {
        asked.store(true, Ordering::Relaxed);
        std::future::ready(Ok::<_, std::convert::Infallible>(respond(&req, page)))
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(REQUEST_TIMEOUT)
        .max_buf_size(MAX_REQUEST_BYTES)
        .keep_alive(false)
        .serve_connection(TokioIo::new(stream), service);
    match tokio::time::timeout(CONNECTION_TIMEOUT, conn).await {
        Ok(Ok(())) if asked.load(Ordering::Relaxed) => page.scrapes.served(),
        // Closed without a request: a port check, not a scrape.
        Ok(Ok(())) => {}
        Ok(Err(e)) => page.scrapes.failed(peer, &e),
        Err(_) => page
            .scrapes
            .failed(peer, &format!("the connection was still open after {} s", CONNECTION_TIMEOUT.as_secs())),
    }
}

/// The answer to one request: the page for GET or HEAD `/metrics`, 404 for another path,
/// 405 for another method.
fn respond(req: &Request<Incoming>, page: &Page) -> Response<Full<Bytes>> {
    let (status, body) = match (req.method(), req.uri().path()) {
        (&Method::GET | &Method::HEAD, "/metrics") => (StatusCode::OK, page.get()),
        (&Method::GET | &Method::HEAD, _) => {
            (StatusCode::NOT_FOUND, Bytes::from_static(b"only /metrics is served here\n"))
        }
        _ => (StatusCode::METHOD_NOT_ALLOWED, Bytes::from_static(b"GET /metrics\n")),
    };
    let mut r = Response::new(Full::new(body));
    *r.status_mut() = status;
    // The exposition format's type only on the metrics themselves.
    let kind = if status == StatusCode::OK { CONTENT_TYPE_TEXT } else { "text/plain; charset=utf-8" };
    r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    if status == StatusCode::METHOD_NOT_ALLOWED {
        r.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    }
    r
}

/// A label value, escaped as the text format requires.
fn esc(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Writes the page of metrics for `s`.
pub fn render(s: &Summary, probe: &str, max_flows: usize) -> String {
    let mut o = String::with_capacity(4096 + s.flows.len().min(max_flows) * 1200);
    let p = format!("probe=\"{}\"", esc(probe));
    packet_families(&mut o, &p, s);
    reorder_families(&mut o, &p, s);
    dropped_families(&mut o, &p, s);
    scrape_family(&mut o, &p, s);
    forgotten_family(&mut o, &p, s);
    receive_families(&mut o, &p, s);
    latency_family(&mut o, &p, s);
    io_families(&mut o, &p, s);
    job_families(&mut o, &p, s);
    evidence_families(&mut o, &p, s);
    flow_families(&mut o, &p, s, max_flows);
    o
}

/// The `# HELP` and `# TYPE` lines that open a metric family.
fn family(o: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// Frames analysed by kind, malformed frames by error, and packets of untracked flows.
fn packet_families(o: &mut String, p: &str, s: &Summary) {
    family(o, "roceprobe_packets_total", "counter", "Frames analysed, by kind (roce, other, malformed).");
    let malformed: u64 = s.decode_errors.values().sum();
    for (kind, n) in [("roce", s.roce_packets), ("other", s.non_roce_packets), ("malformed", malformed)] {
        let _ = writeln!(o, "roceprobe_packets_total{{{p},kind=\"{kind}\"}} {n}");
    }
    family(o, "roceprobe_malformed_packets_total", "counter", "Malformed frames by what was wrong.");
    for (kind, n) in &s.decode_errors {
        let _ = writeln!(o, "roceprobe_malformed_packets_total{{{p},error=\"{}\"}} {n}", esc(kind));
    }
    family(o, "roceprobe_untracked_packets_total", "counter", "RoCEv2 packets of flows beyond --max-flows.");
    let _ = writeln!(o, "roceprobe_untracked_packets_total{{{p}}} {}", s.untracked_packets);
}

/// A counter family with a series per vantage.
fn per_vantage(o: &mut String, p: &str, name: &str, help: &str, n: LateByVantage) {
    family(o, name, "counter", help);
    for (vantage, n) in [("compute", n.compute), ("storage", n.storage)] {
        let _ = writeln!(o, "{name}{{{p},vantage=\"{vantage}\"}} {n}");
    }
}

/// Packets that came after the reorder window, and frames it let go early.
fn reorder_families(o: &mut String, p: &str, s: &Summary) {
    per_vantage(
        o,
        p,
        "roceprobe_late_packets_total",
        "RoCEv2 packets that came after the reorder window had passed them, by vantage.",
        s.reorder.late_packets,
    );
    per_vantage(
        o,
        p,
        "roceprobe_io_copies_after_end_total",
        "NVMe capsules a vantage saw first after the other vantage's copies had ended their I/O, by vantage.",
        s.reorder.io_copies_after_end,
    );
    family(
        o,
        "roceprobe_reorder_released_early_total",
        "counter",
        "Frames analysed before the reorder window had passed them, for want of room.",
    );
    let _ = writeln!(o, "roceprobe_reorder_released_early_total{{{p}}} {}", s.reorder.released_early);
    per_vantage(
        o,
        p,
        "roceprobe_mirror_duplicates_total",
        "Second copies of packets from one mirror (both ports of a routed hop), counted once, by vantage.",
        s.mirror_duplicates,
    );
}

/// What the reports and the latency series could not keep.
fn dropped_families(o: &mut String, p: &str, s: &Summary) {
    family(
        o,
        "roceprobe_report_drops_total",
        "counter",
        "Snapshots and batches dropped because the reports fell behind.",
    );
    let _ = writeln!(o, "roceprobe_report_drops_total{{{p}}} {}", s.report_drops);
    family(
        o,
        "roceprobe_latency_samples_dropped_total",
        "counter",
        "Latency samples beyond the bound on latency series.",
    );
    let _ = writeln!(o, "roceprobe_latency_samples_dropped_total{{{p}}} {}", s.latency_samples_dropped);
}

/// Evidence (with `--evidence-dir`): events and files per kind, the events without a file
/// by reason, what the disk bound removed and holds.
fn evidence_families(o: &mut String, p: &str, s: &Summary) {
    let Some(e) = &s.evidence else { return };
    type Count = fn(&crate::metrics::evidence::KindCounts) -> u64;
    let per_kind: [(&str, &str, Count); 2] = [
        (
            "roceprobe_evidence_events_total",
            "Evidence events (loss, RNR NAK, congestion, slow or timed-out I/O, ICRC error), by kind.",
            |c| c.events,
        ),
        ("roceprobe_evidence_files_total", "Evidence pcapng files written, by event kind.", |c| c.files),
    ];
    for (name, help, count) in per_kind {
        family(o, name, "counter", help);
        for (kind, c) in &e.kinds {
            let _ = writeln!(o, "{name}{{{p},kind=\"{kind}\"}} {}", count(c));
        }
    }
    family(
        o,
        "roceprobe_evidence_not_written_total",
        "counter",
        "Evidence events without a file, by kind and reason (capped_per_minute, no_room, write_failed).",
    );
    for (kind, c) in &e.kinds {
        for (reason, n) in [
            ("capped_per_minute", c.capped_per_minute),
            ("no_room", c.no_room),
            ("write_failed", c.write_failed),
        ] {
            let _ = writeln!(
                o,
                "roceprobe_evidence_not_written_total{{{p},kind=\"{kind}\",reason=\"{reason}\"}} {n}"
            );
        }
    }
    family(
        o,
        "roceprobe_evidence_files_removed_total",
        "counter",
        "Evidence files removed, oldest first, to stay within --evidence-max-bytes.",
    );
    let _ = writeln!(o, "roceprobe_evidence_files_removed_total{{{p}}} {}", e.files_removed);
    family(o, "roceprobe_evidence_bytes_on_disk", "gauge", "Bytes of the evidence files in --evidence-dir.");
    let _ = writeln!(o, "roceprobe_evidence_bytes_on_disk{{{p}}} {}", e.bytes_on_disk);
    family(
        o,
        "roceprobe_evidence_events_dropped_total",
        "counter",
        "Evidence events lost before the stats side (a live capture whose reports fell behind, or events without a file beyond 4096 per worker and interval).",
    );
    let _ = writeln!(o, "roceprobe_evidence_events_dropped_total{{{p}}} {}", e.events_dropped);
}

/// Scrapes of this endpoint by outcome (only when the summary has them).
fn scrape_family(o: &mut String, p: &str, s: &Summary) {
    let Some(sc) = s.prometheus else { return };
    family(
        o,
        "roceprobe_scrapes_total",
        "counter",
        "Scrapes of this endpoint by outcome (failed: connections not answered, see docs/PROMETHEUS.md).",
    );
    for (outcome, n) in [("served", sc.served), ("failed", sc.failed)] {
        let _ = writeln!(o, "roceprobe_scrapes_total{{{p},outcome=\"{outcome}\"}} {n}");
    }
}

/// Entries of the bounded tables forgotten to make room, by table.
fn forgotten_family(o: &mut String, p: &str, s: &Summary) {
    family(
        o,
        "roceprobe_table_entries_forgotten_total",
        "counter",
        "Entries of bounded tables forgotten to make room for newer ones, by table.",
    );
    let f = s.forgotten;
    for (table, n) in [
        ("nvme_commands", f.nvme_commands),
        ("cm_requests", f.cm_requests),
        ("announced_flows", f.announced_flows),
        ("io_connections", f.io_connections),
        ("io_acks", f.io_acks),
        ("rdma_requests", f.rdma_requests),
        ("idle_flows", f.idle_flows),
        ("summary_flows", f.summary_flows),
    ] {
        let _ = writeln!(o, "roceprobe_table_entries_forgotten_total{{{p},table=\"{table}\"}} {n}");
    }
}

/// Frames received and dropped per source.
fn receive_families(o: &mut String, p: &str, s: &Summary) {
    family(
        o,
        "roceprobe_receive_packets_total",
        "counter",
        "Frames received per source (DPDK port or file).",
    );
    for (src, st) in &s.ports {
        let _ = writeln!(o, "roceprobe_receive_packets_total{{{p},source=\"{src}\"}} {}", st.ipackets);
    }
    family(o, "roceprobe_receive_drops_total", "counter", "Frames the source could not deliver, by reason.");
    for (src, st) in &s.ports {
        for (reason, n) in [("missed", st.imissed), ("errors", st.ierrors), ("no_mbuf", st.rx_nombuf)] {
            let _ =
                writeln!(o, "roceprobe_receive_drops_total{{{p},source=\"{src}\",reason=\"{reason}\"}} {n}");
        }
    }
}

/// I/O latency as a summary (quantiles, sum, count) per (initiator, target, op, segment).
fn latency_family(o: &mut String, p: &str, s: &Summary) {
    family(
        o,
        "roceprobe_io_latency_seconds",
        "summary",
        "I/O latency per (initiator, target, op, segment) over the run (segments: docs/METRICS.md).",
    );
    for l in &s.latency {
        let labels = format!(
            "{p},initiator=\"{}\",target=\"{}\",op=\"{}\",segment=\"{}\"",
            esc(&l.initiator_ip),
            esc(&l.target_ip),
            esc(&l.op),
            esc(&l.segment)
        );
        for (q, us) in [("0.5", l.p50_us), ("0.9", l.p90_us), ("0.99", l.p99_us), ("0.999", l.p999_us)] {
            let _ = writeln!(o, "roceprobe_io_latency_seconds{{{labels},quantile=\"{q}\"}} {:.9}", us / 1e6);
        }
        let _ = writeln!(
            o,
            "roceprobe_io_latency_seconds_sum{{{labels}}} {}.{:09}",
            l.sum_ns / 1_000_000_000,
            l.sum_ns % 1_000_000_000
        );
        let _ = writeln!(o, "roceprobe_io_latency_seconds_count{{{labels}}} {}", l.count);
    }
}

/// NVMe I/Os per (initiator, target, op): outcomes, bytes moved, and sizes as a histogram.
fn io_families(o: &mut String, p: &str, s: &Summary) {
    if s.ios.by_pair.is_empty() {
        return;
    }
    let labels = |x: &crate::report::summary::IoPairSummary| {
        format!(
            "{p},initiator=\"{}\",target=\"{}\",op=\"{}\"",
            esc(&x.initiator_ip),
            esc(&x.target_ip),
            esc(&x.op)
        )
    };
    family(
        o,
        "roceprobe_nvme_ios_total",
        "counter",
        "NVMe I/Os per (initiator, target, op), by outcome (overflowed: commands not followed, --max-ios full).",
    );
    for x in &s.ios.by_pair {
        let c = &x.counts;
        for (outcome, n) in [
            ("completed", c.completed),
            ("timed_out", c.timed_out),
            ("unfinished", c.unfinished),
            ("overflowed", c.overflowed),
        ] {
            let _ = writeln!(o, "roceprobe_nvme_ios_total{{{},outcome=\"{outcome}\"}} {n}", labels(x));
        }
    }
    family(
        o,
        "roceprobe_nvme_commands_total",
        "counter",
        "NVMe commands other than reads and writes (op nvme_other) per (initiator, target), by command: io.flush, admin.identify, fabrics.connect, ... (other: beyond 8 different ones).",
    );
    for x in &s.ios.by_pair {
        for (command, n) in x.counts.opcodes.named() {
            let _ = writeln!(o, "roceprobe_nvme_commands_total{{{},command=\"{command}\"}} {n}", labels(x));
        }
    }
    family(
        o,
        "roceprobe_nvme_io_bytes_total",
        "counter",
        "Data moved by completed NVMe I/Os (their SGL lengths).",
    );
    for x in &s.ios.by_pair {
        let _ = writeln!(o, "roceprobe_nvme_io_bytes_total{{{}}} {}", labels(x), x.counts.bytes);
    }
    family(
        o,
        "roceprobe_nvme_io_size_bytes",
        "histogram",
        "Sizes of the completed NVMe I/Os that moved data.",
    );
    for x in &s.ios.by_pair {
        let (l, c) = (labels(x), &x.counts);
        let mut below = 0;
        for (i, &bound) in SIZE_CLASS_BOUNDS.iter().enumerate() {
            below += c.size_classes[i];
            let _ = writeln!(o, "roceprobe_nvme_io_size_bytes_bucket{{{l},le=\"{bound}\"}} {below}");
        }
        let all: u64 = c.size_classes.iter().sum();
        let _ = writeln!(o, "roceprobe_nvme_io_size_bytes_bucket{{{l},le=\"+Inf\"}} {all}");
        let _ = writeln!(o, "roceprobe_nvme_io_size_bytes_sum{{{l}}} {}", c.bytes);
        let _ = writeln!(o, "roceprobe_nvme_io_size_bytes_count{{{l}}} {all}");
    }
}

/// Collective jobs: step durations, and the steps each host held back, by reason.
fn job_families(o: &mut String, p: &str, s: &Summary) {
    if s.jobs.is_empty() {
        return;
    }
    family(
        o,
        "roceprobe_step_duration_seconds",
        "summary",
        "Duration of a collective job's steps over the run.",
    );
    for j in &s.jobs {
        let l = format!("{p},job=\"{}\"", esc(&j.name));
        for (q, us) in [("0.5", j.step_p50_us), ("0.99", j.step_p99_us)] {
            // A named job without a step yet has no quantiles (NaN, as Prometheus' clients write).
            let value = us.map_or("NaN".to_owned(), |us| format!("{:.9}", us / 1e6));
            let _ = writeln!(o, "roceprobe_step_duration_seconds{{{l},quantile=\"{q}\"}} {value}");
        }
        let _ = writeln!(o, "roceprobe_step_duration_seconds_count{{{l}}} {}", j.steps);
    }
    family(
        o,
        "roceprobe_straggler_steps_total",
        "counter",
        "Steps of a job a host finished last in, by what its packets showed (loss, nak, congestion, none).",
    );
    for j in &s.jobs {
        for st in &j.stragglers {
            for (reason, n) in &st.reasons {
                let _ = writeln!(
                    o,
                    "roceprobe_straggler_steps_total{{{p},job=\"{}\",host=\"{}\",reason=\"{reason}\"}} {n}",
                    esc(&j.name),
                    esc(&st.host)
                );
            }
        }
    }
    family(
        o,
        "roceprobe_straggler_lag_seconds_total",
        "counter",
        "Time a host finished after its job's median flow, summed over the steps it held back.",
    );
    for j in &s.jobs {
        for st in &j.stragglers {
            let _ = writeln!(
                o,
                "roceprobe_straggler_lag_seconds_total{{{p},job=\"{}\",host=\"{}\"}} {:.9}",
                esc(&j.name),
                esc(&st.host),
                st.lag_us / 1e6
            );
        }
    }
}

/// The number of flows left out of the export, then one family per flow counter over the
/// flows with the most bytes, up to the cap.
fn flow_families(o: &mut String, p: &str, s: &Summary, max_flows: usize) {
    let (flows, left_out) = busiest_flows(s, max_flows);
    family(
        o,
        "roceprobe_flows_not_exported",
        "gauge",
        "Flows beyond the export cap (fewest bytes), not shown as series.",
    );
    let _ = writeln!(o, "roceprobe_flows_not_exported{{{p}}} {left_out}");
    for (name, help, get) in FLOW_COUNTERS {
        family(o, name, "counter", help);
        for f in &flows {
            let _ = writeln!(
                o,
                "{name}{{{p},vantage=\"{}\",src=\"{}\",dst=\"{}\",dst_qpn=\"{}\",transport=\"{}\"}} {}",
                esc(&f.vantage),
                esc(&f.src_ip),
                esc(&f.dst_ip),
                f.dst_qpn,
                esc(&f.transport),
                get(&f.counts)
            );
        }
    }
}

/// The flows with the most bytes, up to `max_flows`, and how many were left out.
fn busiest_flows(s: &Summary, max_flows: usize) -> (Vec<&FlowSummary>, usize) {
    let mut flows: Vec<_> = s.flows.iter().collect();
    flows.sort_by_key(|f| std::cmp::Reverse(f.counts.bytes));
    let left_out = flows.len().saturating_sub(max_flows);
    flows.truncate(max_flows);
    (flows, left_out)
}

/// A flow counter read out of a flow's counts.
type FlowCounter = fn(&crate::track::FlowCounts) -> u64;

/// The per-flow counter families: name, help and the counter.
const FLOW_COUNTERS: [(&str, &str, FlowCounter); 10] = [
    ("roceprobe_flow_packets_total", "Packets of the flow.", |c| c.packets),
    ("roceprobe_flow_bytes_total", "Frame bytes of the flow.", |c| c.bytes),
    ("roceprobe_flow_payload_bytes_total", "RDMA payload bytes of the flow.", |c| c.payload_bytes),
    ("roceprobe_flow_retransmitted_packets_total", "Retransmitted packets.", |c| c.retx_packets),
    (
        "roceprobe_flow_gap_psns_total",
        "PSNs skipped: packets lost upstream of this vantage (a later resend does not undo it).",
        |c| c.gap_psns,
    ),
    ("roceprobe_flow_nak_sequence_total", "NAK sequence errors.", |c| c.nak_seq),
    ("roceprobe_flow_nak_rnr_total", "RNR NAKs.", |c| c.nak_rnr),
    ("roceprobe_flow_cnp_total", "Congestion notification packets for the flow.", |c| c.cnp),
    ("roceprobe_flow_ecn_ce_total", "Packets marked ECN CE.", |c| c.ecn_ce),
    ("roceprobe_flow_mirror_duplicates_total", "Second copies of the flow's packets from one mirror.", |c| {
        c.mirror_duplicates
    }),
];

/// The host name, for `--probe-id`'s default.
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "roceprobe".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;
    use std::time::Instant;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(esc("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    /// A server of `page` on a free loopback port.
    fn server(page: &Page) -> std::net::SocketAddr {
        let listener = bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        serve(listener, page.clone()).unwrap();
        addr
    }

    /// Sends `request` and reads the answer to the end (the server closes after it).
    fn ask(addr: std::net::SocketAddr, request: &str) -> String {
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        let mut r = String::new();
        c.read_to_string(&mut r).unwrap();
        r
    }

    /// Waits (ten seconds at most) until the server has counted `want`.
    fn wait_for_counts(page: &Page, want: impl Fn(ScrapeStats) -> bool) -> ScrapeStats {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !want(page.scrapes()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        page.scrapes()
    }

    #[test]
    fn a_scrape_gets_the_latest_page_and_only_metrics_is_served() {
        let page = Page::default();
        page.set("first\n".into());
        let addr = server(&page);
        // A port check: connects and closes without a byte. Not a scrape.
        drop(TcpStream::connect(addr).unwrap());
        let text = "roceprobe_packets_total{probe=\"x\",kind=\"roce\"} 5\n";
        page.set(text.into());
        let r = ask(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n"), "{r}");
        let (head, body) = r.split_once("\r\n\r\n").unwrap();
        assert_eq!(body, text);
        let head = head.to_ascii_lowercase();
        assert!(head.contains("\r\ncontent-type: text/plain; version=0.0.4; charset=utf-8\r\n"), "{head}");
        assert!(head.contains(&format!("\r\ncontent-length: {}\r\n", text.len())), "{head}");
        assert!(head.contains("\r\nconnection: close\r\n"), "{head}");
        // A query string is not part of the path.
        assert!(ask(addr, "GET /metrics?x=1 HTTP/1.1\r\nHost: x\r\n\r\n").ends_with(text));
        // HEAD: the head of the page, without it.
        let r = ask(addr, "HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 200 OK\r\n") && r.ends_with("\r\n\r\n"), "{r}");
        assert!(r.to_ascii_lowercase().contains(&format!("\r\ncontent-length: {}\r\n", text.len())), "{r}");
        let r = ask(addr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 404 Not Found\r\n"), "{r}");
        // An error's text is not the exposition format.
        assert!(r.to_ascii_lowercase().contains("\r\ncontent-type: text/plain; charset=utf-8\r\n"), "{r}");
        let r = ask(addr, "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
        assert!(r.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"), "{r}");
        assert!(r.to_ascii_lowercase().contains("\r\nallow: get, head\r\n"), "{r}");
        // An HTTP/1.0 client is answered in its version.
        assert!(ask(addr, "GET /metrics HTTP/1.0\r\n\r\n").starts_with("HTTP/1.0 200 OK\r\n"));
        let want = ScrapeStats { served: 6, failed: 0 };
        assert_eq!(wait_for_counts(&page, |s| s == want), want);
    }

    #[test]
    fn a_client_that_hangs_does_not_stop_the_next_scrape() {
        let page = Page::default();
        page.set("up 1\n".into());
        let addr = server(&page);
        // Connects and never sends a request, nor reads; another sends half a request.
        let _hanging = TcpStream::connect(addr).unwrap();
        let mut half = TcpStream::connect(addr).unwrap();
        half.write_all(b"GET /metr").unwrap();
        let start = Instant::now();
        let r = ask(addr, "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(start.elapsed() < REQUEST_TIMEOUT, "{:?}", start.elapsed());
        assert!(r.starts_with("HTTP/1.0 200 OK") && r.ends_with("up 1\n"), "{r}");
        // Both are cut off after the request timeout, and counted.
        let want = ScrapeStats { served: 1, failed: 2 };
        assert_eq!(wait_for_counts(&page, |s| s == want), want);
        let mut rest = Vec::new();
        half.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = half.read_to_end(&mut rest);
        assert!(!String::from_utf8_lossy(&rest).contains(" 200 OK"));
    }

    #[test]
    fn a_request_head_too_large_is_refused() {
        let page = Page::default();
        page.set("up 1\n".into());
        let addr = server(&page);
        let mut c = TcpStream::connect(addr).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut request = b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Filler: ".to_vec();
        request.resize(request.len() + (1 << 20), b'a');
        request.extend_from_slice(b"\r\n\r\n");
        // The server stops reading at its bound and closes: the rest may not be taken.
        let _ = c.write_all(&request);
        let mut r = Vec::new();
        let _ = c.read_to_end(&mut r);
        let r = String::from_utf8_lossy(&r);
        assert!(r.is_empty() || r.starts_with("HTTP/1.1 431 "), "{r}");
        assert!(ask(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").ends_with("\r\n\r\nup 1\n"));
        let want = ScrapeStats { served: 1, failed: 1 };
        assert_eq!(wait_for_counts(&page, |s| s == want), want);
    }

    #[test]
    fn connections_beyond_the_bound_are_closed_at_once() {
        let page = Page::default();
        page.set("up 1\n".into());
        let addr = server(&page);
        let hanging: Vec<_> = (0..MAX_CONNECTIONS).map(|_| TcpStream::connect(addr).unwrap()).collect();
        // One more: closed without an answer, long before the request timeout.
        let start = Instant::now();
        let mut extra = TcpStream::connect(addr).unwrap();
        extra.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let _ = extra.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut r = Vec::new();
        let _ = extra.read_to_end(&mut r);
        assert!(r.is_empty(), "{}", String::from_utf8_lossy(&r));
        assert!(start.elapsed() < REQUEST_TIMEOUT, "{:?}", start.elapsed());
        let refused = wait_for_counts(&page, |s| s.failed >= 1);
        assert_eq!(refused, ScrapeStats { served: 0, failed: 1 });
        // Closed without a request: not scrapes; their slots serve the next.
        drop(hanging);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut c = TcpStream::connect(addr).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
            let _ = c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
            let mut r = String::new();
            let _ = c.read_to_string(&mut r);
            if r.ends_with("\r\n\r\nup 1\n") {
                break;
            }
            assert!(Instant::now() < deadline, "no slot came free");
            std::thread::sleep(Duration::from_millis(20));
        }
        let s = wait_for_counts(&page, |s| s.served == 1);
        assert_eq!(s.served, 1, "{s:?}");
    }

    #[test]
    fn scrape_counts_are_on_the_page() {
        let mut s = Summary::build(&Default::default(), &[], &Default::default());
        assert!(!render(&s, "p", 10).contains("roceprobe_scrapes_total"), "only with an endpoint");
        s.prometheus = Some(ScrapeStats { served: 7, failed: 2 });
        let page = render(&s, "p", 10);
        assert!(page.contains("roceprobe_scrapes_total{probe=\"p\",outcome=\"served\"} 7\n"), "{page}");
        assert!(page.contains("roceprobe_scrapes_total{probe=\"p\",outcome=\"failed\"} 2\n"), "{page}");
    }

    #[test]
    fn a_taken_address_is_an_error_that_names_it() {
        let first = bind("127.0.0.1:0").unwrap();
        let addr = first.local_addr().unwrap().to_string();
        let e = format!("{:#}", bind(&addr).unwrap_err());
        assert!(e.starts_with(&format!("--prometheus {addr}: cannot listen there")), "{e}");
    }
}
