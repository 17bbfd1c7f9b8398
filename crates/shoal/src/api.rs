//! The HTTP API on `--api-port`: Prometheus metrics at `/metrics`.
//!
//! A deliberately small HTTP/1.1 server: one request per connection, GET
//! only, bounded request size. Metrics are gathered from every shard by
//! message when scraped, so shards keep plain shard-local counters.

use std::fmt::Write as _;

use shoal_runtime::net::{AsyncRead, AsyncWriteExt, BufResult, TcpListener, TcpStream};
use shoal_runtime::{nr_shards, submit_to};

/// Longest request head we read; anything longer is refused.
const REQUEST_BYTES_MAX: usize = 8 * 1024;

struct ShardMetrics {
    forwarded_requests: u64,
    memtable_bytes: usize,
}

pub async fn serve(listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => shoal_runtime::spawn(handle(stream)),
            Err(e) => {
                tracing::warn!("api accept failed: {e}");
                shoal_runtime::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        }
    }
}

async fn handle(mut stream: TcpStream) {
    let mut head = Vec::new();
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < REQUEST_BYTES_MAX {
        let BufResult(read, buf) = stream.read(Vec::with_capacity(1024)).await;
        match read {
            Ok(n) if n > 0 => head.extend_from_slice(&buf),
            _ => return,
        }
    }
    let request_line = String::from_utf8_lossy(head.split(|b| *b == b'\r').next().unwrap_or_default()).into_owned();
    let (status, body) = match request_line.split_whitespace().collect::<Vec<_>>().as_slice() {
        ["GET", "/metrics", ..] => ("200 OK", metrics().await),
        ["GET", ..] => ("404 Not Found", "not found; try /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", "only GET is served\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.into_bytes()).await;
}

async fn metrics() -> String {
    let mut shards = Vec::new();
    for shard in 0..nr_shards() {
        let sample = submit_to(shard, || async {
            ShardMetrics {
                forwarded_requests: shoal_coordinator::forwarded_requests_total(),
                memtable_bytes: shoal_replica::local().memtable_bytes(),
            }
        })
        .await;
        if let Ok(sample) = sample {
            shards.push((shard, sample));
        }
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# HELP shoal_cql_forwarded_requests_total CQL requests a shard sent to the shard owning their token."
    );
    let _ = writeln!(out, "# TYPE shoal_cql_forwarded_requests_total counter");
    for (shard, m) in &shards {
        let _ = writeln!(out, "shoal_cql_forwarded_requests_total{{shard=\"{shard}\"}} {}", m.forwarded_requests);
    }
    let _ = writeln!(out, "# HELP shoal_memtable_bytes Bytes held by memtables.");
    let _ = writeln!(out, "# TYPE shoal_memtable_bytes gauge");
    for (shard, m) in &shards {
        let _ = writeln!(out, "shoal_memtable_bytes{{shard=\"{shard}\"}} {}", m.memtable_bytes);
    }
    out
}
