//! Certificates made for tests: a CA of their own and leaves it signs,
//! written to a fresh directory (rcgen, a dev-dependency only).

use std::path::PathBuf;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::credentials::{ClientAuth, TlsFiles};

pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
}

pub struct Leaf {
    pub certificate_pem: String,
    pub key_pem: String,
}

fn fresh_dir() -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("shoal-tls-test-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    dir
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA parameters");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().expect("a key")).expect("a CA");
        TestCa { issuer, dir: fresh_dir() }
    }

    /// A certificate for `name` (an IP address or a host name).
    pub fn leaf(&self, name: &str) -> Leaf {
        let key = KeyPair::generate().expect("a key");
        let params = CertificateParams::new(vec![name.to_string()]).expect("leaf parameters");
        let certificate = params.signed_by(&key, &self.issuer).expect("a signed leaf");
        Leaf { certificate_pem: certificate.pem(), key_pem: key.serialize_pem() }
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).expect("a test file");
        path
    }

    /// A client trusting this CA, presenting `certificate` if given.
    pub fn client_config(&self, certificate: Option<&Leaf>) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.issuer.der().clone()).expect("a root");
        let builder = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots);
        let config = match certificate {
            None => builder.with_no_client_auth(),
            Some(leaf) => {
                let chain = vec![CertificateDer::from_pem_slice(leaf.certificate_pem.as_bytes()).expect("a cert")];
                let key = PrivateKeyDer::from_pem_slice(leaf.key_pem.as_bytes()).expect("a key");
                builder.with_client_auth_cert(chain, key).expect("client auth")
            }
        };
        Arc::new(config)
    }
}

impl Leaf {
    /// This leaf's files, with `ca` as the truststore.
    pub fn files(&self, ca: &TestCa, require_client_auth: bool) -> TlsFiles {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        TlsFiles {
            certificate: ca.write(&format!("cert-{n}.pem"), &self.certificate_pem),
            keyfile: ca.write(&format!("key-{n}.pem"), &self.key_pem),
            truststore: Some(ca.write(&format!("ca-{n}.pem"), &ca.issuer.pem())),
            client_auth: if require_client_auth { ClientAuth::Required } else { ClientAuth::None },
        }
    }
}

impl Drop for TestCa {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
