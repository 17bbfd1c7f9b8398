//! CQL data types: the closed set of types a column, a bind marker or a
//! function argument can have, parsed from and printed as CQL type text.
//!
//! The printed form is the one `system_schema.columns.type` holds in Cassandra
//! 4+/ScyllaDB (`text`, `frozen<list<int>>`, `map<text, int>`), because the
//! drivers parse exactly that text to build their metadata.

use std::fmt;
use std::sync::Arc;

use thiserror::Error;

/// A CQL type. `Frozen` wraps a collection or tuple whose value is stored and
/// replaced as one cell; unfrozen collections are stored one cell per element.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CqlType {
    Ascii,
    Bigint,
    Blob,
    Boolean,
    Counter,
    Date,
    Decimal,
    Double,
    Duration,
    Float,
    Inet,
    Int,
    Smallint,
    Text,
    Time,
    Timestamp,
    Timeuuid,
    Tinyint,
    Uuid,
    Varint,
    List(Box<CqlType>),
    Set(Box<CqlType>),
    Map(Box<CqlType>, Box<CqlType>),
    Tuple(Vec<CqlType>),
    /// A user-defined type. Stored whole, like a tuple of its field types,
    /// whether frozen or not. In a schema it is always resolved (fields
    /// filled in from the keyspace's definition); the parser produces a bare
    /// reference (no fields) that DDL and statements resolve.
    Udt(Arc<UserType>),
    /// `vector<elem, n>` (Cassandra 5): exactly `n` non-null elements, one
    /// cell, never multi-cell. Elements of a fixed-length type (see
    /// [`CqlType::vector_element_size`]) are packed back to back; others
    /// each carry an unsigned vint length. DDL bounds `n` to
    /// 1..=[`MAX_VECTOR_DIMENSION`]; the parsers keep what they read so
    /// DDL can say what is wrong.
    Vector(Box<CqlType>, u32),
    Frozen(Box<CqlType>),
}

/// The largest vector dimension DDL accepts (ScyllaDB's limit; Cassandra
/// recommends no more than 2^13).
pub const MAX_VECTOR_DIMENSION: u32 = 16_000;

/// A user-defined type's definition: named fields in declaration order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UserType {
    /// Empty in an unqualified reference the parser made.
    pub keyspace: String,
    pub name: String,
    pub fields: Vec<(String, CqlType)>,
}

impl UserType {
    /// A reference by name, to be resolved against a keyspace.
    pub fn reference(keyspace: Option<String>, name: String) -> CqlType {
        CqlType::Udt(Arc::new(UserType { keyspace: keyspace.unwrap_or_default(), name, fields: Vec::new() }))
    }

    pub fn field_types(&self) -> impl ExactSizeIterator<Item = &CqlType> {
        self.fields.iter().map(|(_, ty)| ty)
    }

