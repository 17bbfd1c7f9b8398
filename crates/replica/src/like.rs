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

/// A pattern, read token by token where it stands: a filter matches every
/// row a scan reads, so matching allocates nothing.
#[derive(Debug, Clone, Copy)]
pub struct LikePattern<'a> {
    pattern: &'a str,
}

impl<'a> LikePattern<'a> {
    /// The pattern; `None` when it is not UTF-8 (no text matches it).
    pub fn new(pattern: &'a [u8]) -> Option<LikePattern<'a>> {
        std::str::from_utf8(pattern).ok().map(|pattern| LikePattern { pattern })
    }

    /// The token at byte offset `p` of the pattern and the bytes it spans;
    /// `None` at the end.
    fn token_at(&self, p: usize) -> Option<(Token, usize)> {
        let mut chars = self.pattern[p..].chars();
        let c = chars.next()?;
        Some(match c {
            // A trailing unescaped backslash is itself.
            '\\' => chars.next().map_or((Token::Literal('\\'), 1), |next| (Token::Literal(next), 1 + next.len_utf8())),
            '%' => (Token::Any, 1),
            '_' => (Token::One, 1),
            c => (Token::Literal(c), c.len_utf8()),
        })
    }

    /// Whether the whole of `text` matches; a value that is not UTF-8
    /// matches nothing.
    pub fn matches(&self, text: &[u8]) -> bool {
        let Ok(text) = std::str::from_utf8(text) else { return false };
        // The classic wildcard walk, over byte offsets of `text` and of the
        // pattern: on a mismatch, go back to the last `%` and let it
        // swallow one more character. Taking each `%` as short as possible
        // first leaves the most room for what follows, so one backtrack
        // point suffices (linear in practice, quadratic at worst).
        let (mut t, mut p) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while let Some(c) = text[t..].chars().next() {
            match self.token_at(p) {
                Some((Token::Any, len)) => {
                    star = Some((p + len, t));
                    p += len;
                }
                Some((Token::One, len)) => {
                    t += c.len_utf8();
                    p += len;
                }
                Some((Token::Literal(literal), len)) if literal == c => {
                    t += c.len_utf8();
                    p += len;
                }
                _ => match star {
                    Some((after_star, star_t)) => {
                        // star_t <= t < text.len(): a character starts there.
                        let swallowed = text[star_t..].chars().next().map_or(1, char::len_utf8);
                        star = Some((after_star, star_t + swallowed));
                        p = after_star;
                        t = star_t + swallowed;
                    }
                    None => return false,
                },
            }
        }
        // What is left of the pattern must match nothing: `%`s only.
        while let Some((token, len)) = self.token_at(p) {
            if token != Token::Any {
                return false;
            }
            p += len;
        }
        true
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
            let mut tokens = Vec::new();
            let mut p = 0;
            while let Some((token, len)) = parsed.token_at(p) {
                tokens.push(token);
                p += len;
            }
            let chars: Vec<char> = text.chars().collect();
            assert_eq!(parsed.matches(text.as_bytes()), naive(&tokens, &chars), "{pattern:?} on {text:?}");
        }
    }

    #[test]
    fn invalid_utf8_matches_nothing() {
        assert!(!like(b"%", b"\xff"));
        assert!(!like(b"\xff", b"\xff"));
    }
}
