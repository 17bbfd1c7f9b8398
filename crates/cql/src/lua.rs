//! The Lua runtime of user-defined functions, as ScyllaDB's (`lang/lua.cc`):
//! one Lua state per shard (a thread-local, never shared), each function
//! compiled once per shard and cached by its name, argument types and body.
//!
//! A run is bounded: an instruction-count hook fails it past
//! [`INSTRUCTIONS_MAX`] (ScyllaDB yields and times out instead; a shard
//! here cannot yield inside a selection, so it fails sooner), and the
//! state's memory is capped at [`MEMORY_MAX_BYTES`]. Scripts see the base,
//! string, table and math libraries, without what reads files, catches
//! errors (a caught timeout would loop on) or runs coroutines. Each run gets
//! a fresh global table (reads fall through to the libraries), so one call
//! leaves nothing behind for the next.
//!
//! Values cross as ScyllaDB maps them: integers as Lua integers, floats
//! and doubles as numbers, text, ascii and blobs as strings, booleans,
//! timestamps (ms), dates (days + 2^31) and times (ns) as integers, uuids
//! and inets as strings, durations as `{months, days, nanoseconds}`,
//! lists and tuples as sequences, sets as `{v = true}`, maps as `{k = v}`,
//! user types as `{field = v}` (every field must be given back).
//! Varints beyond 64 bits and decimals go in as strings (Lua's arithmetic
//! takes numeric strings), where ScyllaDB has a decimal userdata.
//!
//! [`call`] runs a function on serialized values: a failure while running
//! (a Lua error, a result of the wrong kind, the instruction bound) is a
//! FunctionFailure naming the function, as in Cassandra, a text result
//! that is not UTF-8 (or ASCII) an InvalidRequest, as ScyllaDB validates
//! results; a function `RETURNS NULL ON NULL INPUT` is not run on a null
//! argument.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value as LuaValue, VmState};
use shoal_schema::collection::normalize;
use shoal_schema::literal::{parse_date, parse_duration, parse_time, parse_timestamp};
use shoal_schema::value::decimal_to_string;
use shoal_schema::{parse_literal, CqlType, LiteralKind, UserFunction, Value};

use crate::error::{CqlError, CqlResult};

/// Instructions one run may execute (checked every [`HOOK_EVERY`]).
const INSTRUCTIONS_MAX: u32 = 10_000_000;
const HOOK_EVERY: u32 = 10_000;
/// All Lua memory of a shard: compiled functions and running ones.
const MEMORY_MAX_BYTES: usize = 64 << 20;
/// Compiled functions kept per shard; past it the cache starts over.
const CACHED_MAX: usize = 1024;
/// Globals taken away from scripts (see the module doc).
const REMOVED_GLOBALS: [&str; 6] = ["dofile", "loadfile", "pcall", "xpcall", "collectgarbage", "print"];

/// Why a run failed: the text ScyllaDB gives (with its "lua execution
/// failed: " or "could not compile: " prefix).
pub type LuaFailure = String;

/// The starts of the failures that are a result no value of the return
/// type (text that is not UTF-8, ascii that is not ASCII): ScyllaDB
/// validates a result as a value and answers InvalidRequest for these.
const INVALID_UTF8: &str = "value is not valid utf8";
const INVALID_ASCII: &str = "value is not valid ascii";

/// Whether `failure` is an invalid result rather than a failed run.
fn is_invalid_result(failure: &LuaFailure) -> bool {
    failure.starts_with(INVALID_UTF8) || failure.starts_with(INVALID_ASCII)
}

struct Runtime {
    lua: Lua,
    /// The libraries, behind each run's fresh globals.
    libraries: Table,
    compiled: HashMap<String, Function>,
    /// Hook calls left in the current run.
    budget: std::rc::Rc<Cell<u32>>,
}

thread_local! {
    static RUNTIME: RefCell<Option<Runtime>> = const { RefCell::new(None) };
}

