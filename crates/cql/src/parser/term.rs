//! Terms (literals, bind markers, collection and tuple literals, function
//! calls, casts, arithmetic) and the CQL type grammar, which casts and DDL
//! share.

use shoal_schema::arithmetic::NumericOp;
use shoal_schema::{CqlType, UserType};

use super::{PResult, Parser};
use crate::ast::{BindMarker, Literal, Term};
use crate::lexer::{Sym, TokenKind};

/// Words that are constants wherever a term is expected.
fn keyword_literal(word: &str) -> Option<Literal> {
    Some(match word {
        "true" => Literal::Boolean(true),
        "false" => Literal::Boolean(false),
        "null" => Literal::Null,
        "nan" => Literal::Float("NaN".into()),
        "infinity" => Literal::Float("Infinity".into()),
        _ => return None,
    })
}

fn token_literal(kind: &TokenKind) -> Option<Literal> {
    Some(match kind {
        TokenKind::Str(s) => Literal::String(s.clone()),
        TokenKind::Integer(s) => Literal::Integer(s.clone()),
        TokenKind::Float(s) => Literal::Float(s.clone()),
        TokenKind::Uuid(s) => Literal::Uuid(s.clone()),
        TokenKind::Blob(b) => Literal::Blob(b.clone()),
        TokenKind::Duration(s) => Literal::Duration(s.clone()),
        TokenKind::Ident(word) => return keyword_literal(word),
        _ => return None,
    })
}

fn operation(op: NumericOp, left: Term, right: Term) -> Term {
    Term::Operation { op, left: Box::new(grouped(left)), right: Box::new(grouped(right)) }
}

/// An operand in parentheses, `(2)`: a group, not the 1-tuple it would be
/// elsewhere (no operator takes a tuple).
fn grouped(term: Term) -> Term {
    match term {
        Term::Tuple(mut items) if items.len() == 1 => items.remove(0),
        term => term,
    }
}

