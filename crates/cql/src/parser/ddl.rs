//! Schema statements: CREATE/ALTER/DROP KEYSPACE, TABLE and TYPE, CREATE
//! and DROP INDEX (the index itself in `index`), MATERIALIZED VIEW (in
//! `view`), TRUNCATE, DROP FUNCTION/AGGREGATE (CREATE in `function`), and
//! `WITH` option lists. Other schema objects (roles, triggers) are refused
//! with a clear error.

use super::{PResult, Parser};
use crate::ast::{
    AlterKeyspace, AlterTable, AlterTableOp, AlterType, AlterTypeOp, ColumnDef, CreateKeyspace, CreateTable,
    CreateType, DropFunction, DropIndex, DropKeyspace, DropTable, DropType, OptionValue, Options, Statement, Term,
    Truncate, Using,
};
use crate::lexer::{Sym, TokenKind};

/// What follows CREATE/ALTER/DROP, classified.
enum Object {
    Keyspace,
    Table,
    Type,
    Index,
    /// `MATERIALIZED VIEW`.
    View,
    /// A known but unsupported object, named for the error message.
    Unsupported(&'static str),
    Unknown,
}

fn classify(word: &str) -> Object {
    match word {
        "keyspace" | "schema" => Object::Keyspace,
        "table" | "columnfamily" => Object::Table,
        "index" | "custom" => Object::Index,
        "type" => Object::Type,
        "function" | "or" => Object::Unsupported("FUNCTION"),
        "aggregate" => Object::Unsupported("AGGREGATE"),
        "materialized" => Object::View,
        "role" => Object::Unsupported("ROLE"),
        "user" => Object::Unsupported("USER"),
        "trigger" => Object::Unsupported("TRIGGER"),
        _ => Object::Unknown,
    }
}

impl Parser<'_> {
    /// Consumes `verb object` and tells which object it was; errors for
    /// unsupported or unknown objects.
    fn schema_object(&mut self, verb: &str) -> PResult<Object> {
        let start = self.advance();
        let object = classify(self.word_at(0).unwrap_or(""));
        match object {
            Object::Unsupported(what) => Err(self.unsupported(&start, &format!("{verb} {what}"))),
            Object::Unknown => Err(self.mismatched("KEYSPACE or TABLE")),
            _ => {
                self.advance();
                Ok(object)
            }
        }
    }

    pub(super) fn create(&mut self) -> PResult<Statement> {
        if self.creates_function() {
            return self.create_function();
        }
        let custom = self.is_kw_at(1, "custom");
        match self.schema_object("CREATE")? {
            Object::Keyspace => self.create_keyspace(),
            Object::Type => self.create_type(),
            Object::Index => self.create_index(custom),
            Object::View => self.create_view(),
            _ => self.create_table(),
        }
    }

    pub(super) fn alter(&mut self) -> PResult<Statement> {
        let start = self.peek().clone();
        match self.schema_object("ALTER")? {
            Object::Keyspace => {
                let name = self.ident("keyspace name")?;
                self.expect_kw("with")?;
                let options = self.options()?;
                Ok(Statement::AlterKeyspace(AlterKeyspace { name, options }))
            }
            Object::Type => self.alter_type(),
            Object::Index => Err(self.unsupported(&start, "ALTER INDEX")),
            Object::View => self.alter_view(),
            _ => self.alter_table(),
        }
    }

    pub(super) fn drop(&mut self) -> PResult<Statement> {
        if self.is_kw_at(1, "function") || self.is_kw_at(1, "aggregate") {
            let aggregate = self.is_kw_at(1, "aggregate");
            self.advance();
            self.advance();
            return self.drop_function(aggregate);
        }
        match self.schema_object("DROP")? {
            Object::View => self.drop_view(),
            Object::Index => {
                let if_exists = self.if_exists()?;
                let (keyspace, name) = self.qualified_name("index name")?;
                Ok(Statement::DropIndex(DropIndex { keyspace, name, if_exists }))
            }
            Object::Keyspace => {
                let if_exists = self.if_exists()?;
                let name = self.ident("keyspace name")?;
                Ok(Statement::DropKeyspace(DropKeyspace { name, if_exists }))
            }
            Object::Type => {
                let if_exists = self.if_exists()?;
                let (keyspace, name) = self.qualified_name("type name")?;
                Ok(Statement::DropType(DropType { keyspace, name, if_exists }))
            }
            _ => {
                let if_exists = self.if_exists()?;
                let (keyspace, name) = self.qualified_name("table name")?;
                Ok(Statement::DropTable(DropTable { keyspace, name, if_exists }))
            }
        }
    }