fn new_runtime() -> mlua::Result<Runtime> {
    let lua = Lua::new_with(StdLib::STRING | StdLib::TABLE | StdLib::MATH, LuaOptions::default())?;
    lua.set_memory_limit(MEMORY_MAX_BYTES)?;
    let globals = lua.globals();
    for name in REMOVED_GLOBALS {
        globals.raw_set(name, LuaValue::Nil)?;
    }
    let budget = std::rc::Rc::new(Cell::new(0u32));
    let left = budget.clone();
    lua.set_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |_, _| match left.get() {
        0 => Err(mlua::Error::runtime(TIMEOUT)),
        n => {
            left.set(n - 1);
            Ok(VmState::Continue)
        }
    })?;
    Ok(Runtime { lua, libraries: globals, compiled: HashMap::new(), budget })
}

const TIMEOUT: &str = "lua execution timeout";

fn with_runtime<T>(f: impl FnOnce(&mut Runtime) -> Result<T, LuaFailure>) -> Result<T, LuaFailure> {
    RUNTIME.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(new_runtime().map_err(|e| format!("could not start lua: {e}"))?);
        }
        // Set just above.
        f(slot.as_mut().expect("the runtime was just made"))
    })
}

/// The chunk ScyllaDB compiles: the arguments bound by name, then the body.
fn chunk(arg_names: &[String], body: &str) -> String {
    match arg_names.is_empty() {
        true => body.to_string(),
        false => format!("local {} = ...;\n{body}", arg_names.join(",")),
    }
}

/// Compiles `body` as a function of `arg_names`: ScyllaDB's "could not
/// compile: ..." when it is not Lua.
pub fn check(arg_names: &[String], body: &str) -> Result<(), LuaFailure> {
    with_runtime(|rt| compile(rt, arg_names, body).map(|_| ()))
}

fn compile(rt: &Runtime, arg_names: &[String], body: &str) -> Result<Function, LuaFailure> {
    rt.lua
        .load(chunk(arg_names, body))
        .set_name("=<internal>")
        .set_mode(mlua::ChunkMode::Text)
        .into_function()
        .map_err(|e| format!("could not compile: {}", message(&e)))
}

/// A Lua error's own text, without mlua's wrapping.
fn message(error: &mlua::Error) -> String {
    match error {
        mlua::Error::CallbackError { cause, .. } => message(cause),
        mlua::Error::RuntimeError(m) | mlua::Error::SyntaxError { message: m, .. } => m.clone(),
        mlua::Error::MemoryError(m) => format!("not enough memory: {m}"),
        other => other.to_string(),
    }
}

/// Runs `function` on serialized `args` (null: `None`), its failures
/// mapped to the protocol's errors.
pub fn call(function: &UserFunction, args: &[Option<Bytes>]) -> CqlResult<Option<Bytes>> {
    if !function.called_on_null_input && args.iter().any(Option::is_none) {
        return Ok(None);
    }
    let mut values = Vec::with_capacity(args.len());
    for (arg, ty) in args.iter().zip(&function.arg_types) {
        values.push(match arg {
            // An empty value of a type that has no empty form reads as null.
            Some(bytes)
                if bytes.is_empty() && !matches!(ty.unfrozen(), CqlType::Text | CqlType::Ascii | CqlType::Blob) =>
            {
                None
            }
            Some(bytes) => Some(
                Value::deserialize(ty, bytes)
                    .map_err(|e| CqlError::Server(format!("argument of {}: {e}", function.name)))?,
            ),
            None => None,
        });
    }
    match run(function, &values) {
        Ok(result) => Ok(result.map(|v| Bytes::from(v.to_bytes()))),
        Err(message) if is_invalid_result(&message) => Err(CqlError::Invalid(message)),
        Err(message) => Err(CqlError::FunctionFailure {
            keyspace: function.keyspace.clone(),
            function: function.name.clone(),
            arg_types: function.arg_types.iter().map(ToString::to_string).collect(),
            message: format!("execution of '{}.{}' failed: {message}", function.keyspace, function.name),
        }),
    }
}

