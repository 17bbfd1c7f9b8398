//! The rows of the `system_auth` tables, made from the roles the schema
//! holds when read (the tables themselves are virtual, `system`).

use shoal_schema::Roles;

use crate::system_cells::{boolean, text, text_set, Values};

/// The rows of `system_auth.<table>`, in its column order.
pub fn rows(table: &str, roles: &Roles) -> Vec<Values> {
    match table {
        "roles" => roles
            .roles
            .values()
            .map(|r| {
                vec![
                    text(&r.name),
                    boolean(r.can_login),
                    boolean(r.is_superuser),
                    text_set(r.member_of.iter().map(String::as_str)),
                    r.salted_hash.as_deref().and_then(text),
                ]
            })
            .collect(),
        "role_members" => roles
            .roles
            .values()
            .flat_map(|member| member.member_of.iter().map(|role| vec![text(role), text(&member.name)]))
            .collect(),
        "role_permissions" => roles
            .permissions
            .iter()
            .flat_map(|(role, resources)| {
                resources.iter().map(move |(resource, permissions)| {
                    vec![text(role), text(resource), text_set(permissions.iter().map(String::as_str))]
                })
            })
            .collect(),
        _ => Vec::new(),
    }
}
