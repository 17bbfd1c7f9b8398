//! How the process asks the kernel for memory.
//!
//! Shards grow their heaps in bursts — a memtable filling, a stream being
//! applied, the row cache warming — and each new page the heap touches is a
//! page fault. With transparent huge pages (mimalloc asks for them with
//! `madvise`), such a fault may compact memory to find 2 MiB and then zero
//! all of it, stalling the shard that touched it; Cassandra's and Redis's
//! production guides tell users to turn THP off for that reason. Measured
//! here (2 cores; bench/results/2026-11-27-streaming.md), turning it off
//! for the process raised a bootstrap's streaming (median 155 → 212 MB/s
//! per receiving shard), three-node QUORUM writes (+24-47%, p99 180-200 ms
//! → 45-102 ms) and one node's CQL reads (+21-31%), and cost pipelined
//! memcached gets ~7%, within their run-to-run noise (a warm cache's
//! random lookups likely miss the TLB more with 4 KiB pages). The server
//! turns it off unless `--transparent-hugepages` is given.

/// Turns transparent huge pages off for this process (and what it forks),
/// whatever the system-wide setting. Memory already backed by huge pages
/// keeps them; every later fault takes 4 KiB pages.
pub fn disable_transparent_huge_pages() -> std::io::Result<()> {
    rustix::thread::disable_transparent_huge_pages(true)?;
    Ok(())
}
