//! What the user and `bench/` read: the per-second progress line, the
//! summary as text, and the summary as JSON (shape fixed by
//! crates/stress/README.md; the harness parses it).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::Serialize;

use crate::args::Config;
use crate::cpu::CpuUse;
use crate::stats::{OpStats, Totals};
use crate::workload::OpKind;

/// `  <t>s  <ops/s> ops/s  p50 <us> us  p99 <us> us  errors <n>  p99.9 <us> us
/// max <us> us` for the second ending `t` seconds into the run; `elapsed`
/// is the interval's real length (the tick may come late). The tail
/// percentiles come last so that parsers of the older line still match.
pub fn progress_line(t_s: u64, interval: &OpStats, elapsed: Duration, warming_up: bool) -> String {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let h = &interval.latency_us;
    let mut line = format!(
        "{t_s:>5}s {:>10.0} ops/s  p50 {:>7} us  p99 {:>7} us  errors {}  p99.9 {:>7} us  max {:>7} us",
        interval.ops() as f64 / secs,
        h.value_at_quantile(0.5),
        h.value_at_quantile(0.99),
        interval.errors,
        h.value_at_quantile(0.999),
        h.max(),
    );
    if warming_up {
        line.push_str("  (warm-up)");
    }
    line
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

impl Percentiles {
    fn of(stats: &OpStats) -> Percentiles {
        let h = &stats.latency_us;
        let q = |q: f64| h.value_at_quantile(q) as f64;
        Percentiles { p50: q(0.5), p90: q(0.9), p99: q(0.99), p999: q(0.999), max: h.max() as f64, mean: h.mean() }
    }
}

/// One operation kind in the JSON `per_op` object.
#[derive(Debug, Clone, Serialize)]
pub struct OpSummary {
    pub ops: u64,
    pub errors: u64,
    pub misses: u64,
    #[serde(flatten)]
    pub latency_us: Percentiles,
}

impl OpSummary {
    fn of(stats: &OpStats) -> OpSummary {
        OpSummary { ops: stats.ops(), errors: stats.errors, misses: stats.misses, latency_us: Percentiles::of(stats) }
    }
}

/// The JSON summary (`--json`), also the source of the text summary.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub protocol: crate::args::Protocol,
    pub workload: crate::args::WorkloadKind,
    /// Offered ops/s; `null` when unthrottled.
    pub rate: Option<f64>,
    /// Measured seconds (after the warm-up, until the last operation ended).
    pub duration_s: f64,
    /// Successful operations (misses included, errors not).
    pub ops: u64,
    pub ops_per_s: f64,
    pub errors: u64,
    pub misses: u64,
    /// Operations that `--rate` scheduled before the end but that never
    /// started because the run ended first (0 without a rate).
    pub not_started: u64,
    pub latency_us: Percentiles,
    pub per_op: BTreeMap<&'static str, OpSummary>,
    /// The loader's own CPU over the whole run (warm-up included); `null`
    /// where it cannot be read.
    pub loader_cpu: Option<CpuUse>,
    pub config: Config,
}

impl Summary {
    pub fn new(
        config: &Config,
        kinds: &[OpKind],
        totals: &Totals,
        measured: Duration,
        not_started: u64,
        loader_cpu: Option<CpuUse>,
    ) -> Summary {
        let all = totals.all();
        let duration_s = measured.as_secs_f64();
        Summary {
            protocol: config.protocol,
            workload: config.workload,
            rate: config.rate,
            duration_s,
            ops: all.ops(),
            ops_per_s: if duration_s > 0.0 { all.ops() as f64 / duration_s } else { 0.0 },
            errors: all.errors,
            misses: all.misses,
            not_started,
            latency_us: Percentiles::of(&all),
            per_op: kinds.iter().map(|&k| (k.name(), OpSummary::of(totals.of(k)))).collect(),
            loader_cpu,
            config: config.clone(),
        }
    }

    pub fn to_json(&self) -> String {
        // Invariant: every field is a number, string, bool, path or map with
        // string keys, which serde_json always serializes.
        serde_json::to_string_pretty(self).expect("the summary serializes")
    }

    pub fn to_text(&self) -> String {
        let mut s = String::new();
        let rate = self.rate.map_or("unthrottled".to_string(), |r| format!("rate {r} ops/s"));
        // Writing to a String cannot fail.
        let _ = writeln!(s, "summary ({:.2} s measured, {rate}):", self.duration_s);
        let _ = writeln!(s, "  ops        {:>12}   {:.0} ops/s", self.ops, self.ops_per_s);
        let _ = writeln!(s, "  errors     {:>12}", self.errors);
        let _ = writeln!(s, "  misses     {:>12}", self.misses);
        if self.not_started > 0 {
            let _ = writeln!(s, "  not started {:>11}   (the rate was not sustained)", self.not_started);
        }
        let _ = writeln!(s, "  latency us {}", percentile_columns(&self.latency_us));
        if self.per_op.len() > 1 {
            for (name, op) in &self.per_op {
                let _ = writeln!(
                    s,
                    "  {name:<6} {:>10} ops, {} errors, {} misses; {}",
                    op.ops,
                    op.errors,
                    op.misses,
                    percentile_columns(&op.latency_us)
                );
            }
        }
        if let Some(cpu) = &self.loader_cpu {
            let _ = writeln!(
                s,
                "  loader cpu {:.2} s in {:.2} s = {:.2} cores ({} worker thread(s) + the main thread)",
                cpu.cpu_s, cpu.wall_s, cpu.cores, self.config.threads
            );
        }
        s
    }
}

