//! One TLS session with no I/O of its own (sans-I/O): ciphertext in,
//! plaintext out, and the reverse. [`crate::socket`] moves the bytes
//! between this and a socket; the fuzz target `tls_records` feeds it
//! garbage directly.
//!
//! Everything a session holds is bounded by what one call hands it: a call
//! to [`Session::receive`] takes one read's ciphertext and returns its
//! plaintext at once (rustls keeps at most one partial record), and a call
//! to [`Session::send`] encrypts one write's plaintext straight into the
//! caller's buffer. Bytes that are not TLS fail the call with
//! [`TlsError::Protocol`] after queueing the alert that tells the peer why
//! (drain it with [`Session::take_output`]); nothing here panics on input.

use std::io::{Read, Write};
use std::sync::Arc;

use crate::TlsError;

/// One end of a TLS connection.
#[derive(Debug)]
pub struct Session {
    connection: rustls::Connection,
}

/// What a call to [`Session::receive`] found beyond the plaintext.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received {
    /// More may come.
    Open,
    /// The peer sent close_notify: it sends nothing more.
    Closed,
}

impl Session {
    /// The server end of a new connection.
    pub fn server(config: Arc<rustls::ServerConfig>) -> Result<Session, TlsError> {
        let connection = rustls::ServerConnection::new(config).map_err(TlsError::Protocol)?;
        Ok(Session::new(rustls::Connection::Server(connection)))
    }

    /// The client end of a new connection to `server`.
    pub fn client(config: Arc<rustls::ClientConfig>, server: std::net::IpAddr) -> Result<Session, TlsError> {
        let name = rustls::pki_types::ServerName::IpAddress(server.into());
        let connection = rustls::ClientConnection::new(config, name).map_err(TlsError::Protocol)?;
        Ok(Session::new(rustls::Connection::Client(connection)))
    }

    fn new(mut connection: rustls::Connection) -> Session {
        // The callers bound what they hand over (one read, one batch of
        // answers) and drain the output after every call, so rustls needs
        // no limit of its own: with one, a large write would be cut short.
        connection.set_buffer_limit(None);
        Session { connection }
    }

    /// The protocol version and cipher suite the handshake settled on, as
    /// ScyllaDB's `system.clients` names them (`TLS1.3`, and the suite's
    /// IANA name, `TLS_AES_256_GCM_SHA384`); `None` while handshaking.
    pub fn negotiated(&self) -> Option<(&'static str, String)> {
        let protocol = match self.connection.protocol_version()? {
            rustls::ProtocolVersion::TLSv1_2 => "TLS1.2",
            rustls::ProtocolVersion::TLSv1_3 => "TLS1.3",
            _ => "unknown",
        };
        let suite = self.connection.negotiated_cipher_suite()?.suite();
        // rustls writes TLS 1.3 suites `TLS13_...`; IANA's names are `TLS_...`.
        let name = suite.as_str().map_or_else(|| format!("{suite:?}"), |name| name.replacen("TLS13_", "TLS_", 1));
        Some((protocol, name))
    }

    /// The handshake is not complete yet.
    pub fn is_handshaking(&self) -> bool {
        self.connection.is_handshaking()
    }

    /// Takes `ciphertext` (any number of bytes, records split anywhere)
    /// and appends what it decrypts to `plaintext`.
    pub fn receive(&mut self, mut ciphertext: &[u8], plaintext: &mut Vec<u8>) -> Result<Received, TlsError> {
        // An empty slice would read as the end of the stream.
        while !ciphertext.is_empty() {
            let read = self.connection.read_tls(&mut ciphertext).map_err(TlsError::Io)?;
            let state = self.connection.process_new_packets().map_err(TlsError::Protocol)?;
            let available = state.plaintext_bytes_to_read();
            if available > 0 {
                let start = plaintext.len();
                plaintext.resize(start + available, 0);
                self.connection.reader().read_exact(&mut plaintext[start..]).map_err(TlsError::Io)?;
            }
            if state.peer_has_closed() {
                return Ok(Received::Closed);
            }
            if read == 0 {
                // After close_notify rustls reads nothing more.
                return Ok(Received::Closed);
            }
        }
        Ok(Received::Open)
    }

