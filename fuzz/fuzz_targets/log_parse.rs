#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| turnback_fuzz::log_parse(data));
