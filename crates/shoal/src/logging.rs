//! The node's log: to stderr, as text or JSON, with a level per module
//! that can change while the node runs.
//!
//! - Text (`--log-format text`, the default) has ANSI colours only when
//!   stderr is a terminal: a file, a pipe or journald gets plain lines.
//!   JSON (`--log-format json`) is one object per line (`timestamp`,
//!   `level`, `message`, `target`, `threadName`).
//! - A *module* is a tracing target: a Rust module path such as
//!   `shoal_cluster::failure_detector` (every line names its own); a level
//!   set on a module holds for the modules under it. Levels: off, error,
//!   warn, info, debug, trace.
//! - `--default-log-level` (info) for every module, `RUST_LOG` (an
//!   `EnvFilter` string) in its place when set, then each
//!   `--logger-log-level module=level` (ScyllaDB's option: repeatable, the
//!   pairs separated by commas or ScyllaDB's single colons).
//! - At run time, `nodetool setlogginglevel <module> <level>` (`POST
//!   /system/logger/<module>?level=<level>`) changes one module;
//!   `nodetool setlogginglevel` alone puts back the levels of the start.
//!   The filter sits behind tracing-subscriber's reload layer; a change
//!   rebuilds it and the callsites' cached interest, so a disabled
//!   `debug!` on a shard's path stays one cached check, no lock.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::str::FromStr;
use std::sync::{Mutex, OnceLock};

use thiserror::Error;
use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, reload, Registry};

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LoggingError {
    #[error("invalid log level '{0}': use off, error, warn, info, debug or trace")]
    Level(String),
    #[error("invalid module '{0}': use a Rust module path such as shoal_cluster::failure_detector")]
    Module(String),
    #[error("invalid logger level '{0}': use module=level")]
    Pair(String),
    #[error("invalid RUST_LOG: {0}")]
    Env(String),
    #[error("the log filter cannot be changed: {0}")]
    Reload(String),
    #[error("logging was not set up")]
    NotStarted,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines; colours only on a terminal.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// What the log starts with.
#[derive(Debug, Clone, Default)]
pub struct LogSettings {
    pub format: LogFormat,
    /// The level of every module without one of its own; `None`: info.
    pub default_level: Option<String>,
    /// `module=level` entries, as given.
    pub module_levels: Vec<String>,
}

/// The levels in force, to rebuild the filter from.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Levels {
    /// `RUST_LOG`'s directives, or the default level.
    base: String,
    modules: BTreeMap<String, LevelFilter>,
}

impl Levels {
    fn directives(&self) -> String {
        let mut text = self.base.clone();
        for (module, level) in &self.modules {
            text.push_str(&format!(",{module}={level}"));
        }
        text
    }

    fn filter(&self) -> Result<EnvFilter, LoggingError> {
        EnvFilter::try_new(self.directives()).map_err(|e| LoggingError::Env(e.to_string()))
    }
}

struct Logging {
    handle: reload::Handle<EnvFilter, Registry>,
    /// Changed by the HTTP API only (never on a request's path).
    levels: Mutex<Levels>,
    initial: Levels,
}

static LOGGING: OnceLock<Logging> = OnceLock::new();

/// Starts logging to stderr; call once, first thing.
pub fn init(settings: &LogSettings) -> Result<(), LoggingError> {
    let base = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.trim().is_empty() => directives,
        _ => parse_level(settings.default_level.as_deref().unwrap_or("info"))?.to_string(),
    };
    let mut modules = BTreeMap::new();
    for entry in &settings.module_levels {
        for (module, level) in parse_module_levels(entry)? {
            modules.insert(module, level);
        }
    }
    let levels = Levels { base, modules };
    let (filter, handle) = reload::Layer::new(levels.filter()?);
    let registry = tracing_subscriber::registry().with(filter);
    // Logs go to stderr, so client subcommands (stress, nodetool) keep
    // stdout for their reports.
    let result = match settings.format {
        LogFormat::Text => registry
            .with(
                fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(std::io::stderr().is_terminal())
                    .with_thread_names(true),
            )
            .try_init(),
        LogFormat::Json => registry
            .with(
                fmt::layer()
                    .json()
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false)
                    .with_thread_names(true)
                    .with_writer(std::io::stderr),
            )
            .try_init(),
    };
    result.map_err(|e| LoggingError::Reload(e.to_string()))?;
    let _ = LOGGING.set(Logging { handle, levels: Mutex::new(levels.clone()), initial: levels });
    Ok(())
}

