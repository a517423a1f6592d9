//! Replays the committed cargo-fuzz corpora (fuzz/corpus/*, seeded from the captures and
//! grown by `scripts/fuzz`) and any crash inputs kept as regressions (fuzz/regressions/*)
//! through the same code the fuzz targets run.

use std::path::Path;

fn replay(dir: &Path, f: fn(&[u8])) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut n = 0;
    for e in entries {
        let p = e.unwrap().path();
        let data = std::fs::read(&p).unwrap();
        let r = std::panic::catch_unwind(|| f(&data));
        assert!(r.is_ok(), "{} panics", p.display());
        n += 1;
    }
    n
}

#[test]
fn fuzz_corpora_and_regressions_replay_without_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let decode = replay(&root.join("corpus/decode"), roceprobe::fuzzing::decode)
        + replay(&root.join("regressions/decode"), roceprobe::fuzzing::decode);
    let worker = replay(&root.join("corpus/worker"), roceprobe::fuzzing::worker)
        + replay(&root.join("regressions/worker"), roceprobe::fuzzing::worker);
    let two = replay(&root.join("corpus/worker_two_vantages"), roceprobe::fuzzing::worker_two_vantages)
        + replay(&root.join("regressions/worker_two_vantages"), roceprobe::fuzzing::worker_two_vantages);
    assert!(decode > 100, "decode corpus: {decode} inputs");
    assert!(worker > 20, "worker corpus: {worker} inputs");
    assert!(two > 20, "two-vantage worker corpus: {two} inputs");
}