    /// After `DROP FUNCTION|AGGREGATE`: `[IF EXISTS] [ks.]name [(types)]`.
    fn drop_function(&mut self, aggregate: bool) -> PResult<Statement> {
        let if_exists = self.if_exists()?;
        let (keyspace, name) = self.qualified_name("function name")?;
        let args = match self.eat_sym(Sym::LParen) {
            false => None,
            true if self.eat_sym(Sym::RParen) => Some(Vec::new()),
            true => {
                let mut types = vec![self.cql_type()?];
                while self.eat_sym(Sym::Comma) {
                    types.push(self.cql_type()?);
                }
                self.expect_sym(Sym::RParen)?;
                Some(types)
            }
        };
        Ok(Statement::DropFunction(DropFunction { keyspace, name, args, if_exists, aggregate }))
    }

    pub(super) fn truncate(&mut self) -> PResult<Statement> {
        self.advance();
        if !self.eat_kw("table") {
            self.eat_kw("columnfamily");
        }
        let (keyspace, name) = self.qualified_name("table name")?;
        let mut using = Using::default();
        if self.eat_kw("using") {
            self.using_options(&mut using, super::dml::TRUNCATE)?;
        }
        Ok(Statement::Truncate(Truncate { keyspace, name, timeout: using.timeout }))
    }

    fn create_keyspace(&mut self) -> PResult<Statement> {
        let if_not_exists = self.if_not_exists()?;
        // ScyllaDB's parser has no alternative for a keyword here.
        if self.is_kw("with") {
            return Err(self.no_viable());
        }
        let name = self.ident("keyspace name")?;
        self.expect_kw("with")?;
        let options = self.options()?;
        Ok(Statement::CreateKeyspace(CreateKeyspace { name, if_not_exists, options }))
    }

