//! CREATE INDEX's target and options (`CREATE [CUSTOM] INDEX` and the
//! index name were consumed by `ddl`).

use shoal_schema::IndexKind;

use super::{PResult, Parser};
use crate::ast::{CreateIndex, IndexTarget, Statement};
use crate::lexer::{Sym, TokenKind};

impl Parser<'_> {
    /// After `CREATE [CUSTOM] INDEX`: `[IF NOT EXISTS] [name] ON [ks.]t
    /// (target) [USING 'class' [WITH OPTIONS = {...}] | WITH options]`.
    pub(super) fn create_index(&mut self, custom: bool) -> PResult<Statement> {
        if custom {
            self.expect_kw("index")?;
        }
        let if_not_exists = self.if_not_exists()?;
        let name = if self.is_kw("on") { None } else { Some(self.ident("index name")?) };
        self.expect_kw("on")?;
        let (keyspace, table) = self.qualified_name("table name")?;
        self.expect_sym(Sym::LParen)?;
        let target = self.index_target()?;
        self.expect_sym(Sym::RParen)?;
        let mut options = Vec::new();
        let custom_class = if self.eat_kw("using") {
            let TokenKind::Str(class) = self.peek().kind.clone() else { return Err(self.mismatched("a class name")) };
            self.advance();
            // `WITH OPTIONS = {...}`: a custom class's, and custom
            // classes are refused.
            if self.eat_kw("with") {
                self.options()?;
            }
            Some(class)
        } else {
            if self.eat_kw("with") {
                options = self.options()?;
            }
            None
        };
        Ok(Statement::CreateIndex(CreateIndex {
            keyspace,
            table,
            name,
            if_not_exists,
            target,
            custom_class,
            options,
            view_id: None,
        }))
    }

    /// `v` | `keys(m)` | `values(m)` | `entries(m)` | `full(l)` |
    /// `(p1, ...), v` (a local index).
    fn index_target(&mut self) -> PResult<IndexTarget> {
        let local_key = match self.is_sym(Sym::LParen) {
            true => {
                let key = self.paren_idents("column name")?;
                self.expect_sym(Sym::Comma)?;
                Some(key)
            }
            false => None,
        };
        let kind = match self.word_at(0) {
            Some("keys") if self.is_sym_at(1, Sym::LParen) => Some(IndexKind::Keys),
            Some("values") if self.is_sym_at(1, Sym::LParen) => Some(IndexKind::Values),
            Some("entries") if self.is_sym_at(1, Sym::LParen) => Some(IndexKind::Entries),
            Some("full") if self.is_sym_at(1, Sym::LParen) => Some(IndexKind::Full),
            _ => None,
        };
        let Some(kind) = kind else {
            let column = self.ident("column name")?;
            return Ok(IndexTarget { column, kind: IndexKind::Values, kind_named: false, local_key });
        };
        self.advance();
        self.expect_sym(Sym::LParen)?;
        let column = self.ident("column name")?;
        self.expect_sym(Sym::RParen)?;
        Ok(IndexTarget { column, kind, kind_named: true, local_key })
    }
}
