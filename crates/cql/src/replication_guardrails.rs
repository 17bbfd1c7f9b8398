//! ScyllaDB's replication guardrails: the `system.config` settings
//! `replication_strategy_{warn,fail}_list`,
//! `{minimum,maximum}_replication_factor_{warn,fail}_threshold` and
//! `restrict_replication_simplestrategy`, live like the others (a copy per
//! shard, set on every shard by an UPDATE, until the node stops), and the
//! check CREATE and ALTER KEYSPACE pass before their schema change, which
//! refuses a strategy on the fail list or a replication factor past a fail
//! threshold with ScyllaDB's ConfigurationException texts.
//!
//! The warn settings are listed and kept, with ScyllaDB's defaults, but no
//! warning reaches the client: Shoal's responses carry none yet.

use std::cell::{Cell, RefCell};

use crate::ast::{OptionValue, Statement};
use crate::error::{invalid, CqlError, CqlResult};

/// The strategies the lists may name (ScyllaDB's
/// `replication_strategy_restriction_t`).
const STRATEGIES: [&str; 4] = ["SimpleStrategy", "NetworkTopologyStrategy", "LocalStrategy", "EverywhereStrategy"];

/// A threshold that is off.
const OFF: i64 = -1;

thread_local! {
    static WARN_LIST: RefCell<Vec<String>> = RefCell::new(vec!["SimpleStrategy".to_string()]);
    static FAIL_LIST: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    static MIN_RF_WARN: Cell<i64> = const { Cell::new(3) };
    static MIN_RF_FAIL: Cell<i64> = const { Cell::new(OFF) };
    static MAX_RF_WARN: Cell<i64> = const { Cell::new(OFF) };
    static MAX_RF_FAIL: Cell<i64> = const { Cell::new(OFF) };
    static RESTRICT_SIMPLE: Cell<Restriction> = const { Cell::new(Restriction::False) };
}

/// ScyllaDB's `tri_mode_restriction`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Restriction {
    False,
    True,
    Warn,
}

impl Restriction {
    fn name(self) -> &'static str {
        match self {
            Restriction::False => "false",
            Restriction::True => "true",
            Restriction::Warn => "warn",
        }
    }
}

type Threshold = &'static std::thread::LocalKey<Cell<i64>>;

const THRESHOLDS: [(&str, Threshold); 4] = [
    ("minimum_replication_factor_warn_threshold", &MIN_RF_WARN),
    ("minimum_replication_factor_fail_threshold", &MIN_RF_FAIL),
    ("maximum_replication_factor_warn_threshold", &MAX_RF_WARN),
    ("maximum_replication_factor_fail_threshold", &MAX_RF_FAIL),
];

/// This shard's settings as `system.config` rows (name, source, type,
/// value); lists and the restriction as ScyllaDB renders them, in JSON.
pub(crate) fn rows() -> Vec<[String; 4]> {
    let list = |cell: &'static std::thread::LocalKey<RefCell<Vec<String>>>| {
        let names: Vec<String> = cell.with(|l| l.borrow().iter().map(|n| format!("\"{n}\"")).collect());
        format!("[{}]", names.join(", "))
    };
    let mut rows = vec![
        [
            "replication_strategy_warn_list".into(),
            "default".into(),
            "replication strategy list".into(),
            list(&WARN_LIST),
        ],
        [
            "replication_strategy_fail_list".into(),
            "default".into(),
            "replication strategy list".into(),
            list(&FAIL_LIST),
        ],
        [
            "restrict_replication_simplestrategy".into(),
            "default".into(),
            "tri_mode_restriction".into(),
            format!("\"{}\"", RESTRICT_SIMPLE.with(Cell::get).name()),
        ],
    ];
    for (name, cell) in THRESHOLDS {
        rows.push([name.into(), "default".into(), "integer".into(), cell.with(Cell::get).to_string()]);
    }
    rows
}

/// A parsed value for setting `name`, if it is one of these; to be set on
/// every shard with [`Value::set`].
pub(crate) fn parse(name: &str, value: &str) -> Option<CqlResult<Value>> {
    let bad = || invalid(format!("Invalid value '{value}' for {name}"));
    let parsed = match name {
        "replication_strategy_warn_list" | "replication_strategy_fail_list" => {
            let inner = value.trim().trim_start_matches('[').trim_end_matches(']');
            let names: Vec<String> = inner
                .split(',')
                .map(|n| n.trim().trim_matches('"').trim())
                .filter(|n| !n.is_empty())
                .map(str::to_string)
                .collect();
            match names.iter().all(|n| STRATEGIES.contains(&n.as_str())) {
                true => Ok(Value::List(name == "replication_strategy_fail_list", names)),
                false => Err(bad()),
            }
        }
        "restrict_replication_simplestrategy" => match value.trim().trim_matches('"').to_ascii_lowercase().as_str() {
            "false" | "0" => Ok(Value::Restriction(Restriction::False)),
            "true" | "1" => Ok(Value::Restriction(Restriction::True)),
            "warn" => Ok(Value::Restriction(Restriction::Warn)),
            _ => Err(bad()),
        },
        _ => {
            let index = THRESHOLDS.iter().position(|(known, _)| *known == name)?;
            value.trim().parse::<i64>().map(|v| Value::Threshold(index, v)).map_err(|_| bad())
        }
    };
    Some(parsed)
}

