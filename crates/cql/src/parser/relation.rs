//! WHERE clauses: single-column, IN, multi-column (tuple) and token
//! relations, and the comparison operators they share with IF conditions.

use super::{PResult, Parser};
use crate::ast::{InValues, Operator, Relation, Term};
use crate::lexer::{Sym, TokenKind};

impl Parser<'_> {
    /// `relation (AND relation)*`, after `WHERE`.
    pub(super) fn where_clause(&mut self) -> PResult<Vec<Relation>> {
        let mut relations = vec![self.relation()?];
        while self.eat_kw("and") {
            relations.push(self.relation()?);
        }
        Ok(relations)
    }

    fn relation(&mut self) -> PResult<Relation> {
        if self.is_sym(Sym::LParen) {
            return self.multi_column_relation();
        }
        if self.is_kw("token") && self.is_sym_at(1, Sym::LParen) {
            self.advance();
            let columns = self.paren_idents("column name")?;
            let op = self.comparison_op()?;
            let value = self.term()?;
            return Ok(Relation::Token { columns, op, value });
        }
        let column = self.ident("column name")?;
        if self.eat_sym(Sym::LBracket) {
            let key = self.term()?;
            self.expect_sym(Sym::RBracket)?;
            let op = self.comparison_op()?;
            let value = self.term()?;
            return Ok(Relation::Element { column, key, op, value });
        }
        if self.eat_kw("in") {
            let values = self.in_values()?;
            return Ok(Relation::In { column, values });
        }
        if self.is_kw("not") && self.is_kw_at(1, "in") {
            self.advance();
            self.advance();
            let values = self.in_values()?;
            return Ok(Relation::NotIn { column, values });
        }
        if self.eat_kw("is") {
            self.expect_kw("not")?;
            self.expect_kw("null")?;
            return Ok(Relation::IsNotNull { column });
        }
        let op = self.operator()?;
        let value = self.term()?;
        Ok(Relation::Simple { column, op, value })
    }

    fn multi_column_relation(&mut self) -> PResult<Relation> {
        let columns = self.paren_idents("column name")?;
        if self.eat_kw("in") {
            let values = self.in_values()?;
            return Ok(Relation::MultiColumnIn { columns, values });
        }
        let op = self.comparison_op()?;
        let value = self.term()?;
        Ok(Relation::MultiColumn { columns, op, value })
    }

    /// After `IN`: `?`, `:name`, or a parenthesized, possibly empty list.
    pub(super) fn in_values(&mut self) -> PResult<InValues> {
        if self.is_sym(Sym::Question) || self.is_sym(Sym::Colon) {
            return match self.bind_marker()? {
                Term::Bind(index) => Ok(InValues::Bind(index)),
                _ => Err(self.no_viable()),
            };
        }
        self.expect_sym(Sym::LParen)?;
        if self.eat_sym(Sym::RParen) {
            return Ok(InValues::Terms(Vec::new()));
        }
        let terms = self.comma_list(Self::term)?;
        self.expect_sym(Sym::RParen)?;
        Ok(InValues::Terms(terms))
    }

    /// `=`, `<`, `<=`, `>`, `>=`, `!=`.
    pub(super) fn comparison_op(&mut self) -> PResult<Operator> {
        let op = match self.peek().kind {
            TokenKind::Sym(Sym::Eq) => Operator::Eq,
            TokenKind::Sym(Sym::Lt) => Operator::Lt,
            TokenKind::Sym(Sym::Le) => Operator::Le,
            TokenKind::Sym(Sym::Gt) => Operator::Gt,
            TokenKind::Sym(Sym::Ge) => Operator::Ge,
            TokenKind::Sym(Sym::Ne) => Operator::Ne,
            _ => return Err(self.mismatched("a comparison operator (=, <, <=, >, >=, !=)")),
        };
        self.advance();
        Ok(op)
    }

    /// A comparison, `CONTAINS`, `CONTAINS KEY` or `LIKE` (not `IN`).
    pub(super) fn operator(&mut self) -> PResult<Operator> {
        if self.eat_kw("contains") {
            return Ok(if self.eat_kw("key") { Operator::ContainsKey } else { Operator::Contains });
        }
        if self.eat_kw("like") {
            return Ok(Operator::Like);
        }
        if !matches!(self.peek().kind, TokenKind::Sym(_)) {
            return Err(self.mismatched("an operator (=, <, <=, >, >=, !=, IN, CONTAINS, LIKE)"));
        }
        self.comparison_op()
    }
}
