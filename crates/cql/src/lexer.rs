//! CQL lexer: turns statement text into tokens carrying 1-based line and
//! column (in chars) positions. Also owns [`ParseError`], which both the lexer
//! and the parser report, so the two share one error type and one format.
//!
//! Keywords are not tokens of their own: an unquoted word is an
//! [`TokenKind::Ident`] (lowercased) and the parser decides from context
//! whether it is a keyword, because CQL lets most keywords be names.
//! A `-` is always its own token; the parser folds `- 5` into the literal
//! `-5` where a term is expected, so `c = c -1` still reads as a subtraction.
//! Which words are reserved (never names unquoted) is here too, with
//! [`maybe_quote`], which writes a name as CQL must.

use thiserror::Error;

/// Keywords that cannot be used as unquoted names: Cassandra's reserved list
/// (`token` and `set` included, as in ScyllaDB: `ALTER TABLE t ADD token
/// text` is a syntax error there), less `desc`, `describe` and `execute`,
/// which ScyllaDB's grammar leaves unreserved.
const RESERVED: &[&str] = &[
    "add",
    "allow",
    "alter",
    "and",
    "apply",
    "asc",
    "authorize",
    "batch",
    "begin",
    "by",
    "columnfamily",
    "create",
    "delete",
    "drop",
    "entries",
    "from",
    "full",
    "grant",
    "if",
    "in",
    "index",
    "infinity",
    "insert",
    "into",
    "is",
    "keyspace",
    "limit",
    "materialized",
    "modify",
    "nan",
    "norecursive",
    "not",
    "null",
    "of",
    "on",
    "or",
    "order",
    "primary",
    "rename",
    "replace",
    "revoke",
    "schema",
    "select",
    "set",
    "table",
    "to",
    "token",
    "truncate",
    "unlogged",
    "update",
    "use",
    "using",
    "view",
    "where",
    "with",
];

/// A name as CQL must write it: bare when it is lower case letters, digits
/// and `_` starting with a letter and not a reserved word, else quoted.
pub fn maybe_quote(name: &str) -> String {
    let bare = name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !crate::parser::is_reserved(name);
    if bare {
        name.to_string()
    } else {
        format!("\"{}\"", name.replace('"', "\"\""))
    }
}

pub(crate) fn is_reserved(word: &str) -> bool {
    RESERVED.contains(&word)
}

/// A syntax error at a place in the statement text. Displays the way
/// Cassandra's `SyntaxException` messages do: `line 1:14 mismatched input ...`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("line {line}:{column} {message}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// 1-based column, counted in chars (not bytes).
    pub column: usize,
    pub message: String,
}

/// Punctuation and operators.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sym {
    LParen,
    RParen,
    LBrace,
    RBrace,
    LBracket,
    RBracket,
    Comma,
    Semicolon,
    Dot,
    /// `..`, in slice selections (`s[3..5]`).
    Range,
    Colon,
    Question,
    Star,
    /// `/` and `%`, in arithmetic selectors (`a / 2`).
    Slash,
    Percent,
    Plus,
    Minus,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    PlusEq,
    MinusEq,
}