/// Sets `module`'s level from now on.
pub fn set_level(module: &str, level: &str) -> Result<(), LoggingError> {
    let module = check_module(module)?;
    let level = parse_level(level)?;
    change(|levels| {
        levels.modules.insert(module, level);
    })
}

/// Puts back the levels the node started with.
pub fn reset() -> Result<(), LoggingError> {
    let logging = LOGGING.get().ok_or(LoggingError::NotStarted)?;
    change(|levels| *levels = logging.initial.clone())
}

/// The levels in force: the base, then each module's.
pub fn levels() -> Result<(String, Vec<(String, String)>), LoggingError> {
    let logging = LOGGING.get().ok_or(LoggingError::NotStarted)?;
    let levels = logging.levels.lock().map_err(|e| LoggingError::Reload(e.to_string()))?;
    let modules = levels.modules.iter().map(|(m, l)| (m.clone(), l.to_string())).collect();
    Ok((levels.base.clone(), modules))
}

fn change(edit: impl FnOnce(&mut Levels)) -> Result<(), LoggingError> {
    let logging = LOGGING.get().ok_or(LoggingError::NotStarted)?;
    let mut levels = logging.levels.lock().map_err(|e| LoggingError::Reload(e.to_string()))?;
    let mut next = levels.clone();
    edit(&mut next);
    logging.handle.reload(next.filter()?).map_err(|e| LoggingError::Reload(e.to_string()))?;
    *levels = next;
    Ok(())
}

fn parse_level(text: &str) -> Result<LevelFilter, LoggingError> {
    LevelFilter::from_str(text.trim()).map_err(|_| LoggingError::Level(text.to_string()))
}

/// A module path: words of letters, digits and `_`, joined by `::`.
fn check_module(text: &str) -> Result<String, LoggingError> {
    let module = text.trim();
    let word = |w: &str| !w.is_empty() && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if module.split("::").all(word) {
        Ok(module.to_string())
    } else {
        Err(LoggingError::Module(text.to_string()))
    }
}

/// `a=debug,b::c=trace` or ScyllaDB's `a=debug:b=trace` (a single colon
/// separates pairs; `::` stays inside a module path).
fn parse_module_levels(text: &str) -> Result<Vec<(String, LevelFilter)>, LoggingError> {
    let mut pairs = Vec::new();
    for entry in split_pairs(text).into_iter().filter(|e| !e.trim().is_empty()) {
        let (module, level) = entry.split_once('=').ok_or_else(|| LoggingError::Pair(entry.to_string()))?;
        pairs.push((check_module(module)?, parse_level(level)?));
    }
    Ok(pairs)
}

/// Splits at commas and at colons that are not part of a `::`.
fn split_pairs(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut pieces = Vec::new();
    let mut start = 0;
    for (i, byte) in bytes.iter().enumerate() {
        let lone_colon =
            *byte == b':' && (i == 0 || bytes[i - 1] != b':') && bytes.get(i + 1).is_none_or(|next| *next != b':');
        if *byte == b',' || lone_colon {
            pieces.push(&text[start..i]);
            start = i + 1;
        }
    }
    pieces.push(&text[start..]);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_levels_split_at_commas_and_single_colons() {
        let parsed = parse_module_levels("shoal_cluster::failure_detector=debug:shoal_storage=trace,raft=warn");
        assert_eq!(
            parsed,
            Ok(vec![
                ("shoal_cluster::failure_detector".to_string(), LevelFilter::DEBUG),
                ("shoal_storage".to_string(), LevelFilter::TRACE),
                ("raft".to_string(), LevelFilter::WARN),
            ])
        );
        assert_eq!(parse_module_levels(""), Ok(Vec::new()));
    }

    #[test]
    fn bad_modules_and_levels_are_refused() {
        assert_eq!(parse_module_levels("shoal=loud"), Err(LoggingError::Level("loud".to_string())));
        assert_eq!(parse_module_levels("shoal"), Err(LoggingError::Pair("shoal".to_string())));
        // A module that would smuggle another directive into the filter.
        assert!(matches!(check_module("a[span]"), Err(LoggingError::Module(_))));
        assert!(matches!(check_module("a:::b"), Err(LoggingError::Module(_))));
        assert_eq!(check_module(" shoal_cql::processor "), Ok("shoal_cql::processor".to_string()));
    }

    #[test]
    fn directives_put_modules_after_the_base() {
        let levels = Levels {
            base: "info".to_string(),
            modules: [("shoal_cluster".to_string(), LevelFilter::DEBUG)].into_iter().collect(),
        };
        assert_eq!(levels.directives(), "info,shoal_cluster=debug");
        assert!(levels.filter().is_ok());
    }
}
