//! Internode frames: what one node's shard sends another's over TCP.
//!
//! A frame is `[u32 body length][u32 crc32c of the body][body]`, integers
//! big-endian, and a body is `[u8 kind][u8 verb][u64 id][payload]`. A
//! request carries an id its sender chose; the response (or failure) to it
//! carries the same id, so many requests share a connection and their
//! answers may come in any order.
//!
//! The decoder is total: any bytes give a frame, "incomplete" or an error,
//! and an error means the stream is out of step or damaged, so the
//! connection is closed (fuzzed by `fuzz/fuzz_targets/internode_frame.rs`).
//! A body's length is checked against [`MAX_BODY_BYTES`] before anything
//! is buffered for it.

use bytes::{Buf, Bytes, BytesMut};
use thiserror::Error;

use crate::verb::Verb;

/// Length and checksum.
pub const FRAME_HEADER_BYTES: usize = 8;
/// Kind, verb and id.
pub const BODY_HEADER_BYTES: usize = 1 + 1 + 8;
/// The largest body a node sends or takes; larger data (streaming) goes in
/// several frames.
pub const MAX_BODY_BYTES: usize = 64 << 20;

/// What a frame is to the request it belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request = 0,
    Response = 1,
    /// The request failed on the receiving node; the payload says why
    /// (UTF-8).
    Failure = 2,
    /// A request that is not answered (ScyllaDB's one-way verbs: an
    /// acknowledgement sent as a message of its own).
    OneWay = 3,
}

