//! Fuzzes the server side of a TLS connection (`shoal_tls::session`, the
//! state machine every TLS port runs before a protocol sees a byte): a
//! client that sends garbage, split in two where the first byte says, as
//! TCP may split it. It gets an error or waits for more, never a panic,
//! never a finished handshake and never plaintext.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use shoal_tls::session::Session;
use shoal_tls::{ClientAuth, TlsFiles};

/// A server configuration read, as a node's is, from PEM files: a
/// self-signed certificate made once per process, requiring client
/// certificates, so the client-auth path is reachable too.
fn config() -> &'static Arc<rustls::ServerConfig> {
    static CONFIG: OnceLock<Arc<rustls::ServerConfig>> = OnceLock::new();
    CONFIG.get_or_init(|| {
        let certified = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).expect("a certificate");
        let dir = std::env::temp_dir().join(format!("shoal-fuzz-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let write = |name: &str, text: String| {
            let path = dir.join(name);
            std::fs::write(&path, text).expect("a PEM file");
            path
        };
        let certificate = write("cert.pem", certified.cert.pem());
        let files = TlsFiles {
            truststore: Some(certificate.clone()),
            certificate,
            keyfile: write("key.pem", certified.signing_key.serialize_pem()),
            client_auth: ClientAuth::Required,
        };
        shoal_tls::credentials::server_config(&files).expect("a server configuration")
    })
}

fuzz_target!(|data: &[u8]| {
    let mut session = Session::server(Arc::clone(config())).expect("a session");
    let (split, rest) = data.split_first().map_or((0, data), |(split, rest)| (usize::from(*split), rest));
    let at = split.min(rest.len());
    let mut plaintext = Vec::new();
    let mut sent = Vec::new();
    for piece in [&rest[..at], &rest[at..]] {
        let received = session.receive(piece, &mut plaintext);
        let _ = session.take_output(&mut sent);
        if received.is_err() {
            break;
        }
    }
    assert!(session.is_handshaking(), "garbage finished a handshake");
    assert!(plaintext.is_empty(), "garbage decrypted to plaintext");
});
