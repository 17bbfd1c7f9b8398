//! CQL parser: a recursive-descent parser over the lexer's tokens that builds
//! the [`ast`](crate::ast) tree. This file owns the entry point, the token
//! cursor, error construction and statement dispatch; the grammar itself is
//! split by family: `ddl` (keyspaces, tables, options), `dml` (INSERT,
//! UPDATE, DELETE, BATCH, USING, IF), `select`, `relation` (WHERE),
//! `term` (values and types), `role`, `permission` and `service_level`.
//!
//! Every input either parses or yields a [`ParseError`]; nothing panics.
//! Nesting (collections, tuples, function calls, casts, types) is limited to
//! [`MAX_DEPTH`] so hostile input cannot exhaust the stack.

mod ddl;
mod describe;
mod dml;
mod function;
mod index;
mod permission;
mod relation;
mod role;
mod select;
mod service_level;
mod term;
#[cfg(test)]
mod tests;
mod view;

use crate::ast::{BindMarker, Parsed, Statement};
pub(crate) use crate::lexer::is_reserved;
use crate::lexer::{tokenize, Sym, Token, TokenKind};

pub use crate::lexer::ParseError;

/// Deepest nesting of terms, types or selectors accepted.
pub const MAX_DEPTH: usize = 64;

type PResult<T> = Result<T, ParseError>;

/// Parses one statement, optionally followed by `;`.
pub fn parse_statement(text: &str) -> Result<Parsed, ParseError> {
    let tokens = tokenize(text)?;
    let mut parser = Parser::new(text, tokens);
    let statement = parser.statement()?;
    parser.eat_sym(Sym::Semicolon);
    if !matches!(parser.peek().kind, TokenKind::Eof) {
        return Err(parser.mismatched("<EOF>"));
    }
    Ok(Parsed { statement, bind_markers: parser.binds })
}

/// Parses one term alone (an aggregate's stored `INITCOND`).
pub fn parse_term(text: &str) -> Result<crate::ast::Term, ParseError> {
    let tokens = tokenize(text)?;
    let mut parser = Parser::new(text, tokens);
    let term = parser.term()?;
    if !matches!(parser.peek().kind, TokenKind::Eof) {
        return Err(parser.mismatched("<EOF>"));
    }
    Ok(term)
}