    fn create_type(&mut self) -> PResult<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let (keyspace, name) = self.qualified_name("type name")?;
        self.expect_sym(Sym::LParen)?;
        let fields = self.definition_list(|p| Ok((p.ident("field name")?, p.cql_type()?)))?;
        Ok(Statement::CreateType(CreateType { keyspace, name, if_not_exists, fields }))
    }

    fn alter_type(&mut self) -> PResult<Statement> {
        let (keyspace, name) = self.qualified_name("type name")?;
        let op = if self.eat_kw("add") {
            AlterTypeOp::Add(self.ident("field name")?, self.cql_type()?)
        } else if self.eat_kw("rename") {
            let mut pairs = Vec::new();
            loop {
                let from = self.ident("field name")?;
                self.expect_kw("to")?;
                pairs.push((from, self.ident("field name")?));
                if !self.eat_kw("and") {
                    break;
                }
            }
            AlterTypeOp::Rename(pairs)
        } else {
            return Err(self.mismatched("ADD or RENAME"));
        };
        Ok(Statement::AlterType(AlterType { keyspace, name, op }))
    }

    fn create_table(&mut self) -> PResult<Statement> {
        let if_not_exists = self.if_not_exists()?;
        let (keyspace, name) = self.qualified_name("table name")?;
        let mut table = CreateTable {
            keyspace,
            name,
            if_not_exists,
            columns: Vec::new(),
            partition_key: Vec::new(),
            clustering_key: Vec::new(),
            clustering_order: Vec::new(),
            options: Vec::new(),
            compact_storage: false,
            multiple_primary_keys: false,
        };
        self.expect_sym(Sym::LParen)?;
        let mut key_declared = false;
        self.definition_list(|p| p.table_element(&mut table, &mut key_declared))?;
        // A table without a PRIMARY KEY is well-formed CQL that cannot be
        // created: the executor answers Invalid, as Cassandra does.
        if self.eat_kw("with") {
            self.table_options(&mut table)?;
        }
        Ok(Statement::CreateTable(table))
    }

    /// One item inside CREATE TABLE's parentheses: a column definition
    /// (maybe with an inline PRIMARY KEY) or a PRIMARY KEY clause.
    fn table_element(&mut self, table: &mut CreateTable, key_declared: &mut bool) -> PResult<()> {
        let key_clause = self.is_kw("primary") && self.is_kw_at(1, "key");
        let (partition, clustering) = if key_clause {
            self.advance_pair();
            self.primary_key_clause()?
        } else {
            let column = self.column_def()?;
            let inline_key = self.eat_kw("primary");
            if inline_key {
                self.expect_kw("key")?;
            }
            let name = column.name.clone();
            table.columns.push(column);
            if !inline_key {
                return Ok(());
            }
            (vec![name], Vec::new())
        };
        table.multiple_primary_keys |= *key_declared;
        *key_declared = true;
        table.partition_key = partition;
        table.clustering_key = clustering;
        Ok(())
    }

    /// `item (',' item?)* ')'`: a CREATE TABLE or CREATE TYPE body after
    /// its `(`, where ScyllaDB's grammar lets a comma go without an item
    /// (`(k int PRIMARY KEY, v int,)`).
    fn definition_list<T>(&mut self, mut item: impl FnMut(&mut Self) -> PResult<T>) -> PResult<Vec<T>> {
        let mut items = vec![item(self)?];
        while self.eat_sym(Sym::Comma) {
            if !self.is_sym(Sym::Comma) && !self.is_sym(Sym::RParen) {
                items.push(item(self)?);
            }
        }
        self.expect_sym(Sym::RParen)?;
        Ok(items)
    }

    fn advance_pair(&mut self) {
        self.advance();
        self.advance();
    }

    /// `( partition_key [, clustering...] )` after PRIMARY KEY, where the
    /// partition key is one column or a parenthesized list.
    pub(super) fn primary_key_clause(&mut self) -> PResult<(Vec<String>, Vec<String>)> {
        self.expect_sym(Sym::LParen)?;
        let partition =
            if self.is_sym(Sym::LParen) { self.paren_idents("column name")? } else { vec![self.ident("column name")?] };
        let mut clustering = Vec::new();
        while self.eat_sym(Sym::Comma) {
            clustering.push(self.ident("column name")?);
        }
        self.expect_sym(Sym::RParen)?;
        Ok((partition, clustering))
    }

    /// `name type [STATIC]`.
    fn column_def(&mut self) -> PResult<ColumnDef> {
        let name = self.ident("column name")?;
        let ty = self.cql_type()?;
        let is_static = self.eat_kw("static");
        Ok(ColumnDef { name, ty, is_static })
    }

    /// CREATE TABLE's `WITH`: CLUSTERING ORDER BY, COMPACT STORAGE and
    /// ordinary options, joined by AND.
    fn table_options(&mut self, table: &mut CreateTable) -> PResult<()> {
        loop {
            if self.eat_kw("clustering") {
                self.expect_kw("order")?;
                self.expect_kw("by")?;
                self.expect_sym(Sym::LParen)?;
                table.clustering_order = self.comma_list(Self::ordering)?;
                self.expect_sym(Sym::RParen)?;
            } else if self.eat_kw("compact") {
                self.expect_kw("storage")?;
                table.compact_storage = true;
            } else {
                self.option(&mut table.options)?;
            }
            if !self.eat_kw("and") {
                return Ok(());
            }
        }
    }

    /// `USING TIMESTAMP n` after `ALTER TABLE ... DROP`: an integer
    /// literal, as in Cassandra's grammar, or a bind marker, as ScyllaDB
    /// also takes (its index is the second part).
    fn drop_timestamp(&mut self) -> PResult<(Option<i64>, Option<usize>)> {
        if !self.eat_kw("using") {
            return Ok((None, None));
        }
        self.expect_kw("timestamp")?;
        if matches!(self.peek().kind, TokenKind::Sym(Sym::Question | Sym::Colon)) {
            let Term::Bind(index) = self.bind_marker()? else { unreachable!("bind_marker gives a Term::Bind") };
            return Ok((None, Some(index)));
        }
        let negative = self.eat_sym(Sym::Minus);
        let TokenKind::Integer(digits) = &self.peek().kind else {
            return Err(self.mismatched("an integer timestamp"));
        };
        let text = if negative { format!("-{digits}") } else { digits.clone() };
        let timestamp = text.parse::<i64>().map_err(|_| self.mismatched("a 64-bit integer timestamp"))?;
        self.advance();
        Ok((Some(timestamp), None))
    }

    fn alter_table(&mut self) -> PResult<Statement> {
        let (keyspace, name) = self.qualified_name("table name")?;
        let word = self.word_at(0).unwrap_or("").to_string();
        let op = match word.as_str() {
            "add" => {
                self.advance();
                AlterTableOp::Add(self.one_or_parenthesized(Self::column_def)?)
            }
            "drop" => {
                self.advance();
                let columns = self.one_or_parenthesized(|p| p.ident("column name"))?;
                let (timestamp, timestamp_marker) = self.drop_timestamp()?;
                AlterTableOp::Drop { columns, timestamp, timestamp_marker }
            }
            "rename" => {
                self.advance();
                let mut pairs = vec![self.rename_pair()?];
                while self.eat_kw("and") {
                    pairs.push(self.rename_pair()?);
                }
                AlterTableOp::Rename(pairs)
            }
            "with" => {
                self.advance();
                AlterTableOp::With(self.options()?)
            }
            "alter" => {
                self.advance();
                let column = self.ident("column name")?;
                self.expect_kw("type")?;
                AlterTableOp::AlterType { column, ty: self.cql_type()? }
            }
            _ => return Err(self.mismatched("ADD, DROP, RENAME, WITH or ALTER")),
        };
        Ok(Statement::AlterTable(AlterTable { keyspace, name, op }))
    }

    /// `item` or `(item, ...)`.
    fn one_or_parenthesized<T>(&mut self, mut item: impl FnMut(&mut Self) -> PResult<T>) -> PResult<Vec<T>> {
        if !self.eat_sym(Sym::LParen) {
            return Ok(vec![item(self)?]);
        }
        let items = self.comma_list(item)?;
        self.expect_sym(Sym::RParen)?;
        Ok(items)
    }

    fn rename_pair(&mut self) -> PResult<(String, String)> {
        let from = self.ident("column name")?;
        self.expect_kw("to")?;
        Ok((from, self.ident("column name")?))
    }

    /// `name = value (AND name = value)*`.
    pub(super) fn options(&mut self) -> PResult<Options> {
        let mut options = Vec::new();
        loop {
            self.option(&mut options)?;
            if !self.eat_kw("and") {
                return Ok(options);
            }
        }
    }

    pub(super) fn option(&mut self, options: &mut Options) -> PResult<()> {
        let at = self.peek().clone();
        if self.is_kw("with") {
            return Err(self.no_viable());
        }
        let name = self.ident("option name")?;
        if options.iter().any(|(existing, _)| *existing == name) {
            let message = format!("multiple definitions of option '{name}'");
            return Err(self.error_at_token(&at, message));
        }
        self.expect_sym(Sym::Eq)?;
        let value = if self.is_sym(Sym::LBrace) { OptionValue::Map(self.option_map()?) } else { self.option_scalar()? };
        options.push((name, value));
        Ok(())
    }

    /// `{ key: value, ... }`, keys and values rendered to strings.
    pub(super) fn option_map(&mut self) -> PResult<Vec<(String, String)>> {
        self.advance();
        let mut entries = Vec::new();
        if self.eat_sym(Sym::RBrace) {
            return Ok(entries);
        }
        loop {
            let key = self.map_constant()?;
            self.expect_sym(Sym::Colon)?;
            let value = self.map_constant()?;
            // Cassandra's and ScyllaDB's `convert_property_map`.
            if entries.iter().any(|(existing, _)| *existing == key) {
                return Err(self.error_at_token(self.peek(), format!("Multiple definition for property {key}")));
            }
            entries.push((key, value));
            if !self.eat_sym(Sym::Comma) {
                break;
            }
        }
        self.expect_sym(Sym::RBrace)?;
        Ok(entries)
    }

    /// A key or value of an option map: a constant, not a bare word
    /// (`{'rows_per_partition': ALL}` is refused, as by ScyllaDB).
    fn map_constant(&mut self) -> PResult<String> {
        let token = self.peek().clone();
        let bare = matches!(&token.kind, TokenKind::Ident(w) if w != "true" && w != "false");
        if bare {
            return Err(self.error_at_token(&token, format!("Invalid property value: {}", self.token_text(&token))));
        }
        Ok(render(self.option_scalar()?))
    }

    /// A string, number, boolean or bare word.
    pub(super) fn option_scalar(&mut self) -> PResult<OptionValue> {
        let value = match &self.peek().kind {
            TokenKind::Sym(Sym::Minus) => return Ok(OptionValue::Number(self.negative_literal()?.to_string())),
            TokenKind::Str(s) | TokenKind::Uuid(s) => OptionValue::String(s.clone()),
            TokenKind::Integer(n) | TokenKind::Float(n) => OptionValue::Number(n.clone()),
            TokenKind::Ident(w) if w == "true" => OptionValue::Bool(true),
            TokenKind::Ident(w) if w == "false" => OptionValue::Bool(false),
            TokenKind::Ident(_) => {
                let token = self.peek();
                OptionValue::String(self.src.get(token.start..token.end).unwrap_or("").to_string())
            }
            _ => return Err(self.mismatched("an option value (string, number, boolean or map)")),
        };
        self.advance();
        Ok(value)
    }
}

fn render(value: OptionValue) -> String {
    match value {
        OptionValue::String(s) | OptionValue::Number(s) => s,
        OptionValue::Bool(b) => b.to_string(),
        OptionValue::Map(_) => String::new(),
    }
}