impl Parser<'_> {
    /// A term, with arithmetic (`1 + 2 * ?`): products before sums, each
    /// grouped from the left.
    pub(super) fn term(&mut self) -> PResult<Term> {
        self.nested(|p| p.term_sum())
    }

    /// A term without operators: a selector's operand, where the
    /// selector's own grammar reads `+` and `*`.
    pub(super) fn primary_term(&mut self) -> PResult<Term> {
        self.nested(|p| p.term_inner())
    }

    fn term_sum(&mut self) -> PResult<Term> {
        let additive = |sym| match sym {
            Sym::Plus => Some(NumericOp::Add),
            Sym::Minus => Some(NumericOp::Sub),
            _ => None,
        };
        self.left_associative(additive, Self::term_product, Self::operation_follows, operation)
    }

    fn term_product(&mut self) -> PResult<Term> {
        let multiplicative = |sym| match sym {
            Sym::Star => Some(NumericOp::Mul),
            Sym::Slash => Some(NumericOp::Div),
            Sym::Percent => Some(NumericOp::Mod),
            _ => None,
        };
        self.left_associative(multiplicative, Self::term_signed, Self::operation_follows, operation)
    }

    /// Whether the operator at the cursor joins `left` to another term.
    /// Not after a collection literal nor before a bare column name: there
    /// `+` and `-` are an UPDATE's (`l = [1] + l`, `c = 5 - c`).
    fn operation_follows(&self, left: &Term) -> bool {
        let collection = matches!(
            left,
            Term::List(_) | Term::Set(_) | Term::Map(_) | Term::EmptyBraces | Term::UserType(_) | Term::Column(_)
        );
        let called = self.is_sym_at(2, Sym::LParen) || self.is_sym_at(2, Sym::Dot);
        let column_next = match &self.peek_nth(1).kind {
            TokenKind::QuotedIdent(_) => !called,
            TokenKind::Ident(word) => keyword_literal(word).is_none() && !called,
            _ => false,
        };
        !collection && !column_next
    }

    /// `-x` of anything but a number literal (which is read as a negative
    /// literal) is a negation.
    fn term_signed(&mut self) -> PResult<Term> {
        let number = |kind: &TokenKind| match kind {
            TokenKind::Integer(_) | TokenKind::Float(_) | TokenKind::Duration(_) => true,
            TokenKind::Ident(word) => word == "infinity" || word == "nan",
            _ => false,
        };
        if !self.is_sym(Sym::Minus) || number(&self.peek_nth(1).kind) {
            return self.term_inner();
        }
        self.advance();
        let operand = self.nested(|p| p.term_signed())?;
        Ok(Term::Negation(Box::new(grouped(operand))))
    }

    fn term_inner(&mut self) -> PResult<Term> {
        match &self.peek().kind {
            TokenKind::Sym(Sym::Minus) => self.negative_literal().map(Term::Literal),
            TokenKind::Sym(Sym::Question) | TokenKind::Sym(Sym::Colon) => self.bind_marker(),
            TokenKind::Sym(Sym::LBracket) => self.list_literal(),
            TokenKind::Sym(Sym::LBrace) => self.braces_literal(),
            TokenKind::Sym(Sym::LParen) => self.paren_term(),
            TokenKind::Ident(word) if word == "cast" && self.is_sym_at(1, Sym::LParen) => self.cast_as(),
            TokenKind::Ident(_) | TokenKind::QuotedIdent(_) if self.at_function_call() => self.function_call(),
            // A name that is no constant nor reserved word: a column,
            // refused when evaluated (InvalidRequest, not a syntax error).
            TokenKind::QuotedIdent(name) => {
                let term = Term::Column(name.clone());
                self.advance();
                Ok(term)
            }
            TokenKind::Ident(word) if keyword_literal(word).is_none() && !super::is_reserved(word) => {
                let term = Term::Column(word.clone());
                self.advance();
                Ok(term)
            }
            kind => match token_literal(kind) {
                Some(literal) => {
                    self.advance();
                    Ok(Term::Literal(literal))
                }
                None => Err(self.mismatched("a value (literal, bind marker or function call)")),
            },
        }
    }

    /// `- number`, folded into one literal so `-5` stays the integer `-5`.
    pub(super) fn negative_literal(&mut self) -> PResult<Literal> {
        self.advance();
        let literal = match &self.peek().kind {
            TokenKind::Integer(s) => Literal::Integer(format!("-{s}")),
            TokenKind::Float(s) => Literal::Float(format!("-{s}")),
            TokenKind::Duration(s) => Literal::Duration(format!("-{s}")),
            TokenKind::Ident(w) if w == "infinity" => Literal::Float("-Infinity".into()),
            TokenKind::Ident(w) if w == "nan" => Literal::Float("NaN".into()),
            _ => return Err(self.mismatched("a number after '-'")),
        };
        self.advance();
        Ok(literal)
    }

    /// `?` or `:name`, registered in text order.
    pub(super) fn bind_marker(&mut self) -> PResult<Term> {
        let name = if self.eat_sym(Sym::Question) {
            None
        } else {
            self.expect_sym(Sym::Colon)?;
            Some(self.any_name("bind marker name")?)
        };
        // A name given twice (`p = :x AND c = :x`) is one variable, as in
        // ScyllaDB, unless the node is set to count two, as Cassandra does.
        let same = name.as_ref().filter(|_| crate::live_config::same_name_same_variable());
        if let Some(index) = same.and_then(|n| self.binds.iter().position(|b| b.name.as_ref() == Some(n))) {
            return Ok(Term::Bind(index));
        }
        self.binds.push(BindMarker { name });
        Ok(Term::Bind(self.binds.len() - 1))
    }

    /// A name where keywords cannot be confused with anything (function and
    /// bind marker names): any unquoted word or a quoted identifier.
    fn any_name(&mut self, what: &str) -> PResult<String> {
        let name = match &self.peek().kind {
            TokenKind::Ident(word) => word.clone(),
            TokenKind::QuotedIdent(name) => name.clone(),
            _ => return Err(self.mismatched(what)),
        };
        self.advance();
        Ok(name)
    }

    /// Whether the cursor is at `name (` or `ks.name (`.
    pub(super) fn at_function_call(&self) -> bool {
        let is_name = |n| matches!(self.peek_nth(n).kind, TokenKind::Ident(_) | TokenKind::QuotedIdent(_));
        is_name(0)
            && (self.is_sym_at(1, Sym::LParen)
                || (self.is_sym_at(1, Sym::Dot) && is_name(2) && self.is_sym_at(3, Sym::LParen)))
    }

    /// `name` or `ks.name` of a function, joined with `.`.
    pub(super) fn function_name(&mut self) -> PResult<String> {
        let mut name = self.any_name("function name")?;
        if self.eat_sym(Sym::Dot) {
            name = format!("{name}.{}", self.any_name("function name")?);
        }
        Ok(name)
    }

    fn function_call(&mut self) -> PResult<Term> {
        let name = self.function_name()?;
        self.expect_sym(Sym::LParen)?;
        // `count(*)` where a value belongs parses, as in ScyllaDB's grammar,
        // and is refused as a call no function answers.
        let star = self.eat_sym(Sym::Star);
        let args = if star || self.is_sym(Sym::RParen) { Vec::new() } else { self.comma_list(Self::term)? };
        self.expect_sym(Sym::RParen)?;
        Ok(Term::FunctionCall { name, args })
    }

    /// `CAST(term AS type)` where a value is expected (Cassandra's
    /// `castAs` functions).
    fn cast_as(&mut self) -> PResult<Term> {
        self.advance();
        self.advance();
        let term = Box::new(self.nested(|p| p.term())?);
        self.expect_kw("as")?;
        let ty = self.cql_type()?;
        self.expect_sym(Sym::RParen)?;
        Ok(Term::CastAs { term, ty })
    }

    /// Terms up to `close`, allowing none.
    fn terms_until(&mut self, close: Sym) -> PResult<Vec<Term>> {
        if self.eat_sym(close) {
            return Ok(Vec::new());
        }
        let items = self.comma_list(Self::term)?;
        self.expect_sym(close)?;
        Ok(items)
    }

    fn list_literal(&mut self) -> PResult<Term> {
        self.advance();
        Ok(Term::List(self.terms_until(Sym::RBracket)?))
    }

    /// `{}`, `{a, b}` or `{k: v, ...}`; the first element decides set or map.
    fn braces_literal(&mut self) -> PResult<Term> {
        self.advance();
        if self.eat_sym(Sym::RBrace) {
            return Ok(Term::EmptyBraces);
        }
        if self.at_field_name() {
            return self.user_type_literal();
        }
        let first = self.term()?;
        if !self.eat_sym(Sym::Colon) {
            let mut items = vec![first];
            while self.eat_sym(Sym::Comma) {
                items.push(self.term()?);
            }
            self.expect_sym(Sym::RBrace)?;
            return Ok(Term::Set(items));
        }
        let mut entries = vec![(first, self.term()?)];
        while self.eat_sym(Sym::Comma) {
            let key = self.term()?;
            self.expect_sym(Sym::Colon)?;
            entries.push((key, self.term()?));
        }
        self.expect_sym(Sym::RBrace)?;
        Ok(Term::Map(entries))
    }

    /// A name followed by `:` where a map key would be: no term is a bare
    /// name, so this can only start a user type literal.
    fn at_field_name(&self) -> bool {
        let name = match &self.peek().kind {
            TokenKind::Ident(word) => keyword_literal(word).is_none(),
            TokenKind::QuotedIdent(_) => true,
            _ => false,
        };
        name && self.is_sym_at(1, Sym::Colon)
    }

    /// `{field: term, ...}` after the `{`.
    fn user_type_literal(&mut self) -> PResult<Term> {
        let fields = self.comma_list(|p| {
            let name = p.any_name("field name")?;
            p.expect_sym(Sym::Colon)?;
            Ok((name, p.term()?))
        })?;
        self.expect_sym(Sym::RBrace)?;
        Ok(Term::UserType(fields))
    }

    /// `(type) term` or a tuple `(a, b)`.
    fn paren_term(&mut self) -> PResult<Term> {
        self.advance();
        if self.at_cast_type() {
            let ty = self.cql_type()?;
            self.expect_sym(Sym::RParen)?;
            // A cast binds tighter than any operator: `(int) ? + 1`.
            let term = Box::new(self.primary_term()?);
            return Ok(Term::Cast { ty, term });
        }
        let mut items = self.comma_list(Self::term)?;
        self.expect_sym(Sym::RParen)?;
        // `(1 + 2)` groups an operation; `(a)` stays a 1-tuple.
        if let [Term::Operation { .. } | Term::Negation(_)] = items.as_slice() {
            return Ok(items.remove(0));
        }
        Ok(Term::Tuple(items))
    }

    /// After `(`: a lone name (not a constant word) before `)`, or a
    /// parameterized type. A lone unknown name is taken as a cast too, so it
    /// is reported as an unknown type rather than a bad value.
    pub(super) fn at_cast_type(&self) -> bool {
        let Some(word) = self.word_at(0) else {
            return false;
        };
        if self.is_sym_at(1, Sym::RParen) {
            return keyword_literal(word).is_none();
        }
        matches!(word, "frozen" | "list" | "set" | "map" | "tuple") && self.is_sym_at(1, Sym::Lt)
    }

    /// A CQL type: native names, `list<t>`, `set<t>`, `map<k, v>`,
    /// `tuple<t, ...>`, `vector<t, n>`, `frozen<t>`, and user types by
    /// (qualified) name.
    pub(super) fn cql_type(&mut self) -> PResult<CqlType> {
        self.nested(|p| p.cql_type_inner())
    }

    fn cql_type_inner(&mut self) -> PResult<CqlType> {
        let token = self.peek().clone();
        let name = match &token.kind {
            TokenKind::Ident(word) => word.clone(),
            TokenKind::QuotedIdent(name) => {
                let name = name.clone();
                self.advance();
                return self.user_type(name);
            }
            TokenKind::Str(_) => {
                let message = "custom types are not supported".to_string();
                return Err(self.error_at_token(&token, message));
            }
            _ => return Err(self.mismatched("a type")),
        };
        self.advance();
        if let Some(native) = CqlType::native(&name) {
            return Ok(native);
        }
        match name.as_str() {
            // `frozen<frozen<T>>` is `frozen<T>`, as in Cassandra and ScyllaDB.
            "frozen" => match self.single_type_param()? {
                frozen @ CqlType::Frozen(_) => Ok(frozen),
                inner => Ok(CqlType::Frozen(Box::new(inner))),
            },
            "list" => Ok(CqlType::List(Box::new(self.single_type_param()?))),
            "set" => Ok(CqlType::Set(Box::new(self.single_type_param()?))),
            "map" => {
                self.expect_sym(Sym::Lt)?;
                let key = self.cql_type()?;
                self.expect_sym(Sym::Comma)?;
                let value = self.cql_type()?;
                self.expect_sym(Sym::Gt)?;
                Ok(CqlType::Map(Box::new(key), Box::new(value)))
            }
            "tuple" => {
                self.expect_sym(Sym::Lt)?;
                let fields = self.comma_list(Self::cql_type)?;
                self.expect_sym(Sym::Gt)?;
                Ok(CqlType::Tuple(fields))
            }
            "vector" if self.is_sym(Sym::Lt) => {
                self.expect_sym(Sym::Lt)?;
                let elem = self.cql_type()?;
                self.expect_sym(Sym::Comma)?;
                let dimension = self.vector_dimension()?;
                self.expect_sym(Sym::Gt)?;
                Ok(CqlType::Vector(Box::new(elem), dimension))
            }
            _ => self.user_type(name),
        }
    }

    /// `name` or `ks.name` of a user type, after its first word: a reference
    /// that DDL and statements resolve against the schema.
    fn user_type(&mut self, first: String) -> PResult<CqlType> {
        if self.eat_sym(Sym::Dot) {
            return Ok(UserType::reference(Some(first), self.ident("type name")?));
        }
        Ok(UserType::reference(None, first))
    }

    /// A vector's dimension: an integer, perhaps negative. Out-of-range
    /// values are kept clamped (negative as 0) for DDL to refuse as
    /// Invalid, as Cassandra does; only a non-integer is a syntax error.
    fn vector_dimension(&mut self) -> PResult<u32> {
        let negative = self.eat_sym(Sym::Minus);
        let TokenKind::Integer(digits) = &self.peek().kind else {
            return Err(self.mismatched("a vector dimension (an integer)"));
        };
        let dimension = if negative { 0 } else { digits.parse().unwrap_or(u32::MAX) };
        self.advance();
        Ok(dimension)
    }

    /// `<t>`.
    fn single_type_param(&mut self) -> PResult<CqlType> {
        self.expect_sym(Sym::Lt)?;
        let ty = self.cql_type()?;
        self.expect_sym(Sym::Gt)?;
        Ok(ty)
    }
}
