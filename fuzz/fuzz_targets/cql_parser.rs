//! Fuzz target for the CQL parser: any text must parse or yield a
//! `ParseError`, never panic, overflow the stack or hang.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_cql::parser::parse_statement;

fuzz_target!(|data: &[u8]| {
    // Lossy decoding keeps invalid-UTF-8 inputs useful: the replacement
    // character exercises the lexer's non-ASCII paths.
    let text = String::from_utf8_lossy(data);
    if let Err(e) = parse_statement(&text) {
        // Positions must point inside (or just past) the input.
        assert!(e.line >= 1 && e.column >= 1, "bad position in {e}");
        assert!(e.line <= text.lines().count().max(1) + 1, "line past end in {e}");
        assert!(!e.message.is_empty());
    }
});