    pub fn field_index(&self, name: &str) -> Option<usize> {
        self.fields.iter().position(|(n, _)| n == name)
    }
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum TypeError {
    #[error("unknown type '{0}'")]
    Unknown(String),
    #[error("malformed type '{text}': {why}")]
    Malformed { text: String, why: &'static str },
}

impl CqlType {
    /// The native type named `name` (case-insensitive; `varchar` is `text`).
    pub fn native(name: &str) -> Option<CqlType> {
        let ty = match name.to_ascii_lowercase().as_str() {
            "ascii" => CqlType::Ascii,
            "bigint" => CqlType::Bigint,
            "blob" => CqlType::Blob,
            "boolean" => CqlType::Boolean,
            "counter" => CqlType::Counter,
            "date" => CqlType::Date,
            "decimal" => CqlType::Decimal,
            "double" => CqlType::Double,
            "duration" => CqlType::Duration,
            "float" => CqlType::Float,
            "inet" => CqlType::Inet,
            "int" => CqlType::Int,
            "smallint" => CqlType::Smallint,
            "text" | "varchar" => CqlType::Text,
            "time" => CqlType::Time,
            "timestamp" => CqlType::Timestamp,
            "timeuuid" => CqlType::Timeuuid,
            "tinyint" => CqlType::Tinyint,
            "uuid" => CqlType::Uuid,
            "varint" => CqlType::Varint,
            _ => return None,
        };
        Some(ty)
    }

    /// Parses CQL type text such as `frozen<map<text, list<int>>>`.
    pub fn parse(text: &str) -> Result<CqlType, TypeError> {
        let mut parser = TypeParser { text, pos: 0 };
        let ty = parser.parse_type()?;
        parser.skip_spaces();
        if parser.pos != text.len() {
            return Err(parser.malformed("trailing characters"));
        }
        Ok(ty)
    }

    /// The type with any `frozen<...>` wrapper removed.
    pub fn unfrozen(&self) -> &CqlType {
        match self {
            CqlType::Frozen(inner) => inner.unfrozen(),
            other => other,
        }
    }

    /// Whether a zero-length value is a valid value of this type: the
    /// "empty" value Cassandra accepts for scalar types (drivers read it
    /// back as EMPTY), distinct from null and sorting before every other
    /// value. Text and blob types hold it as the empty string anyway, and
    /// tuples as "no fields"; collections, durations and counters have no
    /// empty value.
    pub fn allows_empty(&self) -> bool {
        matches!(
            self.unfrozen(),
            CqlType::Ascii
                | CqlType::Text
                | CqlType::Blob
                | CqlType::Boolean
                | CqlType::Tinyint
                | CqlType::Smallint
                | CqlType::Int
                | CqlType::Bigint
                | CqlType::Float
                | CqlType::Double
                | CqlType::Date
                | CqlType::Time
                | CqlType::Timestamp
                | CqlType::Uuid
                | CqlType::Timeuuid
                | CqlType::Inet
                | CqlType::Varint
                | CqlType::Decimal
        )
    }

    /// A list, set or map that is not frozen: stored one cell per element.
    pub fn is_multi_cell(&self) -> bool {
        matches!(self, CqlType::List(_) | CqlType::Set(_) | CqlType::Map(..))
    }

    /// Whether the user type `keyspace.name` occurs anywhere in this type.
    pub fn mentions_udt(&self, keyspace: &str, name: &str) -> bool {
        match self {
            CqlType::Udt(udt) => {
                (udt.keyspace == keyspace && udt.name == name)
                    || udt.fields.iter().any(|(_, ty)| ty.mentions_udt(keyspace, name))
            }
            CqlType::List(e) | CqlType::Set(e) | CqlType::Frozen(e) | CqlType::Vector(e, _) => {
                e.mentions_udt(keyspace, name)
            }
            CqlType::Map(k, v) => k.mentions_udt(keyspace, name) || v.mentions_udt(keyspace, name),
            CqlType::Tuple(fields) => fields.iter().any(|ty| ty.mentions_udt(keyspace, name)),
            _ => false,
        }
    }

    pub fn is_counter(&self) -> bool {
        matches!(self, CqlType::Counter)
    }

    /// The fixed serialized size of a value of this type, if it has one.
    pub fn fixed_size_bytes(&self) -> Option<usize> {
        match self {
            CqlType::Boolean | CqlType::Tinyint => Some(1),
            CqlType::Smallint => Some(2),
            CqlType::Int | CqlType::Float | CqlType::Date => Some(4),
            CqlType::Bigint | CqlType::Counter | CqlType::Double | CqlType::Time | CqlType::Timestamp => Some(8),
            CqlType::Uuid | CqlType::Timeuuid => Some(16),
            _ => None,
        }
    }

    /// The length of every value of this type when it is a vector element,
    /// if all have the same (Cassandra's `valueLengthIfFixed`): such
    /// elements are packed without a length. Narrower than
    /// [`CqlType::fixed_size_bytes`]: Cassandra gives tinyint, smallint,
    /// date, time and counter variable length there, and drivers follow it.
    pub fn vector_element_size(&self) -> Option<usize> {
        match self {
            CqlType::Boolean => Some(1),
            CqlType::Int | CqlType::Float => Some(4),
            CqlType::Bigint | CqlType::Double | CqlType::Timestamp => Some(8),
            CqlType::Uuid | CqlType::Timeuuid => Some(16),
            CqlType::Vector(elem, n) => elem.vector_element_size()?.checked_mul(*n as usize),
            CqlType::Frozen(inner) => inner.vector_element_size(),
            _ => None,
        }
    }
}

impl fmt::Display for CqlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            CqlType::Ascii => "ascii",
            CqlType::Bigint => "bigint",
            CqlType::Blob => "blob",
            CqlType::Boolean => "boolean",
            CqlType::Counter => "counter",
            CqlType::Date => "date",
            CqlType::Decimal => "decimal",
            CqlType::Double => "double",
            CqlType::Duration => "duration",
            CqlType::Float => "float",
            CqlType::Inet => "inet",
            CqlType::Int => "int",
            CqlType::Smallint => "smallint",
            CqlType::Text => "text",
            CqlType::Time => "time",
            CqlType::Timestamp => "timestamp",
            CqlType::Timeuuid => "timeuuid",
            CqlType::Tinyint => "tinyint",
            CqlType::Uuid => "uuid",
            CqlType::Varint => "varint",
            CqlType::List(elem) => return write!(f, "list<{elem}>"),
            CqlType::Set(elem) => return write!(f, "set<{elem}>"),
            CqlType::Map(key, value) => return write!(f, "map<{key}, {value}>"),
            CqlType::Frozen(inner) => return write!(f, "frozen<{inner}>"),
            CqlType::Vector(elem, n) => return write!(f, "vector<{elem}, {n}>"),
            CqlType::Udt(udt) => return f.write_str(&udt_name(&udt.name)),
            CqlType::Tuple(fields) => {
                f.write_str("tuple<")?;
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{field}")?;
                }
                return f.write_str(">");
            }
        };
        f.write_str(name)
    }
}

