//! The calling shard's registry: the metrics registered on it, the
//! collectors that report values kept elsewhere, and [`gather`], which
//! turns both into a snapshot the exporter can carry to another thread.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::histogram::{Histogram, HistogramSnapshot};

/// Label names and values of one sample (without `shard`, which the
/// exporter adds).
pub type Labels = Vec<(&'static str, String)>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// Counters are kept as integers but may be reported as fractions
    /// (seconds spent, say).
    Counter(f64),
    Gauge(f64),
    Histogram(HistogramSnapshot),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub labels: Labels,
    pub value: Value,
}

/// All samples of one metric name on one shard.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    pub samples: Vec<Sample>,
}

/// A monotonically increasing count owned by one shard.
#[derive(Debug, Default)]
pub struct Counter(Cell<u64>);

impl Counter {
    pub fn inc(&self) {
        self.add(1);
    }

    pub fn add(&self, n: u64) {
        self.0.set(self.0.get().wrapping_add(n));
    }

    pub fn get(&self) -> u64 {
        self.0.get()
    }
}

/// A value that goes up and down, owned by one shard.
#[derive(Debug, Default)]
pub struct Gauge(Cell<i64>);

impl Gauge {
    pub fn add(&self, delta: i64) {
        self.0.set(self.0.get() + delta);
    }

    pub fn get(&self) -> i64 {
        self.0.get()
    }
}

enum Handle {
    Counter(Rc<Counter>),
    Gauge(Rc<Gauge>),
    Histogram(Rc<Histogram>),
}

struct Registered {
    name: &'static str,
    help: &'static str,
    labels: Labels,
    handle: Handle,
}

type CollectorFn = Rc<dyn Fn(&mut Collector)>;

#[derive(Default)]
struct Registry {
    registered: Vec<Registered>,
    collectors: Vec<CollectorFn>,
}

thread_local! {
    static REGISTRY: RefCell<Registry> = RefCell::new(Registry::default());
}

fn register(name: &'static str, help: &'static str, labels: &[(&'static str, &str)], handle: Handle) {
    assert!(valid_name(name), "metric name {name:?} is not a Prometheus name");
    assert!(labels.iter().all(|(label, _)| valid_name(label) && *label != "shard"), "bad labels on {name}");
    let labels = labels.iter().map(|(k, v)| (*k, (*v).to_string())).collect();
    REGISTRY.with(|r| r.borrow_mut().registered.push(Registered { name, help, labels, handle }));
}

/// Registers a counter on the calling shard. Counter names end in `_total`.
pub fn counter(name: &'static str, help: &'static str, labels: &[(&'static str, &str)]) -> Rc<Counter> {
    assert!(name.ends_with("_total"), "counter {name} must end in _total");
    let counter = Rc::new(Counter::default());
    register(name, help, labels, Handle::Counter(Rc::clone(&counter)));
    counter
}

/// Registers a gauge on the calling shard.
pub fn gauge(name: &'static str, help: &'static str, labels: &[(&'static str, &str)]) -> Rc<Gauge> {
    let gauge = Rc::new(Gauge::default());
    register(name, help, labels, Handle::Gauge(Rc::clone(&gauge)));
    gauge
}

/// Registers a latency histogram on the calling shard; its name should end
/// in `_seconds` (values are exported in seconds).
pub fn histogram(name: &'static str, help: &'static str, labels: &[(&'static str, &str)]) -> Rc<Histogram> {
    assert!(name.ends_with("_seconds"), "histogram {name} must end in _seconds");
    let histogram = Rc::new(Histogram::default());
    register(name, help, labels, Handle::Histogram(Rc::clone(&histogram)));
    histogram
}

/// Registers a closure run at every scrape on the calling shard, to report
/// values the subsystem keeps itself (sizes, counts of things that come
/// and go, such as tables).
pub fn register_collector(collect: impl Fn(&mut Collector) + 'static) {
    REGISTRY.with(|r| r.borrow_mut().collectors.push(Rc::new(collect)));
}

/// Where collectors put their samples during [`gather`].
#[derive(Default)]
pub struct Collector {
    families: BTreeMap<&'static str, Family>,
}

impl Collector {
    pub fn counter(&mut self, name: &'static str, help: &'static str, labels: Labels, value: f64) {
        assert!(name.ends_with("_total"), "counter {name} must end in _total");
        self.add(name, help, Kind::Counter, Sample { labels, value: Value::Counter(value) });
    }

    pub fn gauge(&mut self, name: &'static str, help: &'static str, labels: Labels, value: f64) {
        self.add(name, help, Kind::Gauge, Sample { labels, value: Value::Gauge(value) });
    }

    fn add(&mut self, name: &'static str, help: &'static str, kind: Kind, sample: Sample) {
        let family = self.families.entry(name).or_insert_with(|| Family { name, help, kind, samples: Vec::new() });
        assert_eq!(family.kind, kind, "metric {name} reported as two kinds");
        family.samples.push(sample);
    }
}

/// This shard's metrics now, by name.
pub fn gather() -> Vec<Family> {
    let mut collector = Collector::default();
    let collectors = REGISTRY.with(|r| {
        let registry = r.borrow();
        for metric in &registry.registered {
            let (kind, value) = match &metric.handle {
                Handle::Counter(c) => (Kind::Counter, Value::Counter(c.get() as f64)),
                // Gauges are i64 inside; f64 holds every value a gauge reaches.
                Handle::Gauge(g) => (Kind::Gauge, Value::Gauge(g.get() as f64)),
                Handle::Histogram(h) => (Kind::Histogram, Value::Histogram(h.snapshot())),
            };
            collector.add(metric.name, metric.help, kind, Sample { labels: metric.labels.clone(), value });
        }
        registry.collectors.clone()
    });
    // Outside the borrow: a collector may register metrics of its own.
    for collect in collectors {
        collect(&mut collector);
    }
    collector.families.into_values().collect()
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gather_reports_handles_and_collectors_by_name() {
        let requests = counter("t_requests_total", "Requests.", &[("op", "read")]);
        requests.add(3);
        let open = gauge("t_open", "Open things.", &[]);
        open.add(2);
        open.add(-1);
        histogram("t_latency_seconds", "Latency.", &[]).record_us(100);
        register_collector(|c| c.gauge("t_sizes_bytes", "Sizes.", vec![("table", "a".into())], 42.0));
        let families = gather();
        let names: Vec<_> = families.iter().map(|f| f.name).collect();
        assert_eq!(names, ["t_latency_seconds", "t_open", "t_requests_total", "t_sizes_bytes"]);
        assert_eq!(families[2].samples[0].value, Value::Counter(3.0));
        assert_eq!(families[2].samples[0].labels, vec![("op", "read".to_string())]);
        assert_eq!(families[1].samples[0].value, Value::Gauge(1.0));
        assert_eq!(families[3].samples[0].value, Value::Gauge(42.0));
    }

    #[test]
    #[should_panic(expected = "must end in _total")]
    fn counters_are_named_as_counters() {
        counter("t_requests", "Requests.", &[]);
    }
}
