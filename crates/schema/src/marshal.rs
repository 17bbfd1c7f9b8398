//! Cassandra's marshal class names for CQL types
//! (`org.apache.cassandra.db.marshal.Int32Type`,
//! `...VectorType(...FloatType , 3)`): the text protocol v4 sends as a
//! custom `[option]` for the types it has no id for (`duration`, `vector`),
//! which drivers parse back into types.
//!
//! The spelling follows Cassandra's `AbstractType.toString()`: vector
//! parameters separated by `" , "`, user type and field names in hex,
//! `FrozenType(...)` around frozen collections and user types.

use crate::types::{CqlType, TypeError, UserType};

const PREFIX: &str = "org.apache.cassandra.db.marshal.";

/// How deeply [`parse`] follows nested types: real types nest a few
/// levels, and the bound keeps recursion on hostile input shallow.
const MAX_DEPTH: usize = 32;

/// The marshal class name of `ty`.
pub fn class_name(ty: &CqlType) -> String {
    let mut out = String::new();
    write_class(ty, &mut out);
    out
}

fn simple_name(ty: &CqlType) -> Option<&'static str> {
    let name = match ty {
        CqlType::Ascii => "AsciiType",
        CqlType::Bigint => "LongType",
        CqlType::Blob => "BytesType",
        CqlType::Boolean => "BooleanType",
        CqlType::Counter => "CounterColumnType",
        CqlType::Date => "SimpleDateType",
        CqlType::Decimal => "DecimalType",
        CqlType::Double => "DoubleType",
        CqlType::Duration => "DurationType",
        CqlType::Float => "FloatType",
        CqlType::Inet => "InetAddressType",
        CqlType::Int => "Int32Type",
        CqlType::Smallint => "ShortType",
        CqlType::Text => "UTF8Type",
        CqlType::Time => "TimeType",
        CqlType::Timestamp => "TimestampType",
        CqlType::Timeuuid => "TimeUUIDType",
        CqlType::Tinyint => "ByteType",
        CqlType::Uuid => "UUIDType",
        CqlType::Varint => "IntegerType",
        _ => return None,
    };
    Some(name)
}

fn write_class(ty: &CqlType, out: &mut String) {
    out.push_str(PREFIX);
    if let Some(name) = simple_name(ty) {
        out.push_str(name);
        return;
    }
    match ty {
        CqlType::List(e) => write_params("ListType", [&**e], out),
        CqlType::Set(e) => write_params("SetType", [&**e], out),
        CqlType::Map(k, v) => write_params("MapType", [&**k, &**v], out),
        CqlType::Frozen(inner) => write_params("FrozenType", [&**inner], out),
        CqlType::Tuple(fields) => write_params("TupleType", fields, out),
        CqlType::Vector(elem, dimension) => {
            out.push_str("VectorType(");
            write_class(elem, out);
            out.push_str(&format!(" , {dimension})"));
        }
        CqlType::Udt(udt) => {
            out.push_str(&format!("UserType({},{}", udt.keyspace, hex(&udt.name)));
            for (name, field) in &udt.fields {
                out.push_str(&format!(",{}:", hex(name)));
                write_class(field, out);
            }
            out.push(')');
        }
        // Every other type has a simple name, written above.
        _ => {}
    }
}

fn write_params<'a>(name: &str, types: impl IntoIterator<Item = &'a CqlType>, out: &mut String) {
    out.push_str(name);
    out.push('(');
    for (i, t) in types.into_iter().enumerate() {
        out.push_str(if i > 0 { "," } else { "" });
        write_class(t, out);
    }
    out.push(')');
}

fn hex(text: &str) -> String {
    text.bytes().map(|b| format!("{b:02x}")).collect()
}

