//! A file written front to back, direct: bytes appended of any length
//! gather in an aligned write-behind buffer, which goes to the file in
//! whole aligned blocks whenever it fills ([`APPEND_BUFFER_BYTES`], one
//! request). At [`Appender::finish`] the last partial block is written
//! padded with zeros and the file is truncated to the bytes appended, so
//! the file on disk is exactly what was appended: formats that find their
//! end from the file's length (SSTables) need no change.

use std::path::Path;

use crate::aligned::{align_up, AlignedBuf};
use crate::{File, IoClass, IoResult, MAX_REQUEST_BYTES};

/// The write-behind buffer: one request's worth.
pub const APPEND_BUFFER_BYTES: usize = MAX_REQUEST_BYTES;

pub struct Appender {
    file: File,
    buf: AlignedBuf,
    /// Bytes of `buf` appended and not yet written.
    filled: usize,
    /// Where `buf` goes in the file: everything before it is written.
    written: u64,
    class: IoClass,
}

impl Appender {
    /// Creates `path` (truncating it if it exists), direct where the
    /// filesystem allows it.
    pub async fn create(path: &Path, class: IoClass) -> IoResult<Appender> {
        crate::record(class, 0);
        let mut options = compio::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(true);
        let file = File::open_with(path, options, true).await?;
        Ok(Appender { file, buf: AlignedBuf::zeroed(APPEND_BUFFER_BYTES), filled: 0, written: 0, class })
    }

    /// The bytes appended so far: where the next byte goes.
    pub fn len(&self) -> u64 {
        self.written + self.filled as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends `bytes`, writing the buffer each time it fills.
    pub async fn append(&mut self, mut bytes: &[u8]) -> IoResult<()> {
        while !bytes.is_empty() {
            let room = APPEND_BUFFER_BYTES - self.filled;
            let taken = room.min(bytes.len());
            self.buf.as_mut_slice()[self.filled..self.filled + taken].copy_from_slice(&bytes[..taken]);
            self.filled += taken;
            bytes = &bytes[taken..];
            if self.filled == APPEND_BUFFER_BYTES {
                let buf = std::mem::replace(&mut self.buf, AlignedBuf::zeroed(0));
                let (result, buf) = self.file.write_aligned_at(self.written, buf, self.class).await;
                self.buf = buf;
                result?;
                self.written += APPEND_BUFFER_BYTES as u64;
                self.filled = 0;
            }
        }
        Ok(())
    }

    /// Writes what the buffer holds (its last block padded with zeros),
    /// sets the file's length to the bytes appended, and makes it durable
    /// (fdatasync).
    pub async fn finish(mut self) -> IoResult<()> {
        if self.filled > 0 {
            let blocks = align_up(self.filled as u64) as usize;
            self.buf.as_mut_slice()[self.filled..blocks].fill(0);
            self.buf.shrink_to(blocks);
            let (result, _) = self.file.write_aligned_at(self.written, self.buf, self.class).await;
            result?;
            self.file.set_len(self.written + self.filled as u64, self.class).await?;
        }
        self.file.sync_data(self.class).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_holds_exactly_what_was_appended() {
        let dir = std::env::temp_dir().join(format!("shoal-io-appender-{}", std::process::id()));
        crate::block_on(async {
            crate::create_dir_all(&dir, IoClass::Maintenance).await.expect("create dir");
            for total in [0, 1, 4096, 5000, APPEND_BUFFER_BYTES, 3 * APPEND_BUFFER_BYTES + 123] {
                let path = dir.join(format!("data-{total}"));
                let mut appender = Appender::create(&path, IoClass::Flush).await.expect("create");
                assert!(appender.file.is_direct(), "the test directory takes O_DIRECT");
                let bytes: Vec<u8> = (0..total).map(|i| (i % 253) as u8).collect();
                for piece in bytes.chunks(777) {
                    appender.append(piece).await.expect("append");
                }
                assert_eq!(appender.len(), total as u64);
                appender.finish().await.expect("finish");
                assert_eq!(std::fs::read(&path).expect("read"), bytes, "{total} bytes");
            }
        });
        let _ = std::fs::remove_dir_all(&dir);
    }
}
