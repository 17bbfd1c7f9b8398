//! A connection's socket, plain or TLS, with the calls the protocols use:
//! reads that append to the connection's buffer, whole writes, a split
//! into a read half and a write half, and a hand-off to another shard.
//!
//! A TLS socket runs a [`Session`] over the shard's TCP stream: each read
//! takes what the kernel has (at most [`READ_BYTES`]) and decrypts it in
//! one go, each write encrypts the caller's bytes into one buffer and
//! writes it whole. The two halves of a split share the session
//! (`Rc<RefCell>`: one shard, and no borrow is held across an await).
//! Records the read half makes the session queue (a TLS 1.3 key update's
//! answer) go out with the write half's next write.
//!
//! A handshake must finish within the acceptor's timeout; a client that
//! stalls in it is cut off ([`TlsError::HandshakeTimeout`]).

use std::cell::RefCell;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::Duration;

use shoal_runtime::net::{self, AsyncWriteExt, BufResult, DetachedStream, TcpStream};

use crate::credentials::{self, TlsFiles};
use crate::reload::{Reloadable, Watcher};
use crate::session::{Received, Session};
use crate::TlsError;

/// Room made for each read of ciphertext.
pub const READ_BYTES: usize = 64 * 1024;
/// A write buffer kept past this size is given back after the write.
const KEPT_WRITE_BUFFER_BYTES: usize = 1 << 20;

/// A server's side of TLS: its current configuration (reloaded when its
/// files change) and how long a client may take to finish the handshake.
#[derive(Debug, Clone)]
pub struct Acceptor {
    config: Reloadable<rustls::ServerConfig>,
    handshake_timeout: Duration,
}

impl Acceptor {
    /// Reads `files` now (an error stops the node from starting) and has
    /// `watcher` rebuild the configuration when they change.
    pub fn new(
        what: &str,
        files: TlsFiles,
        handshake_timeout: Duration,
        watcher: &mut Watcher,
    ) -> Result<Acceptor, TlsError> {
        let config = Reloadable::new(credentials::server_config(&files)?);
        watcher.watch(what, files.paths(), &config, move || credentials::server_config(&files));
        Ok(Acceptor { config, handshake_timeout })
    }

    /// The TLS handshake of an accepted connection, within the timeout.
    pub async fn accept(&self, tcp: TcpStream) -> Result<Socket, TlsError> {
        let session = Session::server(self.config.load())?;
        handshake_within(self.handshake_timeout, tcp, session).await
    }
}

/// A client's side of TLS (a node connecting to its peers).
#[derive(Debug, Clone)]
pub struct Connector {
    config: Reloadable<rustls::ClientConfig>,
    handshake_timeout: Duration,
}

impl Connector {
    /// As [`Acceptor::new`]; `verify_name` asks that a peer's certificate
    /// name the address it is reached at.
    pub fn new(
        what: &str,
        files: TlsFiles,
        verify_name: bool,
        handshake_timeout: Duration,
        watcher: &mut Watcher,
    ) -> Result<Connector, TlsError> {
        let config = Reloadable::new(credentials::client_config(&files, verify_name)?);
        watcher.watch(what, files.paths(), &config, move || credentials::client_config(&files, verify_name));
        Ok(Connector { config, handshake_timeout })
    }

    /// The TLS handshake of a connection to `server`, within the timeout.
    pub async fn connect(&self, tcp: TcpStream, server: IpAddr) -> Result<Socket, TlsError> {
        let session = Session::client(self.config.load(), server)?;
        handshake_within(self.handshake_timeout, tcp, session).await
    }
}

/// An accepted connection as its listener is configured: TLS with an
/// acceptor, plain without.
pub async fn accept(acceptor: Option<&Acceptor>, tcp: TcpStream) -> Result<Socket, TlsError> {
    match acceptor {
        Some(acceptor) => acceptor.accept(tcp).await,
        None => Ok(Socket::Plain(tcp)),
    }
}

async fn handshake_within(limit: Duration, tcp: TcpStream, session: Session) -> Result<Socket, TlsError> {
    match shoal_runtime::time::timeout(limit, handshake(tcp, session)).await {
        Ok(result) => result,
        Err(_) => Err(TlsError::HandshakeTimeout(limit.as_millis())),
    }
}

