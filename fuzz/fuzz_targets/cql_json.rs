//! Fuzz target for JSON read from clients (`INSERT JSON`, `fromJson()`): any
//! text, read as a value of any column type, must become a value or a
//! readable error, never panic; a value it yields must render back to JSON.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_cql::json;
use shoal_cql::values::{eval, Bindings, BoundValue, Receiver};
use shoal_schema::CqlType;

/// Column types the first input byte picks from: every JSON rendering and
/// reading path, nested both ways.
const TYPES: &[&str] = &[
    "int",
    "bigint",
    "varint",
    "decimal",
    "float",
    "double",
    "text",
    "ascii",
    "blob",
    "boolean",
    "uuid",
    "timeuuid",
    "timestamp",
    "date",
    "time",
    "duration",
    "inet",
    "tinyint",
    "smallint",
    "list<int>",
    "set<text>",
    "map<int, text>",
    "map<frozen<list<int>>, boolean>",
    "tuple<int, text, double>",
    "frozen<map<text, frozen<set<timestamp>>>>",
    "vector<float, 3>",
    "list<frozen<tuple<varint, blob>>>",
];

fuzz_target!(|data: &[u8]| {
    let Some((&pick, text)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(text);
    let ty_text = TYPES[usize::from(pick) % TYPES.len()];
    // The list above is fixed and every entry is a valid type.
    let ty = CqlType::parse(ty_text).expect("a valid type");
    let Ok(parsed) = json::parse(&text) else { return };
    let Ok(term) = json::term_of(&ty, &parsed) else { return };
    let receiver = Receiver { name: "v", ty: &ty };
    if let Ok(BoundValue::Value(bytes)) = eval(&term, receiver, Bindings::NONE) {
        json::to_json(&ty, &bytes).expect("a value read from JSON renders back to JSON");
    }
});
