//! Fuzz target for the HTTP API's request decoder (`shoal-http`): any
//! bytes give a request, "not yet whole" or an error, never a panic; a
//! decoded request's path is absolute, and a head that grew past the
//! bound is never waited on.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal_http::{percent_decode, percent_encode, Request, HEAD_BYTES_MAX};

fuzz_target!(|data: &[u8]| {
    match Request::parse(data) {
        Ok(Some(request)) => {
            assert!(request.path.starts_with('/'));
            for (name, value) in &request.query {
                assert_eq!(percent_decode(&percent_encode(name), true).as_deref(), Ok(name.as_str()));
                assert_eq!(percent_decode(&percent_encode(value), true).as_deref(), Ok(value.as_str()));
            }
        }
        Ok(None) => assert!(data.len() < HEAD_BYTES_MAX),
        Err(e) => assert!(e.status().code() >= 400),
    }
});
