//! ScyllaDB's service level statements: `CREATE | ALTER | DROP SERVICE
//! LEVEL`, `ATTACH SERVICE LEVEL .. TO role`, `DETACH SERVICE LEVEL FROM
//! role`, and the `LIST` forms. `SERVICE_LEVEL(S)` may stand for `SERVICE
//! LEVEL(S)`. Names are identifiers (lowercased unless quoted) or strings.
//! Option values are kept as written; the statement checks them when it
//! runs, with ScyllaDB's texts.

use super::{PResult, Parser};
use crate::ast::Statement;
use crate::auth::statement::{ServiceLevelOptions, ServiceLevelStatement};
use crate::lexer::{Sym, TokenKind};

impl Parser<'_> {
    /// Whether the statement at the cursor is a service level statement.
    pub(super) fn at_service_level_statement(&self) -> bool {
        match self.word_at(0) {
            Some("create" | "alter" | "drop" | "attach" | "detach") => self.is_service_level_at(1, false),
            Some("list") => {
                let mut at = 1;
                if self.is_kw_at(at, "all") {
                    at += 1;
                }
                if self.is_kw_at(at, "attached") || self.is_kw_at(at, "effective") {
                    at += 1;
                }
                self.is_service_level_at(at, true)
            }
            _ => false,
        }
    }

    /// `SERVICE LEVEL` or `SERVICE_LEVEL` (or their plurals) at `n`.
    fn is_service_level_at(&self, n: usize, plural: bool) -> bool {
        let level = |word: Option<&str>| word == Some("level") || (plural && word == Some("levels"));
        let underscored =
            |word: Option<&str>| word == Some("service_level") || (plural && word == Some("service_levels"));
        underscored(self.word_at(n)) || (self.is_kw_at(n, "service") && level(self.word_at(n + 1)))
    }

    /// Eats `SERVICE LEVEL(S)` or `SERVICE_LEVEL(S)`.
    fn service_level_words(&mut self) -> PResult<()> {
        if self.eat_kw("service_level") || self.eat_kw("service_levels") {
            return Ok(());
        }
        self.expect_kw("service")?;
        if self.eat_kw("levels") {
            return Ok(());
        }
        self.expect_kw("level")
    }

    pub(super) fn service_level_statement(&mut self) -> PResult<Statement> {
        let verb = self.word_at(0).unwrap_or_default().to_string();
        self.advance();
        if verb == "list" {
            return Ok(Statement::ServiceLevel(self.list_service_levels()?));
        }
        self.service_level_words()?;
        let statement = match verb.as_str() {
            "create" => {
                let if_not_exists = self.if_not_exists()?;
                let name = self.role_name()?;
                ServiceLevelStatement::Create { name, if_not_exists, options: self.service_level_options()? }
            }
            "alter" => {
                let name = self.role_name()?;
                ServiceLevelStatement::Alter { name, options: self.service_level_options()? }
            }
            "drop" => {
                let if_exists = self.if_exists()?;
                ServiceLevelStatement::Drop { name: self.role_name()?, if_exists }
            }
            "attach" => {
                let name = self.role_name()?;
                self.expect_kw("to")?;
                ServiceLevelStatement::Attach { name, role: self.role_name()? }
            }
            _ => {
                self.expect_kw("from")?;
                ServiceLevelStatement::Detach { role: self.role_name()? }
            }
        };
        Ok(Statement::ServiceLevel(statement))
    }

    fn list_service_levels(&mut self) -> PResult<ServiceLevelStatement> {
        let all = self.eat_kw("all");
        if self.eat_kw("attached") {
            self.service_level_words()?;
            if all {
                return Ok(ServiceLevelStatement::ListAttached { role: None });
            }
            self.expect_kw("of")?;
            return Ok(ServiceLevelStatement::ListAttached { role: Some(self.role_name()?) });
        }
        if !all && self.eat_kw("effective") {
            self.service_level_words()?;
            self.expect_kw("of")?;
            return Ok(ServiceLevelStatement::ListEffective { role: self.role_name()? });
        }
        self.service_level_words()?;
        let name = if all { None } else { Some(self.role_name()?) };
        Ok(ServiceLevelStatement::List { name })
    }

    /// `[WITH option = value [AND ...]]`.
    fn service_level_options(&mut self) -> PResult<ServiceLevelOptions> {
        let mut options = ServiceLevelOptions::default();
        if !self.eat_kw("with") {
            return Ok(options);
        }
        loop {
            let at = self.peek().clone();
            let name = self.ident("a service level option")?;
            self.expect_sym(Sym::Eq)?;
            let value = self.service_level_value()?;
            let taken = match name.as_str() {
                "timeout" => options.timeout.replace(value).is_some(),
                "workload_type" => options.workload_type.replace(value).is_some(),
                "shares" => {
                    let shares = value.as_deref().and_then(|v| v.parse().ok());
                    let Some(shares) = shares else { return Err(self.mismatched("an integer number of shares")) };
                    options.shares.replace(shares).is_some()
                }
                _ => return Err(self.error_at_token(&at, format!("Unknown property '{name}'"))),
            };
            if taken {
                return Err(self.error_at_token(&at, format!("Multiple definition for property {name}")));
            }
            if !self.eat_kw("and") {
                return Ok(options);
            }
        }
    }

    /// An option's value as written; `None` for `null`.
    fn service_level_value(&mut self) -> PResult<Option<String>> {
        let negative = self.eat_sym(Sym::Minus);
        let sign = if negative { "-" } else { "" };
        let value = match &self.peek().kind {
            TokenKind::Ident(word) if word == "null" && !negative => None,
            TokenKind::Duration(text) | TokenKind::Integer(text) | TokenKind::Float(text) => {
                Some(format!("{sign}{text}"))
            }
            TokenKind::Str(text) | TokenKind::Ident(text) if !negative => Some(text.clone()),
            _ => return Err(self.mismatched("a service level option's value")),
        };
        self.advance();
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse_statement;
    use super::*;

    fn statement(text: &str) -> ServiceLevelStatement {
        match parse_statement(text).map(|p| p.statement) {
            Ok(Statement::ServiceLevel(statement)) => statement,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn every_form_parses() {
        let options = ServiceLevelOptions {
            timeout: Some(Some("575ms".into())),
            workload_type: Some(Some("batch".into())),
            shares: Some(200),
        };
        assert_eq!(
            statement("CREATE SERVICE LEVEL IF NOT EXISTS Gold WITH timeout = 575ms AND workload_type = 'batch' AND shares = 200"),
            ServiceLevelStatement::Create { name: "gold".into(), if_not_exists: true, options }
        );
        let reset = ServiceLevelOptions { timeout: Some(None), ..ServiceLevelOptions::default() };
        assert_eq!(
            statement("ALTER SERVICE_LEVEL 'Gold' WITH timeout = null"),
            ServiceLevelStatement::Alter { name: "Gold".into(), options: reset }
        );
        let negative = ServiceLevelOptions { timeout: Some(Some("-5s".into())), ..ServiceLevelOptions::default() };
        assert_eq!(
            statement("ALTER SERVICE LEVEL s WITH timeout = -5s"),
            ServiceLevelStatement::Alter { name: "s".into(), options: negative }
        );
        assert_eq!(
            statement("DROP SERVICE LEVEL IF EXISTS s"),
            ServiceLevelStatement::Drop { name: "s".into(), if_exists: true }
        );
        assert_eq!(
            statement("ATTACH SERVICE LEVEL s TO r"),
            ServiceLevelStatement::Attach { name: "s".into(), role: "r".into() }
        );
        assert_eq!(statement("DETACH SERVICE_LEVEL FROM r"), ServiceLevelStatement::Detach { role: "r".into() });
        assert_eq!(statement("LIST SERVICE LEVEL s"), ServiceLevelStatement::List { name: Some("s".into()) });
        assert_eq!(statement("LIST ALL SERVICE_LEVELS"), ServiceLevelStatement::List { name: None });
        assert_eq!(statement("LIST ALL SERVICE LEVELS"), ServiceLevelStatement::List { name: None });
        assert_eq!(
            statement("LIST ATTACHED SERVICE LEVEL OF r"),
            ServiceLevelStatement::ListAttached { role: Some("r".into()) }
        );
        assert_eq!(statement("LIST ALL ATTACHED SERVICE LEVELS"), ServiceLevelStatement::ListAttached { role: None });
        assert_eq!(
            statement("LIST EFFECTIVE SERVICE LEVEL OF r"),
            ServiceLevelStatement::ListEffective { role: "r".into() }
        );
    }

    #[test]
    fn bad_options_are_syntax_errors() {
        for text in [
            "CREATE SERVICE LEVEL s WITH colour = 'red'",
            "CREATE SERVICE LEVEL s WITH shares = 'many'",
            "CREATE SERVICE LEVEL s WITH shares = 1 AND shares = 2",
            "ALTER SERVICE LEVEL s WITH timeout = -'x'",
        ] {
            assert!(parse_statement(text).is_err(), "{text}");
        }
    }
}
