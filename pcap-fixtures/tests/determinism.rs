//! The committed scenarios are exactly what the generator writes today: regenerating them
//! gives the same bytes (so the truth and the captures cannot drift apart, and a change to
//! the generator or to the emit code shows up here).

#[test]
fn committed_scenarios_are_what_the_generator_writes() {
    let out = tempfile::tempdir().unwrap();
    for s in pcap_fixtures::all() {
        let fresh = out.path().join(s.name);
        pcap_fixtures::write_scenario(&s, &fresh).unwrap();
        let committed = pcap_fixtures::scenarios_dir().join(s.name);
        let mut names: Vec<_> = std::fs::read_dir(&fresh).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        assert!(!names.is_empty());
        for n in names {
            let a = std::fs::read(fresh.join(&n)).unwrap();
            let b = std::fs::read(committed.join(&n)).unwrap_or_default();
            assert!(
                a == b,
                "{}/{} differs from a fresh generation: run `cargo run -p pcap-fixtures --bin generate-fixtures`",
                s.name,
                n.to_string_lossy()
            );
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_wire_and_another_seed_does_not() {
    let a = pcap_fixtures::scenarios::nvme(1);
    let b = pcap_fixtures::scenarios::nvme(1);
    let c = pcap_fixtures::scenarios::nvme(2);
    let frames = |w: &pcap_fixtures::scenarios::Built| -> Vec<Vec<u8>> {
        pcap_fixtures::render::Delivery::Split { mirror: pcap_fixtures::render::DIRECT }
            .render(&w.wire)
            .into_iter()
            .map(|d| d.frame)
            .collect()
    };
    assert_eq!(frames(&a), frames(&b));
    assert_ne!(frames(&a), frames(&c));
}
