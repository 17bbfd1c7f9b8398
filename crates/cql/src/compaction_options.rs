//! The `compaction = {...}` option of CREATE/ALTER TABLE and of
//! materialized views: the strategy class resolved to the name
//! `system_schema.tables` shows, and every sub-option checked the way
//! ScyllaDB checks it, with its texts (ConfigurationException), so a typo
//! or an out-of-range value is refused instead of stored and ignored.
//!
//! Each strategy accepts the common options (tombstone compaction,
//! `enabled`, the thresholds) and its own; any other key is refused as a
//! whole set ("Invalid compaction strategy options {...}"), after the
//! values of the known ones are checked. Cassandra's common options that
//! ScyllaDB ignores (`log_all`, `only_purge_repaired_tombstones`,
//! `provide_overlapping_tombstones`) are accepted, so schemas written for
//! Cassandra load unchanged.
//!
//! ScyllaDB's IncrementalCompactionStrategy is accepted with its options
//! and checks; the storage layer compacts such a table size-tiered (ICS's
//! own tiering, without its fragmented runs).

use std::collections::BTreeMap;

use crate::error::{CqlError, CqlResult};

/// The sub-options every strategy takes.
const COMMON: &[&str] = &[
    "class",
    "enabled",
    "tombstone_threshold",
    "tombstone_compaction_interval",
    "unchecked_tombstone_compaction",
    "min_threshold",
    "max_threshold",
    "log_all",
    "only_purge_repaired_tombstones",
    "provide_overlapping_tombstones",
];
const SIZE_TIERED: &[&str] = &["min_sstable_size", "bucket_low", "bucket_high", "cold_reads_to_omit"];
const LEVELED: &[&str] = &["sstable_size_in_mb", "fanout_size", "single_sstable_uplevel"];
/// ICS: size tiers (without `cold_reads_to_omit`), its fragment size and
/// its space amplification goal.
const INCREMENTAL: &[&str] =
    &["min_sstable_size", "bucket_low", "bucket_high", "sstable_size_in_mb", "space_amplification_goal"];
const TIME_WINDOW: &[&str] = &[
    "compaction_window_unit",
    "compaction_window_size",
    "timestamp_resolution",
    "expired_sstable_check_frequency_seconds",
    "unsafe_aggressive_sstable_expiration",
    "enable_optimized_twcs_queries",
];

/// The strategies Shoal runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    SizeTiered,
    Leveled,
    TimeWindow,
    Incremental,
    Null,
}

impl Strategy {
    /// The strategy's own sub-options (besides [`COMMON`]). Time windows
    /// are compacted size-tiered inside, so TWCS takes STCS's too.
    fn own_options(self) -> &'static [&'static [&'static str]] {
        match self {
            Strategy::SizeTiered => &[SIZE_TIERED],
            Strategy::Leveled => &[LEVELED],
            Strategy::TimeWindow => &[TIME_WINDOW, SIZE_TIERED],
            Strategy::Incremental => &[INCREMENTAL],
            Strategy::Null => &[],
        }
    }
}

/// The `compaction` map as stored: `class` resolved, every option checked.
pub fn validated(entries: &[(String, String)]) -> CqlResult<BTreeMap<String, String>> {
    let mut map: BTreeMap<String, String> = entries.iter().cloned().collect();
    let class = map
        .get("class")
        .cloned()
        .ok_or_else(|| CqlError::Config("Missing sub-option 'class' for the 'compaction' option.".to_string()))?;
    let short = class.rsplit('.').next().unwrap_or(&class);
    let (strategy, full) = match short {
        "SizeTieredCompactionStrategy" => (Strategy::SizeTiered, format!("org.apache.cassandra.db.compaction.{short}")),
        "LeveledCompactionStrategy" => (Strategy::Leveled, format!("org.apache.cassandra.db.compaction.{short}")),
        "TimeWindowCompactionStrategy" => (Strategy::TimeWindow, format!("org.apache.cassandra.db.compaction.{short}")),
        // ScyllaDB's own, which it names short.
        "IncrementalCompactionStrategy" => (Strategy::Incremental, short.to_string()),
        "NullCompactionStrategy" => (Strategy::Null, short.to_string()),
        _ => return Err(CqlError::Config(format!("Unable to find compaction strategy class '{class}'"))),
    };
    check_values(&map)?;
    let unknown: Vec<(&String, &String)> = map
        .iter()
        .filter(|(key, _)| {
            !COMMON.contains(&key.as_str()) && !strategy.own_options().iter().any(|own| own.contains(&key.as_str()))
        })
        .collect();
    if !unknown.is_empty() {
        let listed: Vec<String> = unknown.iter().map(|(k, v)| format!("\"{k}\": \"{v}\"")).collect();
        return Err(config(format!(
            "Invalid compaction strategy options {{{}}} for chosen strategy type",
            listed.join(", ")
        )));
    }
    map.insert("class".to_string(), full);
    Ok(map)
}

