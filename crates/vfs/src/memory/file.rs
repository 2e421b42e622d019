//! Regular-file data: sparse, in chunks.
//!
//! The file is `size` bytes long; its data lives in 64 KiB chunks keyed by
//! chunk index, each holding the bytes from the chunk's start up to the last
//! byte written in it. Everything else below `size` (holes, truncated tails,
//! SETATTR extensions) reads as zeros and costs nothing. A write touches
//! O(len / 64 KiB) chunks, each found in O(log chunks); nothing is ever copied
//! because the file grew elsewhere.

use std::collections::BTreeMap;

use crate::CreateVerifier;

/// Bytes per chunk.
const CHUNK: u64 = 64 * 1024;

/// Contents of a regular file.
#[derive(Default)]
pub(super) struct FileData {
    size: u64,
    /// Chunk index -> bytes from the chunk's start; never reaches past `size`.
    chunks: BTreeMap<u64, Vec<u8>>,
    /// Sum of the chunks' lengths (what the budget was charged).
    stored: u64,
    /// The verifier of the EXCLUSIVE create that made this file, if any.
    pub(super) verifier: Option<CreateVerifier>,
}

impl FileData {
    /// An empty file of `size` bytes (all zeros, nothing stored).
    pub(super) fn with_size(size: u64, verifier: Option<CreateVerifier>) -> Self {
        Self {
            size,
            verifier,
            ..Self::default()
        }
    }

    /// Size in bytes.
    pub(super) fn size(&self) -> u64 {
        self.size
    }

    /// Bytes actually stored.
    pub(super) fn stored(&self) -> u64 {
        self.stored
    }

    /// The chunks a write of `[offset, end)` touches (`end > offset`), with how
    /// many bytes each must hold from its start.
    fn span(offset: u64, end: u64) -> impl Iterator<Item = (u64, usize)> {
        (offset / CHUNK..=(end - 1) / CHUNK).map(move |k| {
            let base = k * CHUNK;
            // At most CHUNK: fits in usize.
            (k, ((end - base).min(CHUNK)) as usize)
        })
    }

    /// New bytes a write of `len > 0` bytes at `offset` will store. The caller
    /// checked that `offset + len` does not overflow.
    pub(super) fn growth(&self, offset: u64, len: u64) -> u64 {
        Self::span(offset, offset + len)
            .map(|(k, need)| need.saturating_sub(self.chunks.get(&k).map_or(0, Vec::len)) as u64)
            .sum()
    }

    /// Writes `data` at `offset` (the caller charged [`Self::growth`] bytes and
    /// checked that the end does not overflow).
    pub(super) fn write(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = offset + data.len() as u64;
        let mut src = data;
        for (k, need) in Self::span(offset, end) {
            let chunk = self.chunks.entry(k).or_default();
            if chunk.len() < need {
                self.stored += (need - chunk.len()) as u64;
                // Grow geometrically, but never past one chunk.
                let target = need.max(chunk.len() * 2).min(CHUNK as usize);
                chunk.reserve_exact(target - chunk.len());
                chunk.resize(need, 0);
            }
            let start = (offset.max(k * CHUNK) - k * CHUNK) as usize;
            let (head, rest) = src.split_at((need - start).min(src.len()));
            if let Some(dst) = chunk.get_mut(start..start + head.len()) {
                dst.copy_from_slice(head);
            }
            src = rest;
        }
        self.size = self.size.max(end);
    }

