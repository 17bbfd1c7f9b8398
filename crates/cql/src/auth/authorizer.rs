//! Whether a role may do something, as Cassandra's `CassandraAuthorizer`:
//! a permission granted on the resource or any of its parents, to the role
//! or any role granted to it; a superuser may do everything.
//!
//! Each shard keeps what it resolved for `permissions_validity_in_ms`, and
//! for the schema version it was resolved on only: roles and permissions
//! ride in the schema, so a GRANT or REVOKE (a new schema, installed on
//! every shard of every node before it is answered) empties every cache,
//! and takes effect on the next statement everywhere. A read or write
//! (every request) finds its table in the cache by the names its statement
//! holds: a hit allocates nothing and does not look at the schema.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use hashbrown::HashMap;
use shoal_schema::{Roles, Schema};
use uuid::Uuid;

use super::config::{config, Authorizer};
use super::resource::Resource;
use crate::error::{CqlError, CqlResult};

/// Entries one shard's cache holds at most; past this it starts over.
const CACHE_ENTRIES_MAX: usize = 10_000;

/// What a role may do on one resource, once resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Resolved {
    Everything,
    Only(BTreeSet<String>),
}

impl Resolved {
    fn permits(&self, permission: &str) -> bool {
        match self {
            Resolved::Everything => true,
            Resolved::Only(held) => held.contains(permission),
        }
    }
}

struct Cached {
    resolved_at: Instant,
    resolved: Resolved,
}

/// A resource as the cache finds it: a table by the names a statement
/// holds (what every read and write needs), or any other resource.
#[derive(Clone, Copy)]
enum Target<'a> {
    Table(&'a str, &'a str),
    Other(&'a Resource),
}

impl<'a> From<&'a Resource> for Target<'a> {
    fn from(resource: &'a Resource) -> Target<'a> {
        match resource {
            Resource::Table(keyspace, table) => Target::Table(keyspace, table),
            other => Target::Other(other),
        }
    }
}

impl Target<'_> {
    fn to_resource(self) -> Resource {
        match self {
            Target::Table(keyspace, table) => Resource::Table(keyspace.to_string(), table.to_string()),
            Target::Other(resource) => resource.clone(),
        }
    }
}

/// What one role resolved: tables by keyspace, then name, so a hit
/// looks up borrowed names and allocates nothing; other resources whole.
#[derive(Default)]
struct RoleEntries {
    tables: HashMap<String, HashMap<String, Cached>>,
    others: HashMap<Resource, Cached>,
}

impl RoleEntries {
    fn get(&self, target: Target<'_>) -> Option<&Cached> {
        match target {
            Target::Table(keyspace, table) => self.tables.get(keyspace)?.get(table),
            Target::Other(resource) => self.others.get(resource),
        }
    }

    /// Whether `resource` is new here.
    fn insert(&mut self, resource: Resource, cached: Cached) -> bool {
        match resource {
            Resource::Table(keyspace, table) => self.tables.entry(keyspace).or_default().insert(table, cached),
            other => self.others.insert(other, cached),
        }
        .is_none()
    }
}

#[derive(Default)]
struct Cache {
    /// The schema the entries were resolved on.
    version: Uuid,
    /// By role.
    entries: HashMap<String, RoleEntries>,
    len: usize,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::default());
}

/// Whether the authorizer checks statements at all.
pub fn enabled() -> bool {
    config().authorizer == Authorizer::Cassandra
}

/// The permissions `user` holds on `resource`: granted on it or a parent,
/// to the user or a role granted to it.
pub fn permissions_of(roles: &Roles, user: &str, resource: &Resource) -> BTreeSet<String> {
    let chain: Vec<String> = resource.chain().iter().map(Resource::name).collect();
    let mut held = BTreeSet::new();
    for role in roles.granted(user) {
        let Some(granted) = roles.permissions.get(&role) else { continue };
        for name in &chain {
            held.extend(granted.get(name).into_iter().flatten().cloned());
        }
    }
    held
}

fn resolve(roles: &Roles, user: &str, resource: &Resource) -> Resolved {
    match roles.is_superuser(user) {
        true => Resolved::Everything,
        false => Resolved::Only(permissions_of(roles, user, resource)),
    }
}

/// Whether `user` holds `permission` on `target`, from this shard's cache
/// when it is fresh. A hit allocates nothing. On a miss, a resource that
/// `exists` denies is allowed, uncached (the statement fails on its own);
/// a hit needs no such look: entries live for one schema version, so what
/// existed when resolved still does.
fn allowed(schema: &Schema, user: &str, permission: &str, target: Target<'_>, exists: impl FnOnce() -> bool) -> bool {
    let validity = Duration::from_millis(config().permissions_validity_ms);
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.version != schema.version || cache.len >= CACHE_ENTRIES_MAX {
            cache.entries.clear();
            cache.len = 0;
            cache.version = schema.version;
        }
        let cached = cache.entries.get(user).and_then(|entries| entries.get(target));
        if let Some(cached) = cached.filter(|c| c.resolved_at.elapsed() < validity) {
            return cached.resolved.permits(permission);
        }
        if !exists() {
            return true;
        }
        let resource = target.to_resource();
        let resolved = resolve(&schema.roles, user, &resource);
        let permits = resolved.permits(permission);
        let entries = cache.entries.entry(user.to_string()).or_default();
        let added = entries.insert(resource, Cached { resolved_at: Instant::now(), resolved });
        cache.len += usize::from(added);
        permits
    })
}

