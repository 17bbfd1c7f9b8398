//! Metrics: each shard keeps its own registry (a thread-local, so recording
//! is a plain add on shard-owned memory: no atomics, no locks), and the
//! exporter gathers a snapshot from every shard and renders them together
//! in Prometheus' text format, each sample labelled with its shard.
//!
//! A subsystem adds its metrics without touching the exporter, in one of
//! two ways:
//! - [`counter`], [`gauge`] and [`histogram`] register a metric on the
//!   calling shard and return a handle that the hot path updates;
//! - [`register_collector`] registers a closure that reads values the
//!   subsystem already keeps (per-table sizes, say) at scrape time.
//!
//! Names follow Prometheus' conventions: `shoal_` prefix, base units
//! (`_seconds`, `_bytes`), `_total` on counters. The exporter adds the
//! `shard` label; callers must not. [`parse_text`] reads the text back
//! (nodetool builds its reports from it).

mod histogram;
mod parse;
mod registry;
mod render;

pub use histogram::{Histogram, HistogramSnapshot, BUCKET_BOUNDS_US};
pub use parse::{parse_text, ParsedSample};
pub use registry::{
    counter, gather, gauge, histogram, register_collector, Collector, Counter, Family, Gauge, Kind, Labels, Sample,
    Value,
};
pub use render::render_prometheus;
