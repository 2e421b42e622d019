#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rnfs_rpc::fuzzing::record_deframer(data));
