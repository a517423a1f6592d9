//! `roceprobe plot` draws valid SVG whose series are the CSV reports' numbers.

mod common;
use common::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

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

/// Replays `pcap` into `csv` with `args`, then plots `csv` into `out`.
fn replay_and_plot(csv: &Path, out: &Path, args: &[&str]) {
    replay_into(csv, args);
    let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// `roceprobe replay -q --csv-dir CSV ARGS`, which must succeed.
fn replay_into(csv: &Path, args: &[&str]) {
    let o = run(&[&["replay", "-q", "--csv-dir", csv.to_str().unwrap()][..], args].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// The first interval start of a run and its span to the last interval's end, in ns, over
/// the latency and flows reports.
fn run_span(csv: &Path) -> (String, u64) {
    let rows: Vec<Row> = ["latency.csv", "flows.csv"].iter().flat_map(|f| read_csv(&csv.join(f))).collect();
    let ns = |s: &str| roceprobe::report::plot::parse_rfc3339(s).unwrap();
    let first = rows.iter().map(|r| r["interval_start"].clone()).min_by_key(|s| ns(s)).unwrap();
    let end = rows.iter().map(|r| ns(&r["interval_end"])).max().unwrap();
    let span = end - ns(&first);
    (first, span)
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
    let flows = read_csv(&csv.join("flows.csv"));
    let starts: BTreeSet<&str> = flows.iter().map(|r| r["interval_start"].as_str()).collect();
    assert!(starts.len() >= 5, "{} intervals", starts.len());
    // The legend writes the QPN in hex, as the exit report does (27 is 0x00001b).
    let name = |r: &Row| {
        let qpn: u32 = r["dst_qpn"].parse().unwrap();
        format!("{} {}>{} qp 0x{qpn:06x}", &r["vantage"][..1], r["src_ip"], r["dst_ip"])
    };
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
    let latency = read_csv(&csv.join("latency.csv"));
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
    let latency = read_csv(&csv.join("latency.csv"));
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
fn plot_writes_no_file_through_a_link() {
    // A link in --out named like a plot: its target was written over (and plot exits 0).
    let dir = tempfile::tempdir().unwrap();
    let (csv, _) = rc_loss_plots(dir.path());
    let out = dir.path().join("again");
    std::fs::create_dir(&out).unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "mine").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("flow_throughput.svg")).unwrap();
    let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("flow_throughput.svg: it is a symbolic link, not a regular file"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 1, "nothing written before the refusal");
    // --out a link to nothing: said so (it was "File exists").
    // A hard link under a plot's name: the plot takes the name, the file it shared keeps
    // its bytes (it was written over).
    std::fs::remove_file(out.join("flow_throughput.svg")).unwrap();
    std::fs::hard_link(&victim, out.join("flow_throughput.svg")).unwrap();
    let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "mine");
    assert!(std::fs::read_to_string(out.join("flow_throughput.svg")).unwrap().starts_with("<svg"));
    assert!(!std::fs::read_dir(&out).unwrap().any(|e| e
        .unwrap()
        .file_name()
        .to_string_lossy()
        .contains(".roceprobe-part")));
    let dangling = dir.path().join("dangling");
    std::os::unix::fs::symlink(dir.path().join("nowhere"), &dangling).unwrap();
    let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", dangling.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("a symbolic link to nothing"), "{err}");
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
        // Values the probe never writes were drawn as plots that mislead: NaN as 0, a
        // negative rate below the axis, a huge latency squeezing every series off the chart.
        (
            format!("{lat}{t},{t},a,b,op,seg,3,1,1,NaN,1,1,1,1\r\n"),
            flows.to_owned(),
            "latency.csv row 1: p50_us 'NaN' is not a number from 0 to 1e15",
        ),
        (
            format!("{lat}{t},{t},a,b,op,seg,3,1,1,1,1,1,1,1e308\r\n"),
            flows.to_owned(),
            "max_us '1e308' is not a number from 0 to 1e15",
        ),
        (
            format!("{lat}{t},{t},a,b,op,seg,-100,1,1,1,1,1,1,1\r\n"),
            flows.to_owned(),
            "count '-100' is not a number",
        ),
        (
            lat.to_owned(),
            format!("{flows}{t},{t},c,a,b,1,RC,1,1,1,0,0,0,0,0,0,0,0,-5\r\n"),
            "flows.csv row 1: throughput_gbps '-5' is not a number",
        ),
        (
            lat.to_owned(),
            format!("{flows}{t},{t},c,a,b,1,RC,1,1,1,0,0,0,0,0,0,0,0,inf\r\n"),
            "throughput_gbps 'inf' is not a number",
        ),
        // A file without its header row is no report (it was plotted as an empty run).
        (String::new(), flows.to_owned(), "latency.csv: empty, without the header row a report starts with"),
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

/// rc_loss_vlan replayed in 20 µs intervals and plotted: (CSV folder, plots folder).
fn rc_loss_plots(dir: &Path) -> (std::path::PathBuf, std::path::PathBuf) {
    let (csv, out) = (dir.join("csv"), dir.join("plots"));
    let pcap = fixtures().join("scenarios/rc_loss_vlan/rc_loss_vlan.pcap");
    let args = ["--interval", "20us", "--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"];
    replay_and_plot(&csv, &out, &[&args[..], &[pcap.to_str().unwrap()]].concat());
    (csv, out)
}

fn svg_file(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The x extent of the one `rect` under a node, in pixels.
fn bar(n: roxmltree::Node) -> (f64, f64) {
    let rects: Vec<_> = n.descendants().filter(|r| r.has_tag_name("rect")).collect();
    assert_eq!(rects.len(), 1);
    let attr = |a: &str| rects[0].attribute(a).unwrap().parse::<f64>().unwrap();
    (attr("x"), attr("x") + attr("width"))
}

#[test]
fn a_one_interval_run_draws_one_bar_across_its_interval_on_an_axis_in_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, out) = (dir.path().join("csv"), dir.path().join("plots"));
    let pcap = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    let args = ["--interval", "10s", "--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20"];
    replay_and_plot(&csv, &out, &[&args[..], &[pcap.to_str().unwrap()]].concat());
    let (first, span) = run_span(&csv);
    assert_eq!(span, 10_000_000_000, "one interval of 10 s");
    let text = svg_file(&out.join("segments_nvme_read.svg"));
    let (label, ticks) = axis(&text, "x-axis");
    assert_eq!(label, format!("s since the first interval ({first})"));
    let names: Vec<&str> = ticks.iter().map(|t| t.0.as_str()).collect();
    assert_eq!(names, ["0", "2", "4", "6", "8", "10"]);
    // Each segment's bar spans the interval, tick 0 to tick 10, less a gap at each end.
    let (x0, x10) = (ticks[0].1, ticks[5].1);
    let doc = roxmltree::Document::parse(&text).unwrap();
    let bars: Vec<_> = doc.descendants().filter(|n| n.attribute("class") == Some("series")).collect();
    assert_eq!(bars.len(), 3);
    for g in bars {
        assert_eq!(g.attribute("data-x"), Some("0"));
        let (l, r) = bar(g);
        assert!(
            ((l + r) / 2.0 - (x0 + x10) / 2.0).abs() <= 1.5
                && r - l >= 0.8 * (x10 - x0)
                && l >= x0
                && r <= x10,
            "bar {l}..{r} on an axis {x0}..{x10}"
        );
    }
}

#[test]
fn a_1ms_interval_run_has_an_axis_in_milliseconds_with_each_bar_in_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, out) = (dir.path().join("csv"), dir.path().join("plots"));
    let t = scenario_truth("nvme_faults");
    let files: Vec<String> =
        scenario_files("nvme_faults", &t).iter().map(|p| p.to_str().unwrap().to_owned()).collect();
    let args: Vec<String> =
        [vec!["--interval".to_owned(), "1ms".to_owned()], scenario_args(&t), files].concat();
    replay_and_plot(&csv, &out, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let (first, span) = run_span(&csv);
    let ms = span / 1_000_000;
    assert!(span % 1_000_000 == 0 && (2..=5).contains(&ms), "a run of a few 1 ms intervals: {span} ns");
    let ns = |s: &str| roceprobe::report::plot::parse_rfc3339(s).unwrap();
    let latency = read_csv(&csv.join("latency.csv"));
    for op in ["nvme_read", "nvme_write"] {
        let text = svg_file(&out.join(format!("segments_{op}.svg")));
        let (label, ticks) = axis(&text, "x-axis");
        assert_eq!(label, format!("ms since the first interval ({first})"), "{op}");
        let names: Vec<&str> = ticks.iter().map(|t| t.0.as_str()).collect();
        let want: Vec<String> = (0..=ms).map(|k| k.to_string()).collect();
        assert_eq!(names, want, "{op}");
        // Each interval's bar where the interval is: between the ticks of its start and end.
        let starts: BTreeSet<u64> = latency
            .iter()
            .filter(|r| r["op"] == op)
            .map(|r| (ns(&r["interval_start"]) - ns(&first)) / 1_000_000)
            .collect();
        assert!(!starts.is_empty(), "{op}");
        let doc = roxmltree::Document::parse(&text).unwrap();
        for g in doc.descendants().filter(|n| n.attribute("class") == Some("series")) {
            let x = nums(g.attribute("data-x").unwrap());
            assert_eq!(x, starts.iter().map(|s| *s as f64).collect::<Vec<_>>(), "{op}");
            if let [start] = starts.iter().copied().collect::<Vec<_>>()[..] {
                let (l, r) = bar(g);
                let (a, b) = (ticks[start as usize].1, ticks[start as usize + 1].1);
                assert!(l >= a && r <= b && r - l >= 0.8 * (b - a), "{op}: bar {l}..{r}, interval {a}..{b}");
            }
        }
    }
}

