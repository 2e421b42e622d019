#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rnfs_nfs3::fuzzing::nfs3_res(data));
