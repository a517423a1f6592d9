//! `roceprobe plot` draws valid SVG whose series are the CSV reports' numbers.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

type Row = BTreeMap<String, String>;

fn read(path: &Path) -> Vec<Row> {
    let mut r = csv::Reader::from_path(path).unwrap();
    let h: Vec<String> = r.headers().unwrap().iter().map(str::to_owned).collect();
    r.records().map(|rec| h.iter().cloned().zip(rec.unwrap().iter().map(str::to_owned)).collect()).collect()
}

fn f(row: &Row, k: &str) -> f64 {
    row[k].parse().unwrap()
}

fn nums(s: &str) -> Vec<f64> {
    s.split_whitespace().map(|v| v.parse().unwrap()).collect()
}

/// Every `g.series` of an SVG: name → (x, y).
fn series(svg: &str) -> BTreeMap<String, (Vec<f64>, Vec<f64>)> {
    let doc = roxmltree::Document::parse(svg).expect("valid XML");
    assert_eq!(doc.root_element().tag_name().name(), "svg");
    doc.descendants()
        .filter(|n| n.attribute("class") == Some("series"))
        .map(|n| {
            let (x, y) = (nums(n.attribute("data-x").unwrap()), nums(n.attribute("data-y").unwrap()));
            assert_eq!(x.len(), y.len());
            (n.attribute("data-name").unwrap().to_owned(), (x, y))
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The texts under an element, trimmed, in order.
fn texts(n: roxmltree::Node) -> Vec<String> {
    n.descendants()
        .filter(|t| t.has_tag_name("text"))
        .map(|t| t.text().unwrap_or("").trim().to_owned())
        .collect()
}

/// The only element of an SVG with `class`.
fn group<'a>(doc: &'a roxmltree::Document, class: &str) -> roxmltree::Node<'a, 'a> {
    let mut found = doc.descendants().filter(|n| n.attribute("class") == Some(class));
    let g = found.next().unwrap_or_else(|| panic!("no {class}"));
    assert!(found.next().is_none(), "more than one {class}");
    g
}

/// An axis (`x-axis` or `y-axis`) of an SVG: its label, and its ticks as (label, position
/// along the axis in pixels).
fn axis(svg: &str, class: &str) -> (String, Vec<(String, f64)>) {
    let doc = roxmltree::Document::parse(svg).unwrap();
    let g = group(&doc, class);
    let child = |c: &str| g.descendants().find(|n| n.attribute("class") == Some(c)).unwrap();
    let label = texts(child("axis-label"));
    assert_eq!(label.len(), 1, "{class}: {label:?}");
    let at = if class == "x-axis" { "x" } else { "y" };
    let ticks = child("ticks")
        .descendants()
        .filter(|t| t.has_tag_name("text"))
        .map(|t| (t.text().unwrap().trim().to_owned(), t.attribute(at).unwrap().parse().unwrap()))
        .collect();
    (label[0].clone(), ticks)
}

/// Multiplier from Gbit/s of the unit a throughput axis label names.
fn per_gbps(label: &str) -> f64 {
    let unit = label.strip_prefix("throughput (").and_then(|l| l.strip_suffix(')')).unwrap_or(label);
    match unit {
        "Gbit/s" => 1.0,
        "Mbit/s" => 1e3,
        "kbit/s" => 1e6,
        "bit/s" => 1e9,
        _ => panic!("throughput axis label {label:?}"),
    }
}

#[test]
fn plots_carry_the_csv_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, out) = (dir.path().join("csv"), dir.path().join("plots"));
    let pcap = fixtures().join("scenarios/rc_loss_vlan/rc_loss_vlan.pcap");
    let o = run(&[
        "replay",
        "-q",
        "--interval",
        "20us",
        "--csv-dir",
        csv.to_str().unwrap(),
        "--vantage",
        "compute=vlan:10",
        "--vantage",
        "storage=vlan:20",
        pcap.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let listed: BTreeSet<String> = String::from_utf8_lossy(&o.stdout).lines().map(str::to_owned).collect();
    let svg = |name: &str| {
        let p = out.join(name);
        assert!(listed.contains(p.to_str().unwrap()), "{name} not listed");
        // And its PNG: the plot's size, and drawn (not one colour).
        let png = p.with_extension("png");
        assert!(listed.contains(png.to_str().unwrap()), "{name}'s PNG not listed");
        let b = std::fs::read(&png).unwrap();
        assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
        assert_eq!(&b[12..24], b"IHDR\0\0\x03\x20\0\0\x01\xc2", "800x450");
        assert!(b.len() > 10_000, "{} bytes", b.len());
        std::fs::read_to_string(p).unwrap()
    };

    // Throughput: the busiest flows, each interval's throughput in the axis's unit (0 where
    // the flow had no row), and a circle per interval with retransmissions.
    let flows = read(&csv.join("flows.csv"));
    let starts: BTreeSet<&str> = flows.iter().map(|r| r["interval_start"].as_str()).collect();
    assert!(starts.len() >= 5, "{} intervals", starts.len());
    let name =
        |r: &Row| format!("{} {}>{} qp {}", &r["vantage"][..1], r["src_ip"], r["dst_ip"], r["dst_qpn"]);
    let mut bytes: BTreeMap<String, f64> = BTreeMap::new();
    for r in &flows {
        *bytes.entry(name(r)).or_default() += f(r, "bytes");
    }
    let text = svg("flow_throughput.svg");
    let plotted = series(&text);
    let scale = per_gbps(&axis(&text, "y-axis").0);
    assert_eq!(plotted.len(), bytes.len().min(8));
    let least_shown = plotted.keys().map(|k| bytes[k]).fold(f64::INFINITY, f64::min);
    assert!(bytes.iter().filter(|(k, _)| !plotted.contains_key(*k)).all(|(_, b)| *b <= least_shown));
    let doc = roxmltree::Document::parse(&text).unwrap();
    let mut retx_marks = 0;
    for (flow, (_, y)) in &plotted {
        let want: Vec<f64> = starts
            .iter()
            .map(|s| {
                flows
                    .iter()
                    .filter(|r| name(r) == *flow && r["interval_start"] == *s)
                    .map(|r| f(r, "throughput_gbps"))
                    .sum::<f64>()
                    * scale
            })
            .collect();
        assert!(y.iter().zip(&want).all(|(a, b)| close(*a, *b)), "{flow}: {y:?} vs {want:?}");
        let retx = flows.iter().filter(|r| name(r) == *flow && f(r, "retx_packets") > 0.0).count();
        let circles = doc
            .descendants()
            .filter(|n| {
                n.attribute("class") == Some("retx") && n.attribute("data-name") == Some(flow.as_str())
            })
            .count();
        assert_eq!(circles, retx, "{flow}");
        retx_marks += circles;
    }
    assert!(retx_marks > 0, "the fixture has retransmissions");

    // Latency CDFs: one line per segment of the op, rising to 1.
    let latency = read(&csv.join("latency.csv"));
    let ops: BTreeSet<&str> = latency.iter().map(|r| r["op"].as_str()).collect();
    for op in &ops {
        let plotted = series(&svg(&format!("latency_cdf_{op}.svg")));
        let segs: BTreeSet<String> =
            latency.iter().filter(|r| r["op"] == *op).map(|r| r["segment"].clone()).collect();
        assert_eq!(plotted.keys().cloned().collect::<BTreeSet<_>>(), segs, "{op}");
        for (seg, (x, y)) in &plotted {
            assert!(x.windows(2).all(|w| w[0] <= w[1]) && y.windows(2).all(|w| w[0] <= w[1]), "{op} {seg}");
            assert!(close(*y.last().unwrap(), 1.0), "{op} {seg} ends at {:?}", y.last());
            let max = latency
                .iter()
                .filter(|r| r["op"] == *op && r["segment"] == *seg)
                .map(|r| f(r, "max_us"))
                .fold(0.0, f64::max);
            assert!(close(*x.last().unwrap(), max.max(0.001)), "{op} {seg}");
        }
    }
}

#[test]
fn the_segment_split_is_the_count_weighted_mean_of_the_pairs_medians_per_interval() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, out) = (dir.path().join("csv"), dir.path().join("plots"));
    let pcap = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let c = csv.to_str().unwrap();
    let args = ["replay", "-q", "--interval", "20us", "--csv-dir", c, "--vantage", "compute=vlan:10"];
    let o = run(&[&args[..], &["--vantage", "storage=vlan:20", pcap.to_str().unwrap()]].concat());
    assert!(o.status.success());
    assert!(run(&["plot", "--csv-dir", c, "--out", out.to_str().unwrap()]).status.success());
    let latency = read(&csv.join("latency.csv"));
    let plotted = series(&std::fs::read_to_string(out.join("segments_nvme_read.svg")).unwrap());
    let starts: BTreeSet<&str> =
        latency.iter().filter(|r| r["op"] == "nvme_read").map(|r| r["interval_start"].as_str()).collect();
    for seg in ["compute", "network", "storage"] {
        let want: Vec<f64> = starts
            .iter()
            .map(|s| {
                let rows: Vec<&Row> = latency
                    .iter()
                    .filter(|r| r["op"] == "nvme_read" && r["segment"] == seg && r["interval_start"] == *s)
                    .collect();
                let n: f64 = rows.iter().map(|r| f(r, "count")).sum();
                if n > 0.0 {
                    rows.iter().map(|r| f(r, "count") * f(r, "p50_us")).sum::<f64>() / n
                } else {
                    0.0
                }
            })
            .collect();
        let y = &plotted[seg].1;
        assert!(
            y.iter().zip(&want).all(|(a, b)| close(*a, *b)) && y.len() == want.len(),
            "{seg}: {y:?} vs {want:?}"
        );
    }
}

