//! Where a backup is written and a restore reads from: a directory, or an
//! S3-compatible object store named `s3://bucket[/prefix]` (the
//! `object_store` crate; credentials, region and endpoint from the
//! environment as the AWS tools read them: `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ENDPOINT` and
//! `AWS_ALLOW_HTTP=true` for a store on plain HTTP such as MinIO).
//!
//! Paths inside a location are relative, `/`-separated. The store's calls
//! run on a tokio runtime of this process (`shoal backup` and `shoal
//! restore` are their own processes, never a node's shards); a file is
//! sent in parts of [`PART_BYTES`] so an SSTable need not fit in memory.
//! A file written to a directory is synced, and so is the directory.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::StreamExt;
use object_store::path::Path as StorePath;
use object_store::{ObjectStore, PutPayload, WriteMultipart};

use super::BackupError;

/// The size of the parts a file is sent to a store in.
const PART_BYTES: usize = 8 << 20;
/// Parts of one file in flight to a store at once.
const PARTS_IN_FLIGHT: usize = 4;

pub enum Location {
    Dir(PathBuf),
    Store { store: Arc<dyn ObjectStore>, prefix: StorePath, runtime: tokio::runtime::Runtime, url: String },
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> BackupError {
    move |e| BackupError::Io(what, e)
}

fn store_error(what: String) -> impl FnOnce(object_store::Error) -> BackupError {
    move |e| BackupError::Store(what, e.to_string())
}

impl Location {
    /// `s3://bucket[/prefix]`, or a directory.
    pub fn parse(text: &str) -> Result<Location, BackupError> {
        let Some(rest) = text.strip_prefix("s3://") else { return Ok(Location::Dir(PathBuf::from(text))) };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        let fail = store_error(text.to_string());
        let store = object_store::aws::AmazonS3Builder::from_env().with_bucket_name(bucket).build().map_err(fail)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io(format!("a runtime for {text}")))?;
        let prefix = StorePath::parse(prefix).map_err(|e| BackupError::Store(text.to_string(), e.to_string()))?;
        Ok(Location::Store { store: Arc::new(store), prefix, runtime, url: text.trim_end_matches('/').to_string() })
    }

    /// `rel` as the user would name it.
    pub fn name(&self, rel: &str) -> String {
        match self {
            Location::Dir(dir) => dir.join(rel).display().to_string(),
            Location::Store { url, .. } => format!("{url}/{rel}"),
        }
    }

    fn key(prefix: &StorePath, rel: &str) -> StorePath {
        rel.split('/').filter(|p| !p.is_empty()).fold(prefix.clone(), |path, part| path.child(part))
    }

