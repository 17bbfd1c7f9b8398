//! CQL `LIKE` patterns, as ScyllaDB matches them (`utils/like_matcher.cc`).
//!
//! `%` matches any run of characters (also none), `_` exactly one character
//! (a code point, not a byte), and a backslash makes the character after it
//! literal (`\%`, `\_`, `\\`); a trailing unescaped backslash matches
//! itself. Everything else, regex metacharacters included, is literal. The
//! whole text must match: the empty pattern matches only the empty text.

/// One element of a parsed pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    Literal(char),
    /// `_`
    One,
    /// `%`
    Any,
}

/// A parsed pattern, ready to match many values (a filter checks every row
/// a scan reads against the same pattern).
#[derive(Debug, Clone)]
pub struct LikePattern {
    tokens: Vec<Token>,
}

impl LikePattern {
    /// Parses a pattern; `None` when it is not UTF-8 (no text matches it).
    pub fn new(pattern: &[u8]) -> Option<LikePattern> {
        let pattern = std::str::from_utf8(pattern).ok()?;
        let mut tokens = Vec::with_capacity(pattern.len());
        let mut escaping = false;
        for c in pattern.chars() {
            let token = match (escaping, c) {
                (true, c) => Token::Literal(c),
                (false, '\\') => {
                    escaping = true;
                    continue;
                }
                (false, '%') => Token::Any,
                (false, '_') => Token::One,
                (false, c) => Token::Literal(c),
            };
            escaping = false;
            // Consecutive `%` match what one does; keeping one bounds the
            // backtracking below.
            if !(token == Token::Any && tokens.last() == Some(&Token::Any)) {
                tokens.push(token);
            }
        }
        if escaping {
            tokens.push(Token::Literal('\\'));
        }
        Some(LikePattern { tokens })
    }

    /// Whether the whole of `text` matches; a value that is not UTF-8
    /// matches nothing.
    pub fn matches(&self, text: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(text) else { return false };
        // The classic wildcard walk, over byte offsets of `text` (no
        // allocation per row): on a mismatch, go back to the last `%` and
        // let it swallow one more character. Taking each `%` as short as
        // possible first leaves the most room for what follows, so one
        // backtrack point suffices (linear in practice, quadratic at worst).
        let (mut t, mut p) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while let Some(c) = text[t..].chars().next() {
            match self.tokens.get(p) {
                Some(Token::Any) => {
                    star = Some((p, t));
                    p += 1;
                }
                Some(Token::One) => {
                    t += c.len_utf8();
                    p += 1;
                }
                Some(Token::Literal(literal)) if *literal == c => {
                    t += c.len_utf8();
                    p += 1;
                }
                _ => match star {
                    Some((star_p, star_t)) => {
                        // star_t <= t < text.len(): a character starts there.
                        let swallowed = text[star_t..].chars().next().map_or(1, char::len_utf8);
                        star = Some((star_p, star_t + swallowed));
                        p = star_p + 1;
                        t = star_t + swallowed;
                    }
                    None => return false,
                },
            }
        }
        self.tokens[p..].iter().all(|token| *token == Token::Any)
    }
}

/// Whether `text` matches `pattern` (both as stored: UTF-8 bytes).
pub fn like(pattern: &[u8], text: &[u8]) -> bool {
    LikePattern::new(pattern).is_some_and(|p| p.matches(text))
}

#[cfg(test)]
mod tests {
    use super::{like, LikePattern, Token};

    fn m(pattern: &str, text: &str) -> bool {
        like(pattern.as_bytes(), text.as_bytes())
    }

    #[test]
    fn prefixes_suffixes_and_infixes() {
        assert!(m("abc%", "abc"));
        assert!(m("abc%", "abcdef"));
        assert!(!m("abc%", "xabc"));
        assert!(m("%abc", "xxabc"));
        assert!(!m("%abc", "abcx"));
        assert!(m("%abc%", "xxabcyy"));
        assert!(m("%abc%", "abc"));
        assert!(!m("%abc%", "abxc"));
        assert!(m("%", ""));
        assert!(m("%%%", "one"));
        assert!(m("a%b%c", "aXbYbZc"));
        assert!(!m("a%b%c", "aXbYbZ"));
        // Overlapping segments do not share characters.
        assert!(!m("%aba%aba%", "ababa"));
        assert!(m("%aba%aba%", "abaaba"));
    }

    #[test]
    fn exact_and_empty() {
        assert!(m("abc", "abc"));
        assert!(!m("abc", "abcd"));
        assert!(!m("abc", "ab"));
        assert!(m("", ""));
        assert!(!m("", "a"));
    }

    #[test]
    fn underscore_is_one_code_point() {
        assert!(m("a_c", "abc"));
        assert!(!m("a_c", "ac"));
        assert!(!m("a_c", "abbc"));
        assert!(m("a_c", "aéc"));
        assert!(m("_", "ж"));
        assert!(!m("_", ""));
        assert!(m("%_", "x"));
        assert!(!m("%_", ""));
        assert!(m("_%_", "ab"));
        assert!(!m("_%_", "a"));
    }

    #[test]
    fn escapes_make_wildcards_literal() {
        assert!(m(r"100\%", "100%"));
        assert!(!m(r"100\%", "1000"));
        assert!(m(r"a\_b", "a_b"));
        assert!(!m(r"a\_b", "axb"));
        assert!(m(r"a\\b", r"a\b"));
        // An escaped ordinary character is that character.
        assert!(m(r"\a", "a"));
        // A trailing unescaped backslash matches itself.
        assert!(m(r"ab\", r"ab\"));
        assert!(!m(r"ab\", "ab"));
        assert!(m(r"%\", r"x\"));
    }

    #[test]
    fn regex_metacharacters_are_literal() {
        assert!(m("a.c", "a.c"));
        assert!(!m("a.c", "abc"));
        assert!(m("[a]*^$+?(|){", "[a]*^$+?(|){"));
        assert!(!m("a*", "aaa"));
    }

    /// The definition, by recursion: slow, and obviously right.
    fn naive(tokens: &[Token], text: &[char]) -> bool {
        match tokens.split_first() {
            None => text.is_empty(),
            Some((Token::Any, rest)) => (0..=text.len()).any(|i| naive(rest, &text[i..])),
            Some((Token::One, rest)) => !text.is_empty() && naive(rest, &text[1..]),
            Some((Token::Literal(c), rest)) => text.first() == Some(c) && naive(rest, &text[1..]),
        }
    }

    #[test]
    fn random_patterns_match_as_the_definition_says() {
        let alphabet = ['a', 'b', 'é', '%', '_', '\\'];
        // xorshift: a fixed seed, so a failure replays.
        let mut state: u64 = 0x2026_1129;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for _ in 0..20_000 {
            let pattern: String = (0..next(7)).map(|_| alphabet[next(alphabet.len())]).collect();
            let text: String = (0..next(8)).map(|_| alphabet[next(alphabet.len())]).collect();
            let parsed = LikePattern::new(pattern.as_bytes()).expect("UTF-8");
            let chars: Vec<char> = text.chars().collect();
            assert_eq!(parsed.matches(text.as_bytes()), naive(&parsed.tokens, &chars), "{pattern:?} on {text:?}");
        }
    }

    #[test]
    fn invalid_utf8_matches_nothing() {
        assert!(!like(b"%", b"\xff"));
        assert!(!like(b"\xff", b"\xff"));
    }
}