/// The values of the options a strategy may take, in ScyllaDB's order:
/// the common ones, then size-tiered, leveled and time-window ones.
fn check_values(map: &BTreeMap<String, String>) -> CqlResult<()> {
    let get = |name: &'static str| map.get(name).map(|v| (name, v.as_str()));
    if let Some((name, v)) = get("tombstone_threshold") {
        let value = float(name, v)?;
        if !(0.0..=1.0).contains(&value) {
            return Err(config(format!("{name} value ({value}) must be between 0.0 and 1.0")));
        }
    }
    if let Some((name, v)) = get("tombstone_compaction_interval") {
        let seconds = integer(name, v)?;
        if seconds < 0 {
            return Err(config(format!("{name} value ({}ms) must be positive", seconds.saturating_mul(1000))));
        }
    }
    for name in ["unchecked_tombstone_compaction", "enabled", "enable_optimized_twcs_queries"] {
        if let Some((name, v)) = get(name) {
            if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                return Err(config(format!("{name} value ({v}) must be \"true\" or \"false\"")));
            }
        }
    }
    for name in ["min_threshold", "max_threshold"] {
        if let Some((name, v)) = get(name) {
            let value = integer(name, v)?;
            if value < 2 {
                return Err(config(format!("{name} value ({value}) must be bigger or equal to 2")));
            }
        }
    }
    if let Some((name, v)) = get("min_sstable_size") {
        // Bytes: a long, unlike the other integers.
        let value: i64 = v.trim().parse().map_err(|_| syntax_integer(name, v))?;
        if value < 0 {
            return Err(config(format!("{name} value ({value}) must be non negative")));
        }
    }
    let bucket_low = get("bucket_low").map(|(name, v)| float(name, v)).transpose()?;
    if let Some(value) = bucket_low.filter(|low| *low <= 0.0 || *low >= 1.0) {
        return Err(config(format!("bucket_low value ({value}) must be between 0.0 and 1.0")));
    }
    if let Some((name, v)) = get("bucket_high") {
        let value = float(name, v)?;
        if value <= 1.0 {
            return Err(config(format!("{name} value ({value}) must be greater than 1.0")));
        }
    }
    if let Some((name, v)) = get("space_amplification_goal") {
        let value = float(name, v)?;
        if value <= 1.0 || value > 2.0 {
            return Err(config(format!(
                "{name} value ({value}) must be greater than 1.0 and less than or equal to 2.0"
            )));
        }
    }
    if let Some((name, v)) = get("cold_reads_to_omit") {
        let value = float(name, v)?;
        if !(0.0..=1.0).contains(&value) {
            return Err(config(format!("{name} value ({value}) must be between 0.0 and 1.0")));
        }
    }
    if let Some((name, v)) = get("sstable_size_in_mb") {
        let value = integer(name, v)?;
        if value <= 0 {
            return Err(config(format!("{name} value ({value}) must be positive")));
        }
    }
    if let Some((name, v)) = get("compaction_window_unit") {
        if !["MINUTES", "HOURS", "DAYS"].iter().any(|unit| v.eq_ignore_ascii_case(unit)) {
            return Err(config(format!("Invalid window unit {v} for {name}")));
        }
    }
    if let Some((name, v)) = get("compaction_window_size") {
        let value = integer(name, v)?;
        if value < 1 {
            return Err(config(format!("{name} value ({value}) must be greater than 1")));
        }
    }
    if let Some((name, v)) = get("timestamp_resolution") {
        if !["MICROSECONDS", "MILLISECONDS"].iter().any(|unit| v.eq_ignore_ascii_case(unit)) {
            return Err(config(format!("Invalid timestamp resolution {v} for {name}")));
        }
    }
    Ok(())
}

fn config(message: String) -> CqlError {
    CqlError::Config(message)
}

/// An integer sub-option; ScyllaDB refuses one that does not parse as a
/// syntax error.
fn integer(name: &str, value: &str) -> CqlResult<i32> {
    value.trim().parse().map_err(|_| syntax_integer(name, value))
}

fn syntax_integer(name: &str, value: &str) -> CqlError {
    CqlError::Syntax(format!("Invalid integer value {value} for '{name}'"))
}

