//! Role statements: `CREATE|ALTER|DROP ROLE|USER`, `GRANT|REVOKE role`,
//! `LIST ROLES|USERS` (Cassandra's grammar, with its `HASHED PASSWORD`
//! and ScyllaDB's `SALTED HASH`). Role names are identifiers (lowercased unless
//! quoted) or string literals (kept as written).

use super::{PResult, Parser};
use crate::ast::{OptionValue, Statement};
use crate::auth::statement::{RoleOptions, RoleStatement};
use crate::lexer::{Sym, TokenKind};

impl Parser<'_> {
    /// Whether the statement at the cursor is a role statement.
    pub(super) fn at_role_statement(&self) -> bool {
        match self.word_at(0) {
            Some("create" | "alter" | "drop") => self.is_kw_at(1, "role") || self.is_kw_at(1, "user"),
            Some("grant" | "revoke") => !self.is_permission_at(1),
            Some("list") => self.is_kw_at(1, "roles") || self.is_kw_at(1, "users"),
            _ => false,
        }
    }

    pub(super) fn is_permission_at(&self, n: usize) -> bool {
        matches!(
            self.word_at(n),
            Some("all" | "create" | "alter" | "drop" | "select" | "modify" | "authorize" | "describe" | "execute")
        ) && !matches!(self.peek_nth(n + 1).kind, TokenKind::Ident(ref w) if w == "to" || w == "from")
    }

    pub(super) fn role_statement(&mut self) -> PResult<Statement> {
        let verb = self.advance();
        let verb = match &verb.kind {
            TokenKind::Ident(word) => word.clone(),
            _ => return Err(self.no_viable()),
        };
        let statement = match verb.as_str() {
            "list" => self.list_roles()?,
            "grant" => {
                let role = self.role_name()?;
                self.expect_kw("to")?;
                RoleStatement::Grant { role, grantee: self.role_name()? }
            }
            "revoke" => {
                let role = self.role_name()?;
                self.expect_kw("from")?;
                RoleStatement::Revoke { role, revokee: self.role_name()? }
            }
            _ => {
                let user = self.eat_kw("user");
                if !user {
                    self.expect_kw("role")?;
                }
                match verb.as_str() {
                    "create" => {
                        let if_not_exists = self.if_not_exists()?;
                        let name = self.user_or_role_name(user)?;
                        let options = self.role_options(user)?;
                        RoleStatement::Create { name, if_not_exists, options, user }
                    }
                    "alter" => {
                        let name = self.user_or_role_name(user)?;
                        let options = self.role_options(user)?;
                        RoleStatement::Alter { name, options, user }
                    }
                    _ => {
                        let if_exists = self.if_exists()?;
                        RoleStatement::Drop { name: self.user_or_role_name(user)?, if_exists, user }
                    }
                }
            }
        };
        Ok(Statement::Role(statement))
    }

    fn list_roles(&mut self) -> PResult<RoleStatement> {
        if self.eat_kw("users") {
            return Ok(RoleStatement::ListUsers);
        }
        self.expect_kw("roles")?;
        let of = if self.eat_kw("of") { Some(self.role_name()?) } else { None };
        let recursive = !self.eat_kw("norecursive");
        Ok(RoleStatement::ListRoles { of, recursive })
    }

    /// A role name: an identifier, lowercased unless quoted, or a string.
    pub(super) fn role_name(&mut self) -> PResult<String> {
        if let TokenKind::Str(name) = &self.peek().kind {
            let name = name.clone();
            self.advance();
            return Ok(name);
        }
        self.ident("role name")
    }

    /// The name after `ROLE`, or after the deprecated `USER`, which (as in
    /// Cassandra's grammar) takes no double-quoted name.
    fn user_or_role_name(&mut self, user: bool) -> PResult<String> {
        if user && matches!(self.peek().kind, TokenKind::QuotedIdent(_)) {
            let at = self.peek().clone();
            return Err(self.error_at_token(
                &at,
                "Quoted strings are are not supported for user names and USER is deprecated, please use ROLE".into(),
            ));
        }
        self.role_name()
    }

    /// The options of CREATE/ALTER ROLE (`WITH a = b AND ...`), or of the
    /// USER forms (`WITH PASSWORD 'p' [SUPERUSER | NOSUPERUSER]`).
    fn role_options(&mut self, user: bool) -> PResult<RoleOptions> {
        let mut options = RoleOptions::default();
        if user {
            if self.eat_kw("with") {
                self.expect_kw("password")?;
                options.password = Some(self.string("a password")?);
            }
            if self.eat_kw("superuser") {
                options.superuser = Some(true);
            } else if self.eat_kw("nosuperuser") {
                options.superuser = Some(false);
            }
            return Ok(options);
        }
        if !self.eat_kw("with") {
            return Ok(options);
        }
        loop {
            let at = self.peek().clone();
            // ScyllaDB's `SALTED HASH = '..'` is Cassandra's `HASHED PASSWORD`.
            let salted = self.is_kw("salted") && self.is_kw_at(1, "hash");
            if salted {
                self.advance();
                self.advance();
            }
            let hashed = salted || self.eat_kw("hashed");
            let name = if salted { "password".to_string() } else { self.ident("a role option")? };
            self.expect_sym(Sym::Eq)?;
            let taken = match (hashed, name.as_str()) {
                (true, "password") => options.hashed_password.is_some(),
                (false, "password") => options.password.is_some(),
                (false, "login") => options.login.is_some(),
                (false, "superuser") => options.superuser.is_some(),
                (false, "options") => options.options.is_some(),
                _ => return Err(self.error_at_token(&at, format!("Invalid property '{name}'"))),
            };
            if taken {
                let message = format!("Multiple definition for property {}", name.to_uppercase());
                return Err(self.error_at_token(&at, message));
            }
            match (hashed, name.as_str()) {
                (true, _) => options.hashed_password = Some(self.string("a hashed password")?),
                (false, "password") => options.password = Some(self.string("a password")?),
                (false, "login") => options.login = Some(self.boolean()?),
                (false, "superuser") => options.superuser = Some(self.boolean()?),
                _ => options.options = Some(self.option_map()?),
            }
            if !self.eat_kw("and") {
                return Ok(options);
            }
        }
    }

    fn string(&mut self, what: &str) -> PResult<String> {
        match &self.peek().kind {
            TokenKind::Str(s) => {
                let s = s.clone();
                self.advance();
                Ok(s)
            }
            _ => Err(self.mismatched(what)),
        }
    }

    fn boolean(&mut self) -> PResult<bool> {
        match self.option_scalar()? {
            OptionValue::Bool(b) => Ok(b),
            OptionValue::String(s) if s.eq_ignore_ascii_case("true") => Ok(true),
            OptionValue::String(s) if s.eq_ignore_ascii_case("false") => Ok(false),
            _ => Err(self.mismatched("true or false")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse_statement;
    use super::*;

    fn role(text: &str) -> RoleStatement {
        match parse_statement(text).map(|p| p.statement) {
            Ok(Statement::Role(statement)) => statement,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn create_role_with_every_option() {
        let parsed = role(
            "CREATE ROLE IF NOT EXISTS Alice WITH PASSWORD = 'pw' AND LOGIN = true AND SUPERUSER = false \
             AND OPTIONS = {'a': 'b'}",
        );
        let options = RoleOptions {
            password: Some("pw".into()),
            login: Some(true),
            superuser: Some(false),
            options: Some(vec![("a".into(), "b".into())]),
            ..RoleOptions::default()
        };
        assert_eq!(parsed, RoleStatement::Create { name: "alice".into(), if_not_exists: true, options, user: false });
        let salted = role("create role 'Bob' with salted hash = '$2a$10$x' and login = false");
        let hashed = role("create role 'Bob' with hashed password = '$2a$10$x' and login = false");
        assert_eq!(salted, hashed);
        let RoleStatement::Create { name, options, .. } = hashed else { panic!("{hashed:?}") };
        assert_eq!(
            (name.as_str(), options.hashed_password.as_deref(), options.login),
            ("Bob", Some("$2a$10$x"), Some(false))
        );
    }

    #[test]
    fn user_forms_grants_and_lists() {
        let create = role("CREATE USER IF NOT EXISTS bob WITH PASSWORD 'pw' NOSUPERUSER");
        let options = RoleOptions { password: Some("pw".into()), superuser: Some(false), ..RoleOptions::default() };
        assert_eq!(create, RoleStatement::Create { name: "bob".into(), if_not_exists: true, options, user: true });
        assert_eq!(
            role("DROP USER IF EXISTS bob"),
            RoleStatement::Drop { name: "bob".into(), if_exists: true, user: true }
        );
        assert_eq!(role("DROP ROLE r"), RoleStatement::Drop { name: "r".into(), if_exists: false, user: false });
        assert_eq!(role("DROP ROLE \"R\""), RoleStatement::Drop { name: "R".into(), if_exists: false, user: false });
        for quoted_user in ["CREATE USER \"u1\"", "DROP USER \"u1\"", "ALTER USER \"u1\" WITH PASSWORD 'p'"] {
            let error = parse_statement(quoted_user).expect_err(quoted_user);
            assert!(error.to_string().contains("not supported for user names"), "{quoted_user}: {error}");
        }
        assert_eq!(role("GRANT r TO bob"), RoleStatement::Grant { role: "r".into(), grantee: "bob".into() });
        assert_eq!(role("REVOKE r FROM bob"), RoleStatement::Revoke { role: "r".into(), revokee: "bob".into() });
        assert_eq!(role("LIST ROLES"), RoleStatement::ListRoles { of: None, recursive: true });
        assert_eq!(
            role("LIST ROLES OF bob NORECURSIVE"),
            RoleStatement::ListRoles { of: Some("bob".into()), recursive: false }
        );
        assert_eq!(role("LIST USERS"), RoleStatement::ListUsers);
    }

    #[test]
    fn bad_role_options_are_refused() {
        for text in [
            "CREATE ROLE r WITH PASSWORD = 'a' AND PASSWORD = 'b'",
            "CREATE ROLE r WITH colour = 'red'",
            "CREATE ROLE r WITH LOGIN = 5",
            "ALTER ROLE r WITH PASSWORD = 5",
        ] {
            assert!(parse_statement(text).is_err(), "{text}");
        }
    }
}