#[test]
fn the_legend_names_every_flow_in_full_within_the_page() {
    let dir = tempfile::tempdir().unwrap();
    let (_, out) = rc_loss_plots(dir.path());
    let text = svg_file(&out.join("flow_throughput.svg"));
    let plotted = series(&text);
    assert!(plotted.len() >= 4, "{} flows", plotted.len());
    let doc = roxmltree::Document::parse(&text).unwrap();
    let legend = texts(group(&doc, "legend"));
    for name in plotted.keys() {
        assert!(legend.contains(name), "{name} not in the legend {legend:?}");
    }
    // Drawn with the font of the plot's layout, each legend text inside the page and clear
    // of the others.
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    options.fontdb_mut().set_sans_serif_family("DejaVu Sans");
    let tree = resvg::usvg::Tree::from_str(&text, &options).unwrap();
    fn walk(g: &resvg::usvg::Group, out: &mut Vec<(String, resvg::usvg::Rect)>) {
        for n in g.children() {
            match n {
                resvg::usvg::Node::Group(g) => walk(g, out),
                resvg::usvg::Node::Text(t) => {
                    let s: String = t.chunks().iter().map(|c| c.text()).collect();
                    out.push((s.trim().to_owned(), t.abs_bounding_box()));
                }
                _ => {}
            }
        }
    }
    let mut drawn = Vec::new();
    walk(tree.root(), &mut drawn);
    let boxes: Vec<_> = drawn.iter().filter(|(s, _)| legend.contains(s)).collect();
    assert_eq!(boxes.len(), legend.len(), "{drawn:?}");
    for (i, (s, b)) in boxes.iter().enumerate() {
        assert!(b.left() >= 0.0 && b.right() <= 800.0 && b.top() >= 0.0 && b.bottom() <= 450.0, "{s}: {b:?}");
        for (t, c) in &boxes[i + 1..] {
            let apart = b.right() <= c.left()
                || c.right() <= b.left()
                || b.bottom() <= c.top()
                || c.bottom() <= b.top();
            assert!(apart, "{s} {b:?} overlaps {t} {c:?}");
        }
    }
}

