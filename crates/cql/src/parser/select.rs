//! SELECT: the selection list and its selector expressions, and the clauses
//! after FROM (a SELECT without FROM reads ScyllaDB's `system.one_row`) (WHERE, GROUP BY, ORDER BY, limits, ALLOW FILTERING, BYPASS
//! CACHE, USING TIMEOUT).

use super::{PResult, Parser};
use crate::ast::{Order, Select, Selection, Selector, SelectorExpr, Statement, Using};
use crate::lexer::{Sym, TokenKind};
use shoal_schema::arithmetic::NumericOp;

use super::dml::UsingRules;

const SELECT: UsingRules = UsingRules { statement: "SELECT", ttl: false, timestamp: false };

fn arithmetic(op: NumericOp, left: SelectorExpr, right: SelectorExpr) -> SelectorExpr {
    SelectorExpr::Arithmetic { op, left: Box::new(left), right: Box::new(right) }
}

impl Parser<'_> {
    pub(super) fn select(&mut self) -> PResult<Statement> {
        self.advance();
        let json = self.select_flag("json");
        let distinct = self.select_flag("distinct");
        let selection = if self.eat_sym(Sym::Star) {
            Selection::Wildcard
        } else {
            Selection::Selectors(self.comma_list(Self::selector)?)
        };
        // ScyllaDB's SELECT without FROM (`SELECT 1 AS one`, `SELECT
        // now()`): selectors over its table of one row (not DISTINCT ones).
        // Anything else where FROM belongs is a typo of it (`FORM t`).
        let clause = ["where", "group", "order", "per", "limit", "allow", "bypass", "using"];
        let ends = matches!(self.peek().kind, TokenKind::Eof) || self.is_sym(Sym::Semicolon);
        let without_from = !distinct && (ends || clause.iter().any(|word| self.is_kw(word)));
        let (keyspace, table) = match without_from {
            true => (Some("system".to_string()), "one_row".to_string()),
            false => {
                self.expect_kw("from")?;
                self.qualified_name("table name")?
            }
        };
        let mut select = Select {
            keyspace,
            table,
            distinct,
            json,
            selection,
            where_clause: Vec::new(),
            group_by: Vec::new(),
            order_by: Vec::new(),
            per_partition_limit: None,
            limit: None,
            allow_filtering: false,
            bypass_cache: false,
            timeout: None,
            without_from,
        };
        self.select_timeout(&mut select)?;
        self.select_clauses(&mut select)?;
        self.select_timeout(&mut select)?;
        Ok(Statement::Select(select))
    }

    /// `JSON` / `DISTINCT` right after SELECT, unless the word is really a
    /// column named so (`SELECT json FROM t`, `SELECT distinct, x ...`).
    fn select_flag(&mut self, keyword: &str) -> bool {
        let is_column = self.is_kw_at(1, "from") || self.is_kw_at(1, "as") || self.is_sym_at(1, Sym::Comma);
        self.is_kw(keyword) && !is_column && self.eat_kw(keyword)
    }

    /// `USING TIMEOUT t`, which drivers put after the table name or at the end.
    fn select_timeout(&mut self, select: &mut Select) -> PResult<()> {
        if !self.is_kw("using") {
            return Ok(());
        }
        let token = self.advance();
        if select.timeout.is_some() {
            let message = "USING TIMEOUT given twice".to_string();
            return Err(self.error_at_token(&token, message));
        }
        let mut using = Using::default();
        self.using_options(&mut using, SELECT)?;
        select.timeout = using.timeout;
        Ok(())
    }

    fn select_clauses(&mut self, select: &mut Select) -> PResult<()> {
        if self.eat_kw("where") {
            select.where_clause = self.where_clause()?;
        }
        if self.is_kw("group") {
            self.advance();
            self.expect_kw("by")?;
            select.group_by = self.comma_list(|p| p.ident("column name"))?;
        }
        if self.is_kw("order") {
            self.advance();
            self.expect_kw("by")?;
            select.order_by = self.comma_list(Self::ordering)?;
        }
        if self.eat_kw("per") {
            self.expect_kw("partition")?;
            self.expect_kw("limit")?;
            select.per_partition_limit = Some(self.term()?);
        }
        if self.eat_kw("limit") {
            select.limit = Some(self.term()?);
        }
        if self.eat_kw("allow") {
            self.expect_kw("filtering")?;
            select.allow_filtering = true;
        }
        if self.eat_kw("bypass") {
            self.expect_kw("cache")?;
            select.bypass_cache = true;
        }
        Ok(())
    }

    /// `column [ASC | DESC]`, shared with CLUSTERING ORDER BY.
    pub(super) fn ordering(&mut self) -> PResult<(String, Order)> {
        let column = self.ident("column name")?;
        let order = if self.eat_kw("desc") {
            Order::Desc
        } else {
            self.eat_kw("asc");
            Order::Asc
        };
        Ok((column, order))
    }

    pub(super) fn selector(&mut self) -> PResult<Selector> {
        let expr = self.selector_expr()?;
        let alias = if self.eat_kw("as") { Some(self.ident("alias")?) } else { None };
        Ok(Selector { expr, alias })
    }

    /// A selector: sums of products of (signed) primaries, as arithmetic
    /// binds. It counts as a nesting level of its own, besides its
    /// primary's: a selector nested in a function call takes twice the
    /// stack frames a term does, so it gets half the depth.
    fn selector_expr(&mut self) -> PResult<SelectorExpr> {
        self.nested(|p| p.selector_sum())
    }

    fn selector_sum(&mut self) -> PResult<SelectorExpr> {
        let additive = |sym| match sym {
            Sym::Plus => Some(NumericOp::Add),
            Sym::Minus => Some(NumericOp::Sub),
            _ => None,
        };
        self.left_associative(additive, Self::selector_product, |_, _| true, arithmetic)
    }

    fn selector_product(&mut self) -> PResult<SelectorExpr> {
        let multiplicative = |sym| match sym {
            Sym::Star => Some(NumericOp::Mul),
            Sym::Slash => Some(NumericOp::Div),
            Sym::Percent => Some(NumericOp::Mod),
            _ => None,
        };
        self.left_associative(multiplicative, Self::selector_signed, |_, _| true, arithmetic)
    }

    /// `-x` of anything but a number literal (which the term parser reads
    /// as a negative literal) is a negation.
    fn selector_signed(&mut self) -> PResult<SelectorExpr> {
        let negates = self.is_sym(Sym::Minus)
            && !matches!(self.peek_nth(1).kind, TokenKind::Integer(_) | TokenKind::Float(_) | TokenKind::Duration(_));
        if !negates {
            return self.selector_postfix();
        }
        self.advance();
        let operand = self.nested(|p| p.selector_signed())?;
        Ok(SelectorExpr::Negation(Box::new(operand)))
    }

    /// A primary with its field accesses and subscripts.
    fn selector_postfix(&mut self) -> PResult<SelectorExpr> {
        let mut expr = self.nested(|p| p.selector_inner())?;
        loop {
            if self.eat_sym(Sym::Dot) {
                let field = self.ident("field name")?;
                expr = SelectorExpr::Field { expr: Box::new(expr), field };
            } else if self.eat_sym(Sym::LBracket) {
                expr = self.subscript(expr)?;
            } else {
                return Ok(expr);
            }
        }
    }

    /// `[key]`, `[from..to]`, `[from..]` or `[..to]`, after the `[`.
    fn subscript(&mut self, expr: SelectorExpr) -> PResult<SelectorExpr> {
        let expr = Box::new(expr);
        let from = if self.is_sym(Sym::Range) { None } else { Some(self.term()?) };
        let subscript = match (from, self.eat_sym(Sym::Range)) {
            (Some(key), false) => SelectorExpr::Element { expr, key },
            (from, _) => {
                let to = if self.is_sym(Sym::RBracket) { None } else { Some(self.term()?) };
                SelectorExpr::Slice { expr, from, to }
            }
        };
        self.expect_sym(Sym::RBracket)?;
        Ok(subscript)
    }

    fn selector_inner(&mut self) -> PResult<SelectorExpr> {
        if self.at_function_call() {
            return self.selector_call();
        }
        match &self.peek().kind {
            TokenKind::Ident(word) if !matches!(word.as_str(), "true" | "false" | "null" | "nan" | "infinity") => {
                Ok(SelectorExpr::Column(self.ident("column name")?))
            }
            TokenKind::QuotedIdent(_) => Ok(SelectorExpr::Column(self.ident("column name")?)),
            TokenKind::Sym(Sym::LParen) => match self.selector_group() {
                Some(group) => Ok(group),
                None => Ok(SelectorExpr::Term(self.primary_term()?)),
            },
            _ => Ok(SelectorExpr::Term(self.primary_term()?)),
        }
    }

    /// `(selector)` grouping what is no term (`(c - b) / a`); `None`, with
    /// the cursor and markers as they were, for a cast or a tuple, which
    /// stay terms.
    fn selector_group(&mut self) -> Option<SelectorExpr> {
        let (pos, markers) = (self.pos, self.binds.len());
        self.advance();
        let group = match self.at_cast_type() {
            true => None,
            false => self.selector_expr().ok().filter(|e| !matches!(e, SelectorExpr::Term(_))),
        };
        if group.is_some() && self.eat_sym(Sym::RParen) {
            return group;
        }
        self.pos = pos;
        self.binds.truncate(markers);
        None
    }

    /// `name(...)`, with COUNT(*), WRITETIME, TTL and CAST handled apart
    /// because their arguments are not ordinary selectors.
    fn selector_call(&mut self) -> PResult<SelectorExpr> {
        let count_all = self.is_kw("count")
            && self.is_sym_at(3, Sym::RParen)
            && (self.is_sym_at(2, Sym::Star) || self.peek_nth(2).kind == TokenKind::Integer("1".into()));
        let special = if count_all {
            "count(*)".to_string()
        } else if self.is_sym_at(1, Sym::Dot) {
            String::new()
        } else {
            self.word_at(0).unwrap_or("").to_string()
        };
        match special.as_str() {
            "count(*)" => {
                self.advance_n(4);
                Ok(SelectorExpr::CountStar)
            }
            "writetime" | "ttl" => {
                self.advance_n(2);
                let column = self.ident("column name")?;
                let ttl = special == "ttl";
                // One field or subscript of the column (ScyllaDB and
                // Cassandra 5 take no deeper path).
                let part = if self.eat_sym(Sym::Dot) {
                    let field = self.ident("field name")?;
                    Some(SelectorExpr::Field { expr: Box::new(SelectorExpr::Column(column.clone())), field })
                } else if self.eat_sym(Sym::LBracket) {
                    Some(self.subscript(SelectorExpr::Column(column.clone()))?)
                } else {
                    None
                };
                self.expect_sym(Sym::RParen)?;
                Ok(match part {
                    Some(part) => SelectorExpr::WriteTimeOfPart { ttl, part: Box::new(part) },
                    None if ttl => SelectorExpr::Ttl(column),
                    None => SelectorExpr::WriteTime(column),
                })
            }
            "cast" => {
                self.advance_n(2);
                let expr = Box::new(self.selector_expr()?);
                self.expect_kw("as")?;
                let ty = self.cql_type()?;
                self.expect_sym(Sym::RParen)?;
                Ok(SelectorExpr::Cast { expr, ty })
            }
            _ => {
                let name = self.function_name()?;
                self.expect_sym(Sym::LParen)?;
                let args = if self.is_sym(Sym::RParen) { Vec::new() } else { self.comma_list(Self::selector_expr)? };
                self.expect_sym(Sym::RParen)?;
                Ok(SelectorExpr::FunctionCall { name, args })
            }
        }
    }

    fn advance_n(&mut self, n: usize) {
        for _ in 0..n {
            self.advance();
        }
    }
}
