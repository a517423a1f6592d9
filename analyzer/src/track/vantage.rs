//! Vantage points: where a packet was observed (docs/METRICS.md, "Remote mirrors and vantage points"). The user maps traffic to
//! `compute` or `storage` by DPDK port, input file or VLAN id; unmapped traffic is `compute`.

use anyhow::{bail, Result};
use std::fmt;
use std::str::FromStr;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Vantage {
    /// The mirror of the switch ports facing GPU / compute hosts.
    #[default]
    Compute,
    /// The mirror of the switch ports facing storage targets.
    Storage,
}

impl Vantage {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compute => "compute",
            Self::Storage => "storage",
        }
    }
}

impl fmt::Display for Vantage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a `--vantage NAME=SELECTOR` rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selector {
    /// DPDK port id (live).
    Port(u16),
    /// Input file index, 0-based (replay).
    File(u16),
    /// Outermost VLAN id of the frame (an RSPAN VLAN, or a per-vantage tag).
    Vlan(u16),
    /// ERSPAN session id (0-1023).
    Erspan(u16),
}

/// One `--vantage` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    pub vantage: Vantage,
    pub selector: Selector,
}

const RULE_FORM: &str =
    "expected NAME=SELECTOR, NAME compute|storage, SELECTOR port:N|file:N|vlan:N|erspan:N";

impl FromStr for Rule {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let (name, sel) = s.split_once('=').ok_or_else(|| format!("'{s}': {RULE_FORM}"))?;
        let vantage = match name {
            "compute" => Vantage::Compute,
            "storage" => Vantage::Storage,
            _ => return Err(format!("'{s}': unknown vantage '{name}' ({RULE_FORM})")),
        };
        let (kind, num) = sel.split_once(':').ok_or_else(|| format!("'{s}': {RULE_FORM}"))?;
        let n: u16 = num.parse().map_err(|_| format!("'{s}': '{num}' is not a number from 0 to 65535"))?;
        let selector = match kind {
            "port" => Selector::Port(n),
            "file" => Selector::File(n),
            "vlan" if n <= 4095 => Selector::Vlan(n),
            "vlan" => return Err(format!("'{s}': VLAN id {n} is out of range 0-4095")),
            "erspan" if n <= 1023 => Selector::Erspan(n),
            "erspan" => return Err(format!("'{s}': ERSPAN session id {n} is out of range 0-1023")),
            _ => return Err(format!("'{s}': unknown selector '{kind}' ({RULE_FORM})")),
        };
        Ok(Rule { vantage, selector })
    }
}

/// Which kind of source ids the packets carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceKind {
    Port,
    File,
}

/// Resolves a packet's vantage from its ERSPAN session, outermost VLAN and source id, in
/// that order (the most specific first); without a match, the vantage is `compute`.
#[derive(Debug, Clone, Default)]
pub struct VantageMap {
    by_source: Vec<Option<Vantage>>,
    by_vlan: Vec<(u16, Vantage)>,
    by_session: Vec<(u16, Vantage)>,
    /// Some rule maps traffic to `storage` ([`VantageMap::maps_storage`]); without one every
    /// packet is `compute`, which [`VantageMap::resolve`] answers without looking.
    storage_rules: bool,
}

impl VantageMap {
    /// Checks the rules against the kind of source and the number of sources, so that a
    /// selector that can never match is an error before start-up.
    pub fn new(rules: &[Rule], kind: SourceKind, sources: &[u16]) -> Result<Self> {
        Self::check_kind(rules, kind)?;
        let mut m = Self::default();
        for r in rules {
            let id = match (r.selector, kind) {
                (Selector::Vlan(v), _) => {
                    push_unique(&mut m.by_vlan, v, r.vantage, "vlan")?;
                    continue;
                }
                (Selector::Erspan(s), _) => {
                    push_unique(&mut m.by_session, s, r.vantage, "erspan")?;
                    continue;
                }
                // Of the source kind (checked above).
                (Selector::Port(id) | Selector::File(id), _) => id,
            };
            if !sources.contains(&id) {
                let what = if kind == SourceKind::Port { "port" } else { "file" };
                let read = match kind {
                    SourceKind::Port => "the ports read are those EAL found, or those --port names",
                    _ => "the input files, numbered from 0 in the order given",
                };
                bail!("--vantage {what}:{id}: there is no {what} {id} among {sources:?} ({read})");
            }
            let i = usize::from(id);
            if m.by_source.len() <= i {
                m.by_source.resize(i + 1, None);
            }
            if let Some(prev) = m.by_source[i] {
                if prev != r.vantage {
                    let what = if kind == SourceKind::Port { "port" } else { "file" };
                    bail!("--vantage: {what}:{id} is mapped to both {prev} and {}", r.vantage);
                }
            }
            m.by_source[i] = Some(r.vantage);
        }
        m.storage_rules = m.by_source.contains(&Some(Vantage::Storage))
            || m.by_vlan.iter().any(|(_, v)| *v == Vantage::Storage)
            || m.by_session.iter().any(|(_, v)| *v == Vantage::Storage);
        Ok(m)
    }

