//! Warm restart: every `row_cache_save_period` a shard writes the keys of
//! its hottest cached partitions to `saved_caches/shard-N.keys`; at start,
//! after recovery, it reads them back into the row cache in the background
//! (coldest first, so the hottest ends up most recently used), so a restarted node serves its hot set from
//! memory within seconds instead of warming up one miss at a time. Periodic
//! saving (Cassandra's `row_cache_save_period`) also covers a crash: the
//! keys are at most one period old, and a stale key only costs a read.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use shoal_io::IoClass;
use shoal_schema::token::murmur3_token;
use shoal_storage::cache::saved::{self, SavedKey};
use shoal_storage::ClusteringRange;

use crate::database::{Database, ReplicaError, StorageConfig};

/// Keys saved per shard at most: enough for a few GiB of small items, and
/// a file of tens of MiB.
const MAX_SAVED_KEYS: usize = 1_000_000;

/// Keys read back between yields.
const WARM_STEP_KEYS: usize = 32;

fn path(config: &StorageConfig) -> PathBuf {
    config.saved_caches_dir.join(format!("shard-{}.keys", shoal_runtime::this_shard()))
}

impl Database {
    /// Writes this shard's hottest keys (replacing the last file).
    pub async fn save_hot_keys(&self) -> Result<usize, ReplicaError> {
        let Some(config) = self.storage.borrow().clone() else { return Ok(0) };
        let ids: std::collections::HashMap<u32, uuid::Uuid> =
            self.tables().iter().map(|(id, table)| (table.cache_id(), *id)).collect();
        let keys: Vec<SavedKey> = shoal_storage::cache::local()
            .hottest(MAX_SAVED_KEYS)
            .into_iter()
            .filter_map(|(cache_id, position)| Some(SavedKey { table: *ids.get(&cache_id)?, position }))
            .collect();
        let path = path(&config);
        let tmp = path.with_extension("keys.tmp");
        shoal_io::create_dir_all(&config.saved_caches_dir, IoClass::Maintenance)
            .await
            .map_err(shoal_storage::StorageError::from)?;
        shoal_io::replace_durably(&path, &tmp, saved::encode(&keys), IoClass::Maintenance)
            .await
            .map_err(shoal_storage::StorageError::from)?;
        Ok(keys.len())
    }

    /// Saves the hot keys every `period`. Never returns.
    pub(crate) async fn save_hot_keys_every(&self, period: Duration) {
        loop {
            shoal_runtime::time::sleep(period).await;
            if let Err(e) = self.save_hot_keys().await {
                tracing::warn!("saving the row cache's hot keys failed (trying again in {period:?}): {e}");
            }
        }
    }

    /// Loads `in_memory` tables whole into the row cache, then reads the
    /// saved hot keys back. A missing file is no error; a damaged one is
    /// logged and skipped.
    pub(crate) async fn warm_cache(&self) {
        let in_memory: Vec<_> =
            self.tables().iter().filter(|(_, t)| t.in_memory()).map(|(id, t)| (*id, t.clone())).collect();
        for (id, table) in in_memory {
            match table.load_into_cache().await {
                Ok(loaded) => tracing::info!("in-memory table {id}: {loaded} partitions loaded"),
                Err(e) => tracing::error!("loading in-memory table {id} failed: {e}"),
            }
        }
        let Some(config) = self.storage.borrow().clone() else { return };
        let path = path(&config);
        let bytes = match shoal_io::File::open(&path, IoClass::Maintenance).await {
            Ok(file) => match file.read_all(IoClass::Maintenance).await {
                Ok(bytes) => bytes,
                Err(e) => return tracing::warn!("cannot read {}: {e}", path.display()),
            },
            Err(_) => return,
        };
        let keys = match saved::decode(&bytes) {
            Ok(keys) => keys,
            Err(e) => return tracing::warn!("ignoring {}: {e}", path.display()),
        };
        let started = Instant::now();
        let mut warmed = 0usize;
        // Coldest first: each read puts its partition at the head of the
        // LRU list, so the hottest ends up the most recently used.
        for (i, key) in keys.iter().rev().enumerate() {
            if i % WARM_STEP_KEYS == WARM_STEP_KEYS - 1 {
                shoal_runtime::yield_now().await;
            }
            // A key is read only where it belongs: its own token, a table
            // that still exists.
            let Ok(table) = self.table(key.table) else { continue };
            if murmur3_token(&key.position.key) != key.position.token {
                continue;
            }
            match table.read(&key.position, &[ClusteringRange::all()]).await {
                Ok(_) => warmed += 1,
                Err(e) => {
                    tracing::warn!("warming the row cache stopped at a read error: {e}");
                    break;
                }
            }
        }
        tracing::info!("row cache warmed with {warmed} of {} saved partitions in {:?}", keys.len(), started.elapsed());
    }
}
