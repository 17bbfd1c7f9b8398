//! Whether a role may do something, as Cassandra's `CassandraAuthorizer`:
//! a permission granted on the resource or any of its parents, to the role
//! or any role granted to it; a superuser may do everything.
//!
//! Each shard keeps what it resolved for `permissions_validity_in_ms`, and
//! for the schema version it was resolved on only: roles and permissions
//! ride in the schema, so a GRANT or REVOKE (a new schema, installed on
//! every shard of every node before it is answered) empties every cache,
//! and takes effect on the next statement everywhere.

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

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

#[derive(Default)]
struct Cache {
    /// The schema the entries were resolved on.
    version: Uuid,
    /// By role, then resource: a hit looks up borrowed keys, allocating nothing.
    entries: HashMap<String, HashMap<Resource, Cached>>,
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

/// Whether `user` holds `permission` on `resource`, from this shard's cache
/// when it is fresh.
fn allowed(schema: &Schema, user: &str, permission: &str, resource: &Resource) -> bool {
    let validity = Duration::from_millis(config().permissions_validity_ms);
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.version != schema.version || cache.len >= CACHE_ENTRIES_MAX {
            cache.entries.clear();
            cache.len = 0;
            cache.version = schema.version;
        }
        let cached = cache.entries.get(user).and_then(|by_resource| by_resource.get(resource));
        if let Some(cached) = cached.filter(|c| c.resolved_at.elapsed() < validity) {
            return cached.resolved.permits(permission);
        }
        let resolved = resolve(&schema.roles, user, resource);
        let permits = resolved.permits(permission);
        let by_resource = cache.entries.entry(user.to_string()).or_default();
        let added = by_resource.insert(resource.clone(), Cached { resolved_at: Instant::now(), resolved }).is_none();
        cache.len += usize::from(added);
        permits
    })
}

/// Refuses unless `user` holds `permission` on `resource`, with
/// Cassandra's text; always passes without the authorizer.
pub fn ensure(schema: &Schema, user: &str, permission: &str, resource: &Resource) -> CqlResult<()> {
    if !enabled() || allowed(schema, user, permission, resource) {
        return Ok(());
    }
    Err(CqlError::Unauthorized(format!(
        "User {user} has no {permission} permission on {resource} or any of its parents"
    )))
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
        let t = Resource::Table("ks".into(), "t".into());
        assert!(allowed(&schema, "alice", "SELECT", &t));
        let mut revoked = roles();
        revoked.permissions.remove("reader");
        let next = Schema { version: Uuid::from_u128(2), roles: std::sync::Arc::new(revoked), ..schema.clone() };
        assert!(!allowed(&next, "alice", "SELECT", &t), "a new schema empties the cache");
        assert!(allowed(&next, "alice", "MODIFY", &t));
    }
}