/// Reads a marshal class name back into a type, the inverse of
/// [`class_name`]; the package prefix is optional, as for Cassandra.
pub fn parse(text: &str) -> Result<CqlType, TypeError> {
    let mut parser = Parser { text, pos: 0 };
    let ty = parser.class(0)?;
    parser.skip_blank();
    if parser.pos != text.len() {
        return Err(parser.malformed("trailing characters"));
    }
    Ok(ty)
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn malformed(&self, why: &'static str) -> TypeError {
        TypeError::Malformed { text: self.text.to_string(), why }
    }

    fn skip_blank(&mut self) {
        let rest = &self.text[self.pos..];
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// An identifier: class names, hex names, dimensions, keyspaces.
    fn word(&mut self) -> &str {
        self.skip_blank();
        let rest = &self.text[self.pos..];
        let len = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')).unwrap_or(rest.len());
        self.pos += len;
        &rest[..len]
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_blank();
        let found = self.text[self.pos..].starts_with(c);
        if found {
            self.pos += c.len_utf8();
        }
        found
    }

    fn expect(&mut self, c: char, why: &'static str) -> Result<(), TypeError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.malformed(why))
        }
    }

    fn class(&mut self, depth: usize) -> Result<CqlType, TypeError> {
        if depth >= MAX_DEPTH {
            return Err(self.malformed("types nested too deeply"));
        }
        let word = self.word();
        let name = word.strip_prefix(PREFIX).unwrap_or(word).to_string();
        let simple = [
            CqlType::Ascii,
            CqlType::Bigint,
            CqlType::Blob,
            CqlType::Boolean,
            CqlType::Counter,
            CqlType::Date,
            CqlType::Decimal,
            CqlType::Double,
            CqlType::Duration,
            CqlType::Float,
            CqlType::Inet,
            CqlType::Int,
            CqlType::Smallint,
            CqlType::Text,
            CqlType::Time,
            CqlType::Timestamp,
            CqlType::Timeuuid,
            CqlType::Tinyint,
            CqlType::Uuid,
            CqlType::Varint,
        ];
        if let Some(ty) = simple.into_iter().find(|t| simple_name(t) == Some(name.as_str())) {
            return Ok(ty);
        }
        self.expect('(', "expected '('")?;
        let ty = match name.as_str() {
            "ListType" => CqlType::List(Box::new(self.class(depth + 1)?)),
            "SetType" => CqlType::Set(Box::new(self.class(depth + 1)?)),
            "FrozenType" => CqlType::Frozen(Box::new(self.class(depth + 1)?)),
            "MapType" => {
                let key = self.class(depth + 1)?;
                self.expect(',', "expected ','")?;
                CqlType::Map(Box::new(key), Box::new(self.class(depth + 1)?))
            }
            "TupleType" => {
                let mut fields = vec![self.class(depth + 1)?];
                while self.eat(',') {
                    fields.push(self.class(depth + 1)?);
                }
                CqlType::Tuple(fields)
            }
            "VectorType" => {
                let elem = self.class(depth + 1)?;
                self.expect(',', "expected ','")?;
                let dimension = self.word().parse().map_err(|_| self.malformed("expected a vector dimension"))?;
                CqlType::Vector(Box::new(elem), dimension)
            }
            "UserType" => self.user_type(depth)?,
            _ => return Err(TypeError::Unknown(name)),
        };
        self.expect(')', "expected ')'")?;
        Ok(ty)
    }

    /// After `UserType(`: keyspace, hex name, then `hexfield:Type` fields.
    fn user_type(&mut self, depth: usize) -> Result<CqlType, TypeError> {
        let keyspace = self.word().to_string();
        self.expect(',', "expected ','")?;
        let name = self.hex_name()?;
        let mut fields = Vec::new();
        while self.eat(',') {
            let field = self.hex_name()?;
            self.expect(':', "expected ':'")?;
            fields.push((field, self.class(depth + 1)?));
        }
        Ok(CqlType::Udt(std::sync::Arc::new(UserType { keyspace, name, fields })))
    }

    fn hex_name(&mut self) -> Result<String, TypeError> {
        let hex_byte = |pair: &[u8]| match pair {
            [_, _] => std::str::from_utf8(pair).ok().and_then(|p| u8::from_str_radix(p, 16).ok()),
            _ => None,
        };
        let bytes = self.word().as_bytes().chunks(2).map(hex_byte).collect::<Option<Vec<u8>>>();
        bytes.and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| self.malformed("bad hex name"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(text: &str) -> CqlType {
        CqlType::parse(text).expect("test type text is valid")
    }

    #[test]
    fn vectors_are_spelled_as_cassandra_does() {
        assert_eq!(
            class_name(&ty("vector<float, 3>")),
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FloatType , 3)"
        );
        assert_eq!(
            class_name(&ty("vector<frozen<list<frozen<set<int>>>>, 2>")),
            "org.apache.cassandra.db.marshal.VectorType(org.apache.cassandra.db.marshal.FrozenType(\
             org.apache.cassandra.db.marshal.ListType(org.apache.cassandra.db.marshal.FrozenType(\
             org.apache.cassandra.db.marshal.SetType(org.apache.cassandra.db.marshal.Int32Type)))) , 2)"
        );
    }

    #[test]
    fn class_names_round_trip() {
        let udt = UserType {
            keyspace: "ks".into(),
            name: "Addr".into(),
            fields: vec![("street".into(), CqlType::Text), ("n".into(), ty("vector<int, 2>"))],
        };
        let types = [
            "duration",
            "vector<double, 2>",
            "vector<text, 4>",
            "map<text, frozen<list<vector<smallint, 2>>>>",
            "frozen<tuple<int, uuid, varint>>",
            "vector<vector<timeuuid, 1>, 16000>",
        ]
        .map(ty)
        .into_iter()
        .chain([CqlType::Frozen(Box::new(CqlType::Udt(std::sync::Arc::new(udt))))]);
        for t in types {
            assert_eq!(parse(&class_name(&t)), Ok(t.clone()), "{t}");
        }
        assert_eq!(parse("VectorType(FloatType, 3)"), Ok(ty("vector<float, 3>")));
    }

    #[test]
    fn bad_class_names_are_errors() {
        for text in ["", "NoSuchType", "ListType(Int32Type", "VectorType(FloatType)", "VectorType(FloatType , x)"] {
            assert!(parse(text).is_err(), "{text}");
        }
        assert!(parse(&"ListType(".repeat(100)).is_err());
        assert!(parse("UserType(ks,6,61:Int32Type)").is_err());
    }
}