impl Sym {
    /// The symbol as written, for error messages.
    pub fn text(self) -> &'static str {
        match self {
            Sym::LParen => "(",
            Sym::RParen => ")",
            Sym::LBrace => "{",
            Sym::RBrace => "}",
            Sym::LBracket => "[",
            Sym::RBracket => "]",
            Sym::Comma => ",",
            Sym::Semicolon => ";",
            Sym::Slash => "/",
            Sym::Percent => "%",
            Sym::Dot => ".",
            Sym::Range => "..",
            Sym::Colon => ":",
            Sym::Question => "?",
            Sym::Star => "*",
            Sym::Plus => "+",
            Sym::Minus => "-",
            Sym::Eq => "=",
            Sym::Ne => "!=",
            Sym::Lt => "<",
            Sym::Le => "<=",
            Sym::Gt => ">",
            Sym::Ge => ">=",
            Sym::PlusEq => "+=",
            Sym::MinusEq => "-=",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenKind {
    /// An unquoted word, lowercased. Keywords arrive as this too.
    Ident(String),
    /// A `"double-quoted"` name, case kept, `""` unescaped.
    QuotedIdent(String),
    /// A `'single-quoted'` or `$$dollar-quoted$$` string, unescaped.
    Str(String),
    /// Digits as written (arbitrary length), without sign.
    Integer(String),
    /// A decimal or exponent number as written, without sign.
    Float(String),
    /// An unquoted UUID literal as written.
    Uuid(String),
    /// A `0x...` literal, decoded.
    Blob(Vec<u8>),
    /// A duration literal as written, without sign (`1h30m`, `P1DT2H`).
    Duration(String),
    Sym(Sym),
    Eof,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    pub kind: TokenKind,
    pub line: usize,
    pub column: usize,
    /// Byte range in the source, for quoting the token in errors.
    pub start: usize,
    pub end: usize,
}

/// Splits `src` into tokens; the last token is always [`TokenKind::Eof`].
pub fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
    let mut lexer = Lexer { src, pos: 0, line: 1, column: 1 };
    let mut tokens = Vec::new();
    loop {
        let token = lexer.next_token()?;
        let done = token.kind == TokenKind::Eof;
        tokens.push(token);
        if done {
            return Ok(tokens);
        }
    }
}

/// Duration units, two-letter ones first so `ms` is not read as `m` + `s`.
const DURATION_UNITS: [&str; 12] = ["mo", "ms", "us", "µs", "μs", "ns", "y", "w", "d", "h", "m", "s"];

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    line: usize,
    column: usize,
}

