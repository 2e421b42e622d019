#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rnfs_xdr::fuzzing::xdr_reader(data));
