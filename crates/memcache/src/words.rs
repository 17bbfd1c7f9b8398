//! A run of space-separated words of a request line (a `get`'s keys, a
//! meta request's flags), borrowed from the connection's read buffer and
//! walked where it stands: a request holds no vector of its words, so
//! parsing one allocates nothing.

use std::fmt;

/// Words of a line: the bytes between spaces, empty ones (runs of spaces)
/// skipped, as memcached's tokenizer does.
#[derive(Clone, Copy, Default)]
pub struct Words<'a> {
    text: &'a [u8],
}

impl<'a> Words<'a> {
    /// The words of `text` (a line without its newline).
    pub fn new(text: &'a [u8]) -> Words<'a> {
        Words { text }
    }

    /// The first word and the words after it.
    pub fn split_first(self) -> Option<(&'a [u8], Words<'a>)> {
        let start = self.text.iter().position(|b| *b != b' ')?;
        let text = &self.text[start..];
        // Words are short: a plain loop beats memchr's vector set-up.
        let end = text.iter().position(|b| *b == b' ').unwrap_or(text.len());
        Some((&text[..end], Words { text: &text[end..] }))
    }

    /// The first `n` words, and the words after them.
    pub fn split_at(self, n: usize) -> (Words<'a>, Words<'a>) {
        let mut rest = self;
        for _ in 0..n {
            match rest.split_first() {
                Some((_, after)) => rest = after,
                None => break,
            }
        }
        let taken = self.text.len() - rest.text.len();
        (Words { text: &self.text[..taken] }, rest)
    }

    pub fn iter(self) -> impl Iterator<Item = &'a [u8]> {
        let mut rest = self;
        std::iter::from_fn(move || {
            let (word, after) = rest.split_first()?;
            rest = after;
            Some(word)
        })
    }

    pub fn is_empty(self) -> bool {
        self.text.iter().all(|b| *b == b' ')
    }

    /// Whether there are more than `n` words; a line too short to hold
    /// them is not walked.
    pub fn exceeds(self, n: usize) -> bool {
        // n + 1 words take at least n + 1 bytes and n spaces.
        self.text.len() > 2 * n && self.iter().nth(n).is_some()
    }
}

/// Equal when the words are: the spaces between them do not count.
impl PartialEq for Words<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Words<'_> {}

impl fmt::Debug for Words<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(String::from_utf8_lossy)).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_skip_runs_of_spaces_and_split_where_they_stand() {
        let words = Words::new(b"  a bb   ccc ");
        assert_eq!(words.iter().collect::<Vec<_>>(), vec![&b"a"[..], b"bb", b"ccc"]);
        assert!(words.exceeds(2) && !words.exceeds(3));
        assert!(Words::new(b"a b c").exceeds(2) && !Words::new(b"a b ").exceeds(2));
        let (first, rest) = words.split_first().expect("three words");
        assert_eq!((first, rest.iter().count()), (&b"a"[..], 2));
        let (two, after) = words.split_at(2);
        assert_eq!(two, Words::new(b"a bb"));
        assert_eq!(after.iter().collect::<Vec<_>>(), vec![&b"ccc"[..]]);
        let (all, none) = words.split_at(5);
        assert_eq!((all, none.is_empty()), (words, true));
        assert!(Words::new(b"   ").is_empty() && Words::new(b"   ").split_first().is_none());
        assert!(Words::default().is_empty());
    }
}