impl Lexer<'_> {
    fn rest(&self) -> &str {
        &self.src[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn peek_nth(&self, n: usize) -> Option<char> {
        self.rest().chars().nth(n)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
            self.column = 1;
        } else {
            self.column += 1;
        }
        Some(c)
    }

    fn bump_n(&mut self, n: usize) {
        for _ in 0..n {
            self.bump();
        }
    }

    fn error(&self, line: usize, column: usize, message: String) -> ParseError {
        ParseError { line, column, message }
    }

    fn next_token(&mut self) -> Result<Token, ParseError> {
        self.skip_trivia()?;
        let (start, line, column) = (self.pos, self.line, self.column);
        let kind = match self.peek() {
            None => TokenKind::Eof,
            Some(c) => self.lex_at(c)?,
        };
        Ok(Token { kind, line, column, start, end: self.pos })
    }

    fn skip_trivia(&mut self) -> Result<(), ParseError> {
        loop {
            let rest = self.rest();
            if rest.starts_with("--") || rest.starts_with("//") {
                while self.peek().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else if let Some(body) = rest.strip_prefix("/*") {
                let (line, column) = (self.line, self.column);
                let Some(len) = body.find("*/") else {
                    return Err(self.error(line, column, "unterminated comment".into()));
                };
                let chars = rest[..len + 4].chars().count();
                self.bump_n(chars);
            } else if self.peek().is_some_and(char::is_whitespace) {
                self.bump();
            } else {
                return Ok(());
            }
        }
    }

    fn lex_at(&mut self, c: char) -> Result<TokenKind, ParseError> {
        if c.is_ascii_hexdigit() {
            if let Some(uuid) = self.uuid() {
                return Ok(uuid);
            }
        }
        match c {
            '0'..='9' => self.number(),
            // An identifier starts with a letter (CQL's grammar): `_x` is
            // a syntax error, `"_x"` a valid quoted name.
            c if c.is_ascii_alphabetic() => Ok(self.word()),
            '"' => self.quoted_ident(),
            '\'' => self.quoted('\'', "string literal").map(TokenKind::Str),
            '$' if self.peek_nth(1) == Some('$') => self.dollar_string(),
            '-' if self.peek_nth(1).is_some_and(|c| c.is_ascii_digit()) => match self.negative_duration()? {
                Some(duration) => Ok(duration),
                None => self.symbol(c),
            },
            _ => self.symbol(c),
        }
    }

    /// An unquoted UUID, `8-4-4-4-12` hex digits not followed by a name
    /// character; tried first because it may start like a number or a word.
    fn uuid(&mut self) -> Option<TokenKind> {
        let bytes = self.src.as_bytes().get(self.pos..self.pos + 36)?;
        let shape_ok = bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        });
        if !shape_ok {
            return None;
        }
        // All 36 bytes are ASCII, so pos + 36 is a char boundary.
        let next = self.src[self.pos + 36..].chars().next();
        if next.is_some_and(is_ident_char) {
            return None;
        }
        let text = self.src[self.pos..self.pos + 36].to_string();
        self.bump_n(36);
        Some(TokenKind::Uuid(text))
    }

    fn eat_digits(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
    }

    fn at_exponent(&self) -> bool {
        let digit = |c: Option<char>| c.is_some_and(|c| c.is_ascii_digit());
        matches!(self.peek(), Some('e' | 'E'))
            && (digit(self.peek_nth(1)) || (matches!(self.peek_nth(1), Some('+' | '-')) && digit(self.peek_nth(2))))
    }

    fn number(&mut self) -> Result<TokenKind, ParseError> {
        let (start, line, column) = (self.pos, self.line, self.column);
        if self.peek() == Some('0') && matches!(self.peek_nth(1), Some('x' | 'X')) {
            return self.blob();
        }
        self.eat_digits();
        let unit_next = self.peek().is_some_and(|c| c.is_alphabetic());
        if unit_next && !self.at_exponent() {
            return self.duration_units(start, line, column);
        }
        let mut is_float = false;
        // `3..5` is a range of integers, not the float `3.`.
        if self.peek() == Some('.') && self.peek_nth(1) != Some('.') {
            self.bump();
            self.eat_digits();
            is_float = true;
        }
        if self.at_exponent() {
            self.bump_n(2);
            self.eat_digits();
            is_float = true;
        }
        self.reject_tail(start, line, column)?;
        let text = self.src[start..self.pos].to_string();
        Ok(if is_float { TokenKind::Float(text) } else { TokenKind::Integer(text) })
    }

    /// `-<digits><unit>...` is one duration token, as in Cassandra's lexer
    /// (so `1y-2mo` is refused naming `-2mo`); anything else after the
    /// minus leaves the cursor where it was, for the minus sign.
    fn negative_duration(&mut self) -> Result<Option<TokenKind>, ParseError> {
        let (start, line, column) = (self.pos, self.line, self.column);
        self.bump();
        self.eat_digits();
        if self.peek().is_some_and(|c| c.is_alphabetic()) && !self.at_exponent() {
            return self.duration_units(start, line, column).map(Some);
        }
        (self.pos, self.line, self.column) = (start, line, column);
        Ok(None)
    }

    /// `<digits><unit>(<digits><unit>)*`, entered with the first digits eaten.
    fn duration_units(&mut self, start: usize, line: usize, column: usize) -> Result<TokenKind, ParseError> {
        loop {
            let rest = self.rest();
            let unit = DURATION_UNITS.iter().find(|u| rest.get(..u.len()).is_some_and(|p| p.eq_ignore_ascii_case(u)));
            let Some(unit) = unit else {
                return Err(self.bad_literal(start, line, column));
            };
            self.bump_n(unit.chars().count());
            if !self.peek().is_some_and(|c| c.is_ascii_digit()) {
                break;
            }
            self.eat_digits();
        }
        self.reject_tail(start, line, column)?;
        Ok(TokenKind::Duration(self.src[start..self.pos].to_string()))
    }

    fn blob(&mut self) -> Result<TokenKind, ParseError> {
        let (start, line, column) = (self.pos, self.line, self.column);
        self.bump_n(2);
        let digits_start = self.pos;
        while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
            self.bump();
        }
        self.reject_tail(start, line, column)?;
        let digits = &self.src.as_bytes()[digits_start..self.pos];
        if !digits.len().is_multiple_of(2) {
            let message = "hex literal must have an even number of digits".to_string();
            return Err(self.error(line, column, message));
        }
        let nibble = |b: u8| (b as char).to_digit(16).unwrap_or(0) as u8;
        let bytes = digits.chunks(2).map(|p| nibble(p[0]) << 4 | nibble(p[1])).collect();
        Ok(TokenKind::Blob(bytes))
    }

    /// A literal running straight into name characters (`12abc`, `0xZZ`) is
    /// one malformed token, not a number followed by a name.
    fn reject_tail(&mut self, start: usize, line: usize, column: usize) -> Result<(), ParseError> {
        if self.peek().is_some_and(|c| is_ident_char(c) || c.is_alphabetic()) {
            return Err(self.bad_literal(start, line, column));
        }
        Ok(())
    }

    fn bad_literal(&mut self, start: usize, line: usize, column: usize) -> ParseError {
        while self.peek().is_some_and(|c| is_ident_char(c) || c.is_alphabetic()) {
            self.bump();
        }
        let text = &self.src[start..self.pos];
        self.error(line, column, format!("invalid number or duration literal '{text}'"))
    }

    fn word(&mut self) -> TokenKind {
        let start = self.pos;
        while self.peek().is_some_and(is_ident_char) {
            self.bump();
        }
        let text = &self.src[start..self.pos];
        if is_iso_duration(text) {
            return TokenKind::Duration(text.to_string());
        }
        if let Some(tail_len) = iso_alternative_tail(text, self.rest()) {
            self.bump_n(tail_len);
            return TokenKind::Duration(self.src[start..self.pos].to_string());
        }
        TokenKind::Ident(text.to_ascii_lowercase())
    }

    /// The body of a `q`-quoted token where a doubled `q` stands for one.
    fn quoted(&mut self, q: char, what: &str) -> Result<String, ParseError> {
        let (line, column) = (self.line, self.column);
        self.bump();
        let mut out = String::new();
        loop {
            match self.bump() {
                None => return Err(self.error(line, column, format!("unterminated {what}"))),
                Some(c) if c == q => {
                    if self.peek() != Some(q) {
                        return Ok(out);
                    }
                    self.bump();
                    out.push(q);
                }
                Some(c) => out.push(c),
            }
        }
    }

    fn quoted_ident(&mut self) -> Result<TokenKind, ParseError> {
        let (line, column) = (self.line, self.column);
        let name = self.quoted('"', "quoted identifier")?;
        if name.is_empty() {
            return Err(self.error(line, column, "empty quoted identifier".into()));
        }
        Ok(TokenKind::QuotedIdent(name))
    }

    fn dollar_string(&mut self) -> Result<TokenKind, ParseError> {
        let (line, column) = (self.line, self.column);
        let Some(len) = self.rest()[2..].find("$$") else {
            return Err(self.error(line, column, "unterminated $$ string literal".into()));
        };
        let body = self.rest()[2..2 + len].to_string();
        self.bump_n(body.chars().count() + 4);
        Ok(TokenKind::Str(body))
    }

    fn symbol(&mut self, c: char) -> Result<TokenKind, ParseError> {
        let next = self.peek_nth(1);
        let (sym, len) = match (c, next) {
            ('!', Some('=')) => (Sym::Ne, 2),
            ('<', Some('=')) => (Sym::Le, 2),
            ('>', Some('=')) => (Sym::Ge, 2),
            ('+', Some('=')) => (Sym::PlusEq, 2),
            ('-', Some('=')) => (Sym::MinusEq, 2),
            ('.', Some('.')) => (Sym::Range, 2),
            ('(', _) => (Sym::LParen, 1),
            (')', _) => (Sym::RParen, 1),
            ('{', _) => (Sym::LBrace, 1),
            ('}', _) => (Sym::RBrace, 1),
            ('[', _) => (Sym::LBracket, 1),
            (']', _) => (Sym::RBracket, 1),
            (',', _) => (Sym::Comma, 1),
            (';', _) => (Sym::Semicolon, 1),
            ('.', _) => (Sym::Dot, 1),
            (':', _) => (Sym::Colon, 1),
            ('?', _) => (Sym::Question, 1),
            ('*', _) => (Sym::Star, 1),
            ('/', _) => (Sym::Slash, 1),
            ('%', _) => (Sym::Percent, 1),
            ('+', _) => (Sym::Plus, 1),
            ('-', _) => (Sym::Minus, 1),
            ('=', _) => (Sym::Eq, 1),
            ('<', _) => (Sym::Lt, 1),
            ('>', _) => (Sym::Gt, 1),
            _ => {
                let message = format!("no viable alternative at character '{c}'");
                return Err(self.error(self.line, self.column, message));
            }
        };
        self.bump_n(len);
        Ok(TokenKind::Sym(sym))
    }
}