/// Runs `function` on `args` (typed as its arguments; nulls as `nil`).
pub fn run(function: &UserFunction, args: &[Option<Value>]) -> Result<Option<Value>, LuaFailure> {
    with_runtime(|rt| {
        let key =
            format!("{}\u{0}{}\u{0}{:?}\u{0}{}", function.keyspace, function.name, function.arg_types, function.body);
        let compiled = match rt.compiled.get(&key) {
            Some(f) => f.clone(),
            None => {
                let f = compile(rt, &function.arg_names, &function.body)?;
                if rt.compiled.len() >= CACHED_MAX {
                    rt.compiled.clear();
                }
                rt.compiled.insert(key, f.clone());
                f
            }
        };
        let failed = |e: mlua::Error| format!("lua execution failed: {}", message(&e));
        let env = fresh_globals(rt).map_err(failed)?;
        compiled.set_environment(env).map_err(failed)?;
        let mut lua_args = Vec::with_capacity(args.len());
        for (value, ty) in args.iter().zip(&function.arg_types) {
            lua_args.push(match value {
                Some(v) => to_lua(&rt.lua, ty, v).map_err(failed)?,
                None => LuaValue::Nil,
            });
        }
        rt.budget.set(INSTRUCTIONS_MAX / HOOK_EVERY);
        let returned = compiled.call::<MultiValue>(MultiValue::from_vec(lua_args));
        let timed_out = rt.budget.get() == 0;
        let returned = match returned {
            Err(_) if timed_out => return Err(TIMEOUT.to_string()),
            Err(e) => return Err(failed(e)),
            Ok(values) => values,
        };
        if returned.len() != 1 {
            return Err(format!("{} values returned, expected 1", returned.len()));
        }
        match returned.into_iter().next() {
            Some(LuaValue::Nil) | None => Ok(None),
            Some(value) => from_lua(&function.return_type, &value).map(Some),
        }
    })
}

fn fresh_globals(rt: &Runtime) -> mlua::Result<Table> {
    let env = rt.lua.create_table()?;
    let meta = rt.lua.create_table()?;
    meta.raw_set("__index", rt.libraries.clone())?;
    env.set_metatable(Some(meta))?;
    Ok(env)
}

fn to_lua(lua: &Lua, ty: &CqlType, value: &Value) -> mlua::Result<LuaValue> {
    let string = |bytes: &[u8]| lua.create_string(bytes).map(LuaValue::String);
    Ok(match value {
        Value::Ascii(s) | Value::Text(s) => string(s.as_bytes())?,
        Value::Blob(b) => string(b)?,
        Value::Boolean(b) => LuaValue::Boolean(*b),
        Value::Tinyint(v) => LuaValue::Integer(i64::from(*v)),
        Value::Smallint(v) => LuaValue::Integer(i64::from(*v)),
        Value::Int(v) => LuaValue::Integer(i64::from(*v)),
        Value::Bigint(v) | Value::Counter(v) | Value::Timestamp(v) | Value::Time(v) => LuaValue::Integer(*v),
        Value::Date(v) => LuaValue::Integer(i64::from(*v)),
        Value::Float(v) => LuaValue::Number(f64::from(*v)),
        Value::Double(v) => LuaValue::Number(*v),
        Value::Varint(bytes) => match small_integer(bytes) {
            Some(v) => LuaValue::Integer(v),
            None => string(decimal_to_string(0, bytes).as_bytes())?,
        },
        Value::Decimal { scale, unscaled } => string(decimal_to_string(*scale, unscaled).as_bytes())?,
        Value::Uuid(_) | Value::Timeuuid(_) | Value::Inet(_) => string(value.to_string().as_bytes())?,
        Value::Duration { months, days, nanos } => {
            let table = lua.create_table()?;
            table.raw_set("months", *months)?;
            table.raw_set("days", *days)?;
            table.raw_set("nanoseconds", *nanos)?;
            LuaValue::Table(table)
        }
        Value::List(items) | Value::Vector(items) => {
            let element = element_types(ty).0;
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (i, item) in items.iter().enumerate() {
                table.raw_set(i + 1, to_lua(lua, &element, item)?)?;
            }
            LuaValue::Table(table)
        }
        Value::Set(items) => {
            let element = element_types(ty).0;
            let table = lua.create_table()?;
            for item in items {
                table.raw_set(to_lua(lua, &element, item)?, true)?;
            }
            LuaValue::Table(table)
        }
        Value::Map(entries) => {
            let (key, value) = element_types(ty);
            let table = lua.create_table()?;
            for (k, v) in entries {
                table.raw_set(to_lua(lua, &key, k)?, to_lua(lua, &value, v)?)?;
            }
            LuaValue::Table(table)
        }
        Value::Tuple(fields) => {
            let table = lua.create_table()?;
            match ty.unfrozen() {
                CqlType::Udt(udt) => {
                    for (field, (name, ty)) in fields.iter().zip(&udt.fields) {
                        if let Some(field) = field {
                            table.raw_set(name.as_str(), to_lua(lua, ty, field)?)?;
                        }
                    }
                }
                CqlType::Tuple(types) => {
                    for (i, (field, ty)) in fields.iter().zip(types).enumerate() {
                        if let Some(field) = field {
                            table.raw_set(i + 1, to_lua(lua, ty, field)?)?;
                        }
                    }
                }
                _ => {}
            }
            LuaValue::Table(table)
        }
    })
}