    /// Encrypts `plaintext` and appends the records to `out`. Before the
    /// handshake ends the plaintext waits inside the session and goes out
    /// with the first output after it.
    pub fn send(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<(), TlsError> {
        self.connection.writer().write_all(plaintext).map_err(TlsError::Io)?;
        self.take_output(out)
    }

    /// Appends what the session has to send (handshake messages, alerts,
    /// session tickets, records) to `out`.
    pub fn take_output(&mut self, out: &mut Vec<u8>) -> Result<(), TlsError> {
        while self.connection.wants_write() {
            self.connection.write_tls(out).map_err(TlsError::Io)?;
        }
        Ok(())
    }

    /// Queues close_notify: the peer learns that nothing was cut off.
    pub fn close(&mut self) {
        self.connection.send_close_notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_certificates::TestCa;

    /// Runs both ends until neither has anything to send.
    fn exchange(client: &mut Session, server: &mut Session) -> (Vec<u8>, Vec<u8>) {
        let (mut to_client_plain, mut to_server_plain) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            let (mut from_client, mut from_server) = (Vec::new(), Vec::new());
            client.take_output(&mut from_client).ok();
            server.receive(&from_client, &mut to_server_plain).ok();
            server.take_output(&mut from_server).ok();
            client.receive(&from_server, &mut to_client_plain).ok();
            if from_client.is_empty() && from_server.is_empty() {
                break;
            }
        }
        (to_client_plain, to_server_plain)
    }

    #[test]
    fn a_handshake_then_data_both_ways() {
        let ca = TestCa::new();
        let node = ca.leaf("127.0.0.1");
        let server_config = crate::credentials::server_config(&node.files(&ca, false)).expect("server config");
        let client_config = ca.client_config(None);
        let mut server = Session::server(server_config).expect("server session");
        let mut client = Session::client(client_config, [127, 0, 0, 1].into()).expect("client session");
        exchange(&mut client, &mut server);
        assert!(!client.is_handshaking() && !server.is_handshaking());
        let mut records = Vec::new();
        client.send(b"hello server", &mut records).expect("encrypt");
        let mut plain = Vec::new();
        assert_eq!(server.receive(&records, &mut plain).ok(), Some(Received::Open));
        assert_eq!(plain, b"hello server");
        let big = vec![7u8; 100_000];
        records.clear();
        server.send(&big, &mut records).expect("encrypt");
        // Delivered in odd pieces, as TCP may.
        let mut got = Vec::new();
        for piece in records.chunks(1000) {
            client.receive(piece, &mut got).expect("decrypt");
        }
        assert_eq!(got, big);
        server.close();
        records.clear();
        server.take_output(&mut records).ok();
        assert_eq!(client.receive(&records, &mut got).ok(), Some(Received::Closed));
    }

    #[test]
    fn garbage_fails_with_an_alert_and_no_panic() {
        let ca = TestCa::new();
        let config = crate::credentials::server_config(&ca.leaf("127.0.0.1").files(&ca, false)).expect("config");
        for garbage in
            [&b"\x04\x00\x00\x00\x05\x00\x00\x00\x00"[..], b"GET / HTTP/1.1\r\n\r\n", &[0x16, 3, 1, 0, 1, 0xff]]
        {
            let mut server = Session::server(Arc::clone(&config)).expect("session");
            let mut plain = Vec::new();
            let result = server.receive(garbage, &mut plain);
            let mut alert = Vec::new();
            server.take_output(&mut alert).ok();
            assert!(plain.is_empty());
            assert!(result.is_err() || server.is_handshaking(), "{result:?}");
        }
    }

    #[test]
    fn a_client_certificate_from_another_ca_is_refused() {
        let ca = TestCa::new();
        let stranger = TestCa::new();
        let server_config = crate::credentials::server_config(&ca.leaf("127.0.0.1").files(&ca, true)).expect("config");
        let mut server = Session::server(server_config).expect("session");
        let mut client =
            Session::client(ca.client_config(Some(&stranger.leaf("client"))), [127, 0, 0, 1].into()).expect("session");
        exchange(&mut client, &mut server);
        let mut records = Vec::new();
        client.send(b"let me in", &mut records).ok();
        let mut plain = Vec::new();
        assert!(server.receive(&records, &mut plain).is_err() || server.is_handshaking());
        assert!(plain.is_empty());
        // With a certificate of the trusted CA, it gets in.
        let server_config = crate::credentials::server_config(&ca.leaf("127.0.0.1").files(&ca, true)).expect("config");
        let mut server = Session::server(server_config).expect("session");
        let mut client =
            Session::client(ca.client_config(Some(&ca.leaf("client"))), [127, 0, 0, 1].into()).expect("session");
        exchange(&mut client, &mut server);
        assert!(!server.is_handshaking());
    }
}
