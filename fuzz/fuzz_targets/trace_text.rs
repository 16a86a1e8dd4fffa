#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| latencyd::fuzzing::trace_text(data));
