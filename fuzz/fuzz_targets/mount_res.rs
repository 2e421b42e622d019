#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rnfs_nfs3::fuzzing::mount_res(data));