    /// Refuses a rule that selects sources of the other kind (a file in live capture, a
    /// port in a replay): checked before the sources are known.
    pub fn check_kind(rules: &[Rule], kind: SourceKind) -> Result<()> {
        for r in rules {
            match (r.selector, kind) {
                (Selector::Port(p), SourceKind::File) => {
                    bail!(
                        "--vantage port:{p} applies to live capture; replay selects input files with file:N"
                    )
                }
                (Selector::File(f), SourceKind::Port) => {
                    bail!("--vantage file:{f} applies to replay; live capture selects DPDK ports with port:N")
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether any rule maps traffic to `storage` (so there are two vantages to compare).
    pub fn maps_storage(&self) -> bool {
        self.storage_rules
    }

    #[inline]
    pub fn resolve(&self, source: u16, outer_vlan: Option<u16>, erspan_session: Option<u16>) -> Vantage {
        if !self.storage_rules {
            return Vantage::Compute;
        }
        if let Some(s) = erspan_session {
            for &(id, vantage) in &self.by_session {
                if id == s {
                    return vantage;
                }
            }
        }
        if let Some(v) = outer_vlan {
            for &(id, vantage) in &self.by_vlan {
                if id == v {
                    return vantage;
                }
            }
        }
        self.by_source.get(usize::from(source)).copied().flatten().unwrap_or_default()
    }
}

fn push_unique(rules: &mut Vec<(u16, Vantage)>, id: u16, v: Vantage, what: &str) -> Result<()> {
    if let Some(&(_, prev)) = rules.iter().find(|(i, _)| *i == id) {
        if prev != v {
            bail!("--vantage: {what}:{id} is mapped to both {prev} and {v}");
        }
    }
    rules.push((id, v));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rules() {
        assert_eq!(
            "storage=file:1".parse::<Rule>().unwrap(),
            Rule { vantage: Vantage::Storage, selector: Selector::File(1) }
        );
        assert_eq!("compute=vlan:100".parse::<Rule>().unwrap().selector, Selector::Vlan(100));
        assert_eq!("storage=erspan:1023".parse::<Rule>().unwrap().selector, Selector::Erspan(1023));
        for bad in [
            "storage",
            "disk=port:0",
            "storage=port",
            "storage=port:x",
            "storage=erspan2:1",
            "compute=vlan:5000",
        ] {
            assert!(bad.parse::<Rule>().is_err(), "{bad}");
        }
    }

    #[test]
    fn resolves_vlan_before_source_and_defaults_to_compute() {
        let rules: Vec<Rule> = ["storage=file:1", "storage=vlan:20", "compute=vlan:10"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let m = VantageMap::new(&rules, SourceKind::File, &[0, 1]).unwrap();
        assert_eq!(m.resolve(0, None, None), Vantage::Compute);
        assert_eq!(m.resolve(1, None, None), Vantage::Storage);
        assert_eq!(m.resolve(1, Some(10), None), Vantage::Compute);
        assert_eq!(m.resolve(0, Some(20), None), Vantage::Storage);
        assert_eq!(m.resolve(7, Some(99), None), Vantage::Compute);
        let rules: Vec<Rule> =
            ["storage=erspan:3", "compute=vlan:10"].iter().map(|s| s.parse().unwrap()).collect();
        let m = VantageMap::new(&rules, SourceKind::Port, &[0]).unwrap();
        assert_eq!(m.resolve(0, Some(10), Some(3)), Vantage::Storage, "the session wins");
        assert_eq!(m.resolve(0, Some(10), Some(4)), Vantage::Compute);
        assert!(m.maps_storage());
        // Rules that name only `compute`: every packet is `compute`, and nothing is storage.
        let rules: Vec<Rule> = ["compute=erspan:3", "compute=vlan:10", "compute=file:1"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        let m = VantageMap::new(&rules, SourceKind::File, &[0, 1]).unwrap();
        assert!(!m.maps_storage());
        for (source, vlan, session) in [(0, None, None), (1, Some(10), Some(3)), (1, Some(20), None)] {
            assert_eq!(m.resolve(source, vlan, session), Vantage::Compute);
        }
        assert!(!VantageMap::default().maps_storage());
        assert_eq!(VantageMap::default().resolve(3, Some(20), Some(1)), Vantage::Compute);
    }

    #[test]
    fn rejects_selectors_that_cannot_match() {
        let r = |s: &str| vec![s.parse::<Rule>().unwrap()];
        assert!(VantageMap::new(&r("storage=port:0"), SourceKind::File, &[0]).is_err());
        assert!(VantageMap::new(&r("storage=file:0"), SourceKind::Port, &[0]).is_err());
        assert!(VantageMap::new(&r("storage=file:2"), SourceKind::File, &[0, 1]).is_err());
        let both: Vec<Rule> =
            ["storage=file:0", "compute=file:0"].iter().map(|s| s.parse().unwrap()).collect();
        let e = VantageMap::new(&both, SourceKind::File, &[0]).unwrap_err().to_string();
        assert_eq!(e, "--vantage: file:0 is mapped to both storage and compute");
    }
}