/// A collection type's element types (key and value for a map).
fn element_types(ty: &CqlType) -> (CqlType, CqlType) {
    match ty.unfrozen() {
        CqlType::List(e) | CqlType::Set(e) | CqlType::Vector(e, _) => ((**e).clone(), (**e).clone()),
        CqlType::Map(k, v) => ((**k).clone(), (**v).clone()),
        other => (other.clone(), other.clone()),
    }
}

/// A varint of at most 64 bits, as an i64.
fn small_integer(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > 8 {
        return None;
    }
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut full = [fill; 8];
    full[8 - bytes.len()..].copy_from_slice(bytes);
    Some(i64::from_be_bytes(full))
}

/// An integer's text, from a Lua integer, an integral number or a
/// numeric string: ScyllaDB's "value is not an integer" otherwise.
fn integer_text(value: &LuaValue) -> Result<String, LuaFailure> {
    match value {
        LuaValue::Integer(v) => Ok(v.to_string()),
        LuaValue::Number(v) if v.fract() == 0.0 && v.is_finite() => Ok(format!("{v:.0}")),
        LuaValue::Number(_) => Err("value is not an integer".to_string()),
        LuaValue::String(s) => {
            let text = s.to_string_lossy();
            let text = text.trim();
            if !text.is_empty() && text.trim_start_matches('-').bytes().all(|b| b.is_ascii_digit()) {
                return Ok(text.to_string());
            }
            match text.parse::<f64>() {
                Ok(v) => integer_text(&LuaValue::Number(v)),
                Err(_) => Err("value is not a number".to_string()),
            }
        }
        _ => Err("value is not a number".to_string()),
    }
}

fn number(value: &LuaValue) -> Result<f64, LuaFailure> {
    match value {
        LuaValue::Integer(v) => Ok(*v as f64),
        LuaValue::Number(v) => Ok(*v),
        LuaValue::String(s) => {
            s.to_string_lossy().trim().parse::<f64>().map_err(|_| "value is not a number".to_string())
        }
        _ => Err("value is not a number".to_string()),
    }
}

/// A value's text as ScyllaDB's `get_string` makes it: strings as they
/// are, numbers written out; tables and booleans refused.
fn text(value: &LuaValue) -> Result<Vec<u8>, LuaFailure> {
    match value {
        LuaValue::String(s) => Ok(s.as_bytes().to_vec()),
        LuaValue::Integer(v) => Ok(v.to_string().into_bytes()),
        LuaValue::Number(v) => Ok(v.to_string().into_bytes()),
        _ => Err("unexpected value".to_string()),
    }
}

fn parsed(ty: &CqlType, kind: LiteralKind, text: &str) -> Result<Value, LuaFailure> {
    parse_literal(ty, kind, text).map_err(|e| e.to_string())
}

fn integer(ty: &CqlType, value: &LuaValue) -> Result<Value, LuaFailure> {
    parsed(ty, LiteralKind::Integer, &integer_text(value)?)
}

fn table(value: &LuaValue) -> Result<&Table, LuaFailure> {
    match value {
        LuaValue::Table(t) => Ok(t),
        _ => Err("value is not a table".to_string()),
    }
}

