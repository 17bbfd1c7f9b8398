//! A connection's frames on their way out: encoded straight into one
//! buffer that its writer takes whole, so every frame queued in a reactor
//! turn leaves in one write, with no allocation or copy per frame.
//!
//! Both ends of a connection use one: the opener for its requests, the
//! server for its answers. The writer ([`write_loop`]) swaps the buffer
//! for the one it wrote last (emptied, its room kept), so two buffers
//! take turns and a steady stream of frames allocates nothing. It wakes
//! whoever waits for room ([`Outbox::wait_for_room`]) after each write.
//!
//! Shard-local: one shard owns a connection and everything here, so plain
//! cells hold the state and a waker each party (no locks, no channels).

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::task::{Poll, Waker};

use shoal_runtime::net::BufResult;
use shoal_tls::Socket;

use crate::frame::{self, Kind};
use crate::verb::Verb;

/// A buffer kept between writes grows no bigger than this: one burst of
/// large frames (streaming) does not keep its memory for good.
const KEPT_BUFFER_BYTES_MAX: usize = 1 << 20;

#[derive(Default)]
pub(crate) struct Outbox {
    /// Frames encoded and not yet taken by the writer.
    frames: RefCell<Vec<u8>>,
    /// Bytes queued and not yet written: those in `frames` and those of
    /// the write in progress.
    queued_bytes: Cell<usize>,
    /// Set when the connection is gone or a write failed: frames are
    /// dropped and the writer ends.
    closed: Cell<bool>,
    /// The writer, waiting for frames.
    writer: Cell<Option<Waker>>,
    /// Someone waiting for room (a server's reader, held back while too
    /// much waits to be written or too many requests run).
    room: Cell<Option<Waker>>,
}

impl Outbox {
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes.get()
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed.get()
    }

    /// Appends one frame for the writer; false (and nothing queued) once
    /// the connection is closed.
    pub(crate) fn push(&self, kind: Kind, verb: Verb, id: u64, payload: &[u8]) -> bool {
        if self.closed.get() {
            return false;
        }
        let mut frames = self.frames.borrow_mut();
        let before = frames.len();
        frame::encode(&mut frames, kind, verb, id, payload);
        self.queued_bytes.set(self.queued_bytes.get() + frames.len() - before);
        drop(frames);
        wake(&self.writer);
        true
    }

    /// Closes the connection's sending side: queued frames are dropped and
    /// the writer ends, which closes its half of the socket.
    pub(crate) fn close(&self) {
        self.closed.set(true);
        wake(&self.writer);
        wake(&self.room);
    }

    /// Wakes whoever waits in [`Outbox::wait_for_room`] to look again
    /// (something it waits on besides this outbox changed).
    pub(crate) fn wake_waiting(&self) {
        wake(&self.room);
    }

    /// Waits until `ready` holds, looked at again after each write and
    /// each [`Outbox::wake_waiting`]; false if the connection closed first.
    pub(crate) async fn wait_for_room(&self, ready: impl Fn() -> bool) -> bool {
        poll_fn(|cx| {
            if self.closed.get() {
                return Poll::Ready(false);
            }
            if ready() {
                return Poll::Ready(true);
            }
            self.room.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }

    /// The frames queued so far, `spare` left in their place; `None` once
    /// closed. Waits while nothing is queued.
    async fn take(&self, spare: &mut Vec<u8>) -> Option<Vec<u8>> {
        poll_fn(|cx| {
            if self.closed.get() {
                return Poll::Ready(None);
            }
            let mut frames = self.frames.borrow_mut();
            if frames.is_empty() {
                self.writer.set(Some(cx.waker().clone()));
                return Poll::Pending;
            }
            Poll::Ready(Some(std::mem::replace(&mut *frames, std::mem::take(spare))))
        })
        .await
    }
}

fn wake(waiting: &Cell<Option<Waker>>) {
    if let Some(waker) = waiting.take() {
        waker.wake();
    }
}

/// Writes what `outbox` queues, everything queued at once in one write,
/// until the connection closes or a write fails (which closes it).
pub(crate) async fn write_loop(mut writer: Socket, outbox: std::rc::Rc<Outbox>) {
    let mut spare = Vec::new();
    while let Some(batch) = outbox.take(&mut spare).await {
        let bytes = batch.len();
        let BufResult(result, mut written) = writer.write_all(batch).await;
        outbox.queued_bytes.set(outbox.queued_bytes.get().saturating_sub(bytes));
        wake(&outbox.room);
        if result.is_err() {
            outbox.close();
            return;
        }
        written.clear();
        if written.capacity() <= KEPT_BUFFER_BYTES_MAX {
            spare = written;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{decode, Frame};
    use bytes::{Bytes, BytesMut};

    #[test]
    fn frames_pushed_queue_in_one_buffer_until_closed() {
        let outbox = Outbox::default();
        assert!(outbox.push(Kind::Request, Verb::Ping, 1, b"a"));
        assert!(outbox.push(Kind::Response, Verb::Ping, 2, b"bc"));
        let queued = outbox.frames.borrow().len();
        assert_eq!(outbox.queued_bytes(), queued);
        let mut wire = BytesMut::from(&outbox.frames.borrow()[..]);
        let first = decode(&mut wire).expect("good frames").expect("a frame");
        let second = decode(&mut wire).expect("good frames").expect("a frame");
        assert_eq!(first, Frame { kind: Kind::Request, verb: Verb::Ping, id: 1, payload: Bytes::from_static(b"a") });
        assert_eq!(second.id, 2);
        outbox.close();
        assert!(!outbox.push(Kind::Request, Verb::Ping, 3, b""), "a closed outbox takes nothing");
        assert_eq!(outbox.frames.borrow().len(), queued);
    }
}
