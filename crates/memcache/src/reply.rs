//! Writing answers in memcached's words into a connection's answer buffer.

use crate::request::ProtocolError;
use shoal_coordinator::data::Item;

/// Appends answers to a buffer.
pub struct Reply<'b> {
    out: &'b mut Vec<u8>,
}

impl<'b> Reply<'b> {
    pub fn new(out: &'b mut Vec<u8>) -> Reply<'b> {
        Reply { out }
    }

    /// `text\r\n`
    pub fn line(&mut self, text: &[u8]) {
        self.out.extend_from_slice(text);
        self.out.extend_from_slice(b"\r\n");
    }

    pub fn error(&mut self, error: ProtocolError) {
        self.line(error.to_string().as_bytes());
    }

    /// `SERVER_ERROR <message>`, on one line whatever the message holds.
    pub fn server_error(&mut self, message: &str) {
        self.out.extend_from_slice(b"SERVER_ERROR ");
        self.out.extend(message.bytes().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
        self.out.extend_from_slice(b"\r\n");
    }

    /// `VALUE <key> <flags> <bytes> [<cas>]\r\n<data>\r\n`
    pub fn value(&mut self, key: &[u8], item: &Item, cas: Option<u64>) {
        self.out.reserve(key.len() + item.value.len() + 48);
        self.out.extend_from_slice(b"VALUE ");
        self.out.extend_from_slice(key);
        self.word_number(u64::from(item.flags));
        self.word_number(item.value.len() as u64);
        if let Some(cas) = cas {
            self.word_number(cas);
        }
        self.out.extend_from_slice(b"\r\n");
        self.line(&item.value);
    }

    /// ` <n>`
    pub fn word_number(&mut self, n: u64) {
        self.out.push(b' ');
        self.number(n);
    }

    pub fn number(&mut self, n: u64) {
        self.out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }

    pub fn signed(&mut self, n: i64) {
        self.out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
    }

    pub fn bytes(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }
}