/// A type name as CQL text: quoted unless it reads back unchanged bare.
fn udt_name(name: &str) -> String {
    let bare = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if bare {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

/// Recursive-descent parser over type text; depth is bounded by the input
/// length, which callers bound (a CQL statement or a schema row).
struct TypeParser<'a> {
    text: &'a str,
    pos: usize,
}

impl TypeParser<'_> {
    fn malformed(&self, why: &'static str) -> TypeError {
        TypeError::Malformed { text: self.text.to_string(), why }
    }

    fn skip_spaces(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    fn word(&mut self) -> &str {
        self.skip_spaces();
        let rest = &self.text[self.pos..];
        let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        self.pos += len;
        &rest[..len]
    }

    fn expect(&mut self, c: char) -> Result<(), TypeError> {
        self.skip_spaces();
        if self.text[self.pos..].starts_with(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(self.malformed(match c {
                '<' => "expected '<'",
                '>' => "expected '>'",
                _ => "expected ','",
            }))
        }
    }

    fn parse_type(&mut self) -> Result<CqlType, TypeError> {
        let name = self.word().to_ascii_lowercase();
        if name.is_empty() {
            return Err(self.malformed("expected a type name"));
        }
        if let Some(native) = CqlType::native(&name) {
            return Ok(native);
        }
        let ty = match name.as_str() {
            "frozen" => {
                self.expect('<')?;
                let inner = self.parse_type()?;
                self.expect('>')?;
                return Ok(CqlType::Frozen(Box::new(inner)));
            }
            "list" | "set" => {
                self.expect('<')?;
                let elem = Box::new(self.parse_type()?);
                self.expect('>')?;
                if name == "list" {
                    CqlType::List(elem)
                } else {
                    CqlType::Set(elem)
                }
            }
            "map" => {
                self.expect('<')?;
                let key = Box::new(self.parse_type()?);
                self.expect(',')?;
                let value = Box::new(self.parse_type()?);
                self.expect('>')?;
                CqlType::Map(key, value)
            }
            "tuple" => {
                self.expect('<')?;
                let mut fields = vec![self.parse_type()?];
                self.skip_spaces();
                while self.text[self.pos..].starts_with(',') {
                    self.pos += 1;
                    fields.push(self.parse_type()?);
                    self.skip_spaces();
                }
                self.expect('>')?;
                CqlType::Tuple(fields)
            }
            "vector" => {
                self.expect('<')?;
                let elem = Box::new(self.parse_type()?);
                self.expect(',')?;
                let dimension = self.word().parse().map_err(|_| self.malformed("expected a vector dimension"))?;
                self.expect('>')?;
                CqlType::Vector(elem, dimension)
            }
            _ => return Err(TypeError::Unknown(name)),
        };
        Ok(ty)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_round_trip() {
        for text in [
            "int",
            "text",
            "frozen<list<int>>",
            "map<text, frozen<set<uuid>>>",
            "tuple<int, text, blob>",
            "vector<float, 3>",
            "vector<frozen<list<vector<int, 2>>>, 2>",
        ] {
            assert_eq!(CqlType::parse(text).map(|t| t.to_string()).as_deref(), Ok(text));
        }
        assert_eq!(CqlType::parse("VARCHAR"), Ok(CqlType::Text));
        assert_eq!(CqlType::parse(" map < int , text > ").map(|t| t.to_string()).as_deref(), Ok("map<int, text>"));
    }

    #[test]
    fn rejects_bad_text() {
        assert!(matches!(CqlType::parse("nosuch"), Err(TypeError::Unknown(_))));
        assert!(CqlType::parse("list<int").is_err());
        assert!(CqlType::parse("map<int>").is_err());
        assert!(CqlType::parse("int int").is_err());
        assert!(CqlType::parse("").is_err());
        assert!(CqlType::parse("vector<int>").is_err());
        assert!(CqlType::parse("vector<int, x>").is_err());
        assert!(CqlType::parse("vector<int, -1>").is_err());
    }

    #[test]
    fn vector_element_sizes_follow_cassandra() {
        let size = |text: &str| CqlType::parse(text).map(|t| t.vector_element_size()).unwrap_or(Some(999));
        assert_eq!(size("float"), Some(4));
        assert_eq!(size("uuid"), Some(16));
        assert_eq!(size("vector<bigint, 3>"), Some(24));
        for variable in
            ["smallint", "tinyint", "date", "time", "counter", "text", "vector<text, 2>", "frozen<list<int>>"]
        {
            assert_eq!(size(variable), None, "{variable}");
        }
    }

    #[test]
    fn tuples_are_not_multi_cell() {
        assert!(CqlType::parse("list<int>").map(|t| t.is_multi_cell()).unwrap_or(false));
        assert!(!CqlType::parse("frozen<list<int>>").map(|t| t.is_multi_cell()).unwrap_or(true));
        assert!(!CqlType::parse("tuple<int>").map(|t| t.is_multi_cell()).unwrap_or(true));
    }
}