/// Refuses unless `user` holds `permission` on `resource`, with
/// Cassandra's text; always passes without the authorizer.
pub fn ensure(schema: &Schema, user: &str, permission: &str, resource: &Resource) -> CqlResult<()> {
    if !enabled() || allowed(schema, user, permission, resource.into(), || true) {
        return Ok(());
    }
    Err(unauthorized(user, permission, resource))
}

/// [`ensure`] on the table a read or write names, allocating nothing once
/// this shard has resolved it; a table `schema` lacks needs nothing.
pub fn ensure_table(schema: &Schema, user: &str, permission: &str, keyspace: &str, table: &str) -> CqlResult<()> {
    let exists = || schema.table(keyspace, table).is_some();
    if !enabled() || allowed(schema, user, permission, Target::Table(keyspace, table), exists) {
        return Ok(());
    }
    Err(unauthorized(user, permission, &Resource::Table(keyspace.to_string(), table.to_string())))
}

fn unauthorized(user: &str, permission: &str, resource: &Resource) -> CqlError {
    CqlError::Unauthorized(format!("User {user} has no {permission} permission on {resource} or any of its parents"))
}

/// Refuses a SELECT that calls user functions `user` may not EXECUTE
/// (`functions()`: keyspace, name and argument types of each, asked for
/// only when the authorizer checks), as Cassandra checks them on every
/// execution.
pub fn check_execute<'f>(
    functions: impl FnOnce() -> Vec<(&'f str, &'f str, &'f [shoal_schema::CqlType])>,
    user: Option<&str>,
) -> CqlResult<()> {
    let Some(user) = user.filter(|_| enabled()) else { return Ok(()) };
    let functions = functions();
    if functions.is_empty() {
        return Ok(());
    }
    let schema = shoal_coordinator::schema();
    for (keyspace, name, arg_types) in functions {
        let args = arg_types.iter().map(ToString::to_string).collect();
        let resource = Resource::Function(keyspace.to_string(), name.to_string(), args);
        ensure(&schema, user, "EXECUTE", &resource)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use shoal_schema::Role;

    fn roles() -> Roles {
        let mut roles = Roles::default();
        let role = |name: &str, member_of: &[&str], superuser: bool| Role {
            name: name.to_string(),
            is_superuser: superuser,
            member_of: member_of.iter().map(|s| s.to_string()).collect(),
            ..Role::default()
        };
        for r in [role("alice", &["reader"], false), role("reader", &[], false), role("root", &[], true)] {
            roles.roles.insert(r.name.clone(), r);
        }
        let grant = |roles: &mut Roles, role: &str, resource: &str, permission: &str| {
            let resources = roles.permissions.entry(role.to_string()).or_default();
            resources.entry(resource.to_string()).or_default().insert(permission.to_string());
        };
        grant(&mut roles, "reader", "data/ks/t", "SELECT");
        grant(&mut roles, "alice", "data/ks", "MODIFY");
        roles
    }

    #[test]
    fn permissions_are_inherited_through_roles_and_parents() {
        let roles = roles();
        let t = Resource::Table("ks".into(), "t".into());
        let other = Resource::Table("ks".into(), "u".into());
        let held: Vec<String> = permissions_of(&roles, "alice", &t).into_iter().collect();
        assert_eq!(held, ["MODIFY", "SELECT"]);
        let held: Vec<String> = permissions_of(&roles, "alice", &other).into_iter().collect();
        assert_eq!(held, ["MODIFY"]);
        assert!(permissions_of(&roles, "reader", &other).is_empty());
        assert!(permissions_of(&roles, "alice", &Resource::Table("ks2".into(), "t".into())).is_empty());
        assert_eq!(resolve(&roles, "root", &t), Resolved::Everything);
    }

    #[test]
    fn the_cache_follows_the_schema_version() {
        let mut schema = Schema { version: Uuid::from_u128(1), ..Schema::empty() };
        schema.roles = std::sync::Arc::new(roles());
        let t = Target::Table("ks", "t");
        assert!(allowed(&schema, "alice", "SELECT", t, || true));
        let mut revoked = roles();
        revoked.permissions.remove("reader");
        let next = Schema { version: Uuid::from_u128(2), roles: std::sync::Arc::new(revoked), ..schema.clone() };
        assert!(!allowed(&next, "alice", "SELECT", t, || true), "a new schema empties the cache");
        assert!(allowed(&next, "alice", "MODIFY", t, || panic!("a hit looks at no table")));
        let ks = Resource::Keyspace("ks".into());
        assert!(allowed(&next, "alice", "MODIFY", (&ks).into(), || true));
        assert!(!allowed(&next, "alice", "SELECT", (&ks).into(), || true));
        // A table this schema lacks is allowed (the statement fails on its
        // own), and nothing is cached for it.
        let gone = Target::Table("ks", "gone");
        assert!(allowed(&next, "alice", "SELECT", gone, || false));
        assert!(!allowed(&next, "alice", "SELECT", gone, || true));
    }
}