#[test]
fn throughput_axes_take_the_unit_that_fits_the_data() {
    let dir = tempfile::tempdir().unwrap();
    let (_, fast) = rc_loss_plots(&dir.path().join("fast"));
    // The connection manager's capture: a few kilobytes over a second.
    let (csv, slow) = (dir.path().join("slow/csv"), dir.path().join("slow/plots"));
    replay_and_plot(&csv, &slow, &["--interval", "1s", capture("rdma_cm.pcap").to_str().unwrap()]);
    for (out, unit) in [(fast, "Gbit/s"), (slow, "kbit/s")] {
        let text = svg_file(&out.join("flow_throughput.svg"));
        let (label, ticks) = axis(&text, "y-axis");
        assert_eq!(label, format!("throughput ({unit})"));
        let max = series(&text).values().flat_map(|(_, y)| y.iter().copied()).fold(0.0, f64::max);
        assert!((1.0..1000.0).contains(&max), "{unit}: the busiest interval is {max} {unit}");
        let top: f64 = ticks.iter().map(|t| t.0.parse::<f64>().unwrap()).fold(0.0, f64::max);
        assert!(top >= max && top < 2.0 * max + 1.0, "{unit}: ticks up to {top} for {max}");
    }
}

#[test]
fn latency_cdfs_have_log_axes_with_ticks_in_time_units() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, out) = rc_loss_plots(dir.path());
    let ops: BTreeSet<String> = read_csv(&csv.join("latency.csv")).iter().map(|r| r["op"].clone()).collect();
    assert!(!ops.is_empty());
    for op in ops {
        let text = svg_file(&out.join(format!("latency_cdf_{op}.svg")));
        let (label, ticks) = axis(&text, "x-axis");
        assert!(label.starts_with("latency (log scale"), "{op}: {label}");
        // Each tick 1, 2 or 5 times a power of ten of ns, µs, ms or s.
        let us: Vec<f64> = ticks
            .iter()
            .map(|(t, _)| {
                let (v, unit) = t.split_once(' ').unwrap_or_else(|| panic!("{op}: tick {t}"));
                let v: f64 = v.parse().unwrap();
                let lead = v / 10f64.powf(v.log10().floor());
                assert!([1.0, 2.0, 5.0].iter().any(|m| (lead - m).abs() < 1e-9), "{op}: tick {t}");
                v * match unit {
                    "ns" => 1e-3,
                    "µs" => 1.0,
                    "ms" => 1e3,
                    "s" => 1e6,
                    _ => panic!("{op}: tick {t}"),
                }
            })
            .collect();
        assert!(us.len() >= 2 && us.windows(2).all(|w| w[1] > w[0]), "{op}: {ticks:?}");
        // A log axis: position proportional to the log of the latency.
        let (p0, l0) = (ticks[0].1, us[0].log10());
        let px_per_decade = (ticks.last().unwrap().1 - p0) / (us.last().unwrap().log10() - l0);
        for ((t, p), v) in ticks.iter().zip(&us) {
            assert!((p - p0 - (v.log10() - l0) * px_per_decade).abs() <= 1.5, "{op}: tick {t} at {p}");
        }
        // The ticks span the data.
        let x: Vec<f64> = series(&text).values().flat_map(|(x, _)| x.iter().copied()).collect();
        let (lo, hi) =
            (x.iter().copied().fold(f64::INFINITY, f64::min), x.iter().copied().fold(0.0, f64::max));
        assert!(us[0] <= lo && *us.last().unwrap() >= hi, "{op}: ticks {us:?} for data {lo}..{hi}");
    }
}

