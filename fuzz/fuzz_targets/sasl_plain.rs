//! Fuzzes the SASL PLAIN token decoder of CQL's AUTH_RESPONSE: any bytes
//! give credentials or an error, never a panic; decoded credentials are
//! the token's last two NUL-separated fields, neither empty, and encoding
//! them again decodes to the same.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_cql::auth::sasl::decode_plain;

fuzz_target!(|data: &[u8]| {
    let Ok(credentials) = decode_plain(data) else { return };
    assert!(!credentials.username.is_empty() && !credentials.password.is_empty());
    assert!(!credentials.password.contains('\0') && !credentials.username.contains('\0'));
    assert!(data.ends_with(credentials.password.as_bytes()));
    let again = format!("\0{}\0{}", credentials.username, credentials.password);
    assert_eq!(decode_plain(again.as_bytes()).ok(), Some(credentials));
});
