//! Storage errors. Corruption names the file and the place in it, so an
//! operator can find (and quarantine) the damaged file.

use shoal_io::IoError;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("{0}")]
    Io(#[from] IoError),
    #[error("mutation of {bytes} bytes is too large for the commitlog (at most {max_bytes}); raise commitlog_segment_size_in_mb")]
    TooLarge { bytes: usize, max_bytes: usize },
    #[error("commitlog writes are failing: {0}")]
    WriteFailing(String),
    #[error("the commitlog is closed: the node is drained or stopping")]
    CommitlogClosed,
    #[error("compaction stopped (nodetool stop or disableautocompaction)")]
    CompactionStopped,
    #[error("corrupt data{}: {detail}", if place.is_empty() { String::new() } else { format!(" in {place}") })]
    Corrupt { place: String, detail: String },
}

impl StorageError {
    pub fn corrupt(detail: impl Into<String>) -> StorageError {
        StorageError::Corrupt { place: String::new(), detail: detail.into() }
    }

    /// Names where a corruption was found, if not named yet.
    pub fn at(self, place: impl FnOnce() -> String) -> StorageError {
        match self {
            StorageError::Corrupt { place: p, detail } if p.is_empty() => {
                StorageError::Corrupt { place: place(), detail }
            }
            other => other,
        }
    }
}

impl From<crate::codec::DecodeError> for StorageError {
    fn from(e: crate::codec::DecodeError) -> StorageError {
        StorageError::corrupt(e.to_string())
    }
}

pub type StorageResult<T> = Result<T, StorageError>;