/// The seconds in the unit a time axis label starts with.
fn unit_s(label: &str) -> f64 {
    match label.split_whitespace().next().unwrap_or("") {
        "ns" => 1e-9,
        "µs" => 1e-6,
        "ms" => 1e-3,
        "s" => 1.0,
        "min" => 60.0,
        "h" => 3600.0,
        _ => panic!("no time unit in {label:?}"),
    }
}

/// A straggler marker of the steps plot: (job, x, y, host, reason).
type Marker = (String, f64, f64, String, String);

fn markers(svg: &str) -> Vec<Marker> {
    let doc = roxmltree::Document::parse(svg).unwrap();
    doc.descendants()
        .filter(|n| n.attribute("class") == Some("straggler"))
        .map(|n| {
            let a = |k: &str| n.attribute(k).unwrap_or_else(|| panic!("a marker without {k}")).to_owned();
            (
                a("data-name"),
                a("data-x").parse().unwrap(),
                a("data-y").parse().unwrap(),
                a("data-host"),
                a("data-reason"),
            )
        })
        .collect()
}

#[test]
fn the_steps_plot_draws_each_jobs_step_durations_with_the_held_back_stragglers_marked() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, out) = (dir.path().join("csv"), dir.path().join("plots"));
    let t = scenario_truth("collective_vlan");
    let files: Vec<String> =
        scenario_files("collective_vlan", &t).iter().map(|p| p.to_str().unwrap().to_owned()).collect();
    let args = [scenario_args(&t), files].concat();
    replay_and_plot(&csv, &out, &args.iter().map(String::as_str).collect::<Vec<_>>());
    let steps = read_csv(&csv.join("steps.csv"));
    assert!(steps.len() >= 60, "{} steps", steps.len());
    let text = svg_file(&out.join("steps.svg"));
    assert!(out.join("steps.png").is_file());

    // x: time since the first step, in the axis's unit; y: the duration in the y axis's unit.
    let ns = |s: &str| roceprobe::report::plot::parse_rfc3339(s).unwrap();
    let first = steps.iter().map(|r| r["start"].clone()).min_by_key(|s| ns(s)).unwrap();
    let (x_label, _) = axis(&text, "x-axis");
    assert!(x_label.ends_with(&format!(" since the first step ({first})")), "{x_label}");
    let x_unit = unit_s(&x_label);
    let (y_label, y_ticks) = axis(&text, "y-axis");
    let unit = y_label.strip_prefix("step duration (").and_then(|l| l.strip_suffix(')')).unwrap();
    let y_unit = unit_s(unit);
    let x_of = |r: &Row| (ns(&r["start"]) - ns(&first)) as f64 * 1e-9 / x_unit;
    let y_of = |r: &Row| f(r, "duration_s") / y_unit;
    let longest = steps.iter().map(y_of).fold(0.0, f64::max);
    assert!((1.0..1000.0).contains(&longest), "the longest step is {longest} {unit}");
    let top = y_ticks.iter().map(|t| t.0.parse::<f64>().unwrap()).fold(0.0, f64::max);
    assert!(top >= longest, "ticks up to {top} for {longest}");

    // A series per job: its steps in order of start.
    let plotted = series(&text);
    let jobs: BTreeSet<String> = steps.iter().map(|r| r["job"].clone()).collect();
    assert_eq!(plotted.keys().cloned().collect::<BTreeSet<_>>(), jobs);
    assert_eq!(jobs.len(), 2);
    for (job, (x, y)) in &plotted {
        let mut rows: Vec<&Row> = steps.iter().filter(|r| r["job"] == *job).collect();
        rows.sort_by_key(|r| ns(&r["start"]));
        let (wx, wy): (Vec<f64>, Vec<f64>) = rows.iter().map(|r| (x_of(r), y_of(r))).unzip();
        assert_eq!((x.len(), y.len()), (wx.len(), wy.len()), "{job}");
        assert!(x.iter().zip(&wx).all(|(a, b)| close(*a, *b)), "{job}: x {x:?} vs {wx:?}");
        assert!(y.iter().zip(&wy).all(|(a, b)| close(*a, *b)), "{job}: y {y:?} vs {wy:?}");
    }

    // A marker on exactly the steps whose straggler was held back, with its host and reason.
    let mut marked = markers(&text);
    let mut want: Vec<Marker> = steps
        .iter()
        .filter(|r| r["reason"] != "none")
        .map(|r| (r["job"].clone(), x_of(r), y_of(r), r["straggler_host"].clone(), r["reason"].clone()))
        .collect();
    let order = |a: &Marker, b: &Marker| (&a.0, a.1).partial_cmp(&(&b.0, b.1)).unwrap();
    marked.sort_by(order);
    want.sort_by(order);
    assert_eq!(marked.len(), want.len());
    for (m, w) in marked.iter().zip(&want) {
        assert!(
            m.0 == w.0 && close(m.1, w.1) && close(m.2, w.2) && m.3 == w.3 && m.4 == w.4,
            "{m:?} vs {w:?}"
        );
    }

    // The truth: every step held back by loss or congestion is marked with its reason and host.
    let t0 = ns(&first);
    let mut held = 0;
    for job in t["jobs"].as_array().unwrap() {
        let name = job["name"].as_str().unwrap();
        for s in job["steps"].as_array().unwrap() {
            let reason = s["reason"].as_str().unwrap();
            if reason != "loss" && reason != "congestion" {
                continue;
            }
            held += 1;
            let x = (s["start_ns"].as_u64().unwrap() - t0) as f64 * 1e-9 / x_unit;
            let y = s["duration_ns"].as_u64().unwrap() as f64 * 1e-9 / y_unit;
            let host = s["straggler_host"].as_str().unwrap();
            assert!(
                marked.iter().any(|m| m.0 == name
                    && close(m.1, x)
                    && close(m.2, y)
                    && m.3 == host
                    && m.4 == reason),
                "{name}: the step at {x} {reason} by {host} is not marked: {marked:?}"
            );
        }
    }
    assert!(held >= 8, "the scenario holds {held} steps back");

    // The legend: each job, and each reason used with its stragglers.
    let doc = roxmltree::Document::parse(&text).unwrap();
    let legend = texts(group(&doc, "legend"));
    for job in &jobs {
        assert!(legend.contains(job), "{job} not in {legend:?}");
    }
    for reason in ["loss", "congestion"] {
        let entry = legend
            .iter()
            .find(|e| e.starts_with(&format!("held back by {reason}: ")))
            .unwrap_or_else(|| panic!("no {reason} in {legend:?}"));
        let host = &want.iter().find(|m| m.4 == reason).unwrap().3;
        assert!(entry.contains(host.as_str()), "{entry}");
    }
    assert!(!legend.iter().any(|e| e.contains("nak")), "{legend:?}");
}