/// `value` (not nil) as a value of `ty`.
fn from_lua(ty: &CqlType, value: &LuaValue) -> Result<Value, LuaFailure> {
    use CqlType as T;
    let lua_error = |e: mlua::Error| message(&e);
    Ok(match ty.unfrozen() {
        T::Tinyint | T::Smallint | T::Int | T::Bigint | T::Counter | T::Varint => integer(ty, value)?,
        T::Float => Value::Float(number(value)? as f32),
        T::Double => Value::Double(number(value)?),
        T::Decimal => match value {
            LuaValue::Integer(_) => parsed(ty, LiteralKind::Integer, &integer_text(value)?)?,
            LuaValue::Number(v) => parsed(ty, LiteralKind::Float, &v.to_string())?,
            LuaValue::String(s) => parsed(ty, LiteralKind::Float, s.to_string_lossy().trim())
                .map_err(|_| "value is not a decimal".to_string())?,
            _ => return Err("value is not a number".to_string()),
        },
        T::Boolean => Value::Boolean(!matches!(value, LuaValue::Boolean(false) | LuaValue::Nil)),
        T::Blob => Value::Blob(text(value)?),
        T::Text => match String::from_utf8(text(value)?) {
            Ok(s) => Value::Text(s),
            Err(e) => {
                let offset = e.utf8_error().valid_up_to();
                return Err(format!("{INVALID_UTF8}, invalid character at byte offset {offset}"));
            }
        },
        T::Ascii => match String::from_utf8(text(value)?) {
            Ok(s) if s.is_ascii() => Value::Ascii(s),
            _ => return Err(INVALID_ASCII.to_string()),
        },
        T::Timestamp => match value {
            LuaValue::String(s) => Value::Timestamp(parse_timestamp(&s.to_string_lossy()).map_err(|e| e.to_string())?),
            LuaValue::Integer(_) | LuaValue::Number(_) => integer(&T::Bigint, value).map(|v| match v {
                Value::Bigint(ms) => Value::Timestamp(ms),
                other => other,
            })?,
            _ => return Err("timestamp must be a string, integer or date table".to_string()),
        },
        T::Date => match value {
            LuaValue::String(s) => Value::Date(parse_date(&s.to_string_lossy()).map_err(|e| e.to_string())?),
            LuaValue::Integer(_) | LuaValue::Number(_) => {
                let days = integer_text(value)?.parse::<u32>().map_err(|_| "date value must fit in 32 bits")?;
                Value::Date(days)
            }
            _ => return Err("date must be a string, integer or date table".to_string()),
        },
        T::Time => match value {
            LuaValue::String(s) => Value::Time(parse_time(&s.to_string_lossy()).map_err(|e| e.to_string())?),
            LuaValue::Integer(v) => Value::Time(*v),
            _ => return Err("time must be a string or an integer".to_string()),
        },
        T::Uuid | T::Timeuuid => parsed(ty, LiteralKind::Uuid, &String::from_utf8_lossy(&text(value)?))?,
        T::Inet => parsed(ty, LiteralKind::String, &String::from_utf8_lossy(&text(value)?))?,
        T::Duration => match value {
            LuaValue::String(s) => parse_duration(&s.to_string_lossy()).map_err(|e| e.to_string())?,
            LuaValue::Table(t) => duration(t)?,
            _ => return Err("a duration must be of the form { months = v1, days = v2, nanoseconds = v3 }".to_string()),
        },
        T::List(element) | T::Vector(element, _) => {
            let mut pairs = Vec::new();
            for pair in table(value)?.pairs::<LuaValue, LuaValue>() {
                let (k, v) = pair.map_err(lua_error)?;
                pairs.push((
                    integer_text(&k)?.parse::<i64>().map_err(|_| "table is not a sequence")?,
                    from_lua(element, &v)?,
                ));
            }
            pairs.sort_by_key(|(k, _)| *k);
            if pairs.iter().enumerate().any(|(i, (k, _))| *k != i as i64 + 1) {
                return Err("table is not a sequence".to_string());
            }
            let items = pairs.into_iter().map(|(_, v)| v).collect();
            match ty.unfrozen() {
                T::Vector(..) => Value::Vector(items),
                _ => Value::List(items),
            }
        }
        T::Set(element) => {
            let mut items = Vec::new();
            for pair in table(value)?.pairs::<LuaValue, LuaValue>() {
                let (k, v) = pair.map_err(lua_error)?;
                if matches!(v, LuaValue::Boolean(false) | LuaValue::Nil) {
                    return Err("sets are represented with tables with true values".to_string());
                }
                items.push(from_lua(element, &k)?);
            }
            normalized(ty, Value::Set(items))?
        }
        T::Map(key, val) => {
            let mut entries = Vec::new();
            for pair in table(value)?.pairs::<LuaValue, LuaValue>() {
                let (k, v) = pair.map_err(lua_error)?;
                entries.push((from_lua(key, &k)?, from_lua(val, &v)?));
            }
            normalized(ty, Value::Map(entries))?
        }
        T::Tuple(types) => {
            let mut fields = vec![None; types.len()];
            for pair in table(value)?.pairs::<LuaValue, LuaValue>() {
                let (k, v) = pair.map_err(lua_error)?;
                let index = integer_text(&k)?.parse::<usize>().ok().filter(|i| (1..=types.len()).contains(i));
                let Some(index) = index else {
                    return Err(format!(
                        "key {} is not valid for a sequence of size {}",
                        integer_text(&k)?,
                        types.len()
                    ));
                };
                fields[index - 1] = Some(from_lua(&types[index - 1], &v)?);
            }
            if let Some(missing) = fields.iter().position(Option::is_none) {
                return Err(format!("key {} missing in sequence of size {}", missing + 1, types.len()));
            }
            Value::Tuple(fields)
        }
        T::Udt(udt) => {
            let mut fields = vec![None; udt.fields.len()];
            for pair in table(value)?.pairs::<LuaValue, LuaValue>() {
                let (k, v) = pair.map_err(lua_error)?;
                let LuaValue::String(name) = k else { return Err("unexpected value".to_string()) };
                let name = name.to_string_lossy();
                let Some(index) = udt.field_index(&name) else {
                    return Err(format!("invalid UDT field '{name}'"));
                };
                fields[index] = Some(from_lua(&udt.fields[index].1, &v)?);
            }
            if let Some(missing) = fields.iter().position(Option::is_none) {
                return Err(format!("key {} missing in udt {}", udt.fields[missing].0, udt.name));
            }
            Value::Tuple(fields)
        }
        T::Frozen(_) => return Err(format!("values of type {ty} are not supported")),
    })
}

