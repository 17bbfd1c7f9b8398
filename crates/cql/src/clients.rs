//! The CQL clients connected to this node, as ScyllaDB's `system.clients`
//! lists them: one row per connection, with its address and port, the shard
//! serving it, how far its login has got, the driver it named in STARTUP,
//! the role it logged in as, and its TLS protocol and cipher suite.
//!
//! Each shard keeps the connections it serves (the transport registers a
//! connection when it opens and the returned [`Registration`] removes it
//! when dropped); reading the table gathers every shard's, as
//! `system_traces` does. Nothing here is on a request's path: a connection
//! writes its entry at STARTUP and at login only.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;

use crate::error::{CqlError, CqlResult};
use crate::system_cells::{self as cells, Values};

/// Where a connection is in its handshake (ScyllaDB's `connection_stage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Open, no STARTUP yet.
    Established,
    /// STARTUP answered AUTHENTICATE; no login yet.
    Authenticating,
    /// Serving statements.
    Ready,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::Established => "ESTABLISHED",
            Stage::Authenticating => "AUTHENTICATING",
            Stage::Ready => "READY",
        }
    }
}

/// The TLS session a connection runs over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsInfo {
    /// `TLS1.2` or `TLS1.3`, as ScyllaDB writes them.
    pub protocol: String,
    /// The IANA name of the negotiated suite (`TLS_AES_256_GCM_SHA384`).
    pub cipher_suite: String,
}

#[derive(Debug, Clone)]
struct Client {
    address: SocketAddr,
    shard: usize,
    stage: Stage,
    /// STARTUP's options (DRIVER_NAME, DRIVER_VERSION, CQL_VERSION, ...).
    options: BTreeMap<String, String>,
    protocol_version: Option<u8>,
    tls: Option<TlsInfo>,
    username: Option<String>,
}

thread_local! {
    static CLIENTS: RefCell<HashMap<u64, Client>> = RefCell::new(HashMap::new());
    static NEXT_ID: Cell<u64> = const { Cell::new(0) };
}

/// A connection's entry on its shard; dropping it (the connection closing)
/// removes the entry. Not `Send`: it lives and dies on the shard that made it.
#[derive(Debug)]
pub struct Registration {
    id: u64,
    _shard_bound: std::marker::PhantomData<*const ()>,
}

impl Registration {
    /// Lists a connection just accepted (and, with TLS, past its handshake).
    pub fn open(address: SocketAddr, tls: Option<TlsInfo>) -> Registration {
        let id = NEXT_ID.with(|next| {
            let id = next.get();
            next.set(id + 1);
            id
        });
        let client = Client {
            address,
            shard: shoal_runtime::this_shard(),
            stage: Stage::Established,
            options: BTreeMap::new(),
            protocol_version: None,
            tls,
            username: None,
        };
        CLIENTS.with(|clients| clients.borrow_mut().insert(id, client));
        Registration { id, _shard_bound: std::marker::PhantomData }
    }

    /// STARTUP was served with `options` over `protocol_version`; the
    /// connection is now at `stage`.
    pub fn started(&self, protocol_version: u8, options: &HashMap<String, String>, stage: Stage) {
        self.update(|client| {
            client.protocol_version = Some(protocol_version);
            client.options = options.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            client.stage = stage;
        });
    }

    /// The client logged in as `username`.
    pub fn logged_in(&self, username: &str) {
        self.update(|client| {
            client.username = Some(username.to_string());
            client.stage = Stage::Ready;
        });
    }

    fn update(&self, change: impl FnOnce(&mut Client)) {
        CLIENTS.with(|clients| {
            // The entry lives as long as this registration.
            if let Some(client) = clients.borrow_mut().get_mut(&self.id) {
                change(client);
            }
        });
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        CLIENTS.with(|clients| clients.borrow_mut().remove(&self.id));
    }
}

/// The rows of `system.clients` now, in the table's column order, gathered
/// from every shard.
pub(crate) async fn rows() -> CqlResult<Vec<Values>> {
    let answers = shoal_coordinator::on_every_shard(|_| async {
        CLIENTS.with(|clients| clients.borrow().values().cloned().collect::<Vec<Client>>())
    })
    .await
    .map_err(|e| CqlError::Server(format!("reading the clients of every shard: {e}")))?;
    Ok(answers.iter().flatten().map(row).collect())
}

/// `address, port, client_type, client_options, connection_stage,
/// driver_name, driver_version, hostname, protocol_version, shard_id,
/// ssl_cipher_suite, ssl_enabled, ssl_protocol, username`.
fn row(client: &Client) -> Values {
    // Without an authenticator every connection is ScyllaDB's "anonymous".
    let username = match (&client.username, client.stage) {
        (Some(name), _) => Some(name.as_str()),
        (None, Stage::Ready) => Some("anonymous"),
        (None, _) => None,
    };
    let option = |name: &str| client.options.get(name).and_then(|v| cells::text(v));
    vec![
        cells::inet(client.address.ip()),
        cells::int(i32::from(client.address.port())),
        cells::text("cql"),
        cells::text_map(&client.options),
        cells::text(client.stage.name()),
        option("DRIVER_NAME"),
        option("DRIVER_VERSION"),
        None,
        client.protocol_version.and_then(|v| cells::int(i32::from(v))),
        cells::int(i32::try_from(client.shard).unwrap_or(i32::MAX)),
        client.tls.as_ref().and_then(|tls| cells::text(&tls.cipher_suite)),
        cells::boolean(client.tls.is_some()),
        client.tls.as_ref().and_then(|tls| cells::text(&tls.protocol)),
        username.and_then(cells::text),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed() -> Vec<Client> {
        CLIENTS.with(|clients| clients.borrow().values().cloned().collect())
    }

    #[test]
    fn a_connection_is_listed_while_it_lives_and_its_login_shows() {
        let checked = shoal_runtime::run_on_a_shard(std::time::Duration::from_secs(10), || async {
            let address: SocketAddr = "127.0.0.1:40000".parse().expect("an address");
            let registration = Registration::open(address, None);
            assert_eq!(listed().len(), 1);
            assert_eq!(listed()[0].stage, Stage::Established);
            let options = HashMap::from([("DRIVER_NAME".to_string(), "d".to_string())]);
            registration.started(4, &options, Stage::Authenticating);
            let client = &listed()[0];
            assert_eq!((client.stage, client.protocol_version), (Stage::Authenticating, Some(4)));
            assert_eq!(row(client)[13], None, "no user before login");
            registration.logged_in("alice");
            let values = row(&listed()[0]);
            assert_eq!(values[4], cells::text("READY"));
            assert_eq!(values[5], cells::text("d"));
            assert_eq!(values[13], cells::text("alice"));
            drop(registration);
            listed().is_empty()
        });
        assert_eq!(checked, Some(true), "the entry is gone once its registration is dropped");
    }
}
