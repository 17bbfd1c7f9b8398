//! CREATE [OR REPLACE] FUNCTION and AGGREGATE (ScyllaDB's grammar).

use super::{PResult, Parser};
use crate::ast::{CreateAggregate, CreateFunction, Statement};
use crate::lexer::{Sym, TokenKind};

impl Parser<'_> {
    /// At CREATE: whether FUNCTION or AGGREGATE follows (maybe after OR REPLACE).
    pub(super) fn creates_function(&self) -> bool {
        let at = if self.is_kw_at(1, "or") { 3 } else { 1 };
        self.is_kw_at(at, "function") || self.is_kw_at(at, "aggregate")
    }

    /// `CREATE [OR REPLACE] FUNCTION|AGGREGATE ...`.
    pub(super) fn create_function(&mut self) -> PResult<Statement> {
        self.advance();
        let or_replace = self.eat_kw("or");
        if or_replace {
            self.expect_kw("replace")?;
        }
        let aggregate = self.eat_kw("aggregate");
        if !aggregate {
            self.expect_kw("function")?;
        }
        let if_not_exists = self.if_not_exists()?;
        let (keyspace, name) = self.qualified_name("function name")?;
        self.expect_sym(Sym::LParen)?;
        if aggregate {
            let arg_types = self.paren_list(|p| p.cql_type())?;
            return self.aggregate_body(CreateAggregate {
                keyspace,
                name,
                or_replace,
                if_not_exists,
                arg_types,
                state_func: String::new(),
                state_type: shoal_schema::CqlType::Int,
                reduce_func: None,
                final_func: None,
                initcond: None,
            });
        }
        let args = self.paren_list(|p| Ok((p.ident("argument name")?, p.cql_type()?)))?;
        let called_on_null_input = if self.eat_kw("called") {
            true
        } else {
            self.expect_kw("returns")?;
            self.expect_kw("null")?;
            false
        };
        self.expect_kw("on")?;
        self.expect_kw("null")?;
        self.expect_kw("input")?;
        self.expect_kw("returns")?;
        let return_type = self.cql_type()?;
        self.expect_kw("language")?;
        let language = self.ident("language")?;
        self.expect_kw("as")?;
        let TokenKind::Str(body) = self.peek().kind.clone() else { return Err(self.mismatched("a string")) };
        self.advance();
        Ok(Statement::CreateFunction(CreateFunction {
            keyspace,
            name,
            or_replace,
            if_not_exists,
            args,
            called_on_null_input,
            return_type,
            language,
            body,
        }))
    }

    /// After `(`: `[item (, item)*] )`.
    fn paren_list<T>(&mut self, item: impl FnMut(&mut Self) -> PResult<T>) -> PResult<Vec<T>> {
        if self.eat_sym(Sym::RParen) {
            return Ok(Vec::new());
        }
        let items = self.comma_list(item)?;
        self.expect_sym(Sym::RParen)?;
        Ok(items)
    }

    fn aggregate_body(&mut self, mut s: CreateAggregate) -> PResult<Statement> {
        self.expect_kw("sfunc")?;
        s.state_func = self.ident("state function name")?;
        self.expect_kw("stype")?;
        s.state_type = self.cql_type()?;
        if self.eat_kw("reducefunc") {
            s.reduce_func = Some(self.ident("reduce function name")?);
        }
        if self.eat_kw("finalfunc") {
            s.final_func = Some(self.ident("final function name")?);
        }
        if self.eat_kw("initcond") {
            s.initcond = Some(self.term()?);
        }
        Ok(Statement::CreateAggregate(s))
    }
}
