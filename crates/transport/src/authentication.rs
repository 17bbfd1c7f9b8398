//! A connection's login, with an authenticator configured: STARTUP is
//! answered AUTHENTICATE (naming Cassandra's `PasswordAuthenticator`), the
//! client sends its SASL PLAIN token in AUTH_RESPONSE, and is answered
//! AUTH_SUCCESS or BadCredentials (it may try again). Until it succeeds,
//! only OPTIONS, STARTUP and AUTH_RESPONSE are served, and a client that
//! has not logged in within the deadline is hung up on.
//!
//! The password check runs off the shard (`shoal_cql::auth::password`), so
//! a login costs the shard a message, not the hash.

use std::cell::Cell;
use std::time::{Duration, Instant};

use shoal_cql::auth::{login, Authenticator};
use shoal_cql::CqlError;

use crate::frame::Opcode;

/// Where a connection is in its login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    /// No STARTUP yet.
    Unstarted,
    /// AUTHENTICATE sent; waiting for a good AUTH_RESPONSE.
    Authenticating,
    /// Logged in, or no authenticator: every request is served.
    Open,
}

/// A connection's login state.
#[derive(Debug)]
pub(crate) struct Login {
    stage: Cell<Stage>,
    /// When a client still not logged in is hung up on.
    deadline: Option<Instant>,
}

impl Login {
    pub(crate) fn new(authenticator: Authenticator, timeout: Duration) -> Login {
        match authenticator {
            Authenticator::AllowAll => Login { stage: Cell::new(Stage::Open), deadline: None },
            Authenticator::Password => {
                Login { stage: Cell::new(Stage::Unstarted), deadline: Some(Instant::now() + timeout) }
            }
        }
    }

    /// How long the client has left to log in; `None` once it has (or
    /// when no login is needed).
    pub(crate) fn time_left(&self) -> Option<Duration> {
        match self.stage.get() {
            Stage::Open => None,
            _ => self.deadline.map(|d| d.saturating_duration_since(Instant::now())),
        }
    }

    /// Refuses a request the login stage does not allow yet, with
    /// Cassandra's texts.
    pub(crate) fn admit(&self, opcode: Opcode) -> Result<(), CqlError> {
        let expecting = match (self.stage.get(), opcode) {
            (Stage::Open, _) | (_, Opcode::Options | Opcode::Startup) => return Ok(()),
            (Stage::Authenticating, Opcode::AuthResponse) => return Ok(()),
            (Stage::Unstarted, _) => "STARTUP or OPTIONS",
            (Stage::Authenticating, _) => "SASL_RESPONSE",
        };
        Err(CqlError::Protocol(format!("Unexpected message {}, expecting {expecting}", opcode.name())))
    }

    /// STARTUP was served: whether to answer AUTHENTICATE (rather than READY).
    pub(crate) fn started(&self) -> bool {
        if self.stage.get() == Stage::Open {
            return false;
        }
        self.stage.set(Stage::Authenticating);
        true
    }

    /// Checks an AUTH_RESPONSE's token; the role it logs in as.
    pub(crate) async fn authenticate(&self, token: Option<&[u8]>) -> Result<String, CqlError> {
        if self.stage.get() != Stage::Authenticating {
            return Err(CqlError::Protocol(
                "Authentication is not configured on this node (no AUTHENTICATE was sent)".to_string(),
            ));
        }
        let user = login::login(token.unwrap_or_default()).await?;
        self.stage.set(Stage::Open);
        Ok(user)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_login_exchange_is_served_before_login() {
        let login = Login::new(Authenticator::Password, Duration::from_secs(10));
        assert!(login.time_left().is_some());
        assert!(login.admit(Opcode::Options).is_ok());
        let early = login.admit(Opcode::Query).expect_err("refused");
        assert_eq!(early.to_string(), "Unexpected message QUERY, expecting STARTUP or OPTIONS");
        assert!(login.started());
        let refused = login.admit(Opcode::Prepare).expect_err("refused");
        assert_eq!(refused.to_string(), "Unexpected message PREPARE, expecting SASL_RESPONSE");
        assert!(login.admit(Opcode::AuthResponse).is_ok());
        let open = Login::new(Authenticator::AllowAll, Duration::from_secs(10));
        assert!(open.time_left().is_none() && !open.started() && open.admit(Opcode::Query).is_ok());
    }
}
