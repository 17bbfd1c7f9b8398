//! Roles and their permissions, as the cluster agrees on them: what
//! Cassandra keeps in `system_auth.roles`, `role_members` and
//! `role_permissions`, and the service levels attached to roles
//! ([`crate::service_level`]).
//!
//! They ride in the [`Schema`](crate::Schema) snapshot, so they change the
//! way the schema does — one writer, agreed through group 0, persisted in
//! the schema file, installed on every shard before a change is answered —
//! and every node sees a GRANT or REVOKE at once (ScyllaDB 6 also keeps
//! them in group 0). Plain data: hashing and checks live in the CQL layer.

use std::collections::{BTreeMap, BTreeSet};

use crate::service_level::{EffectiveServiceLevel, ServiceLevel};

/// How deep role grants may nest when resolving them (a grant cycle is
/// refused when granted; this bounds the walk all the same).
const GRANT_DEPTH_MAX: usize = 64;

/// One role (`system_auth.roles` row plus its `member_of` set).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Role {
    pub name: String,
    /// bcrypt's `$2a$...` text; `None`: the role has no password.
    pub salted_hash: Option<String>,
    pub can_login: bool,
    pub is_superuser: bool,
    /// `OPTIONS = {...}`: custom options, kept as given.
    pub options: BTreeMap<String, String>,
    /// The roles granted to this one (directly).
    pub member_of: BTreeSet<String>,
    /// The service level attached to it (ScyllaDB's `service_level`
    /// role attribute).
    pub service_level: Option<String>,
}

/// Every role, and every permission granted to one.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Roles {
    pub roles: BTreeMap<String, Role>,
    /// Role name → resource name (Cassandra's, `data/ks/t`) → permission
    /// names (`SELECT`, ...), as granted directly.
    pub permissions: BTreeMap<String, BTreeMap<String, BTreeSet<String>>>,
    /// Every service level, by name.
    pub service_levels: BTreeMap<String, ServiceLevel>,
}

impl Roles {
    pub fn get(&self, name: &str) -> Option<&Role> {
        self.roles.get(name)
    }

    /// `name` and every role granted to it, directly or not, in name order.
    pub fn granted(&self, name: &str) -> BTreeSet<String> {
        let mut seen = BTreeSet::new();
        let mut next = vec![(name.to_string(), 0)];
        while let Some((role, depth)) = next.pop() {
            if depth > GRANT_DEPTH_MAX || !seen.insert(role.clone()) {
                continue;
            }
            if let Some(role) = self.roles.get(&role) {
                next.extend(role.member_of.iter().map(|r| (r.clone(), depth + 1)));
            }
        }
        seen.retain(|r| self.roles.contains_key(r));
        seen
    }

    /// Whether `name` is a superuser, itself or through a granted role.
    pub fn is_superuser(&self, name: &str) -> bool {
        self.granted(name).iter().any(|r| self.roles.get(r).is_some_and(|r| r.is_superuser))
    }

    /// The merge of the service levels attached to `name` and to every
    /// role granted to it; `None` when none is.
    pub fn effective_service_level(&self, name: &str) -> Option<EffectiveServiceLevel> {
        let mut effective: Option<EffectiveServiceLevel> = None;
        // The role itself first, so a tie keeps its own level's name.
        let own = std::iter::once(name.to_string());
        let granted = self.granted(name).into_iter().filter(|r| r != name);
        for role in own.chain(granted) {
            let Some(attached) = self.roles.get(&role).and_then(|r| r.service_level.as_deref()) else { continue };
            let Some(level) = self.service_levels.get(attached) else { continue };
            let level = EffectiveServiceLevel::of(attached, level);
            match &mut effective {
                Some(merged) => merged.merge(&level),
                None => effective = Some(level),
            }
        }
        effective
    }

    /// Removes service level `name` and detaches it from every role.
    pub fn drop_service_level(&mut self, name: &str) {
        self.service_levels.remove(name);
        for role in self.roles.values_mut() {
            if role.service_level.as_deref() == Some(name) {
                role.service_level = None;
            }
        }
    }

    /// Removes `name`, its grants to others, others' grants to it, and
    /// its permissions; permissions on the role itself go too.
    pub fn drop_role(&mut self, name: &str) {
        self.roles.remove(name);
        for role in self.roles.values_mut() {
            role.member_of.remove(name);
        }
        self.permissions.remove(name);
        let resource = format!("roles/{name}");
        for resources in self.permissions.values_mut() {
            resources.remove(&resource);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(name: &str, member_of: &[&str], superuser: bool) -> Role {
        Role {
            name: name.to_string(),
            is_superuser: superuser,
            member_of: member_of.iter().map(|s| s.to_string()).collect(),
            ..Role::default()
        }
    }

    #[test]
    fn grants_resolve_transitively_and_superuser_is_inherited() {
        let mut roles = Roles::default();
        for r in [role("a", &["b"], false), role("b", &["c"], false), role("c", &["a"], true), role("d", &[], false)] {
            roles.roles.insert(r.name.clone(), r);
        }
        let names: Vec<String> = roles.granted("a").into_iter().collect();
        assert_eq!(names, ["a", "b", "c"]);
        assert!(roles.is_superuser("a"));
        assert!(!roles.is_superuser("d"));
        roles.drop_role("c");
        assert!(!roles.is_superuser("a"));
        assert!(roles.get("b").is_some_and(|b| b.member_of.is_empty()));
    }
}
