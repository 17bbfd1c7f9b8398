//! CREATE / ALTER / DROP MATERIALIZED VIEW (`CREATE MATERIALIZED` was
//! consumed by `ddl`, `VIEW` was not).

use super::{PResult, Parser};
use crate::ast::{AlterView, CreateView, DropView, Selector, Statement};
use crate::lexer::Sym;

impl Parser<'_> {
    /// `VIEW [IF NOT EXISTS] [ks.]v AS SELECT (* | c, ...) FROM [ks.]t
    /// WHERE ... PRIMARY KEY (...) [WITH options [AND CLUSTERING ORDER BY
    /// (...)] [AND COMPACT STORAGE]]`.
    pub(super) fn create_view(&mut self) -> PResult<Statement> {
        self.expect_kw("view")?;
        let if_not_exists = self.if_not_exists()?;
        let (keyspace, name) = self.qualified_name("view name")?;
        self.expect_kw("as")?;
        self.expect_kw("select")?;
        let selectors: Vec<Selector> =
            if self.eat_sym(Sym::Star) { Vec::new() } else { self.comma_list(Self::selector)? };
        self.expect_kw("from")?;
        let (base_keyspace, base) = self.qualified_name("table name")?;
        // The WHERE clause is optional in the grammar (Cassandra's and
        // ScyllaDB's); the key columns' IS NOT NULL is checked later.
        let where_clause = if self.eat_kw("where") { self.where_clause()? } else { Vec::new() };
        self.expect_kw("primary")?;
        self.expect_kw("key")?;
        let (partition_key, clustering_key) = self.primary_key_clause()?;
        let mut view = CreateView {
            keyspace,
            name,
            if_not_exists,
            base_keyspace,
            base,
            selectors,
            where_clause,
            partition_key,
            clustering_key,
            clustering_order: Vec::new(),
            options: Vec::new(),
            compact_storage: false,
            view_id: None,
        };
        if self.eat_kw("with") {
            loop {
                if self.eat_kw("clustering") {
                    self.expect_kw("order")?;
                    self.expect_kw("by")?;
                    self.expect_sym(Sym::LParen)?;
                    view.clustering_order = self.comma_list(Self::ordering)?;
                    self.expect_sym(Sym::RParen)?;
                } else if self.eat_kw("compact") {
                    self.expect_kw("storage")?;
                    view.compact_storage = true;
                } else {
                    self.option(&mut view.options)?;
                }
                if !self.eat_kw("and") {
                    break;
                }
            }
        }
        Ok(Statement::CreateView(view))
    }

    /// `VIEW [ks.]v WITH options` after ALTER MATERIALIZED.
    pub(super) fn alter_view(&mut self) -> PResult<Statement> {
        self.expect_kw("view")?;
        let (keyspace, name) = self.qualified_name("view name")?;
        self.expect_kw("with")?;
        let options = self.options()?;
        Ok(Statement::AlterView(AlterView { keyspace, name, options }))
    }

    /// `VIEW [IF EXISTS] [ks.]v` after DROP MATERIALIZED.
    pub(super) fn drop_view(&mut self) -> PResult<Statement> {
        self.expect_kw("view")?;
        let if_exists = self.if_exists()?;
        let (keyspace, name) = self.qualified_name("view name")?;
        Ok(Statement::DropView(DropView { keyspace, name, if_exists }))
    }
}
