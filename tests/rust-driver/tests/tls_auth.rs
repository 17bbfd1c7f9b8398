//! ScyllaDB's Rust driver (`scylla` crate, rustls) over TLS and logged in
//! with a password, against a node with `PasswordAuthenticator`,
//! `CassandraAuthorizer` and `client_encryption_options` on ports of their
//! own (`native_transport_port_ssl` and its shard-aware twin), as
//! docs/security.md sets them up. Checks that:
//! - the driver logs in over TLS, learns the shards from SUPPORTED, and
//!   opens a connection to every shard;
//! - a role granted SELECT on one table reads it and is refused a write
//!   with Cassandra's Unauthorized text;
//! - a wrong password gets Cassandra's BadCredentials text, and a client
//!   without credentials, or without TLS on the TLS port, does not connect.

mod common;

use std::error::Error;
use std::ffi::OsStr;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::CertificateDer;
use scylla::client::session::Session;
use scylla::client::session_builder::SessionBuilder;
use shoal_driver_tests::{free_ports, Server};

use common::{connection_to_every_shard, TestResult};

const SMP: usize = 2;
const LOCAL: &str = "SELECT host_id FROM system.local WHERE key = 'local'";

/// A CA of the test's own, the node's certificate for 127.0.0.1 and the
/// options file naming them, in a directory removed on drop.
struct Pki {
    dir: PathBuf,
    ca: CertificateDer<'static>,
}

impl Pki {
    fn new() -> Result<Pki, Box<dyn Error>> {
        let unique = SystemTime::now().duration_since(UNIX_EPOCH)?.as_nanos();
        let dir = std::env::temp_dir().join(format!("shoal-driver-tls-{}-{unique}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let issuer = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
        let key = KeyPair::generate()?;
        let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])?.signed_by(&key, &issuer)?;
        std::fs::write(dir.join("node.pem"), leaf.pem())?;
        std::fs::write(dir.join("node.key"), key.serialize_pem())?;
        Ok(Pki { dir, ca: issuer.der().clone() })
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The YAML a user would write: logins, permissions, TLS on `ssl_ports`.
    fn options_file(&self, ssl_ports: &[u16]) -> Result<PathBuf, Box<dyn Error>> {
        let [native, shard_aware] = ssl_ports else { return Err("two ports".into()) };
        let text = format!(
            "authenticator: PasswordAuthenticator\n\
             authorizer: CassandraAuthorizer\n\
             client_encryption_options:\n  enabled: true\n  certificate: {}\n  keyfile: {}\n\
             native_transport_port_ssl: {native}\n\
             native_shard_aware_transport_port_ssl: {shard_aware}\n",
            self.path("node.pem").display(),
            self.path("node.key").display(),
        );
        let path = self.path("shoal.yaml");
        std::fs::write(&path, text)?;
        Ok(path)
    }

    /// A rustls client trusting only this CA, on ring (as shoal-tls).
    fn client_config(&self) -> Result<Arc<rustls::ClientConfig>, Box<dyn Error>> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.clone())?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(config))
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A session to `node` over TLS (when `pki` is given) as `user`.
async fn connect(node: SocketAddr, pki: Option<&Pki>, user: Option<(&str, &str)>) -> Result<Session, Box<dyn Error>> {
    let mut builder = SessionBuilder::new().known_node_addr(node);
    if let Some(pki) = pki {
        builder = builder.tls_context(Some(pki.client_config()?));
    }
    if let Some((name, password)) = user {
        builder = builder.user(name, password);
    }
    Ok(builder.build().await?)
}

fn assert_error_names(result: Result<impl Sized, Box<dyn Error>>, text: &str) {
    match result {
        Ok(_) => panic!("expected an error naming {text:?}, got a success"),
        Err(e) => assert!(e.to_string().contains(text), "expected {text:?} in: {e}"),
    }
}

async fn start(pki: &Pki) -> Result<(Server, SocketAddr), Box<dyn Error>> {
    let ssl_ports = free_ports(2)?;
    let options = pki.options_file(&ssl_ports)?;
    let server = Server::start_with(SMP, &[OsStr::new("--options-file"), options.as_os_str()])?;
    Ok((server, SocketAddr::from((Ipv4Addr::LOCALHOST, ssl_ports[0]))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_logs_in_over_tls_and_is_held_to_its_permissions() -> TestResult {
    let pki = Pki::new()?;
    let (_server, tls) = start(&pki).await?;
    let admin = connect(tls, Some(&pki), Some(("cassandra", "cassandra"))).await?;
    let state = admin.get_cluster_state();
    let node = state.get_nodes_info().first().ok_or("no nodes")?;
    connection_to_every_shard(&admin, node, LOCAL).await?;
    for statement in [
        "CREATE KEYSPACE ks WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}",
        "CREATE TABLE ks.t (k int PRIMARY KEY, v text)",
        "INSERT INTO ks.t (k, v) VALUES (1, 'one')",
        "CREATE ROLE alice WITH PASSWORD = 'a' AND LOGIN = true",
        "GRANT SELECT ON TABLE ks.t TO alice",
    ] {
        admin.query_unpaged(statement, ()).await?;
    }

    let alice = connect(tls, Some(&pki), Some(("alice", "a"))).await?;
    let read = alice.prepare("SELECT v FROM ks.t WHERE k = ?").await?;
    let rows = alice.execute_unpaged(&read, (1,)).await?.into_rows_result()?;
    let values: Vec<(String,)> = rows.rows::<(String,)>()?.collect::<Result<_, _>>()?;
    assert_eq!(values, [("one".to_string(),)]);
    let write = alice.query_unpaged("INSERT INTO ks.t (k, v) VALUES (2, 'two')", ()).await;
    assert_error_names(
        write.map_err(Into::into),
        "User alice has no MODIFY permission on <table ks.t> or any of its parents",
    );

    assert_error_names(
        connect(tls, Some(&pki), Some(("alice", "wrong"))).await,
        "Provided username alice and/or password are incorrect",
    );
    assert!(connect(tls, Some(&pki), None).await.is_err(), "no credentials, yet connected");
    assert!(connect(tls, None, Some(("alice", "a"))).await.is_err(), "plaintext on the TLS port, yet connected");
    Ok(())
}
