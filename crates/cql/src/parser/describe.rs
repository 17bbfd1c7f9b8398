//! `DESCRIBE` (`DESC`) statements, Cassandra 4's server-side forms:
//! listings (`KEYSPACES`, `TABLES`, `TYPES`, `FUNCTIONS`, `AGGREGATES`),
//! `CLUSTER`, `[FULL] SCHEMA`, `[ONLY] KEYSPACE [ks]`, one object by kind
//! (`TABLE`, `INDEX`, `MATERIALIZED VIEW`, `TYPE`, `FUNCTION`,
//! `AGGREGATE`) or by name alone, each optionally `WITH INTERNALS`
//! (ScyllaDB's `WITH INTERNALS AND PASSWORDS` too).

use super::{PResult, Parser};
use crate::ast::{Describe, DescribeTarget, Statement};
use crate::lexer::TokenKind;

impl Parser<'_> {
    pub(super) fn describe(&mut self) -> PResult<Statement> {
        self.advance();
        let target = self.describe_target()?;
        let with_internals = self.is_kw("with") && self.is_kw_at(1, "internals");
        if with_internals {
            self.advance();
            self.advance();
        }
        let with_passwords = with_internals && self.is_kw("and") && self.is_kw_at(1, "passwords");
        if with_passwords {
            self.advance();
            self.advance();
        }
        Ok(Statement::Describe(Describe { target, with_internals, with_passwords }))
    }

    fn describe_target(&mut self) -> PResult<DescribeTarget> {
        let listing = match self.word_at(0) {
            Some("keyspaces") => Some(DescribeTarget::Keyspaces),
            Some("tables" | "columnfamilies") => Some(DescribeTarget::Tables),
            Some("types") => Some(DescribeTarget::Types),
            Some("functions") => Some(DescribeTarget::Functions),
            Some("aggregates") => Some(DescribeTarget::Aggregates),
            Some("cluster") => Some(DescribeTarget::Cluster),
            _ => None,
        };
        // A lone word may also name a keyspace or table: `DESCRIBE tables`
        // lists, as in Cassandra, while `DESCRIBE tables.t` describes.
        if let Some(listing) = listing.filter(|_| self.ends_statement_at(1)) {
            self.advance();
            return Ok(listing);
        }
        if self.eat_kw("full") {
            self.expect_kw("schema")?;
            return Ok(DescribeTarget::Schema { full: true });
        }
        if self.is_kw("schema") && self.ends_statement_at(1) {
            self.advance();
            return Ok(DescribeTarget::Schema { full: false });
        }
        let only = self.eat_kw("only");
        if self.eat_kw("keyspace") {
            let name = if self.ends_statement_at(0) { None } else { Some(self.ident("keyspace name")?) };
            return Ok(DescribeTarget::Keyspace { name, only });
        }
        if only {
            return Err(self.mismatched("KEYSPACE"));
        }
        let object: fn(Option<String>, String) -> DescribeTarget = match self.word_at(0) {
            Some("table" | "columnfamily") => DescribeTarget::Table,
            Some("index") => DescribeTarget::Index,
            Some("materialized") => {
                self.advance();
                if !self.is_kw("view") {
                    return Err(self.mismatched("VIEW"));
                }
                DescribeTarget::View
            }
            Some("type") => DescribeTarget::Type,
            Some("function") => DescribeTarget::Function,
            Some("aggregate") => DescribeTarget::Aggregate,
            _ => {
                let (keyspace, name) = self.qualified_name("a keyspace, table, index or view name")?;
                return Ok(DescribeTarget::Any(keyspace, name));
            }
        };
        self.advance();
        let (keyspace, name) = self.qualified_name("name")?;
        Ok(object(keyspace, name))
    }

    /// Whether the statement ends at token `n` (`;`, `WITH INTERNALS` or
    /// the end).
    fn ends_statement_at(&self, n: usize) -> bool {
        matches!(self.peek_nth(n).kind, TokenKind::Eof)
            || self.is_sym_at(n, crate::lexer::Sym::Semicolon)
            || (self.is_kw_at(n, "with") && self.is_kw_at(n + 1, "internals"))
    }
}
