//! Generates bindings to the system DPDK with bindgen and compiles two C files:
//! bindgen's out-of-line copies of DPDK's `static inline` functions (`rte_eth_rx_burst`,
//! `rte_pktmbuf_free`, `rte_get_tsc_cycles`, ...) and `shim.c` for the macros and
//! thread-locals bindgen cannot see.
use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let here = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    for f in ["wrapper.h", "shim.h", "shim.c", "build.rs"] {
        println!("cargo:rerun-if-changed={}", here.join(f).display());
    }

    // Emits the link flags (shared libraries; PMDs are loaded as plugins at EAL init).
    let lib = pkg_config::Config::new()
        .atleast_version("22.11")
        .probe("libdpdk")
        .unwrap_or_else(|e| {
            panic!("DPDK 22.11 not found by pkg-config ({e}); run scripts/setup (Debian: apt-get install libdpdk-dev)")
        });
    // `-include rte_config.h -march=...` are not in pkg_config::Library, so read the raw flags.
    let cflags_out = Command::new("pkg-config")
        .args(["--cflags", "libdpdk"])
        .output()
        .expect("running pkg-config --cflags libdpdk");
    let cflags: Vec<String> =
        String::from_utf8_lossy(&cflags_out.stdout).split_whitespace().map(str::to_owned).collect();
    let _ = lib;

    let static_fns = out.join("static_fns");
    let bindings = bindgen::Builder::default()
        .header(here.join("wrapper.h").to_string_lossy())
        .clang_args(&cflags)
        .clang_arg(format!("-I{}", here.display()))
        .allowlist_function("rte_.*|roceprobe_.*")
        .allowlist_type("rte_.*")
        .allowlist_var("RTE_.*|rte_.*")
        // Packed types that bindgen cannot lay out; roceprobe decodes headers itself.
        .opaque_type("rte_gtp_psc_generic_hdr")
        .opaque_type("rte_l2tpv2_combined_msg_hdr")
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .wrap_static_fns(true)
        .wrap_static_fns_path(&static_fns)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .expect("bindgen failed on the DPDK headers");
    bindings.write_to_file(out.join("bindings.rs")).expect("writing bindings.rs");

    let mut build = cc::Build::new();
    build
        .file(static_fns.with_extension("c"))
        .file(here.join("shim.c"))
        .include(&here)
        .opt_level(3)
        .warnings(false);
    for f in &cflags {
        build.flag(f);
    }
    build.compile("roceprobe_dpdk_shim");
}