#[test]
fn without_steps_there_is_no_steps_plot() {
    let dir = tempfile::tempdir().unwrap();
    let (csv, _) = rc_loss_plots(dir.path());
    // No steps.csv (a folder from before collectives were reported), then steps.csv with its
    // header alone: the other plots, and no steps plot.
    std::fs::remove_file(csv.join("steps.csv")).unwrap();
    let header = "start,end,job,duration_s,flows,bytes,straggler_src_ip,straggler_dst_ip,straggler_dst_qpn,straggler_host,lag_us,reason,straggler_gbps,median_gbps\r\n";
    for (k, steps) in [None, Some(header)].into_iter().enumerate() {
        if let Some(text) = steps {
            std::fs::write(csv.join("steps.csv"), text).unwrap();
        }
        let out = dir.path().join(format!("out{k}"));
        let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(out.join("flow_throughput.svg").is_file(), "{k}");
        assert!(!out.join("steps.svg").exists() && !out.join("steps.png").exists(), "{k}");
    }
}

#[test]
fn the_steps_plot_draws_the_eight_busiest_jobs_and_says_how_many_more() {
    // 12 jobs, job k with k+1 steps: the 8 of the most steps (j4 to j11) get a line each
    // (8 colours); 60 jobs had drawn the chart as a strip under their legend.
    let header = "start,end,job,duration_s,flows,bytes,straggler_src_ip,straggler_dst_ip,straggler_dst_qpn,straggler_host,lag_us,reason,straggler_gbps,median_gbps\r\n";
    let mut steps = header.to_owned();
    for k in 0..12 {
        for n in 0..=k {
            let t = format!("2026-11-29T08:00:00.{:06}000Z", 1000 * n + k);
            steps += &format!(
                "{t},{t},j{k:02},0.000010000,2,100,10.0.0.1,10.0.0.2,7,10.0.0.1,1.000,none,1.0,2.0\r\n"
            );
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let (csv, _) = rc_loss_plots(dir.path());
    std::fs::write(csv.join("steps.csv"), steps).unwrap();
    let out = dir.path().join("many");
    let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = svg_file(&out.join("steps.svg"));
    let plotted: BTreeSet<String> = series(&text).keys().cloned().collect();
    let want: BTreeSet<String> = (4..12).map(|k| format!("j{k:02}")).collect();
    assert_eq!(plotted, want);
    assert!(text.contains("Collective steps of the 8 busiest jobs (4 more in steps.csv)"), "{text}");
}

#[test]
fn plots_an_earlier_run_left_in_out_are_named() {
    // rc_loss_vlan's plots, then nvme_vlan's into the same folder: the first run's that
    // the second does not draw (RDMA latency CDFs, steps) stay, and are named on stderr,
    // not taken for the second run's.
    let dir = tempfile::tempdir().unwrap();
    let (_, out) = rc_loss_plots(dir.path());
    assert!(out.join("steps.svg").is_file() && out.join("latency_cdf_rc_ack.svg").is_file());
    let csv = dir.path().join("nvme");
    let pcap = fixtures().join("scenarios/nvme_vlan/nvme_vlan.pcap");
    replay_into(
        &csv,
        &["--vantage", "compute=vlan:10", "--vantage", "storage=vlan:20", pcap.to_str().unwrap()],
    );
    let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "roceprobe: note: --out {} also holds plots this run did not draw (an earlier run's): latency_cdf_rc_ack.png, latency_cdf_rc_ack.svg, latency_cdf_rdma_read.png, latency_cdf_rdma_read.svg, steps.png, steps.svg",
            out.display()
        )
    );
}

