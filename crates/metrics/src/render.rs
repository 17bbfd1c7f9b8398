//! Prometheus text exposition format (version 0.0.4) of every shard's
//! snapshot: one HELP/TYPE header per name, then the samples of all shards,
//! each with a `shard` label first.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::histogram::BUCKET_BOUNDS_US;
use crate::registry::{Family, Kind, Sample, Value};

/// One metric name across shards: the first shard's family (for help and
/// kind) and every shard's samples.
type Merged<'a> = (&'a Family, Vec<(usize, &'a Sample)>);

/// Renders the families gathered on each shard, `(shard, families)`.
pub fn render_prometheus(shards: &[(usize, Vec<Family>)]) -> String {
    let mut by_name: BTreeMap<&str, Merged<'_>> = BTreeMap::new();
    for (shard, families) in shards {
        for family in families {
            let entry = by_name.entry(family.name).or_insert_with(|| (family, Vec::new()));
            entry.1.extend(family.samples.iter().map(|s| (*shard, s)));
        }
    }
    let mut out = String::new();
    for (name, (family, samples)) in by_name {
        let kind = match family.kind {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        };
        // Writing to a String cannot fail.
        let _ = writeln!(out, "# HELP {name} {}", escape(family.help, false));
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for (shard, sample) in samples {
            let labels = labels(shard, sample);
            match &sample.value {
                Value::Counter(v) | Value::Gauge(v) => {
                    let _ = writeln!(out, "{name}{{{labels}}} {v}");
                }
                Value::Histogram(h) => {
                    let mut cumulative = 0;
                    for (i, count) in h.counts.iter().enumerate() {
                        cumulative += count;
                        let le = match BUCKET_BOUNDS_US.get(i) {
                            Some(bound_us) => format!("{}", *bound_us as f64 / 1e6),
                            None => "+Inf".to_string(),
                        };
                        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
                    }
                    let _ = writeln!(out, "{name}_sum{{{labels}}} {}", h.sum_us as f64 / 1e6);
                    let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
                }
            }
        }
    }
    out
}

fn labels(shard: usize, sample: &Sample) -> String {
    let mut out = format!("shard=\"{shard}\"");
    for (key, value) in &sample.labels {
        let _ = write!(out, ",{key}=\"{}\"", escape(value, true));
    }
    out
}

/// Escapes backslash and newline (and, in label values, the double quote).
fn escape(text: &str, quote: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::Histogram;

    fn family(name: &'static str, kind: Kind, value: Value) -> Family {
        Family { name, help: "Help.", kind, samples: vec![Sample { labels: vec![("table", "a\"b".into())], value }] }
    }

    #[test]
    fn shards_share_one_header_and_label_their_samples() {
        let h = Histogram::default();
        h.record_us(10);
        h.record_us(1 << 30);
        let shards = vec![
            (0, vec![family("x_total", Kind::Counter, Value::Counter(1.0))]),
            (
                1,
                vec![
                    family("x_total", Kind::Counter, Value::Counter(2.0)),
                    family("y_seconds", Kind::Histogram, Value::Histogram(h.snapshot())),
                ],
            ),
        ];
        let text = render_prometheus(&shards);
        assert_eq!(text.matches("# TYPE x_total counter").count(), 1);
        assert!(text.contains("x_total{shard=\"0\",table=\"a\\\"b\"} 1\n"));
        assert!(text.contains("x_total{shard=\"1\",table=\"a\\\"b\"} 2\n"));
        assert!(text.contains("y_seconds_bucket{shard=\"1\",table=\"a\\\"b\",le=\"0.000008\"} 0\n"));
        assert!(text.contains("y_seconds_bucket{shard=\"1\",table=\"a\\\"b\",le=\"0.000016\"} 1\n"));
        assert!(text.contains("le=\"+Inf\"} 2\n"));
        assert!(text.contains("y_seconds_count{shard=\"1\",table=\"a\\\"b\"} 2\n"));
    }
}
