//! Accepting CQL connections and placing each on its shard.
//!
//! Shard 0 accepts on both ports. On the regular port connections go to the
//! shards in turn; on the shard-aware port a connection goes to shard
//! `client source port % shards`, which is how ScyllaDB's drivers open one
//! connection per shard and then send each request to the shard owning its
//! token.

use std::net::SocketAddr;
use std::sync::Arc;

use shoal_runtime::net::{attach, detach, TcpListener};
use shoal_runtime::{submit_to, ShardError};

use crate::connection::{self, ServerConfig};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    RoundRobin,
    BySourcePort,
}

/// How long to keep trying a port that is still taken at start.
const BIND_RETRY_MS: u64 = 10_000;
const BIND_RETRY_STEP_MS: u64 = 50;

/// Binds `address`; returns the listener so the caller can report it bound
/// before serving. A port still held when we start is retried for a while:
/// after a kill -9 the kernel releases a dead process's io_uring (and the
/// listening sockets its pending accepts hold) a few milliseconds later.
pub async fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    let mut waited_ms = 0;
    loop {
        match shoal_runtime::net::listen(address).await {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && waited_ms < BIND_RETRY_MS => {
                if waited_ms == 0 {
                    tracing::info!("{address} is in use; retrying for up to {} s", BIND_RETRY_MS / 1000);
                }
                shoal_runtime::time::sleep(std::time::Duration::from_millis(BIND_RETRY_STEP_MS)).await;
                waited_ms += BIND_RETRY_STEP_MS;
            }
            result => return result,
        }
    }
}

/// Accepts connections forever, placing each on its shard.
pub async fn serve(listener: TcpListener, placement: Placement, config: Arc<ServerConfig>) {
    let mut next = 0usize;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors or a connection reset while queued:
                // keep accepting, the next may work.
                tracing::warn!("accept failed: {e}");
                shoal_runtime::time::sleep(std::time::Duration::from_millis(10)).await;
                continue;
            }
        };
        let shard = match placement {
            Placement::RoundRobin => {
                next = next.wrapping_add(1);
                next % config.nr_shards
            }
            Placement::BySourcePort => usize::from(peer.port()) % config.nr_shards,
        };
        tracing::debug!("connection from {peer} placed on shard {shard} ({placement:?})");
        if let Err(e) = hand_over(stream, shard, Arc::clone(&config)).await {
            tracing::warn!("cannot place connection from {peer} on shard {shard}: {e}");
        }
    }
}

#[derive(Debug, thiserror::Error)]
enum HandOverError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Shard(#[from] ShardError),
}

async fn hand_over(
    stream: shoal_runtime::net::TcpStream,
    shard: usize,
    config: Arc<ServerConfig>,
) -> Result<(), HandOverError> {
    let detached = detach(stream)?;
    submit_to(shard, move || async move {
        let stream = attach(detached)?;
        shoal_runtime::spawn(connection::run(stream, config));
        Ok::<(), std::io::Error>(())
    })
    .await??;
    Ok(())
}
