//! The syntax of role statements: CREATE / ALTER / DROP ROLE (and their
//! legacy USER forms), GRANT / REVOKE a role, LIST ROLES and LIST USERS;
//! and permission statements.

use super::resource::Resource;

/// `WITH PASSWORD = '..' AND LOGIN = .. AND SUPERUSER = .. AND OPTIONS = {..}`:
/// what the statement sets; `None` leaves it as it is (or the default).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RoleOptions {
    pub password: Option<String>,
    /// `HASHED PASSWORD = '$2a$..'` (ScyllaDB's): the bcrypt text itself, as
    /// the schema file keeps it.
    pub hashed_password: Option<String>,
    pub login: Option<bool>,
    pub superuser: Option<bool>,
    pub options: Option<Vec<(String, String)>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RoleStatement {
    /// `CREATE ROLE` / `CREATE USER` (`user`: a user logs in by default).
    Create {
        name: String,
        if_not_exists: bool,
        options: RoleOptions,
        user: bool,
    },
    Alter {
        name: String,
        options: RoleOptions,
        user: bool,
    },
    Drop {
        name: String,
        if_exists: bool,
        user: bool,
    },
    /// `GRANT role TO grantee`.
    Grant {
        role: String,
        grantee: String,
    },
    /// `REVOKE role FROM revokee`.
    Revoke {
        role: String,
        revokee: String,
    },
    /// `LIST ROLES [OF role] [NORECURSIVE]`.
    ListRoles {
        of: Option<String>,
        recursive: bool,
    },
    ListUsers,
}

/// GRANT / REVOKE / LIST PERMISSIONS. `permission: None` is `ALL
/// [PERMISSIONS]`. A table named without its keyspace has an empty
/// keyspace here, the session's at execution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PermissionStatement {
    Grant {
        permission: Option<String>,
        resource: Resource,
        role: String,
    },
    Revoke {
        permission: Option<String>,
        resource: Resource,
        role: String,
    },
    /// `LIST perm|ALL PERMISSIONS [ON resource] [OF role] [NORECURSIVE]`.
    List {
        permission: Option<String>,
        resource: Option<Resource>,
        of: Option<String>,
        recursive: bool,
    },
}

/// A service level option's value as written: `timeout = 10s`,
/// `workload_type = 'batch'`, `shares = 500`; `null` (or `'unspecified'`
/// for a workload type) resets it. Checked when the statement runs, with
/// ScyllaDB's texts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceLevelOptions {
    /// The duration literal as written, `None` for `null`.
    pub timeout: Option<Option<String>>,
    /// The workload type as written, `None` for `null`.
    pub workload_type: Option<Option<String>>,
    pub shares: Option<i64>,
}

/// ScyllaDB's service level statements (`SERVICE_LEVEL` may be written
/// for `SERVICE LEVEL`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServiceLevelStatement {
    Create {
        name: String,
        if_not_exists: bool,
        options: ServiceLevelOptions,
    },
    Alter {
        name: String,
        options: ServiceLevelOptions,
    },
    Drop {
        name: String,
        if_exists: bool,
    },
    /// `ATTACH SERVICE LEVEL name TO role`.
    Attach {
        name: String,
        role: String,
    },
    /// `DETACH SERVICE LEVEL FROM role`.
    Detach {
        role: String,
    },
    /// `LIST SERVICE LEVEL name`, or `LIST ALL SERVICE LEVELS` (`None`).
    List {
        name: Option<String>,
    },
    /// `LIST ATTACHED SERVICE LEVEL OF role`, or `LIST ALL ATTACHED
    /// SERVICE LEVELS` (`None`).
    ListAttached {
        role: Option<String>,
    },
    /// `LIST EFFECTIVE SERVICE LEVEL OF role`.
    ListEffective {
        role: String,
    },
}
