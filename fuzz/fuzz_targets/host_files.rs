#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| latencyd::fuzzing::host_files(data));
