//! Checking a client's credentials (SASL PLAIN) against the roles, as
//! Cassandra's `PasswordAuthenticator` does.

use super::{password, sasl};
use crate::error::{CqlError, CqlResult};

/// The role that the SASL PLAIN `token` logs in as, or BadCredentials
/// with Cassandra's text.
pub async fn login(token: &[u8]) -> CqlResult<String> {
    let credentials = sasl::decode_plain(token).map_err(|e| CqlError::BadCredentials(e.to_string()))?;
    let hash = shoal_coordinator::schema().roles.get(&credentials.username).and_then(|r| r.salted_hash.clone());
    // An unknown user's attempt costs as long as a known one's (`verify`).
    let matched = password::verify(credentials.password, hash).await.map_err(|e| match e {
        password::PasswordError::Busy => CqlError::Overloaded(e.to_string()),
        password::PasswordError::Hashing(_) => CqlError::Server(e.to_string()),
    })?;
    let name = credentials.username;
    if !matched {
        return Err(CqlError::BadCredentials(format!("Provided username {name} and/or password are incorrect")));
    }
    // Read again: the role may have changed while its password was checked.
    let can_login = shoal_coordinator::schema().roles.get(&name).is_some_and(|r| r.can_login);
    if !can_login {
        return Err(CqlError::BadCredentials(format!("{name} is not permitted to log in")));
    }
    Ok(name)
}
