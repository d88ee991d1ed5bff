#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| turnback_fuzz::parse_then_plan(data));