#[test]
fn a_broken_steps_csv_is_a_one_line_error() {
    let header = "start,end,job,duration_s,flows,bytes,straggler_src_ip,straggler_dst_ip,straggler_dst_qpn,straggler_host,lag_us,reason,straggler_gbps,median_gbps\r\n";
    let t = "2026-11-29T08:00:00.000000000Z";
    let row = |duration: &str, reason: &str| {
        format!("{header}{t},{t},j,{duration},2,100,10.0.0.1,10.0.0.2,7,10.0.0.1,1.000,{reason},1.0,2.0\r\n")
    };
    let dir = tempfile::tempdir().unwrap();
    let (csv, _) = rc_loss_plots(dir.path());
    for (steps, needle) in [
        (row("x", "loss"), "duration_s 'x' is not a number"),
        (row("0.000001000", "slow"), "reason 'slow' is not loss, nak, congestion or none"),
        (format!("{header}yesterday,{t},j\r\n"), "steps.csv"),
        ("start,end\r\n\"unterminated\r\n,,,".to_owned(), "steps.csv"),
    ] {
        std::fs::write(csv.join("steps.csv"), &steps).unwrap();
        let out = dir.path().join("broken");
        let o = run(&["plot", "--csv-dir", csv.to_str().unwrap(), "--out", out.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{needle}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{err}");
        assert!(!out.join("steps.svg").exists());
    }
}
