//! PEM files to rustls configurations: a listener's certificate chain and
//! key, and the truststore its clients' (or peers') certificates are
//! checked against. Read with `std::fs`: only start-up and the reload
//! thread ([`crate::reload`]) call this, never a shard.
//!
//! The crypto is rustls's `ring` provider (no OpenSSL, no C toolchain
//! beyond `ring`'s own assembly), TLS 1.2 and 1.3 with rustls's safe
//! defaults.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::TlsError;

/// Files larger than this are not certificates or keys.
const PEM_FILE_BYTES_MAX: u64 = 1 << 20;

/// Whether a server asks its clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// It does not ask.
    None,
    /// It asks; one that is presented must check against the truststore.
    Optional,
    /// A client without a certificate the truststore vouches for is refused.
    Required,
}

/// Where one listener's (or node's) credentials are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The certificate chain, PEM, leaf first.
    pub certificate: PathBuf,
    /// The private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub keyfile: PathBuf,
    /// CA certificates, PEM, that peers' certificates must chain to.
    pub truststore: Option<PathBuf>,
    pub client_auth: ClientAuth,
}

impl TlsFiles {
    /// Every file named, for the reload thread to watch.
    pub fn paths(&self) -> Vec<PathBuf> {
        let mut paths = vec![self.certificate.clone(), self.keyfile.clone()];
        paths.extend(self.truststore.clone());
        paths
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|source| TlsError::Read { path: path.to_path_buf(), source })?;
    let mut bytes = Vec::new();
    file.take(PEM_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| TlsError::Read { path: path.to_path_buf(), source })?;
    if bytes.len() as u64 > PEM_FILE_BYTES_MAX {
        return Err(TlsError::Pem { path: path.to_path_buf(), message: "larger than 1 MiB".to_string() });
    }
    Ok(bytes)
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = read(path)?;
    let certificates: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem { path: path.to_path_buf(), message: e.to_string() })?;
    if certificates.is_empty() {
        return Err(TlsError::Pem { path: path.to_path_buf(), message: "no CERTIFICATE in it".to_string() });
    }
    Ok(certificates)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_slice(&read(path)?)
        .map_err(|e| TlsError::Pem { path: path.to_path_buf(), message: format!("no private key: {e}") })
}

fn roots(path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for certificate in certificates(path)? {
        roots.add(certificate).map_err(|e| TlsError::Pem { path: path.to_path_buf(), message: e.to_string() })?;
    }
    Ok(Arc::new(roots))
}

/// The certificate and its key, checked to belong together.
fn certified_key(files: &TlsFiles) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), TlsError> {
    let chain = certificates(&files.certificate)?;
    let key = private_key(&files.keyfile)?;
    let signing_key = provider().key_provider.load_private_key(key.clone_key()).map_err(TlsError::Protocol)?;
    rustls::sign::CertifiedKey::new(chain.clone(), signing_key).keys_match().map_err(|e| {
        TlsError::Config(format!(
            "{} does not hold the key of {}: {e}",
            files.keyfile.display(),
            files.certificate.display()
        ))
    })?;
    Ok((chain, key))
}

/// A server's configuration: its certificate, and its clients' checked
/// against the truststore as `client_auth` says.
pub fn server_config(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let (chain, key) = certified_key(files)?;
    let builder = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocol)?;
    let builder = match (files.client_auth, &files.truststore) {
        (ClientAuth::None, _) => builder.with_no_client_auth(),
        (auth, Some(truststore)) => {
            let verifier = WebPkiClientVerifier::builder_with_provider(roots(truststore)?, provider());
            let verifier = match auth {
                ClientAuth::Optional => verifier.allow_unauthenticated(),
                _ => verifier,
            };
            builder.with_client_cert_verifier(verifier.build().map_err(|e| TlsError::Config(e.to_string()))?)
        }
        (_, None) => {
            return Err(TlsError::Config("client certificates are checked against a truststore: name one".into()))
        }
    };
    let config = builder.with_single_cert(chain, key).map_err(TlsError::Protocol)?;
    Ok(Arc::new(config))
}

/// A node's configuration for connecting to its peers: it presents its
/// own certificate and checks theirs against the truststore. The peer's
/// address must be in its certificate only with `verify_name`
/// (Cassandra's `require_endpoint_verification`).
pub fn client_config(files: &TlsFiles, verify_name: bool) -> Result<Arc<rustls::ClientConfig>, TlsError> {
    let truststore = files
        .truststore
        .as_ref()
        .ok_or_else(|| TlsError::Config("a node checks its peers against a truststore: name one".into()))?;
    let (chain, key) = certified_key(files)?;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(roots(truststore)?, provider())
        .build()
        .map_err(|e| TlsError::Config(e.to_string()))?;
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Protocol)?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(PeerVerifier { inner: verifier, verify_name }))
        .with_client_auth_cert(chain, key)
        .map_err(TlsError::Protocol)?;
    Ok(Arc::new(config))
}

/// WebPKI's chain and signature checks; the name check only when asked
/// (nodes are reached by address, and certificates often name hosts).
#[derive(Debug)]
struct PeerVerifier {
    inner: Arc<rustls::client::WebPkiServerVerifier>,
    verify_name: bool,
}

impl ServerCertVerifier for PeerVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.verify_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_certificates::TestCa;

    #[test]
    fn missing_and_mismatched_files_are_named() {
        let ca = TestCa::new();
        let node = ca.leaf("127.0.0.1");
        let mut files = node.files(&ca, false);
        files.certificate = PathBuf::from("/nonexistent/cert.pem");
        let error = server_config(&files).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("/nonexistent/cert.pem"), "{error}");
        // Another leaf's key.
        let other = ca.leaf("127.0.0.2").files(&ca, false);
        let mut files = node.files(&ca, false);
        files.keyfile = other.keyfile;
        assert!(matches!(server_config(&files), Err(TlsError::Config(_))));
        // A key file in place of a certificate.
        let mut files = node.files(&ca, false);
        files.certificate = files.keyfile.clone();
        assert!(matches!(server_config(&files), Err(TlsError::Pem { .. })));
        let mut files = node.files(&ca, true);
        files.truststore = None;
        assert!(matches!(server_config(&files), Err(TlsError::Config(_))));
        assert!(matches!(client_config(&files, false), Err(TlsError::Config(_))));
    }
}