fn float(name: &str, value: &str) -> CqlResult<f64> {
    value.trim().parse().map_err(|_| CqlError::Syntax(format!("Invalid float value {value} for '{name}'")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(class: &str, options: &[(&str, &str)]) -> Result<BTreeMap<String, String>, String> {
        let mut entries = vec![("class".to_string(), class.to_string())];
        entries.extend(options.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        validated(&entries).map_err(|e| match e {
            CqlError::Config(m) => format!("config: {m}"),
            CqlError::Syntax(m) => format!("syntax: {m}"),
            other => format!("{other:?}"),
        })
    }

    #[test]
    fn good_options_are_kept_with_the_class_resolved() -> Result<(), String> {
        let stored = check("SizeTieredCompactionStrategy", &[("min_threshold", "4"), ("bucket_high", "1.5")])?;
        assert_eq!(stored["class"], "org.apache.cassandra.db.compaction.SizeTieredCompactionStrategy");
        assert_eq!(stored["min_threshold"], "4");
        check("TimeWindowCompactionStrategy", &[("compaction_window_unit", "hours"), ("bucket_low", "0.5")])?;
        check("LeveledCompactionStrategy", &[("sstable_size_in_mb", "160"), ("enabled", "false")])?;
        assert_eq!(check("NullCompactionStrategy", &[])?["class"], "NullCompactionStrategy");
        Ok(())
    }

    #[test]
    fn bad_values_are_refused_with_scyllas_texts() {
        let refused = [
            ("SizeTieredCompactionStrategy", ("tombstone_threshold", "-0.4"), "config: tombstone_threshold value (-0.4) must be between 0.0 and 1.0"),
            ("LeveledCompactionStrategy", ("tombstone_compaction_interval", "-7"), "config: tombstone_compaction_interval value (-7000ms) must be positive"),
            ("LeveledCompactionStrategy", ("enabled", "certainly"), "config: enabled value (certainly) must be \"true\" or \"false\""),
            ("SizeTieredCompactionStrategy", ("bucket_low", "0.0"), "config: bucket_low value (0) must be between 0.0 and 1.0"),
            ("SizeTieredCompactionStrategy", ("bucket_high", "0.7"), "config: bucket_high value (0.7) must be greater than 1.0"),
            ("SizeTieredCompactionStrategy", ("min_threshold", "1"), "config: min_threshold value (1) must be bigger or equal to 2"),
            ("TimeWindowCompactionStrategy", ("compaction_window_unit", "SECONDS"), "config: Invalid window unit SECONDS for compaction_window_unit"),
            ("TimeWindowCompactionStrategy", ("compaction_window_size", "-8"), "config: compaction_window_size value (-8) must be greater than 1"),
            ("LeveledCompactionStrategy", ("sstable_size_in_mb", "-5"), "config: sstable_size_in_mb value (-5) must be positive"),
            ("LeveledCompactionStrategy", ("sstable_size_in_mb", "2147483648"), "syntax: Invalid integer value 2147483648 for 'sstable_size_in_mb'"),
            ("SizeTieredCompactionStrategy", ("abc", "-54.54"), "config: Invalid compaction strategy options {\"abc\": \"-54.54\"} for chosen strategy type"),
            ("LeveledCompactionStrategy", ("compaction_window_size", "4"), "config: Invalid compaction strategy options {\"compaction_window_size\": \"4\"} for chosen strategy type"),
        ];
        for (class, option, expected) in refused {
            assert_eq!(check(class, &[option]), Err(expected.to_string()), "{class} {option:?}");
        }
        assert_eq!(
            check("NoSuchCompactionStrategy", &[]),
            Err("config: Unable to find compaction strategy class 'NoSuchCompactionStrategy'".to_string())
        );
    }

    #[test]
    fn incremental_takes_its_options_with_scyllas_checks() -> Result<(), String> {
        let stored = check(
            "IncrementalCompactionStrategy",
            &[("sstable_size_in_mb", "1000"), ("space_amplification_goal", "1.5")],
        )?;
        assert_eq!(stored["class"], "IncrementalCompactionStrategy");
        let refused = [
            (("min_sstable_size", "-1"), "config: min_sstable_size value (-1) must be non negative"),
            (("bucket_low", "1.3"), "config: bucket_low value (1.3) must be between 0.0 and 1.0"),
            (("bucket_high", "0.7"), "config: bucket_high value (0.7) must be greater than 1.0"),
            (
                ("space_amplification_goal", "2.2"),
                "config: space_amplification_goal value (2.2) must be greater than 1.0 and less than or equal to 2.0",
            ),
            (("min_threshold", "1"), "config: min_threshold value (1) must be bigger or equal to 2"),
            (
                ("cold_reads_to_omit", "0.5"),
                "config: Invalid compaction strategy options {\"cold_reads_to_omit\": \"0.5\"} for chosen strategy type",
            ),
        ];
        for (option, expected) in refused {
            assert_eq!(check("IncrementalCompactionStrategy", &[option]), Err(expected.to_string()), "{option:?}");
        }
        Ok(())
    }
}
