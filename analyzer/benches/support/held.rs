//! The vantages under which every frame of a single-vantage capture is held by the reorder
//! window: a second vantage mapped to a VLAN no frame carries. Shared by the benchmark's
//! `decode+track+held` and `examples/passes --held`, so that both measure the same thing.

use roceprobe::track::vantage::{Rule, SourceKind};
use roceprobe::track::VantageMap;

pub fn held_vantages() -> VantageMap {
    let rule: Rule = "storage=vlan:4094".parse().unwrap();
    VantageMap::new(&[rule], SourceKind::File, &[0]).unwrap()
}