/// Cursor over the token list plus the bind markers seen so far.
struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Token>,
    /// Returned once the cursor runs past the end, so peeking never fails.
    eof: Token,
    pos: usize,
    binds: Vec<BindMarker>,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, tokens: Vec<Token>) -> Self {
        let eof =
            tokens.last().cloned().unwrap_or(Token { kind: TokenKind::Eof, line: 1, column: 1, start: 0, end: 0 });
        Parser { src, tokens, eof, pos: 0, binds: Vec::new(), depth: 0 }
    }

    fn peek(&self) -> &Token {
        self.peek_nth(0)
    }

    fn peek_nth(&self, n: usize) -> &Token {
        self.tokens.get(self.pos.saturating_add(n)).unwrap_or(&self.eof)
    }

    fn advance(&mut self) -> Token {
        let token = self.peek().clone();
        if self.pos < self.tokens.len() {
            self.pos += 1;
        }
        token
    }

    fn is_sym_at(&self, n: usize, sym: Sym) -> bool {
        self.peek_nth(n).kind == TokenKind::Sym(sym)
    }

    fn is_sym(&self, sym: Sym) -> bool {
        self.is_sym_at(0, sym)
    }

    fn eat_sym(&mut self, sym: Sym) -> bool {
        let found = self.is_sym(sym);
        if found {
            self.advance();
        }
        found
    }

    fn expect_sym(&mut self, sym: Sym) -> PResult<()> {
        if self.eat_sym(sym) {
            Ok(())
        } else {
            Err(self.mismatched(&format!("'{}'", sym.text())))
        }
    }

    /// The unquoted word at `n` tokens ahead, lowercased.
    fn word_at(&self, n: usize) -> Option<&str> {
        match &self.peek_nth(n).kind {
            TokenKind::Ident(word) => Some(word),
            _ => None,
        }
    }

    fn is_kw_at(&self, n: usize, keyword: &str) -> bool {
        self.word_at(n) == Some(keyword)
    }

    fn is_kw(&self, keyword: &str) -> bool {
        self.is_kw_at(0, keyword)
    }

    fn eat_kw(&mut self, keyword: &str) -> bool {
        let found = self.is_kw(keyword);
        if found {
            self.advance();
        }
        found
    }

    fn expect_kw(&mut self, keyword: &str) -> PResult<()> {
        if self.eat_kw(keyword) {
            Ok(())
        } else {
            Err(self.mismatched(&keyword.to_ascii_uppercase()))
        }
    }

    /// `IF NOT EXISTS`, if present.
    fn if_not_exists(&mut self) -> PResult<bool> {
        if !self.eat_kw("if") {
            return Ok(false);
        }
        self.expect_kw("not")?;
        self.expect_kw("exists")?;
        Ok(true)
    }

    /// `IF EXISTS`, if present.
    fn if_exists(&mut self) -> PResult<bool> {
        if !self.eat_kw("if") {
            return Ok(false);
        }
        self.expect_kw("exists")?;
        Ok(true)
    }

    /// A name: an unquoted non-reserved word or a quoted identifier.
    /// `what` names the thing expected, for the error message.
    fn ident(&mut self, what: &str) -> PResult<String> {
        let token = self.peek();
        match &token.kind {
            TokenKind::Ident(word) if !is_reserved(word) => {
                let word = word.clone();
                self.advance();
                Ok(word)
            }
            TokenKind::QuotedIdent(name) => {
                let name = name.clone();
                self.advance();
                Ok(name)
            }
            TokenKind::Ident(word) => {
                let hint = format!(
                    "{what} ({} is a reserved keyword; write \"{word}\" to use it as a name)",
                    word.to_ascii_uppercase()
                );
                Err(self.mismatched(&hint))
            }
            _ => Err(self.mismatched(what)),
        }
    }

    /// `name` or `keyspace.name`.
    fn qualified_name(&mut self, what: &str) -> PResult<(Option<String>, String)> {
        let first = self.ident(what)?;
        if !self.eat_sym(Sym::Dot) {
            return Ok((None, first));
        }
        let second = self.ident(what)?;
        Ok((Some(first), second))
    }

    /// `item (',' item)*`.
    fn comma_list<T>(&mut self, mut item: impl FnMut(&mut Self) -> PResult<T>) -> PResult<Vec<T>> {
        let mut items = vec![item(self)?];
        while self.eat_sym(Sym::Comma) {
            items.push(item(self)?);
        }
        Ok(items)
    }

    /// `'(' ident (',' ident)* ')'`.
    fn paren_idents(&mut self, what: &str) -> PResult<Vec<String>> {
        self.expect_sym(Sym::LParen)?;
        let names = self.comma_list(|p| p.ident(what))?;
        self.expect_sym(Sym::RParen)?;
        Ok(names)
    }

    /// Runs `f` one nesting level deeper, refusing past [`MAX_DEPTH`].
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        if self.depth >= MAX_DEPTH {
            let message = format!("expression nested too deeply (more than {MAX_DEPTH} levels)");
            return Err(self.error_at_token(self.peek(), message));
        }
        self.depth += 1;
        let result = f(self);
        self.depth -= 1;
        result
    }

    /// `first (op operand)*`, grouped from the left, for the operators
    /// `op_of` maps symbols to and while `continues` allows; `join` builds
    /// the node. Each operator counts as a nesting level, as the tree it
    /// builds is as deep as the chain is long.
    fn left_associative<T, Op>(
        &mut self,
        op_of: fn(Sym) -> Option<Op>,
        operand: fn(&mut Self) -> PResult<T>,
        continues: fn(&Self, &T) -> bool,
        join: fn(Op, T, T) -> T,
    ) -> PResult<T> {
        let entered = self.depth;
        let chain = (|| {
            let mut expr = operand(self)?;
            loop {
                let TokenKind::Sym(sym) = self.peek().kind else { return Ok(expr) };
                let Some(op) = op_of(sym) else { return Ok(expr) };
                if !continues(self, &expr) {
                    return Ok(expr);
                }
                if self.depth >= MAX_DEPTH {
                    let message = format!("expression nested too deeply (more than {MAX_DEPTH} levels)");
                    return Err(self.error_at_token(self.peek(), message));
                }
                self.depth += 1;
                self.advance();
                let right = operand(self)?;
                expr = join(op, expr, right);
            }
        })();
        self.depth = entered;
        chain
    }

    fn error_at_token(&self, token: &Token, message: String) -> ParseError {
        ParseError { line: token.line, column: token.column, message }
    }

    /// How a token is quoted in messages: its source text, shortened.
    fn token_text(&self, token: &Token) -> String {
        if token.kind == TokenKind::Eof {
            return "<EOF>".to_string();
        }
        let text = self.src.get(token.start..token.end).unwrap_or("");
        if text.chars().count() > 40 {
            let short: String = text.chars().take(37).collect();
            format!("{short}...")
        } else {
            text.to_string()
        }
    }

    /// "mismatched input 'x' expecting ...", at the current token.
    fn mismatched(&self, expecting: &str) -> ParseError {
        let token = self.peek();
        let text = self.token_text(token);
        self.error_at_token(token, format!("mismatched input '{text}' expecting {expecting}"))
    }

    /// "no viable alternative at input 'x'", at the current token.
    fn no_viable(&self) -> ParseError {
        let token = self.peek();
        let text = self.token_text(token);
        self.error_at_token(token, format!("no viable alternative at input '{text}'"))
    }

    fn unsupported(&self, at: &Token, what: &str) -> ParseError {
        self.error_at_token(at, format!("{what} statements are not supported"))
    }

    fn statement(&mut self) -> PResult<Statement> {
        if self.at_service_level_statement() {
            return self.service_level_statement();
        }
        if self.at_role_statement() {
            return self.role_statement();
        }
        if self.at_permission_statement() {
            return self.permission_statement();
        }
        let word = self.word_at(0).unwrap_or("").to_string();
        match word.as_str() {
            "select" => self.select(),
            "insert" => self.insert(),
            "update" => self.update(),
            "delete" => self.delete(),
            "begin" => self.batch(),
            "use" => {
                self.advance();
                if self.is_sym(Sym::Question) {
                    let message = "Bind variables cannot be used for keyspace names".to_string();
                    return Err(self.error_at_token(self.peek(), message));
                }
                Ok(Statement::Use(self.ident("keyspace name")?))
            }
            "create" => self.create(),
            "alter" => self.alter(),
            "drop" => self.drop(),
            "truncate" => self.truncate(),
            "describe" | "desc" => self.describe(),
            "grant" | "revoke" | "list" => Err(self.unsupported(self.peek(), &word.to_ascii_uppercase())),
            _ => Err(self.no_viable()),
        }
    }
}
