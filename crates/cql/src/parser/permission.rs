//! Permission statements: `GRANT perm ON resource TO role`, `REVOKE perm
//! ON resource FROM role`, `LIST perm PERMISSIONS [ON resource] [OF role]
//! [NORECURSIVE]` (Cassandra's grammar).

use super::{PResult, Parser};
use crate::ast::Statement;
use crate::auth::resource::{Resource, PERMISSIONS};
use crate::auth::statement::PermissionStatement;
use crate::lexer::Sym;
use shoal_schema::CqlType;

impl Parser<'_> {
    /// Whether the statement at the cursor is a permission statement.
    pub(super) fn at_permission_statement(&self) -> bool {
        match self.word_at(0) {
            Some("grant" | "revoke") => self.is_permission_at(1),
            Some("list") => self.is_permission_at(1),
            _ => false,
        }
    }

    pub(super) fn permission_statement(&mut self) -> PResult<Statement> {
        let verb = self.word_at(0).unwrap_or("").to_string();
        self.advance();
        let permission = self.permission()?;
        let statement = match verb.as_str() {
            "list" => {
                let resource = if self.eat_kw("on") { Some(self.resource()?) } else { None };
                let of = if self.eat_kw("of") { Some(self.role_name()?) } else { None };
                let recursive = !self.eat_kw("norecursive");
                PermissionStatement::List { permission, resource, of, recursive }
            }
            "grant" => {
                self.expect_kw("on")?;
                let resource = self.applicable_resource(permission.as_deref())?;
                self.expect_kw("to")?;
                PermissionStatement::Grant { permission, resource, role: self.role_name()? }
            }
            _ => {
                self.expect_kw("on")?;
                let resource = self.applicable_resource(permission.as_deref())?;
                self.expect_kw("from")?;
                PermissionStatement::Revoke { permission, resource, role: self.role_name()? }
            }
        };
        Ok(Statement::Permission(statement))
    }

    /// The resource of a GRANT or REVOKE, refused if it does not take
    /// `permission`.
    fn applicable_resource(&mut self, permission: Option<&str>) -> PResult<Resource> {
        let token = self.peek().clone();
        let resource = self.resource()?;
        match permission.and_then(|p| crate::auth::permissions::unsupported(&resource, p)) {
            Some(message) => Err(self.error_at_token(&token, message)),
            None => Ok(resource),
        }
    }

    /// `ALL [PERMISSIONS]` (`None`) or one permission `[PERMISSION]`.
    fn permission(&mut self) -> PResult<Option<String>> {
        if self.eat_kw("all") {
            self.eat_kw("permissions");
            return Ok(None);
        }
        let word = self.word_at(0).unwrap_or("").to_ascii_uppercase();
        if !PERMISSIONS.contains(&word.as_str()) {
            return Err(self.mismatched("a permission"));
        }
        self.advance();
        if !self.eat_kw("permission") {
            self.eat_kw("permissions");
        }
        Ok(Some(word))
    }

    fn resource(&mut self) -> PResult<Resource> {
        if self.eat_kw("all") {
            if self.eat_kw("keyspaces") {
                return Ok(Resource::AllKeyspaces);
            }
            if self.eat_kw("roles") {
                return Ok(Resource::AllRoles);
            }
            if self.eat_kw("service_levels") || (self.eat_kw("service") && self.eat_kw("levels")) {
                return Ok(Resource::AllServiceLevels);
            }
            self.expect_kw("functions")?;
            if self.eat_kw("in") {
                self.expect_kw("keyspace")?;
                return Ok(Resource::FunctionsIn(self.ident("keyspace name")?));
            }
            return Ok(Resource::AllFunctions);
        }
        if self.eat_kw("keyspace") {
            return Ok(Resource::Keyspace(self.ident("keyspace name")?));
        }
        if self.eat_kw("role") {
            return Ok(Resource::Role(self.role_name()?));
        }
        if self.eat_kw("function") {
            let (keyspace, name) = self.qualified_name("function name")?;
            self.expect_sym(Sym::LParen)?;
            let mut args = Vec::new();
            if !self.eat_sym(Sym::RParen) {
                // A user type argument is frozen, as the function's own
                // signature has it (ScyllaDB's encoded signature).
                args = self.comma_list(|p| {
                    p.cql_type().map(|t| match t {
                        udt @ CqlType::Udt(_) => CqlType::Frozen(Box::new(udt)).to_string(),
                        other => other.to_string(),
                    })
                })?;
                self.expect_sym(Sym::RParen)?;
            }
            return Ok(Resource::Function(keyspace.unwrap_or_default(), name, args));
        }
        self.eat_kw("table");
        let (keyspace, table) = self.qualified_name("table name")?;
        Ok(Resource::Table(keyspace.unwrap_or_default(), table))
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse_statement;
    use super::*;

    fn permission(text: &str) -> PermissionStatement {
        match parse_statement(text).map(|p| p.statement) {
            Ok(Statement::Permission(statement)) => statement,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn grants_revokes_and_lists() {
        let table = Resource::Table("ks".into(), "t".into());
        assert_eq!(
            permission("GRANT SELECT ON ks.t TO alice"),
            PermissionStatement::Grant {
                permission: Some("SELECT".into()),
                resource: table.clone(),
                role: "alice".into()
            }
        );
        assert_eq!(
            permission("GRANT ALL PERMISSIONS ON TABLE ks.t TO alice"),
            PermissionStatement::Grant { permission: None, resource: table.clone(), role: "alice".into() }
        );
        assert_eq!(
            permission("REVOKE MODIFY PERMISSION ON KEYSPACE ks FROM r"),
            PermissionStatement::Revoke {
                permission: Some("MODIFY".into()),
                resource: Resource::Keyspace("ks".into()),
                role: "r".into()
            }
        );
        let resources = [
            ("ALL KEYSPACES", Resource::AllKeyspaces),
            ("ALL ROLES", Resource::AllRoles),
            ("ROLE bob", Resource::Role("bob".into())),
            ("ALL FUNCTIONS", Resource::AllFunctions),
            ("ALL FUNCTIONS IN KEYSPACE ks", Resource::FunctionsIn("ks".into())),
            ("ALL SERVICE_LEVELS", Resource::AllServiceLevels),
            ("ALL SERVICE LEVELS", Resource::AllServiceLevels),
            (
                "FUNCTION ks.f(int, text)",
                Resource::Function("ks".into(), "f".into(), vec!["int".into(), "text".into()]),
            ),
            ("FUNCTION ks.g(u)", Resource::Function("ks".into(), "g".into(), vec!["frozen<u>".into()])),
            ("t", Resource::Table(String::new(), "t".into())),
        ];
        for (text, resource) in resources {
            let parsed = permission(&format!("GRANT ALL ON {text} TO r"));
            let PermissionStatement::Grant { resource: got, .. } = parsed else { panic!("{parsed:?}") };
            assert_eq!(got, resource, "{text}");
        }
        // A permission the resource does not take: Cassandra's grammar
        // refuses it.
        let refused = parse_statement("GRANT EXECUTE ON ALL KEYSPACES TO r").expect_err("refused");
        assert_eq!(refused.message, "Resource type DataResource does not support the requested permissions: EXECUTE");
        assert!(parse_statement("REVOKE CREATE ON FUNCTION ks.f(int) FROM r").is_err());
        assert_eq!(
            permission("LIST ALL PERMISSIONS ON ks.t OF alice NORECURSIVE"),
            PermissionStatement::List {
                permission: None,
                resource: Some(table),
                of: Some("alice".into()),
                recursive: false
            }
        );
        assert_eq!(
            permission("LIST SELECT PERMISSIONS"),
            PermissionStatement::List { permission: Some("SELECT".into()), resource: None, of: None, recursive: true }
        );
        assert!(parse_statement("GRANT FLY ON ks.t TO r").is_err());
    }
}