fn percentile_columns(p: &Percentiles) -> String {
    format!(
        "p50 {:.0}  p90 {:.0}  p99 {:.0}  p99.9 {:.0}  max {:.0}  mean {:.1}",
        p.p50, p.p90, p.p99, p.p999, p.max, p.mean
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::parse_for_test as config;
    use crate::error::OpError;
    use crate::stats::{Outcome, Recorders};

    const SAMPLE_CPU: CpuUse = CpuUse { cpu_s: 1.5, wall_s: 2.0, cores: 0.75 };

    fn sample_totals() -> Totals {
        let rec = Recorders::new(1);
        for us in 1..=100 {
            rec.record(0, OpKind::Read, &Ok(Outcome::Done), Duration::from_micros(us * 10), true);
        }
        rec.record(0, OpKind::Read, &Ok(Outcome::Miss), Duration::from_micros(5), true);
        rec.record(0, OpKind::Write, &Ok(Outcome::Done), Duration::from_micros(50), true);
        rec.record(0, OpKind::Write, &Err(OpError::Timeout(Duration::from_secs(5))), Duration::ZERO, true);
        rec.totals()
    }

    #[test]
    fn json_has_the_contract_shape() -> Result<(), String> {
        let config = config(&["--workload", "mixed", "--ratio", "3:1", "--rate", "500"])?;
        let summary =
            Summary::new(&config, &OpKind::ALL, &sample_totals(), Duration::from_secs(2), 7, Some(SAMPLE_CPU));
        let v: serde_json::Value = serde_json::from_str(&summary.to_json()).map_err(|e| e.to_string())?;
        assert_eq!(v["protocol"], "cql");
        assert_eq!(v["workload"], "mixed");
        assert_eq!(v["rate"], 500.0);
        assert_eq!(v["duration_s"], 2.0);
        assert_eq!(v["ops"], 102);
        assert_eq!(v["ops_per_s"], 51.0);
        assert_eq!(v["errors"], 1);
        assert_eq!(v["misses"], 1);
        assert_eq!(v["not_started"], 7);
        assert_eq!((v["loader_cpu"]["cpu_s"].as_f64(), v["loader_cpu"]["cores"].as_f64()), (Some(1.5), Some(0.75)));
        for key in ["p50", "p90", "p99", "p999", "max", "mean"] {
            assert!(v["latency_us"][key].is_f64(), "latency_us.{key}: {}", v["latency_us"][key]);
        }
        assert_eq!(v["latency_us"]["max"], 1000.0);
        let read = &v["per_op"]["read"];
        assert_eq!((read["ops"].as_u64(), read["misses"].as_u64()), (Some(101), Some(1)));
        assert!(read["p99"].is_f64() && read["mean"].is_f64());
        assert_eq!((v["per_op"]["write"]["ops"].as_u64(), v["per_op"]["write"]["errors"].as_u64()), (Some(1), Some(1)));
        let c = &v["config"];
        assert_eq!(
            (c["port"].as_u64(), c["ratio"].as_str(), c["value-size"].as_u64()),
            (Some(9042), Some("3:1"), Some(1024))
        );
        assert_eq!((c["duration"].as_f64(), c["json"].is_null()), (Some(10.0), true));
        Ok(())
    }

    #[test]
    fn unthrottled_rate_is_null_and_single_kind_has_one_per_op() -> Result<(), String> {
        let config = config(&["--workload", "read"])?;
        let summary = Summary::new(&config, &[OpKind::Read], &Totals::default(), Duration::ZERO, 0, None);
        let v: serde_json::Value = serde_json::from_str(&summary.to_json()).map_err(|e| e.to_string())?;
        assert!(v["rate"].is_null());
        assert_eq!(v["ops_per_s"], 0.0);
        assert_eq!(v["latency_us"]["p50"], 0.0);
        assert_eq!(v["per_op"].as_object().map(|o| o.len()), Some(1));
        assert!(v["loader_cpu"].is_null());
        Ok(())
    }

    #[test]
    fn progress_line_follows_the_contract() {
        let totals = sample_totals();
        let line = progress_line(3, &totals.read, Duration::from_millis(500), false);
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[..11], ["3s", "202", "ops/s", "p50", "500", "us", "p99", "990", "us", "errors", "0"]);
        assert_eq!(words[11..].iter().step_by(3).collect::<Vec<_>>(), [&"p99.9", &"max"]);
        assert!(progress_line(1, &totals.read, Duration::from_secs(1), true).ends_with("(warm-up)"));
    }

    #[test]
    fn text_summary_lists_per_op_lines_for_mixed_runs() -> Result<(), String> {
        let config = config(&["--workload", "mixed"])?;
        let text = Summary::new(&config, &OpKind::ALL, &sample_totals(), Duration::from_secs(1), 0, Some(SAMPLE_CPU))
            .to_text();
        assert!(text.contains("p99.9"), "{text}");
        assert!(text.contains("loader cpu 1.50 s in 2.00 s = 0.75 cores"), "{text}");
        assert!(text.lines().any(|l| l.trim_start().starts_with("read")), "{text}");
        assert!(text.lines().any(|l| l.trim_start().starts_with("write")), "{text}");
        Ok(())
    }
}
