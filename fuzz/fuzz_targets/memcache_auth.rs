//! Fuzzes memcached's ASCII authentication: the auth file parser and the
//! first `set` a connection must send. The input up to its first NUL byte
//! is an auth file, the rest what a client sends: any bytes give a table
//! or an error, and a request, "incomplete" or "close", never a panic;
//! every answered request takes at least one byte and no more than the
//! buffer holds, and only credentials the table holds authenticate.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_memcache::auth::{answer, parse_auth, AuthRequest, AuthTable};

fuzz_target!(|data: &[u8]| {
    let (file, sent) = match data.iter().position(|b| *b == 0) {
        Some(nul) => (&data[..nul], &data[nul + 1..]),
        None => (data, &b""[..]),
    };
    let table = AuthTable::parse(file).unwrap_or_default();
    let mut rest = sent;
    loop {
        let request = parse_auth(rest);
        let Some((consumed, _, authenticated)) = answer(&request, &table) else { break };
        assert!(consumed > 0 && consumed <= rest.len(), "consumed {consumed} of {}", rest.len());
        if let AuthRequest::Credentials { user, password, .. } = request {
            assert_eq!(authenticated, table.check(user, password));
        } else {
            assert!(!authenticated);
        }
        rest = &rest[consumed..];
    }
});
