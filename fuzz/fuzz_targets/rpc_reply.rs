#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rnfs_rpc::fuzzing::rpc_reply(data));