    /// The directories and the files in `rel`, each sorted; none when it
    /// is not there.
    pub fn list(&self, rel: &str) -> Result<(Vec<String>, Vec<String>), BackupError> {
        let (mut dirs, mut files) = (Vec::new(), Vec::new());
        match self {
            Location::Dir(dir) => {
                let path = dir.join(rel);
                let entries = match fs::read_dir(&path) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((dirs, files)),
                    entries => entries.map_err(io(self.name(rel)))?,
                };
                for entry in entries {
                    let entry = entry.map_err(io(self.name(rel)))?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    match entry.file_type().map_err(io(self.name(rel)))?.is_dir() {
                        true => dirs.push(name),
                        false => files.push(name),
                    }
                }
            }
            Location::Store { store, prefix, runtime, .. } => {
                let key = Self::key(prefix, rel);
                let listed =
                    runtime.block_on(store.list_with_delimiter(Some(&key))).map_err(store_error(self.name(rel)))?;
                dirs.extend(listed.common_prefixes.iter().filter_map(|p| p.filename()).map(str::to_string));
                files.extend(listed.objects.iter().filter_map(|o| o.location.filename()).map(str::to_string));
            }
        }
        dirs.sort();
        files.sort();
        Ok((dirs, files))
    }

    /// `bytes` as the file `rel`.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), BackupError> {
        match self {
            Location::Dir(dir) => {
                let path = dir.join(rel);
                let write = || -> std::io::Result<()> {
                    if let Some(parent) = path.parent() {
                        fs::create_dir_all(parent)?;
                    }
                    let mut file = fs::File::create(&path)?;
                    file.write_all(bytes)?;
                    file.sync_all()
                };
                write().map_err(io(self.name(rel)))
            }
            Location::Store { store, prefix, runtime, .. } => {
                let key = Self::key(prefix, rel);
                let put = store.put(&key, PutPayload::from(bytes.to_vec()));
                runtime.block_on(put).map(|_| ()).map_err(store_error(self.name(rel)))
            }
        }
    }

    /// The file `rel`, or `None` when it is not there.
    pub fn read(&self, rel: &str) -> Result<Option<Vec<u8>>, BackupError> {
        match self {
            Location::Dir(dir) => match fs::read(dir.join(rel)) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                read => read.map(Some).map_err(io(self.name(rel))),
            },
            Location::Store { store, prefix, runtime, .. } => {
                let read = runtime.block_on(async { store.get(&Self::key(prefix, rel)).await?.bytes().await });
                match read {
                    Err(object_store::Error::NotFound { .. }) => Ok(None),
                    read => read.map(|b| Some(b.to_vec())).map_err(store_error(self.name(rel))),
                }
            }
        }
    }

    /// Copies the local file `from` in as `rel`.
    pub fn upload(&self, from: &Path, rel: &str) -> Result<(), BackupError> {
        match self {
            Location::Dir(dir) => copy_synced(from, &dir.join(rel)),
            Location::Store { store, prefix, runtime, .. } => {
                let mut file = fs::File::open(from).map_err(io(from.display().to_string()))?;
                let send = async {
                    let mut upload = WriteMultipart::new(store.put_multipart(&Self::key(prefix, rel)).await?);
                    let mut part = vec![0; PART_BYTES];
                    loop {
                        let n = file
                            .read(&mut part)
                            .map_err(|e| object_store::Error::Generic { store: "local file", source: Box::new(e) })?;
                        if n == 0 {
                            break;
                        }
                        upload.wait_for_capacity(PARTS_IN_FLIGHT).await?;
                        upload.write(&part[..n]);
                    }
                    upload.finish().await
                };
                runtime.block_on(send).map(|_| ()).map_err(store_error(self.name(rel)))
            }
        }
    }

    /// Copies `rel` out to the local file `to` (synced).
    pub fn download(&self, rel: &str, to: &Path) -> Result<(), BackupError> {
        match self {
            Location::Dir(dir) => copy_synced(&dir.join(rel), to),
            Location::Store { store, prefix, runtime, .. } => {
                let mut file = fs::File::create(to).map_err(io(to.display().to_string()))?;
                let fetch = async {
                    let mut chunks =
                        store.get(&Self::key(prefix, rel)).await.map_err(store_error(self.name(rel)))?.into_stream();
                    while let Some(chunk) = chunks.next().await {
                        let chunk = chunk.map_err(store_error(self.name(rel)))?;
                        file.write_all(&chunk).map_err(io(to.display().to_string()))?;
                    }
                    Ok::<(), BackupError>(())
                };
                runtime.block_on(fetch)?;
                file.sync_all().map_err(io(to.display().to_string()))
            }
        }
    }

    /// Makes the directory `rel`'s entries durable (a store's are).
    pub fn sync_dir(&self, rel: &str) -> Result<(), BackupError> {
        match self {
            Location::Dir(dir) => sync_dir(&dir.join(rel)),
            Location::Store { .. } => Ok(()),
        }
    }
}

/// Copies `from` to `to` (its directory made as needed) and syncs it.
pub fn copy_synced(from: &Path, to: &Path) -> Result<(), BackupError> {
    if let Some(parent) = to.parent() {
        fs::create_dir_all(parent).map_err(io(parent.display().to_string()))?;
    }
    fs::copy(from, to).map_err(io(from.display().to_string()))?;
    fs::File::open(to).and_then(|f| f.sync_all()).map_err(io(to.display().to_string()))
}

pub fn sync_dir(dir: &Path) -> Result<(), BackupError> {
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir.display().to_string()))
}
