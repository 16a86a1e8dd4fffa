#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| latencyd::fuzzing::plot_input(data));
