//! Writes fabric-scale benchmark traffic (see `pcap_fixtures::fabric`):
//!   generate-fabric-mix OUT.pcap [--connections N] [--hosts N] [--request-bytes N]
//!                       [--no-acks] [--packets N] [--seed N] [--link-gbps N]
//! Defaults: the many-QPs mix (16,384 RC connections = 32,768 QPs between 256 hosts,
//! 138-byte RDMA WRITE Only and 62-byte ACKs) of 1,048,576 frames.

use anyhow::{bail, Context, Result};
use pcap_fixtures::fabric::{self, Mix};

fn main() -> Result<()> {
    let mut args = std::env::args().skip(1);
    let mut out = None;
    let mut mix = Mix::many_qps(1 << 20);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Result<u64> {
            let v = args.next().with_context(|| format!("{name} needs a value"))?;
            v.parse().with_context(|| format!("{name}: not a number: {v}"))
        };
        match a.as_str() {
            "--connections" => mix.connections = num(&a)? as u32,
            "--hosts" => mix.hosts = num(&a)? as u32,
            "--request-bytes" => mix.request_bytes = num(&a)? as usize,
            "--packets" => mix.packets = num(&a)? as usize,
            "--seed" => mix.seed = num(&a)?,
            "--link-gbps" => mix.link_gbps = num(&a)?.max(1),
            "--no-acks" => mix.acks = false,
            _ if a.starts_with("--") => bail!("unknown option {a}"),
            _ => out = Some(std::path::PathBuf::from(a)),
        }
    }
    let Some(out) = out else { bail!("usage: generate-fabric-mix OUT.pcap [options]") };
    let n = fabric::write(&mix, &out)?;
    eprintln!("{}: {n} frames, {} connections, {} hosts", out.display(), mix.connections, mix.hosts);
    Ok(())
}
