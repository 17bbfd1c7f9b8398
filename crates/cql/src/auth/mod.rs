//! Authentication, roles and (later) permissions, as Cassandra's
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
//! - [`tables`]: the rows of `system_auth.roles`, `role_members` and
//!   `role_permissions`.

pub mod config;
pub mod login;
pub mod password;
pub mod roles;
pub mod sasl;
pub mod statement;
pub mod tables;

pub use config::{configure, AuthConfig, Authenticator};