/// ISO 8601 durations with designators (`P1Y2M3DT4H5M6S`) or weeks (`P3W`),
/// upper case as Cassandra requires; at least one component must be present
/// so that a name like `P` or `PT` stays a name.
fn is_iso_duration(text: &str) -> bool {
    let Some(body) = text.strip_prefix('P') else {
        return false;
    };
    if let Some(weeks) = body.strip_suffix('W') {
        return !weeks.is_empty() && weeks.bytes().all(|b| b.is_ascii_digit());
    }
    let (date, time) = match body.split_once('T') {
        Some((date, time)) => (date, Some(time)),
        None => (body, None),
    };
    let date_ok = designators_ok(date, b"YMD");
    let time_ok = time.map_or(Some(0), |t| designators_ok(t, b"HMS").filter(|n| *n > 0));
    match (date_ok, time_ok) {
        (Some(d), Some(t)) => d + t > 0,
        _ => false,
    }
}

/// The ISO 8601 alternative format `P0001-02-03T04:05:06`: given the word
/// read so far (`P0001`, a name) and the text after it, the length of the
/// rest of the literal (`-02-03T04:05:06`), if that is what follows.
fn iso_alternative_tail(word: &str, rest: &str) -> Option<usize> {
    const TAIL: &[u8] = b"-00-00T00:00:00";
    let year = word.strip_prefix('P')?;
    let tail = rest.as_bytes().get(..TAIL.len())?;
    let matches = |pattern: u8, b: u8| if pattern == b'0' { b.is_ascii_digit() } else { pattern == b };
    let ok = year.len() == 4
        && year.bytes().all(|b| b.is_ascii_digit())
        && TAIL.iter().zip(tail).all(|(p, b)| matches(*p, *b));
    ok.then_some(TAIL.len())
}