/// A set or map in CQL's order, duplicates removed.
fn normalized(ty: &CqlType, value: Value) -> Result<Value, LuaFailure> {
    let bytes = normalize(ty, &bytes::Bytes::from(value.to_bytes()));
    Value::deserialize(ty, &bytes).map_err(|e| e.to_string())
}

fn duration(table: &Table) -> Result<Value, LuaFailure> {
    let (mut months, mut days, mut nanos) = (0i64, 0i64, 0i64);
    for pair in table.pairs::<LuaValue, LuaValue>() {
        let (k, v) = pair.map_err(|e| message(&e))?;
        let field = String::from_utf8_lossy(&text(&k)?).into_owned();
        let n = integer_text(&v)?.parse::<i64>().map_err(|_| format!("{field} doesn't fit in a 64 bit integer"))?;
        match field.as_str() {
            "months" => months = n,
            "days" => days = n,
            "nanoseconds" => nanos = n,
            _ => return Err(format!("invalid duration field: '{field}'")),
        }
    }
    let narrow =
        |n: i64, what: &str| i32::try_from(n).map_err(|_| format!("{n} {what} doesn't fit in a 32 bit integer"));
    Ok(Value::Duration { months: narrow(months, "months")?, days: narrow(days, "days")?, nanos })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(args: &[(&str, CqlType)], ret: CqlType, body: &str) -> UserFunction {
        UserFunction {
            keyspace: "ks".into(),
            name: "f".into(),
            arg_names: args.iter().map(|(n, _)| n.to_string()).collect(),
            arg_types: args.iter().map(|(_, t)| t.clone()).collect(),
            return_type: ret,
            called_on_null_input: true,
            language: "lua".into(),
            body: body.into(),
        }
    }

    #[test]
    fn values_cross_both_ways() {
        let f = function(&[("a", CqlType::Int)], CqlType::Int, "return a + 1");
        assert_eq!(run(&f, &[Some(Value::Int(41))]), Ok(Some(Value::Int(42))));
        let f = function(&[("s", CqlType::Text)], CqlType::Text, "return s .. '!'");
        assert_eq!(run(&f, &[Some(Value::Text("hi".into()))]), Ok(Some(Value::Text("hi!".into()))));
        let list = CqlType::List(Box::new(CqlType::Int));
        let f = function(
            &[("l", list.clone())],
            list.clone(),
            "local r = {} for i, v in ipairs(l) do r[i] = v * 2 end return r",
        );
        assert_eq!(
            run(&f, &[Some(Value::List(vec![Value::Int(1), Value::Int(2)]))]),
            Ok(Some(Value::List(vec![Value::Int(2), Value::Int(4)])))
        );
        let set = CqlType::Set(Box::new(CqlType::Text));
        let f = function(&[], set, "return {b = true, a = true}");
        assert_eq!(run(&f, &[]), Ok(Some(Value::Set(vec![Value::Text("a".into()), Value::Text("b".into())]))));
        let f = function(&[("d", CqlType::Decimal)], CqlType::Decimal, "return d + 1");
        let half = parse_literal(&CqlType::Decimal, LiteralKind::Float, "1.5").expect("decimal");
        assert_eq!(
            run(&f, &[Some(half)]),
            Ok(Some(parse_literal(&CqlType::Decimal, LiteralKind::Float, "2.5").expect("decimal")))
        );
        let f = function(&[("a", CqlType::Int)], CqlType::Int, "return nil");
        assert_eq!(run(&f, &[None]), Ok(None));
    }

    #[test]
    fn user_types_cross_as_tables_keyed_by_field() {
        let udt = CqlType::Frozen(Box::new(CqlType::Udt(std::sync::Arc::new(shoal_schema::UserType {
            keyspace: "ks".into(),
            name: "t".into(),
            fields: vec![("f".into(), CqlType::Int), ("g".into(), CqlType::Text)],
        }))));
        let value = Value::Tuple(vec![Some(Value::Int(2)), Some(Value::Text("x".into()))]);
        let f = function(&[("u", udt.clone())], udt.clone(), "return {f = u.f * 10, g = u.g .. '!'}");
        let doubled = Value::Tuple(vec![Some(Value::Int(20)), Some(Value::Text("x!".into()))]);
        assert_eq!(run(&f, &[Some(value.clone())]), Ok(Some(doubled)));
        let f = function(&[("u", udt.clone())], udt.clone(), "return {f = 1, h = 2}");
        assert_eq!(run(&f, &[Some(value.clone())]), Err("invalid UDT field 'h'".to_string()));
        let f = function(&[("u", udt.clone())], udt.clone(), "return {f = 1}");
        assert_eq!(run(&f, &[Some(value.clone())]), Err("key g missing in udt t".to_string()));
        let f = function(&[("u", udt.clone())], udt, "return {[true] = 1}");
        assert_eq!(run(&f, &[Some(value)]), Err("unexpected value".to_string()));
        let f = function(&[("c", CqlType::Counter)], CqlType::Bigint, "return c + 1");
        assert_eq!(run(&f, &[Some(Value::Counter(4))]), Ok(Some(Value::Bigint(5))));
    }

    #[test]
    fn failures_and_bounds() {
        let f = function(&[], CqlType::Int, "error('boom')");
        assert!(run(&f, &[]).expect_err("fails").starts_with("lua execution failed: "));
        let f = function(&[], CqlType::Int, "while true do end");
        assert_eq!(run(&f, &[]), Err(TIMEOUT.to_string()));
        let f = function(&[], CqlType::Int, "return 'x'");
        assert_eq!(run(&f, &[]), Err("value is not a number".to_string()));
        let f = function(&[], CqlType::Int, "return 1, 2");
        assert_eq!(run(&f, &[]), Err("2 values returned, expected 1".to_string()));
        let f = function(&[], CqlType::Tinyint, "return 300");
        assert!(run(&f, &[]).is_err());
        assert!(check(&[], "return (").expect_err("no Lua").starts_with("could not compile: "));
        // Globals of one run are gone in the next.
        let f = function(&[], CqlType::Int, "if seen then return 1 end seen = true return 0");
        assert_eq!(run(&f, &[]), Ok(Some(Value::Int(0))));
        assert_eq!(run(&f, &[]), Ok(Some(Value::Int(0))));
        let f = function(&[], CqlType::Int, "return dofile('/etc/passwd')");
        assert!(run(&f, &[]).is_err());
    }
}
