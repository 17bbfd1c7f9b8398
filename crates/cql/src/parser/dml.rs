//! Data modification: INSERT (column list and JSON forms), UPDATE, DELETE,
//! BATCH, and the USING and IF clauses they share.

use super::{PResult, Parser};
use crate::ast::{
    Assignment, Batch, BatchKind, ColumnCondition, ColumnTarget, Condition, Delete, InValues, Insert, InsertJson,
    Operator, Statement, Term, Update, Using,
};
use crate::lexer::{Sym, TokenKind};

/// Which USING options a statement kind admits; TIMEOUT is always allowed.
#[derive(Clone, Copy)]
pub(super) struct UsingRules {
    pub statement: &'static str,
    pub ttl: bool,
    pub timestamp: bool,
}

const INSERT_UPDATE: UsingRules = UsingRules { statement: "INSERT/UPDATE", ttl: true, timestamp: true };
const DELETE: UsingRules = UsingRules { statement: "DELETE", ttl: false, timestamp: true };
const BATCH: UsingRules = UsingRules { statement: "BATCH", ttl: false, timestamp: true };
pub(super) const TRUNCATE: UsingRules = UsingRules { statement: "TRUNCATE", ttl: false, timestamp: false };

impl Parser<'_> {
    /// `option term (AND option term)*` after `USING`, merged into `using`.
    pub(super) fn using_options(&mut self, using: &mut Using, rules: UsingRules) -> PResult<()> {
        loop {
            let token = self.peek().clone();
            let word = self.word_at(0).unwrap_or("").to_string();
            let (slot, allowed) = match word.as_str() {
                "ttl" => (&mut using.ttl, rules.ttl),
                "timestamp" => (&mut using.timestamp, rules.timestamp),
                "timeout" => (&mut using.timeout, true),
                _ => {
                    let expecting = match (rules.ttl, rules.timestamp) {
                        (true, _) => "TTL, TIMESTAMP or TIMEOUT",
                        (false, true) => "TIMESTAMP or TIMEOUT",
                        _ => "TIMEOUT",
                    };
                    return Err(self.mismatched(expecting));
                }
            };
            let upper = word.to_ascii_uppercase();
            if !allowed {
                let message = format!("USING {upper} is not allowed in {}", rules.statement);
                return Err(self.error_at_token(&token, message));
            }
            if slot.is_some() {
                return Err(self.error_at_token(&token, format!("USING {upper} given twice")));
            }
            self.advance();
            *slot = Some(self.term()?);
            if !self.eat_kw("and") {
                return Ok(());
            }
        }
    }

    pub(super) fn insert(&mut self) -> PResult<Statement> {
        self.advance();
        self.expect_kw("into")?;
        let (keyspace, table) = self.qualified_name("table name")?;
        if self.eat_kw("json") {
            let json = self.term()?;
            let default_unset = self.insert_json_default()?;
            let (if_not_exists, using) = self.insert_tail()?;
            let insert = InsertJson { keyspace, table, json, default_unset, if_not_exists, using };
            return Ok(Statement::InsertJson(insert));
        }
        let columns = self.paren_idents("column name")?;
        self.expect_kw("values")?;
        self.expect_sym(Sym::LParen)?;
        let values = self.comma_list(Self::term)?;
        self.expect_sym(Sym::RParen)?;
        // Unmatched counts are the executor's Invalid, as in Cassandra.
        let (if_not_exists, using) = self.insert_tail()?;
        Ok(Statement::Insert(Insert { keyspace, table, columns, values, if_not_exists, using }))
    }

    /// `DEFAULT NULL | DEFAULT UNSET` after the JSON value; true for UNSET.
    fn insert_json_default(&mut self) -> PResult<bool> {
        if !self.eat_kw("default") {
            return Ok(false);
        }
        if self.eat_kw("unset") {
            return Ok(true);
        }
        self.expect_kw("null")?;
        Ok(false)
    }

    /// `[IF NOT EXISTS] [USING ...]`, accepted in either order.
    fn insert_tail(&mut self) -> PResult<(bool, Using)> {
        let mut if_not_exists = self.if_not_exists()?;
        let mut using = Using::default();
        if self.eat_kw("using") {
            self.using_options(&mut using, INSERT_UPDATE)?;
            if !if_not_exists {
                if_not_exists = self.if_not_exists()?;
            }
        }
        Ok((if_not_exists, using))
    }

    pub(super) fn update(&mut self) -> PResult<Statement> {
        self.advance();
        let (keyspace, table) = self.qualified_name("table name")?;
        let mut using = Using::default();
        if self.eat_kw("using") {
            self.using_options(&mut using, INSERT_UPDATE)?;
        }
        self.expect_kw("set")?;
        let assignments = self.comma_list(Self::assignment)?;
        self.expect_kw("where")?;
        let where_clause = self.where_clause()?;
        let condition = self.condition()?;
        let update = Update { keyspace, table, using, assignments, where_clause, condition };
        Ok(Statement::Update(update))
    }

    /// Whether the cursor is at a reference to `column` (as written in a SET
    /// item's right-hand side), as opposed to a value.
    fn at_column(&self, column: &str) -> bool {
        match &self.peek().kind {
            TokenKind::Ident(word) => word == column,
            TokenKind::QuotedIdent(name) => name == column,
            _ => false,
        }
    }

    fn assignment(&mut self) -> PResult<Assignment> {
        let column = self.ident("column name")?;
        if self.eat_sym(Sym::Dot) {
            let field = self.ident("field name")?;
            self.expect_sym(Sym::Eq)?;
            return Ok(Assignment::SetField { column, field, value: self.term()? });
        }
        if self.eat_sym(Sym::LBracket) {
            let key = self.term()?;
            self.expect_sym(Sym::RBracket)?;
            self.expect_sym(Sym::Eq)?;
            let value = self.term()?;
            return Ok(Assignment::SetElement { column, key, value });
        }
        if self.eat_sym(Sym::PlusEq) {
            return Ok(Assignment::Add { column, value: self.term()? });
        }
        if self.eat_sym(Sym::MinusEq) {
            return Ok(Assignment::Subtract { column, value: self.term()? });
        }
        self.expect_sym(Sym::Eq)?;
        self.assignment_rhs(column)
    }

    /// After `c =`: `term`, `c + term`, `c - term` or `term + c`.
    fn assignment_rhs(&mut self, column: String) -> PResult<Assignment> {
        let is_op = |p: &Self| p.is_sym_at(1, Sym::Plus) || p.is_sym_at(1, Sym::Minus);
        let names_column = matches!(self.peek().kind, TokenKind::QuotedIdent(_))
            || (self.word_at(0).is_some_and(|w| w != "true" && w != "false" && w != "null"));
        if names_column && is_op(self) {
            if !self.at_column(&column) {
                return Err(self.error_at_token(self.peek(), x_equals_x_plus_value()));
            }
            self.advance();
            let add = self.eat_sym(Sym::Plus);
            if !add {
                self.expect_sym(Sym::Minus)?;
            }
            let value = self.term()?;
            return Ok(if add { Assignment::Add { column, value } } else { Assignment::Subtract { column, value } });
        }
        let value = self.term()?;
        if self.is_sym(Sym::Minus) {
            // `c = 5 - c`: CQL subtracts only from the column, as in
            // Cassandra, where this is a syntax error too.
            return Err(self.error_at_token(self.peek(), x_equals_x_plus_value()));
        }
        if !self.eat_sym(Sym::Plus) {
            return Ok(Assignment::Set { column, value });
        }
        if !self.at_column(&column) {
            return Err(self.error_at_token(self.peek(), x_equals_x_plus_value()));
        }
        self.advance();
        Ok(Assignment::Prepend { column, value })
    }

    pub(super) fn delete(&mut self) -> PResult<Statement> {
        self.advance();
        let columns = if self.is_kw("from") { Vec::new() } else { self.comma_list(Self::target)? };
        self.expect_kw("from")?;
        let (keyspace, table) = self.qualified_name("table name")?;
        let mut using = Using::default();
        if self.eat_kw("using") {
            self.using_options(&mut using, DELETE)?;
        }
        self.expect_kw("where")?;
        let where_clause = self.where_clause()?;
        let condition = self.condition()?;
        let delete = Delete { keyspace, table, columns, using, where_clause, condition };
        Ok(Statement::Delete(delete))
    }

    /// `c`, `c[term]` or `c.field`.
    fn target(&mut self) -> PResult<ColumnTarget> {
        let column = self.ident("column name")?;
        let (mut element, mut field) = (None, None);
        if self.eat_sym(Sym::LBracket) {
            element = Some(self.term()?);
            self.expect_sym(Sym::RBracket)?;
        } else if self.eat_sym(Sym::Dot) {
            field = Some(self.ident("field name")?);
        }
        Ok(ColumnTarget { column, element, field })
    }

    /// `[IF EXISTS | IF cond (AND cond)*]` of UPDATE and DELETE.
    fn condition(&mut self) -> PResult<Condition> {
        if !self.eat_kw("if") {
            return Ok(Condition::None);
        }
        if self.eat_kw("exists") {
            return Ok(Condition::IfExists);
        }
        if self.is_kw("not") {
            let message = "IF NOT EXISTS is only valid for INSERT".to_string();
            return Err(self.error_at_token(self.peek(), message));
        }
        let mut conditions = vec![self.column_condition()?];
        while self.eat_kw("and") {
            conditions.push(self.column_condition()?);
        }
        Ok(Condition::IfColumns(conditions))
    }

    fn column_condition(&mut self) -> PResult<ColumnCondition> {
        let target = self.target()?;
        // ScyllaDB's grammar has CONTAINS [KEY] only on a whole column:
        // `l[0] CONTAINS x` does not parse.
        if (target.element.is_some() || target.field.is_some()) && self.is_kw("contains") {
            return Err(self.no_viable());
        }
        let op = if self.eat_kw("in") {
            Operator::In
        } else if self.eat_kw("not") {
            self.expect_kw("in")?;
            Operator::NotIn
        } else {
            let op = self.operator()?;
            let value = self.term()?;
            return Ok(ColumnCondition { target, op, value });
        };
        let value = match self.in_values()? {
            InValues::Bind(index) => Term::Bind(index),
            InValues::Terms(terms) => Term::List(terms),
        };
        Ok(ColumnCondition { target, op, value })
    }

    pub(super) fn batch(&mut self) -> PResult<Statement> {
        self.advance();
        let kind = if self.eat_kw("unlogged") {
            BatchKind::Unlogged
        } else if self.eat_kw("counter") {
            BatchKind::Counter
        } else {
            BatchKind::Logged
        };
        self.expect_kw("batch")?;
        let mut using = Using::default();
        if self.eat_kw("using") {
            self.using_options(&mut using, BATCH)?;
        }
        let mut statements = Vec::new();
        while !self.is_kw("apply") {
            statements.push(self.batch_child()?);
            while self.eat_sym(Sym::Semicolon) {}
        }
        self.advance();
        self.expect_kw("batch")?;
        Ok(Statement::Batch(Batch { kind, using, statements }))
    }

    fn batch_child(&mut self) -> PResult<Statement> {
        match self.word_at(0) {
            Some("insert") => self.insert(),
            Some("update") => self.update(),
            Some("delete") => self.delete(),
            _ => Err(self.mismatched("INSERT, UPDATE, DELETE or APPLY BATCH")),
        }
    }
}

fn x_equals_x_plus_value() -> String {
    "only expressions of the form X = X + <value>, X = <value> + X and X = X - <value> \
     are supported"
        .to_string()
}