    /// Appends up to `count` bytes at `offset` to `out`; returns how many and
    /// whether they reach the end of the file.
    pub(super) fn read(&self, offset: u64, count: u32, out: &mut Vec<u8>) -> (u32, bool) {
        if offset >= self.size {
            return (0, true);
        }
        let n = u64::from(count).min(self.size - offset);
        let end = offset + n;
        if n == 0 {
            return (0, false);
        }
        // n <= count, a u32.
        out.reserve(n as usize);
        let mut pos = offset;
        for (&k, chunk) in self.chunks.range(offset / CHUNK..=(end - 1) / CHUNK) {
            let base = k * CHUNK;
            let data_end = (base + chunk.len() as u64).min(end);
            if data_end <= pos {
                continue;
            }
            let from = pos.max(base);
            out.resize(out.len() + (from - pos) as usize, 0);
            if let Some(bytes) = chunk.get((from - base) as usize..(data_end - base) as usize) {
                out.extend_from_slice(bytes);
            }
            pos = data_end;
        }
        out.resize(out.len() + (end - pos) as usize, 0);
        (n as u32, end >= self.size)
    }

    /// Truncates or extends to `size`; returns the stored bytes freed.
    /// Extending stores nothing: the new tail is a hole.
    pub(super) fn set_size(&mut self, size: u64) -> u64 {
        let mut freed = 0;
        if size < self.size {
            let dropped = self.chunks.split_off(&size.div_ceil(CHUNK));
            freed += dropped.values().map(|c| c.len() as u64).sum::<u64>();
            let keep = (size % CHUNK) as usize;
            if keep != 0 {
                if let Some(chunk) = self.chunks.get_mut(&(size / CHUNK)) {
                    if chunk.len() > keep {
                        freed += (chunk.len() - keep) as u64;
                        chunk.truncate(keep);
                        chunk.shrink_to_fit();
                    }
                }
            }
            self.stored -= freed;
        }
        self.size = size;
        freed
    }

    /// Drops all data; returns the stored bytes freed.
    pub(super) fn clear(&mut self) -> u64 {
        let freed = self.stored;
        self.chunks = BTreeMap::new();
        self.stored = 0;
        self.size = 0;
        freed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(f: &FileData) -> Vec<u8> {
        let mut out = Vec::new();
        let (n, eof) = f.read(0, u32::MAX, &mut out);
        assert!(eof);
        assert_eq!(n as usize, out.len());
        out
    }

    #[test]
    fn writes_across_chunks_match_a_flat_model() {
        let mut f = FileData::default();
        let mut model: Vec<u8> = Vec::new();
        let writes: [(u64, usize, u8); 7] = [
            (10, 5, 1),
            (65_530, 20, 2),
            (200_000, 70_000, 3),
            (0, 3, 4),
            (131_072, 1, 5),
            (65_536, 65_536, 6),
            (199_999, 2, 7),
        ];
        for (offset, len, byte) in writes {
            let data = vec![byte; len];
            let growth = f.growth(offset, len as u64);
            let before = f.stored();
            f.write(offset, &data);
            assert_eq!(f.stored() - before, growth);
            let end = offset as usize + len;
            if model.len() < end {
                model.resize(end, 0);
            }
            model[offset as usize..end].copy_from_slice(&data);
            assert_eq!(read_all(&f), model);
        }
        for (offset, count) in [(0, 1), (65_535, 3), (199_990, 100_000), (10, 0)] {
            let mut out = Vec::new();
            let (n, _) = f.read(offset, count, &mut out);
            let end = (offset as usize + count as usize).min(model.len());
            assert_eq!(out, model[offset as usize..end]);
            assert_eq!(n as usize, out.len());
        }
    }

    #[test]
    fn truncate_frees_and_extension_is_a_hole() {
        let mut f = FileData::default();
        f.write(0, &[9; 150_000]);
        assert_eq!(f.stored(), 150_000);
        assert_eq!(f.set_size(70_000), 80_000);
        assert_eq!(f.stored(), 70_000);
        assert_eq!(f.set_size(1 << 40), 0);
        assert_eq!(f.stored(), 70_000);
        let mut out = Vec::new();
        f.read(69_999, 10, &mut out);
        assert_eq!(out, [9, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(f.set_size(65_536), 4_464);
        assert_eq!(f.set_size(0), 65_536);
        assert_eq!(f.stored(), 0);
    }
}