impl Kind {
    fn from_u8(byte: u8) -> Option<Kind> {
        Some(match byte {
            0 => Kind::Request,
            1 => Kind::Response,
            2 => Kind::Failure,
            3 => Kind::OneWay,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: Kind,
    pub verb: Verb,
    pub id: u64,
    pub payload: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    #[error("internode frame of {bytes} bytes is over the limit of {max_bytes}")]
    TooLarge { bytes: usize, max_bytes: usize },
    #[error("internode frame of {bytes} bytes is shorter than its {BODY_HEADER_BYTES}-byte header")]
    TooShort { bytes: usize },
    #[error("internode frame checksum mismatch (the stream is damaged or out of step)")]
    Checksum,
    #[error("internode frame of unknown kind {0}")]
    UnknownKind(u8),
    #[error("internode frame of unknown verb {0}")]
    UnknownVerb(u8),
}

/// Appends one frame to `out`.
pub fn encode(out: &mut Vec<u8>, kind: Kind, verb: Verb, id: u64, payload: &[u8]) {
    let body_bytes = BODY_HEADER_BYTES + payload.len();
    assert!(body_bytes <= MAX_BODY_BYTES, "an internode payload of {} bytes is over the limit", payload.len());
    let start = out.len();
    out.extend_from_slice(&(body_bytes as u32).to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    out.push(kind as u8);
    out.push(verb as u8);
    out.extend_from_slice(&id.to_be_bytes());
    out.extend_from_slice(payload);
    let crc = crc32c::crc32c(&out[start + FRAME_HEADER_BYTES..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_be_bytes());
}

/// Takes the first complete frame off `buf`; `Ok(None)` until one is there.
pub fn decode(buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
    let Some(body_bytes) = body_bytes(buf) else {
        return Ok(None);
    };
    if body_bytes > MAX_BODY_BYTES {
        return Err(FrameError::TooLarge { bytes: body_bytes, max_bytes: MAX_BODY_BYTES });
    }
    if body_bytes < BODY_HEADER_BYTES {
        return Err(FrameError::TooShort { bytes: body_bytes });
    }
    if buf.len() < FRAME_HEADER_BYTES + body_bytes {
        buf.reserve(FRAME_HEADER_BYTES + body_bytes - buf.len());
        return Ok(None);
    }
    let crc = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]);
    if crc32c::crc32c(&buf[FRAME_HEADER_BYTES..FRAME_HEADER_BYTES + body_bytes]) != crc {
        return Err(FrameError::Checksum);
    }
    let kind = Kind::from_u8(buf[8]).ok_or(FrameError::UnknownKind(buf[8]))?;
    let verb = Verb::from_u8(buf[9]).ok_or(FrameError::UnknownVerb(buf[9]))?;
    buf.advance(FRAME_HEADER_BYTES + 2);
    let id = buf.get_u64();
    let payload = buf.split_to(body_bytes - BODY_HEADER_BYTES).freeze();
    Ok(Some(Frame { kind, verb, id, payload }))
}

/// After [`decode`] found no whole frame in `buf`: the bytes still to come
/// of the frame whose header `buf` holds, if it holds one (`decode` made
/// room for them).
pub fn bytes_to_come(buf: &BytesMut) -> Option<usize> {
    body_bytes(buf).map(|body_bytes| (FRAME_HEADER_BYTES + body_bytes).saturating_sub(buf.len()))
}

/// The body length the frame header at the start of `buf` gives, once the
/// whole header is there.
fn body_bytes(buf: &BytesMut) -> Option<usize> {
    (buf.len() >= FRAME_HEADER_BYTES).then(|| u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn encoded(kind: Kind, verb: Verb, id: u64, payload: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode(&mut out, kind, verb, id, payload);
        out
    }

    #[test]
    fn frames_round_trip_byte_by_byte_and_back_to_back() {
        let mut wire = encoded(Kind::Request, Verb::Ping, 7, b"hello");
        wire.extend(encoded(Kind::Failure, Verb::Hello, u64::MAX, b""));
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for byte in wire {
            buf.extend_from_slice(&[byte]);
            while let Some(frame) = decode(&mut buf).expect("a good stream") {
                frames.push(frame);
            }
        }
        assert_eq!(
            frames,
            vec![
                Frame { kind: Kind::Request, verb: Verb::Ping, id: 7, payload: Bytes::from_static(b"hello") },
                Frame { kind: Kind::Failure, verb: Verb::Hello, id: u64::MAX, payload: Bytes::new() },
            ]
        );
        assert!(buf.is_empty());
    }

    #[test]
    fn a_partial_frame_says_how_much_is_to_come_and_has_room_for_it() {
        let wire = encoded(Kind::Request, Verb::Ping, 7, &[9; 1000]);
        let mut buf = BytesMut::from(&wire[..5]);
        assert_eq!(decode(&mut buf), Ok(None));
        assert_eq!(bytes_to_come(&buf), None, "no whole header yet");
        let mut buf = BytesMut::from(&wire[..100]);
        assert_eq!(decode(&mut buf), Ok(None));
        assert_eq!(bytes_to_come(&buf), Some(wire.len() - 100));
        assert!(buf.capacity() - buf.len() >= wire.len() - 100);
    }

    #[test]
    fn damage_and_nonsense_are_errors() {
        let mut wire = encoded(Kind::Response, Verb::Ping, 1, b"abc");
        *wire.last_mut().expect("a payload byte") ^= 1;
        assert_eq!(decode(&mut BytesMut::from(&wire[..])), Err(FrameError::Checksum));

        let huge = ((MAX_BODY_BYTES + 1) as u32).to_be_bytes();
        let mut buf = BytesMut::from(&[huge[0], huge[1], huge[2], huge[3], 0, 0, 0, 0][..]);
        assert!(matches!(decode(&mut buf), Err(FrameError::TooLarge { .. })));

        let mut short = BytesMut::from(&[0, 0, 0, 3, 0, 0, 0, 0, 1, 2, 3][..]);
        assert_eq!(decode(&mut short), Err(FrameError::TooShort { bytes: 3 }));

        for (at, bad, error) in [(8, 9, FrameError::UnknownKind(9)), (9, 250, FrameError::UnknownVerb(250))] {
            let mut wire = encoded(Kind::Request, Verb::Ping, 1, b"");
            wire[at] = bad;
            let crc = crc32c::crc32c(&wire[FRAME_HEADER_BYTES..]);
            wire[4..8].copy_from_slice(&crc.to_be_bytes());
            assert_eq!(decode(&mut BytesMut::from(&wire[..])), Err(error));
        }
    }
}
