//! Which authenticator this node runs: set once at start, read anywhere.

use std::str::FromStr;
use std::sync::OnceLock;

/// Cassandra's `authenticator` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Authenticator {
    /// Every client is let in without credentials.
    #[default]
    AllowAll,
    /// Clients log in with a role's name and password (SASL PLAIN).
    Password,
}

impl Authenticator {
    /// The class name sent in AUTHENTICATE, which drivers check.
    pub const PASSWORD_CLASS: &'static str = "org.apache.cassandra.auth.PasswordAuthenticator";
}

impl FromStr for Authenticator {
    type Err = String;

    /// Cassandra's names, short or with their package.
    fn from_str(name: &str) -> Result<Authenticator, String> {
        let short = name.trim().rsplit('.').next().unwrap_or("");
        match short {
            "AllowAllAuthenticator" => Ok(Authenticator::AllowAll),
            "PasswordAuthenticator" => Ok(Authenticator::Password),
            _ => Err(format!("unknown authenticator {name:?}: AllowAllAuthenticator or PasswordAuthenticator")),
        }
    }
}

/// Cassandra's `authorizer` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Authorizer {
    /// Every statement is allowed.
    #[default]
    AllowAll,
    /// Statements are checked against the permissions granted to roles.
    Cassandra,
}

impl FromStr for Authorizer {
    type Err = String;

    fn from_str(name: &str) -> Result<Authorizer, String> {
        match name.trim().rsplit('.').next().unwrap_or("") {
            "AllowAllAuthorizer" => Ok(Authorizer::AllowAll),
            "CassandraAuthorizer" => Ok(Authorizer::Cassandra),
            _ => Err(format!("unknown authorizer {name:?}: AllowAllAuthorizer or CassandraAuthorizer")),
        }
    }
}

/// How long a shard keeps a role's resolved permissions
/// (`permissions_validity_in_ms`, Cassandra's default).
pub const PERMISSIONS_VALIDITY_MS_DEFAULT: u64 = 2000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthConfig {
    pub authenticator: Authenticator,
    pub authorizer: Authorizer,
    pub permissions_validity_ms: u64,
}

impl Default for AuthConfig {
    fn default() -> AuthConfig {
        AuthConfig {
            authenticator: Authenticator::default(),
            authorizer: Authorizer::default(),
            permissions_validity_ms: PERMISSIONS_VALIDITY_MS_DEFAULT,
        }
    }
}

static CONFIG: OnceLock<AuthConfig> = OnceLock::new();

/// Sets the node's configuration; call once at start, before clients.
pub fn configure(config: AuthConfig) {
    // A second call (several nodes in one test process) keeps the first.
    let _ = CONFIG.set(config);
}

/// The node's configuration (the defaults until [`configure`]).
pub fn config() -> AuthConfig {
    CONFIG.get().copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_short_and_long() {
        assert_eq!("PasswordAuthenticator".parse(), Ok(Authenticator::Password));
        assert_eq!(Authenticator::PASSWORD_CLASS.parse(), Ok(Authenticator::Password));
        assert_eq!("org.apache.cassandra.auth.AllowAllAuthenticator".parse(), Ok(Authenticator::AllowAll));
        assert!("Kerberos".parse::<Authenticator>().is_err());
        assert_eq!("CassandraAuthorizer".parse(), Ok(Authorizer::Cassandra));
        assert_eq!("org.apache.cassandra.auth.AllowAllAuthorizer".parse(), Ok(Authorizer::AllowAll));
    }
}
