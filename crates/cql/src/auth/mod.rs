//! Authentication, roles and permissions, as Cassandra's
//! `PasswordAuthenticator` and `CassandraRoleManager` do them.
//!
//! - [`config`]: which authenticator the node runs, set once at start;
//! - [`sasl`]: the SASL PLAIN token a client logs in with (a total decoder);
//! - [`password`]: bcrypt hashing and checking, on threads of their own so
//!   a login (tens of milliseconds of CPU) never stalls a shard, with a
//!   bound on the attempts queued;
//! - [`login`]: checks a client's credentials against the roles;
//! - [`statement`] and [`roles`]: role statements, run as schema
//!   transitions so group 0 agrees on them (`shoal_schema::Roles`);
//! - [`resource`], [`authorizer`] and [`access`]: permissions on
//!   resources, inherited through granted roles, checked on every statement
//!   (CassandraAuthorizer) with a per-shard cache that a schema change (a
//!   REVOKE) invalidates at once;
//! - [`permissions`]: GRANT / REVOKE / LIST PERMISSIONS;
//! - [`service_levels`]: ScyllaDB's service levels, attached to roles and
//!   kept with them;
//! - [`tables`]: the rows of `system_auth.roles`, `role_members` and
//!   `role_permissions`;
//! - [`describe`]: roles, grants and permissions as the CQL that recreates
//!   them (DESCRIBE SCHEMA WITH INTERNALS, and the schema file).

pub mod access;
pub mod authorizer;
pub mod config;
pub mod describe;
pub mod login;
pub mod password;
pub mod permissions;
pub mod resource;
pub mod roles;
pub mod sasl;
pub mod service_levels;
pub mod statement;
pub mod tables;

pub use config::{configure, AuthConfig, Authenticator, Authorizer};

/// The roles and permissions as schema-file lines (CQL): the statements
/// of `DESCRIBE SCHEMA WITH INTERNALS AND PASSWORDS`, one a line.
pub fn render(roles: &shoal_schema::Roles) -> String {
    let include = describe::Include { passwords: true, permissions: true };
    describe::elements(roles, include).into_iter().map(|e| e.create_statement + "\n").collect()
}

/// Applies an auth statement read back from the schema file; false for
/// any other statement.
pub fn restore(schema: &mut shoal_schema::Schema, statement: &crate::ast::Statement) -> crate::CqlResult<bool> {
    match statement {
        crate::ast::Statement::Role(role) => roles::restore(schema, role)?,
        crate::ast::Statement::Permission(permission) => permissions::restore(schema, permission),
        crate::ast::Statement::ServiceLevel(level) => service_levels::restore(schema, level)?,
        _ => return Ok(false),
    }
    Ok(true)
}