/// Checks `text` is `(<digits><designator>)*` with designators in the given
/// order, each at most once; returns how many components there were.
fn designators_ok(text: &str, order: &[u8]) -> Option<usize> {
    let bytes = text.as_bytes();
    let (mut i, mut next_allowed, mut count) = (0, 0, 0);
    while i < bytes.len() {
        let digits = bytes[i..].iter().take_while(|b| b.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        i += digits;
        let designator = *bytes.get(i)?;
        let slot = order.iter().position(|d| *d == designator)?;
        if slot < next_allowed {
            return None;
        }
        next_allowed = slot + 1;
        i += 1;
        count += 1;
    }
    Some(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<TokenKind> {
        match tokenize(src) {
            Ok(tokens) => tokens.into_iter().map(|t| t.kind).collect(),
            Err(e) => panic!("lexing {src:?} failed: {e}"),
        }
    }

    fn one(src: &str) -> TokenKind {
        let mut k = kinds(src);
        assert_eq!(k.len(), 2, "{src:?} gave {k:?}");
        k.remove(0)
    }

    fn lex_err(src: &str) -> ParseError {
        match tokenize(src) {
            Ok(t) => panic!("lexing {src:?} should fail, got {t:?}"),
            Err(e) => e,
        }
    }

    #[test]
    fn words_are_lowercased_and_quoted_names_keep_case() {
        assert_eq!(one("SeLeCt"), TokenKind::Ident("select".into()));
        assert_eq!(one("\"MyTable\""), TokenKind::QuotedIdent("MyTable".into()));
        assert_eq!(one("\"a\"\"b\""), TokenKind::QuotedIdent("a\"b".into()));
        assert_eq!(one("x_1"), TokenKind::Ident("x_1".into()));
        // CQL's IDENT starts with a letter (Cassandra's and ScyllaDB's grammar).
        assert!(tokenize("_x1").is_err());
    }

    #[test]
    fn strings() {
        assert_eq!(one("'it''s'"), TokenKind::Str("it's".into()));
        assert_eq!(one("''"), TokenKind::Str(String::new()));
        assert_eq!(one("$$a 'b' $ c$$"), TokenKind::Str("a 'b' $ c".into()));
        assert_eq!(one("'héllo'"), TokenKind::Str("héllo".into()));
    }

    #[test]
    fn numbers() {
        assert_eq!(one("12345678901234567890123"), TokenKind::Integer("12345678901234567890123".into()));
        assert_eq!(one("1.5"), TokenKind::Float("1.5".into()));
        assert_eq!(one("2e10"), TokenKind::Float("2e10".into()));
        assert_eq!(one("2.5E-3"), TokenKind::Float("2.5E-3".into()));
        assert_eq!(kinds("-7"), vec![TokenKind::Sym(Sym::Minus), TokenKind::Integer("7".into()), TokenKind::Eof]);
        assert_eq!(kinds("-2e3")[..2], [TokenKind::Sym(Sym::Minus), TokenKind::Float("2e3".into())]);
        // A negative duration is one token, as in Cassandra's lexer.
        assert_eq!(kinds("1y-2mo")[..2], [TokenKind::Duration("1y".into()), TokenKind::Duration("-2mo".into())]);
    }

    #[test]
    fn blobs_uuids_durations() {
        assert_eq!(one("0xCAFE"), TokenKind::Blob(vec![0xca, 0xfe]));
        assert_eq!(one("0x"), TokenKind::Blob(vec![]));
        let uuid = "123e4567-e89b-12d3-a456-426655440000";
        assert_eq!(one(uuid), TokenKind::Uuid(uuid.into()));
        let uuid = "abcdef12-e89b-12d3-a456-426655440000";
        assert_eq!(one(uuid), TokenKind::Uuid(uuid.into()));
        let all = ["1h30m", "12mo3d", "3w", "500ms", "10us", "10µs", "7ns", "1y", "2D", "P1DT2H", "P3W", "PT5M"];
        for d in all.into_iter().chain(["P0000-00-00T89:09:09", "P0001-02-03T04:05:06"]) {
            assert_eq!(one(d), TokenKind::Duration(d.into()), "{d}");
        }
        assert_eq!(one("P"), TokenKind::Ident("p".into()));
        assert_eq!(one("PT"), TokenKind::Ident("pt".into()));
        assert_eq!(one("p1d"), TokenKind::Ident("p1d".into()));
        // Not the whole alternative form: a name, then a minus.
        assert_eq!(kinds("P0001-02")[..2], [TokenKind::Ident("p0001".into()), TokenKind::Sym(Sym::Minus)]);
    }

    #[test]
    fn symbols_and_comments() {
        let k = kinds("a<=b -- c\n// d\n/* e \n f */ != += -= >= ?");
        let syms: Vec<_> = k.iter().filter_map(|k| if let TokenKind::Sym(s) = k { Some(*s) } else { None }).collect();
        assert_eq!(syms, vec![Sym::Le, Sym::Ne, Sym::PlusEq, Sym::MinusEq, Sym::Ge, Sym::Question]);
    }

    #[test]
    fn positions_are_one_based_chars() {
        let tokens = tokenize("SELECT 'é' ,\n  x").unwrap_or_default();
        let pos: Vec<_> = tokens.iter().map(|t| (t.line, t.column)).collect();
        assert_eq!(pos, vec![(1, 1), (1, 8), (1, 12), (2, 3), (2, 4)]);
    }

    #[test]
    fn uuid_probe_near_multibyte_char_does_not_split_it() {
        // Found by fuzzing: the probe sliced 36 bytes ahead into a 'é'.
        let text = format!("{}é", "a".repeat(35));
        assert!(tokenize(&text).is_err());
        assert!(tokenize("ALTER TABLE t RENAME a TO b AND c \u{FFFD}O d").is_err());
    }

    #[test]
    fn lexical_errors() {
        let e = lex_err("SELECT 'abc");
        assert_eq!((e.line, e.column), (1, 8));
        assert!(e.message.contains("unterminated string"), "{e}");
        let e = lex_err("a\n  @");
        assert_eq!(e.to_string(), "line 2:3 no viable alternative at character '@'");
        assert!(lex_err("0xABC").message.contains("even"));
        assert!(lex_err("12abc").message.contains("'12abc'"));
        assert!(lex_err("1.5h").message.contains("'1.5h'"));
        assert!(lex_err("/* x").message.contains("unterminated comment"));
        assert!(lex_err("\"\"").message.contains("empty"));
        assert!(lex_err("$$abc").message.contains("unterminated"));
        assert!(lex_err("1mos").message.contains("1mos"));
    }
}
