#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| roceprobe::fuzzing::worker_two_vantages(data));
