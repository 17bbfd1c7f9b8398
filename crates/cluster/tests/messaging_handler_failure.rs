//! A handler that panics or fails is answered, and frees its in-flight
//! slot: a peer that sends more such requests than a connection runs at
//! once (`IN_FLIGHT_REQUESTS_MAX`) still gets every answer, and the
//! connection goes on serving. (A panic once left its request unanswered
//! and its slot held, so after that many the connection stopped reading.)

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::rc::Rc;
use std::sync::mpsc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures_util::FutureExt;
use shoal_cluster::frame::{self, Frame, Kind};
use shoal_cluster::hello::{Hello, PROTOCOL_VERSION};
use shoal_cluster::messaging::{self, Identity, IN_FLIGHT_REQUESTS_MAX};
use shoal_cluster::verb::Verb;
use uuid::Uuid;

const CLUSTER: &str = "handler failures";
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// Starts one shard serving the storage port with a handler that panics
/// (`Mutation`), one that fails (`ReadData`) and one that answers
/// (`Ping`, its payload back); where it listens.
fn start_node() -> SocketAddr {
    let (listening, address) = mpsc::channel();
    let shards = shoal_runtime::start_shards(1, None, move |_| {
        let listening = listening.clone();
        async move {
            messaging::set_identity(Identity {
                cluster_name: CLUSTER.to_string(),
                host_id: Uuid::from_u128(1),
                address: LOOPBACK,
                storage_port: 0,
                shard_count: 1,
            });
            messaging::register(Verb::Mutation, Rc::new(|_, _| async { panic!("a bad token") }.boxed_local()));
            messaging::register(Verb::ReadData, Rc::new(|_, _| async { Err("refused".to_string()) }.boxed_local()));
            messaging::register(Verb::Ping, Rc::new(|_, payload| async move { Ok(payload) }.boxed_local()));
            let listener =
                shoal_runtime::net::bind(SocketAddr::new(LOOPBACK, 0)).await.expect("a port on the loopback");
            let _ = listening.send(listener.local_addr().expect("a bound listener has an address"));
            messaging::serve(listener).await;
        }
    });
    // The shard threads run until the test process ends.
    std::mem::forget(shards.expect("the shard starts"));
    address.recv_timeout(Duration::from_secs(10)).expect("the node listens")
}

/// A peer speaking the internode protocol by hand.
struct Peer {
    stream: TcpStream,
    pending: BytesMut,
}

impl Peer {
    fn connect(node: SocketAddr) -> Peer {
        let stream = TcpStream::connect(node).expect("the node accepts");
        stream.set_read_timeout(Some(Duration::from_secs(10))).expect("a read timeout");
        let mut peer = Peer { stream, pending: BytesMut::new() };
        let hello = Hello {
            version: PROTOCOL_VERSION,
            cluster_name: CLUSTER.to_string(),
            host_id: Uuid::from_u128(2),
            address: LOOPBACK,
            storage_port: 1,
            shard_count: 1,
            from_shard: 0,
            to_shard: 0,
        };
        let mut payload = Vec::new();
        hello.encode(&mut payload);
        peer.send(Verb::Hello, 0, &payload);
        assert_eq!(peer.receive().kind, Kind::Response, "welcomed");
        peer
    }

    fn send(&mut self, verb: Verb, id: u64, payload: &[u8]) {
        let mut out = Vec::new();
        frame::encode(&mut out, Kind::Request, verb, id, payload);
        self.stream.write_all(&out).expect("the node reads");
    }

    /// The next frame; fails the test when none comes in 10 s.
    fn receive(&mut self) -> Frame {
        let mut buffer = [0; 64 * 1024];
        loop {
            if let Some(frame) = frame::decode(&mut self.pending).expect("well-formed frames") {
                return frame;
            }
            let read = self.stream.read(&mut buffer).expect("an answer within 10 s");
            assert!(read > 0, "the node closed the connection");
            self.pending.extend_from_slice(&buffer[..read]);
        }
    }
}

#[test]
fn a_handler_that_panics_or_fails_is_answered_and_frees_its_slot() {
    // Over a thousand panics on the shard are expected: not a message
    // each. The test's own still say why it failed.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |panic| {
        if !std::thread::current().name().is_some_and(|name| name.starts_with("shard-")) {
            report(panic);
        }
    }));
    let mut peer = Peer::connect(start_node());
    let requests = IN_FLIGHT_REQUESTS_MAX as u64 + 16;
    for id in 1..=requests {
        let verb = if id % 2 == 0 { Verb::Mutation } else { Verb::ReadData };
        peer.send(verb, id, b"");
    }
    let mut answered = vec![false; requests as usize + 1];
    for _ in 1..=requests {
        let answer = peer.receive();
        assert_eq!(answer.kind, Kind::Failure, "{:?} {} failed", answer.verb, answer.id);
        let message = String::from_utf8_lossy(&answer.payload);
        let expected = if answer.verb == Verb::Mutation { "a bad token" } else { "refused" };
        assert!(message.contains(expected), "{:?}: {message}", answer.verb);
        assert!(!std::mem::replace(&mut answered[answer.id as usize], true), "answered once");
    }
    peer.send(Verb::Ping, requests + 1, b"still here");
    let pong = peer.receive();
    assert_eq!((pong.kind, pong.id, pong.payload), (Kind::Response, requests + 1, Bytes::from_static(b"still here")));
}
