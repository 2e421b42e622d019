//! rnfs FUSE mount (being built).
#![warn(missing_docs)]