/// A new value of one of these settings.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    /// The fail list (true) or the warn list, and its strategies.
    List(bool, Vec<String>),
    Restriction(Restriction),
    /// The index in [`THRESHOLDS`], and the threshold.
    Threshold(usize, i64),
}

impl Value {
    /// Sets it on this shard.
    pub(crate) fn set(self) {
        match self {
            Value::List(true, names) => FAIL_LIST.with(|l| *l.borrow_mut() = names),
            Value::List(false, names) => WARN_LIST.with(|l| *l.borrow_mut() = names),
            Value::Restriction(r) => RESTRICT_SIMPLE.with(|c| c.set(r)),
            Value::Threshold(index, v) => THRESHOLDS[index].1.with(|c| c.set(v)),
        }
    }
}

/// Refuses a CREATE or ALTER KEYSPACE whose replication the guardrails
/// forbid: ScyllaDB's `check_against_restricted_replication_strategies`,
/// its fail half, in its order (the strategy, then each factor).
pub fn check(statement: &Statement) -> CqlResult<()> {
    let (keyspace, options) = match statement {
        Statement::CreateKeyspace(s) => (&s.name, &s.options),
        Statement::AlterKeyspace(s) => (&s.name, &s.options),
        _ => return Ok(()),
    };
    let Some(entries) = options.iter().find_map(|(option, value)| match value {
        OptionValue::Map(entries) if option.eq_ignore_ascii_case("replication") => Some(entries),
        _ => None,
    }) else {
        return Ok(());
    };
    if let Some((_, class)) = entries.iter().find(|(k, _)| k == "class") {
        let strategy = class.rsplit('.').next().unwrap_or(class);
        let restricted = strategy == "SimpleStrategy" && RESTRICT_SIMPLE.with(Cell::get) == Restriction::True;
        if restricted || FAIL_LIST.with(|l| l.borrow().iter().any(|n| n == strategy)) {
            return Err(CqlError::Config(format!(
                "{class} replication class is not recommended, and forbidden by the current configuration, but was \
                 used for keyspace {keyspace}. You may override this restriction by modifying \
                 replication_strategy_fail_list configuration option to not list {class}."
            )));
        }
    }
    for (option, value) in entries.iter().filter(|(k, _)| k != "class" && k != "initial_tablets") {
        let Ok(rf) = value.trim().parse::<i64>() else { continue };
        if rf <= 0 {
            continue;
        }
        let (min_fail, max_fail) = (MIN_RF_FAIL.with(Cell::get), MAX_RF_FAIL.with(Cell::get));
        if min_fail >= 0 && rf < min_fail {
            return Err(CqlError::Config(format!(
                "Replication Factor {option}={rf} is forbidden by the current configuration setting of \
                 minimum_replication_factor_fail_threshold={min_fail}. Please increase replication factor, or lower \
                 minimum_replication_factor_fail_threshold set in the configuration."
            )));
        }
        if max_fail >= 0 && rf > max_fail {
            return Err(CqlError::Config(format!(
                "Replication Factor {option}={rf} is forbidden by the current configuration setting of \
                 maximum_replication_factor_fail_threshold={max_fail}. Please decrease replication factor, or increase \
                 maximum_replication_factor_fail_threshold set in the configuration."
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(text: &str) -> Result<(), String> {
        let parsed = crate::parser::parse_statement(text).expect("parses");
        check(&parsed.statement).map_err(|e| e.to_string())
    }

    #[test]
    fn the_fail_settings_refuse_with_scylladbs_texts() {
        let simple = "CREATE KEYSPACE k WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}";
        assert_eq!(checked(simple), Ok(()));
        parse("replication_strategy_fail_list", "[\"SimpleStrategy\"]").expect("known").expect("valid").set();
        assert!(checked(simple)
            .expect_err("refused")
            .contains("SimpleStrategy replication class is not recommended, and forbidden"));
        parse("replication_strategy_fail_list", "[]").expect("known").expect("valid").set();
        parse("minimum_replication_factor_fail_threshold", "3").expect("known").expect("valid").set();
        assert!(checked(simple).expect_err("refused").contains("Replication Factor replication_factor=1 is forbidden"));
        parse("minimum_replication_factor_fail_threshold", "-1").expect("known").expect("valid").set();
        parse("restrict_replication_simplestrategy", "\"true\"").expect("known").expect("valid").set();
        assert!(checked(simple).is_err());
        parse("restrict_replication_simplestrategy", "false").expect("known").expect("valid").set();
        assert!(parse("replication_strategy_warn_list", "Nope").expect("known").is_err());
        assert!(parse("num_tokens", "1").is_none());
        let listed = rows().into_iter().find(|r| r[0] == "replication_strategy_warn_list").map(|r| r[3].clone());
        assert_eq!(listed.as_deref(), Some("[\"SimpleStrategy\"]"));
    }
}