#[test]
fn over_one_interval_the_segment_split_is_the_truths_pair_medians_weighted_by_count() {
    // Truth from the generator: per (initiator, target) pair the median of its nvme_read I/Os'
    // segment times (the lower one of an even count: the smallest value with half the samples
    // at or below it), weighted by the pair's I/O count.
    let dir = tempfile::tempdir().unwrap();
    let (csv, out) = (dir.path().join("csv"), dir.path().join("plots"));
    let t = scenario_truth("nvme_vlan");
    let pcap = scenario_files("nvme_vlan", &t).remove(0);
    let c = csv.to_str().unwrap();
    let a = scenario_args(&t);
    let args = ["replay", "-q", "--interval", "10s", "--csv-dir", c, pcap.to_str().unwrap()];
    assert!(run(&[&args[..], &a.iter().map(String::as_str).collect::<Vec<_>>()].concat()).status.success());
    assert!(run(&["plot", "--csv-dir", c, "--out", out.to_str().unwrap()]).status.success());
    let plotted = series(&std::fs::read_to_string(out.join("segments_nvme_read.svg")).unwrap());
    let truth = truth_series(&t, &["compute", "network", "storage"]);
    for seg in ["compute", "network", "storage"] {
        let (mut sum, mut n) = (0.0, 0.0);
        for ((_, _, op, s), v) in &truth {
            if op == "nvme_read" && s == seg {
                sum += v.len() as f64 * v[v.len().div_ceil(2) - 1] as f64 / 1000.0;
                n += v.len() as f64;
            }
        }
        assert!(n >= 40.0, "{seg}: {n} reads");
        let y = &plotted[seg].1;
        assert_eq!(y.len(), 1, "{seg}: one interval");
        // 3 significant digits in the histograms.
        assert!(
            (y[0] - sum / n).abs() <= 0.002 * sum / n + 0.001,
            "{seg}: plotted {} vs truth {}",
            y[0],
            sum / n
        );
    }
}

