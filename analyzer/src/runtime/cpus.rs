//! CPU lists, and which CPUs share a last-level cache (from sysfs). With software dispatch
//! (`--rx-core`, `--workers N` without `--rss`) every frame the receiving lcore takes is
//! written into a worker's batch and read there: within one last-level cache that costs
//! little, across two (two core complexes of an AMD EPYC, two sockets) several times as
//! much (docs/DEPLOYMENT.md, "Cores and threads"). A placement that splits them is told at
//! start.

use std::path::Path;

/// Where Linux describes the CPUs.
pub const SYSFS_CPUS: &str = "/sys/devices/system/cpu";

/// The CPUs of a list as taskset, EAL's `-l` and sysfs write it (`1`, `4-7`, `2,3,8-9`),
/// sorted, each once; `None` if it is not one (or names a CPU past 1023).
pub fn parse_list(s: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in s.trim().split(',') {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        if a > b || b >= 1024 {
            return None;
        }
        cpus.extend(a..=b);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Some(cpus)
}

/// The CPUs that share `cpu`'s last-level cache (its data or unified cache of the highest
/// level), as sysfs under `root` (see [`SYSFS_CPUS`]) tells; `None` where it does not.
pub fn sharing_last_level(root: &Path, cpu: usize) -> Option<Vec<usize>> {
    let read = |p: &Path| std::fs::read_to_string(p).ok().map(|s| s.trim().to_string());
    let mut last: Option<(u32, Vec<usize>)> = None;
    for entry in std::fs::read_dir(root.join(format!("cpu{cpu}/cache"))).ok()?.flatten() {
        let dir = entry.path();
        if !entry.file_name().to_string_lossy().starts_with("index")
            || read(&dir.join("type")).as_deref() == Some("Instruction")
        {
            continue;
        }
        let Some(level) = read(&dir.join("level")).and_then(|l| l.parse::<u32>().ok()) else { continue };
        let Some(shared) = read(&dir.join("shared_cpu_list")).and_then(|l| parse_list(&l)) else { continue };
        if last.as_ref().is_none_or(|(l, _)| level > *l) {
            last = Some((level, shared));
        }
    }
    last.map(|(_, shared)| shared)
}

/// What to tell when some of the `workers`' CPUs share no last-level cache with the
/// `receiving` lcore's CPU (sysfs under `root`); `None` when all do, or sysfs does not say.
pub fn split_from_receiving(root: &Path, receiving: usize, workers: &[usize]) -> Option<String> {
    let shared = sharing_last_level(root, receiving)?;
    let mut apart: Vec<usize> = workers.iter().copied().filter(|w| !shared.contains(w)).collect();
    apart.sort_unstable();
    apart.dedup();
    if apart.is_empty() {
        return None;
    }
    Some(format!(
        "the workers on CPU {} share no last-level cache with the receiving lcore's CPU {receiving} (it shares one with CPUs {}): every frame handed over crosses between caches, at several times the cost; give -l lcores that share one (lscpu -e, docs/DEPLOYMENT.md \"Cores and threads\")",
        write_list(&apart),
        write_list(&shared)
    ))
}

/// A sorted CPU list as [`parse_list`] reads it, runs written as ranges: `0-7,64-71`.
pub fn write_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", cpus[i], cpus[j]) } else { cpus[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sysfs tree of `cpus` CPUs whose L1 and L2 are their own and whose L3 is shared by
    /// each group of `per_l3` consecutive CPUs.
    fn sysfs(cpus: usize, per_l3: usize) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        for c in 0..cpus {
            let group = c / per_l3 * per_l3;
            let l3 = format!("{}-{}", group, group + per_l3 - 1);
            for (i, (level, kind, shared)) in [
                (1, "Data", c.to_string()),
                (1, "Instruction", c.to_string()),
                (2, "Unified", c.to_string()),
                (3, "Unified", l3),
            ]
            .into_iter()
            .enumerate()
            {
                let d = root.path().join(format!("cpu{c}/cache/index{i}"));
                std::fs::create_dir_all(&d).unwrap();
                std::fs::write(d.join("level"), format!("{level}\n")).unwrap();
                std::fs::write(d.join("type"), format!("{kind}\n")).unwrap();
                std::fs::write(d.join("shared_cpu_list"), format!("{shared}\n")).unwrap();
            }
        }
        root
    }

    #[test]
    fn cpu_lists_read_as_taskset_writes_them() {
        assert_eq!(parse_list("1"), Some(vec![1]));
        assert_eq!(parse_list("4-7"), Some(vec![4, 5, 6, 7]));
        assert_eq!(parse_list("8-9,2,3,2\n"), Some(vec![2, 3, 8, 9]));
        for bad in ["", "a", "3-1", "1-", "0-1024", "1,,2"] {
            assert_eq!(parse_list(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn cpu_lists_are_written_with_ranges() {
        assert_eq!(write_list(&[0, 1, 2, 3, 64, 65, 66, 67]), "0-3,64-67");
        assert_eq!(write_list(&[5, 7]), "5,7");
        assert_eq!(write_list(&[2, 3, 9]), "2-3,9");
        assert_eq!(write_list(&[]), "");
        for l in ["0-7,64-71", "1", "2-3,9"] {
            assert_eq!(write_list(&parse_list(l).unwrap()), l);
        }
    }

    #[test]
    fn the_last_level_cache_is_the_highest_level_sysfs_lists() {
        let root = sysfs(8, 4);
        assert_eq!(sharing_last_level(root.path(), 5), Some(vec![4, 5, 6, 7]));
        assert_eq!(sharing_last_level(root.path(), 8), None);
    }

    #[test]
    fn workers_apart_from_the_receiving_lcore_are_named() {
        let root = sysfs(8, 4);
        assert_eq!(split_from_receiving(root.path(), 1, &[2, 3]), None);
        let told = split_from_receiving(root.path(), 1, &[2, 5, 7, 5]).unwrap();
        assert!(
            told.starts_with("the workers on CPU 5,7 share no last-level cache with the receiving lcore's CPU 1 (it shares one with CPUs 0-3)"),
            "{told}"
        );
        // Without a cache to read, nothing is told.
        assert_eq!(split_from_receiving(root.path(), 9, &[2]), None);
    }
}
