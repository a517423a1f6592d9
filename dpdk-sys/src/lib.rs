//! Raw bindings to the system DPDK 22.11. Everything here is `unsafe`; the analyzer's
//! `capture::dpdk` module is the only user and wraps it in a small safe API.
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code)]
#![allow(clippy::all)]
#![allow(improper_ctypes)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