#[test]
fn plot_without_csv_reports_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let o = run(&["plot", "--csv-dir", d, "--out", d]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1);
    assert!(err.contains("no latency.csv and flows.csv"), "{err}");
}

#[test]
fn hostile_csv_files_are_one_line_errors_not_panics() {
    let lat = "interval_start,interval_end,initiator_ip,target_ip,op,segment,count,min_us,mean_us,p50_us,p90_us,p99_us,p999_us,max_us\r\n";
    let flows = "interval_start,interval_end,vantage,src_ip,dst_ip,dst_qpn,transport,packets,bytes,payload_bytes,retx_packets,retx_bytes,gap_psns,nak_seq,nak_rnr,nak_other,cnp,ecn_ce,throughput_gbps\r\n";
    let t = "2026-11-29T08:00:00.000000000Z";
    for (l, f, needle) in [
        (
            format!("{lat}{t},{t},a,b,op,seg,x,1,1,1,1,1,1,1\r\n"),
            flows.to_owned(),
            "count 'x' is not a number",
        ),
        (lat.to_owned(), format!("{flows}{t},{t},,a,b,1,RC,1,1,1,0,0,0,0,0,0,0,0,1\r\n"), ""),
        (
            lat.to_owned(),
            format!("{flows}2026-11-29T08:00:00.00000000éZ,{t},c,a,b,1,RC,1,1,1,0,0,0,0,0,0,0,0,1\r\n"),
            "not an RFC 3339 time",
        ),
        (lat.to_owned(), "just,one\r\n\"unterminated\r\n".to_owned(), ""),
        ("\u{0}\u{1}garbage".to_owned(), flows.to_owned(), ""),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("latency.csv"), &l).unwrap();
        std::fs::write(dir.path().join("flows.csv"), &f).unwrap();
        let out = dir.path().join("out");
        let o = run(&["plot", "--csv-dir", dir.path().to_str().unwrap(), "--out", out.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        // Either plotted, or refused in one line; never a panic.
        assert!(!err.contains("panicked"), "{err}");
        if !o.status.success() {
            assert_eq!(o.status.code(), Some(1), "{err}");
            assert_eq!(err.lines().count(), 1, "{err}");
            assert!(err.contains(needle), "{err}");
        } else {
            assert!(needle.is_empty(), "plotted what should be refused ({needle})");
        }
    }
}
