//! Writes every scenario's captures and truth: `generate-fixtures [DIR]` (default: the
//! crate's `scenarios/` folder).

fn main() -> anyhow::Result<()> {
    let out =
        std::env::args().nth(1).map(std::path::PathBuf::from).unwrap_or_else(pcap_fixtures::scenarios_dir);
    for s in pcap_fixtures::all() {
        let dir = out.join(s.name);
        let t = pcap_fixtures::write_scenario(&s, &dir)?;
        println!(
            "{:<14} {:>6} frames {:>6} RoCE {:>3} flows {:>4} I/Os  -> {}",
            s.name,
            t.packets,
            t.roce_packets,
            t.flows.len(),
            t.ios.len(),
            dir.display()
        );
    }
    Ok(())
}