/// Sends what the session has to say and reads what the peer answers
/// until the handshake is done. A failure's alert is sent before giving up.
async fn handshake(mut tcp: TcpStream, mut session: Session) -> Result<Socket, TlsError> {
    let mut incoming = Vec::with_capacity(READ_BYTES);
    let mut outgoing = Vec::new();
    let mut plaintext = Vec::new();
    let mut failure = None;
    loop {
        outgoing.clear();
        session.take_output(&mut outgoing)?;
        if !outgoing.is_empty() {
            let BufResult(written, returned) = tcp.write_all(outgoing).await;
            outgoing = returned;
            written.map_err(TlsError::Io)?;
        }
        if let Some(failure) = failure {
            return Err(failure);
        }
        if !session.is_handshaking() {
            break;
        }
        incoming.clear();
        let BufResult(read, returned) = net::read_appending(&mut tcp, incoming, READ_BYTES).await;
        incoming = returned;
        if read.map_err(TlsError::Io)? == 0 {
            return Err(TlsError::ClosedInHandshake);
        }
        match session.receive(&incoming, &mut plaintext) {
            Ok(Received::Open) => {}
            Ok(Received::Closed) => return Err(TlsError::ClosedInHandshake),
            Err(e) => failure = Some(e),
        }
    }
    Ok(Socket::Tls(TlsStream {
        tcp,
        session: Rc::new(RefCell::new(session)),
        incoming,
        plaintext,
        outgoing,
        peer_closed: false,
    }))
}

/// A connection's socket.
#[derive(Debug)]
pub enum Socket {
    Plain(TcpStream),
    Tls(TlsStream),
}

/// A TLS connection after its handshake.
#[derive(Debug)]
pub struct TlsStream {
    tcp: TcpStream,
    session: Rc<RefCell<Session>>,
    /// This half's buffer of ciphertext read.
    incoming: Vec<u8>,
    /// Plaintext decrypted and not yet handed out.
    plaintext: Vec<u8>,
    /// This half's buffer of records to write.
    outgoing: Vec<u8>,
    /// The peer sent close_notify.
    peer_closed: bool,
}

impl Socket {
    /// Reads what the connection has into `buf` after its bytes (see
    /// `runtime::net::read_appending`); 0 at the end of the stream. Over
    /// TLS, `min_spare_bytes` is only a hint: what one read of ciphertext
    /// decrypts to is appended whole.
    pub async fn read_appending<B: net::IoBufMut>(&mut self, buf: B, min_spare_bytes: usize) -> BufResult<usize, B> {
        match self {
            Socket::Plain(tcp) => net::read_appending(tcp, buf, min_spare_bytes).await,
            Socket::Tls(tls) => tls.read_appending(buf).await,
        }
    }

    /// Writes all of `buf`.
    pub async fn write_all(&mut self, buf: Vec<u8>) -> BufResult<(), Vec<u8>> {
        match self {
            Socket::Plain(tcp) => tcp.write_all(buf).await,
            Socket::Tls(tls) => tls.write_all(buf).await,
        }
    }

    /// Tells a TLS peer that nothing more comes (close_notify), so it can
    /// tell an orderly end from a cut connection; best effort.
    pub async fn close(&mut self) {
        if let Socket::Tls(tls) = self {
            let mut out = Vec::new();
            let closed = {
                let mut session = tls.session.borrow_mut();
                session.close();
                session.take_output(&mut out)
            };
            if closed.is_ok() {
                let _ = tls.tcp.write_all(out).await;
            }
        }
    }

    fn tcp(&self) -> &TcpStream {
        match self {
            Socket::Plain(tcp) => tcp,
            Socket::Tls(tls) => &tls.tcp,
        }
    }

    pub fn set_nodelay(&self, nodelay: bool) -> std::io::Result<()> {
        self.tcp().set_nodelay(nodelay)
    }

    pub fn peer_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp().peer_addr()
    }

    pub fn is_tls(&self) -> bool {
        matches!(self, Socket::Tls(_))
    }

    /// Over TLS, the protocol version and cipher suite in use
    /// ([`Session::negotiated`]).
    pub fn negotiated(&self) -> Option<(&'static str, String)> {
        match self {
            Socket::Plain(_) => None,
            Socket::Tls(tls) => tls.session.borrow().negotiated(),
        }
    }

    /// A read half and a write half, to be used by two tasks of this shard.
    pub fn into_split(self) -> (Socket, Socket) {
        match self {
            Socket::Plain(tcp) => {
                let (reader, writer) = tcp.into_split();
                (Socket::Plain(reader), Socket::Plain(writer))
            }
            Socket::Tls(tls) => {
                let (reader, writer) = tls.tcp.into_split();
                let writer = TlsStream {
                    tcp: writer,
                    session: Rc::clone(&tls.session),
                    incoming: Vec::new(),
                    plaintext: Vec::new(),
                    outgoing: tls.outgoing,
                    peer_closed: tls.peer_closed,
                };
                let reader = TlsStream {
                    tcp: reader,
                    session: tls.session,
                    incoming: tls.incoming,
                    plaintext: tls.plaintext,
                    outgoing: Vec::new(),
                    peer_closed: tls.peer_closed,
                };
                (Socket::Tls(reader), Socket::Tls(writer))
            }
        }
    }

    /// Takes the connection off this shard, with its TLS session and the
    /// plaintext it decrypted and did not hand out yet. A socket that was
    /// split cannot move: its halves share the session.
    pub fn detach(self) -> Result<DetachedSocket, TlsError> {
        match self {
            Socket::Plain(tcp) => Ok(DetachedSocket { stream: net::detach(tcp).map_err(TlsError::Io)?, tls: None }),
            Socket::Tls(tls) => {
                let session = Rc::try_unwrap(tls.session).map_err(|_| TlsError::Split)?.into_inner();
                let stream = net::detach(tls.tcp).map_err(TlsError::Io)?;
                Ok(DetachedSocket { stream, tls: Some((session, tls.plaintext, tls.peer_closed)) })
            }
        }
    }
}

/// A connection on its way to another shard.
#[derive(Debug)]
pub struct DetachedSocket {
    stream: DetachedStream,
    tls: Option<(Session, Vec<u8>, bool)>,
}

impl DetachedSocket {
    /// Puts the connection on the current shard's executor.
    pub fn attach(self) -> std::io::Result<Socket> {
        let tcp = net::attach(self.stream)?;
        Ok(match self.tls {
            None => Socket::Plain(tcp),
            Some((session, plaintext, peer_closed)) => Socket::Tls(TlsStream {
                tcp,
                session: Rc::new(RefCell::new(session)),
                incoming: Vec::new(),
                plaintext,
                outgoing: Vec::new(),
                peer_closed,
            }),
        })
    }
}

impl TlsStream {
    async fn read_appending<B: net::IoBufMut>(&mut self, mut buf: B) -> BufResult<usize, B> {
        loop {
            if !self.plaintext.is_empty() {
                let handed = self.plaintext.len();
                if let Err(e) = buf.extend_from_slice(&self.plaintext) {
                    return BufResult(Err(std::io::Error::other(e.to_string())), buf);
                }
                self.plaintext.clear();
                return BufResult(Ok(handed), buf);
            }
            if self.peer_closed {
                return BufResult(Ok(0), buf);
            }
            self.incoming.clear();
            let BufResult(read, incoming) =
                net::read_appending(&mut self.tcp, std::mem::take(&mut self.incoming), READ_BYTES).await;
            self.incoming = incoming;
            match read {
                Err(e) => return BufResult(Err(e), buf),
                Ok(0) => return BufResult(Ok(0), buf),
                Ok(_) => {}
            }
            match self.session.borrow_mut().receive(&self.incoming, &mut self.plaintext) {
                Ok(Received::Open) => {}
                Ok(Received::Closed) => self.peer_closed = true,
                Err(e) => return BufResult(Err(e.into()), buf),
            }
        }
    }

    async fn write_all(&mut self, buf: Vec<u8>) -> BufResult<(), Vec<u8>> {
        let mut outgoing = std::mem::take(&mut self.outgoing);
        outgoing.clear();
        if let Err(e) = self.session.borrow_mut().send(&buf, &mut outgoing) {
            return BufResult(Err(e.into()), buf);
        }
        let BufResult(written, outgoing) = self.tcp.write_all(outgoing).await;
        if outgoing.capacity() <= KEPT_WRITE_BUFFER_BYTES {
            self.outgoing = outgoing;
        }
        BufResult(written, buf)
    }
}
