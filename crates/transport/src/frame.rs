//! Frame headers of the CQL native protocol v4 (spec section 2): splitting a
//! byte stream into frames, and writing response frames.
//!
//! A v4 header is 9 bytes: version (0x04 request / 0x84 response), flags,
//! stream (`i16`), opcode, body length (`u32`). Invariants:
//! - [`decode_frame`] never reads past its input and never trusts the length
//!   field beyond comparing it with the configured maximum: a frame whose
//!   header claims more than the maximum is rejected as soon as the header is
//!   in, before any of its body is buffered;
//! - a frame in any other protocol version is rejected with
//!   [`FrameError::UnsupportedVersion`], which keeps the offending stream id so
//!   the server can answer on it (see that variant for the reply drivers
//!   expect during version negotiation);
//! - response frames are built in place: [`begin_frame`] writes a header with
//!   a zero length, the caller appends the body to the same `Vec`, and
//!   [`finish_frame`] patches the length (compressing the body first when
//!   asked), so a body is never copied just to learn its length.

use std::ops::Range;

use bytes::{Bytes, BytesMut};
use thiserror::Error;

use crate::compression::{Compression, CompressionError};
use crate::wire;

/// Length of a v3+ frame header.
pub const HEADER_LEN: usize = 9;
/// Length of a v1/v2 frame header (one-byte stream id).
pub const LEGACY_HEADER_LEN: usize = 8;
/// The protocol version this crate speaks.
pub const PROTOCOL_VERSION: u8 = 4;
/// Version byte of a v4 request frame.
pub const REQUEST_VERSION: u8 = 0x04;
/// Version byte of a v4 response frame.
pub const RESPONSE_VERSION: u8 = 0x84;
/// Bit of the version byte set on responses.
pub const RESPONSE_BIT: u8 = 0x80;

/// Frame flag: the body is compressed with the algorithm chosen in STARTUP.
pub const FLAG_COMPRESSION: u8 = 0x01;
/// Frame flag: tracing requested (request) / tracing id first in body (response).
pub const FLAG_TRACING: u8 = 0x02;
/// Frame flag: a `[bytes map]` custom payload precedes the message body.
pub const FLAG_CUSTOM_PAYLOAD: u8 = 0x04;
/// Frame flag (responses): a `[string list]` of warnings precedes the body.
pub const FLAG_WARNING: u8 = 0x08;

/// Stream id of server-initiated EVENT frames.
pub const EVENT_STREAM: i16 = -1;

/// Default `native_transport_max_frame_size_in_mb`, in bytes.
pub const DEFAULT_MAX_FRAME_BYTES: usize = 256 * 1024 * 1024;

/// Message kinds (spec 2.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    Error = 0x00,
    Startup = 0x01,
    Ready = 0x02,
    Authenticate = 0x03,
    Options = 0x05,
    Supported = 0x06,
    Query = 0x07,
    Result = 0x08,
    Prepare = 0x09,
    Execute = 0x0A,
    Register = 0x0B,
    Event = 0x0C,
    Batch = 0x0D,
    AuthChallenge = 0x0E,
    AuthResponse = 0x0F,
    AuthSuccess = 0x10,
}

impl Opcode {
    pub fn from_u8(byte: u8) -> Option<Opcode> {
        let op = match byte {
            0x00 => Opcode::Error,
            0x01 => Opcode::Startup,
            0x02 => Opcode::Ready,
            0x03 => Opcode::Authenticate,
            0x05 => Opcode::Options,
            0x06 => Opcode::Supported,
            0x07 => Opcode::Query,
            0x08 => Opcode::Result,
            0x09 => Opcode::Prepare,
            0x0A => Opcode::Execute,
            0x0B => Opcode::Register,
            0x0C => Opcode::Event,
            0x0D => Opcode::Batch,
            0x0E => Opcode::AuthChallenge,
            0x0F => Opcode::AuthResponse,
            0x10 => Opcode::AuthSuccess,
            _ => return None,
        };
        Some(op)
    }

    pub fn code(self) -> u8 {
        self as u8
    }

    /// The spec's name for the message (`AUTH_RESPONSE`).
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Error => "ERROR",
            Opcode::Startup => "STARTUP",
            Opcode::Ready => "READY",
            Opcode::Authenticate => "AUTHENTICATE",
            Opcode::Options => "OPTIONS",
            Opcode::Supported => "SUPPORTED",
            Opcode::Query => "QUERY",
            Opcode::Result => "RESULT",
            Opcode::Prepare => "PREPARE",
            Opcode::Execute => "EXECUTE",
            Opcode::Register => "REGISTER",
            Opcode::Event => "EVENT",
            Opcode::Batch => "BATCH",
            Opcode::AuthChallenge => "AUTH_CHALLENGE",
            Opcode::AuthResponse => "AUTH_RESPONSE",
            Opcode::AuthSuccess => "AUTH_SUCCESS",
        }
    }
}

/// A decoded v4 frame header. `opcode` stays a raw byte: an unknown opcode is
/// a request-level error answered on the frame's stream, not a framing error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// The raw version byte (0x04 for every header [`decode_frame`] returns).
    pub version: u8,
    pub flags: u8,
    pub stream: i16,
    pub opcode: u8,
    /// Body length in bytes, already checked against the maximum.
    pub length: u32,
}

impl FrameHeader {
    /// Header plus body: how many input bytes the frame occupies.
    pub fn frame_len(&self) -> usize {
        HEADER_LEN + self.length as usize
    }

    /// Where the body lies in the buffer the header was decoded from.
    pub fn body_range(&self) -> Range<usize> {
        HEADER_LEN..self.frame_len()
    }

    pub fn is_compressed(&self) -> bool {
        self.flags & FLAG_COMPRESSION != 0
    }

    pub fn wants_tracing(&self) -> bool {
        self.flags & FLAG_TRACING != 0
    }

    pub fn has_custom_payload(&self) -> bool {
        self.flags & FLAG_CUSTOM_PAYLOAD != 0
    }
}

/// Why a frame could not be taken from the input or written.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FrameError {
    /// The client asked for a protocol version other than 4. Drivers
    /// negotiate by trying their highest version and stepping down when the
    /// answer is a ProtocolError whose message contains "Invalid or
    /// unsupported protocol version" (Java) / "unsupported protocol version"
    /// (Python); the message below mirrors ScyllaDB's and contains both.
    /// Answer it on `stream` with the version byte [`FrameError::response_version`]
    /// gives, then close the connection.
    #[error(
        "Invalid or unsupported protocol version ({version}); the lowest supported version is 4 and the greatest is 4"
    )]
    UnsupportedVersion { version: u8, stream: i16 },
    /// A frame with the response bit set arrived at the server.
    #[error("Wrong protocol direction (expected REQUEST, got RESPONSE) on stream {stream}")]
    WrongDirection { stream: i16 },
    /// The header claims a body longer than the configured maximum. The frame
    /// occupies `HEADER_LEN + length` bytes of input, which the caller may
    /// discard to keep the connection, as Cassandra does.
    #[error("frame of {} exceeds native_transport_max_frame_size_in_mb ({})", human_size(*length as usize), human_size(*max))]
    TooLarge { stream: i16, opcode: u8, length: u32, max: usize },
    /// A compressed frame arrived but STARTUP negotiated no compression.
    #[error("frame on stream {stream} has the compression flag set but no compression was negotiated in STARTUP")]
    CompressionNotNegotiated { stream: i16 },
    /// Compressing or decompressing a body failed.
    #[error(transparent)]
    Compression(#[from] CompressionError),
    /// A response body too long for the `[int]` length field.
    #[error("response body of {length} bytes does not fit in a frame")]
    BodyTooLong { length: usize },
}

impl FrameError {
    /// The stream the error belongs to, when the input told it.
    pub fn stream(&self) -> Option<i16> {
        match self {
            FrameError::UnsupportedVersion { stream, .. }
            | FrameError::WrongDirection { stream }
            | FrameError::TooLarge { stream, .. }
            | FrameError::CompressionNotNegotiated { stream } => Some(*stream),
            FrameError::Compression(_) | FrameError::BodyTooLong { .. } => None,
        }
    }

    /// The version byte to answer this error with. Like Cassandra: a client
    /// asking for an older version (1–3) gets the answer in its own version,
    /// which it can parse; a client asking for a newer one gets our version 4,
    /// which Java (3.x) and Go drivers read from the header to pick the version
    /// to retry with, and which Python accepts as well (it decodes by the
    /// response header and steps down by its own list).
    pub fn response_version(&self) -> u8 {
        match self {
            FrameError::UnsupportedVersion { version: v @ 1..=3, .. } => RESPONSE_BIT | v,
            _ => RESPONSE_VERSION,
        }
    }

    /// Whether the connection can go on after the error is answered: only an
    /// oversized frame (once its bytes are skipped) leaves it usable.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, FrameError::TooLarge { .. })
    }
}

/// "300 MB" for whole MiB counts, "1.5 MB" above 1 MiB, "100 bytes" below.
fn human_size(bytes: usize) -> String {
    const MIB: usize = 1024 * 1024;
    if bytes >= MIB && bytes.is_multiple_of(MIB) {
        format!("{} MB", bytes / MIB)
    } else if bytes >= MIB {
        format!("{:.1} MB", bytes as f64 / MIB as f64)
    } else {
        format!("{bytes} bytes")
    }
}

/// Looks for one complete request frame at the start of `buf`.
///
/// Returns `Ok(None)` while more bytes are needed, `Ok(Some(header))` when
/// `buf[..header.frame_len()]` holds a whole frame (body at
/// `header.body_range()`). The version and length are checked as soon as the
/// bytes holding them are in, so a bad frame fails without waiting for its body.
pub fn decode_frame(buf: &[u8], max_frame_bytes: usize) -> Result<Option<FrameHeader>, FrameError> {
    // Every protocol version keeps the stream id within the first 4 bytes.
    let [version_byte, flags, s0, s1, ..] = *buf else {
        return Ok(None);
    };
    let version = version_byte & !RESPONSE_BIT;
    if version != PROTOCOL_VERSION {
        // v1/v2 headers have a one-byte stream id.
        let stream = if version < 3 { i16::from(s0 as i8) } else { i16::from_be_bytes([s0, s1]) };
        return Err(FrameError::UnsupportedVersion { version, stream });
    }
    let stream = i16::from_be_bytes([s0, s1]);
    if version_byte & RESPONSE_BIT != 0 {
        return Err(FrameError::WrongDirection { stream });
    }
    let [_, _, _, _, opcode, l0, l1, l2, l3, ..] = *buf else {
        return Ok(None);
    };
    let length = u32::from_be_bytes([l0, l1, l2, l3]);
    if length as usize > max_frame_bytes {
        return Err(FrameError::TooLarge { stream, opcode, length, max: max_frame_bytes });
    }
    let header = FrameHeader { version: version_byte, flags, stream, opcode, length };
    if buf.len() < header.frame_len() {
        return Ok(None);
    }
    Ok(Some(header))
}

/// A whole request frame split off the input buffer; the body shares the
/// input's allocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub header: FrameHeader,
    pub body: Bytes,
}

impl Frame {
    /// The body, decompressed when the compression flag is set.
    /// `compression` is what STARTUP negotiated.
    pub fn into_body(self, compression: Option<Compression>, max_frame_bytes: usize) -> Result<Bytes, FrameError> {
        if !self.header.is_compressed() {
            return Ok(self.body);
        }
        let Some(compression) = compression else {
            return Err(FrameError::CompressionNotNegotiated { stream: self.header.stream });
        };
        Ok(Bytes::from(compression.decompress(&self.body, max_frame_bytes)?))
    }
}

/// Splits request frames off a connection's read buffer.
#[derive(Debug, Clone, Copy)]
pub struct FrameDecoder {
    max_frame_bytes: usize,
}

impl FrameDecoder {
    pub fn new(max_frame_bytes: usize) -> FrameDecoder {
        FrameDecoder { max_frame_bytes }
    }

    pub fn max_frame_bytes(&self) -> usize {
        self.max_frame_bytes
    }

    /// Takes the next whole frame off the front of `buf`, leaving any
    /// following bytes in place; `Ok(None)` leaves `buf` untouched.
    pub fn decode(&self, buf: &mut BytesMut) -> Result<Option<Frame>, FrameError> {
        let Some(header) = decode_frame(buf, self.max_frame_bytes)? else {
            return Ok(None);
        };
        let mut frame = buf.split_to(header.frame_len()).freeze();
        let body = frame.split_off(HEADER_LEN);
        Ok(Some(Frame { header, body }))
    }
}

/// Where a frame started in an output buffer, returned by [`begin_frame`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameStart {
    offset: usize,
    header_len: usize,
}

impl FrameStart {
    /// Offset of the first body byte in the output buffer.
    pub fn body_offset(&self) -> usize {
        self.offset + self.header_len
    }
}

/// Writes a frame header with a zero length at the end of `out`. `version`
/// is the raw version byte; versions 1 and 2 get their 8-byte header with a
/// one-byte stream id (only ever needed to answer an unsupported version).
pub fn begin_frame(out: &mut Vec<u8>, version: u8, stream: i16, flags: u8, opcode: u8) -> FrameStart {
    let offset = out.len();
    out.push(version);
    out.push(flags);
    if version & !RESPONSE_BIT < 3 {
        // Truncation is the v1/v2 format: the stream id is one byte there.
        out.push(stream as u8);
    } else {
        out.extend_from_slice(&stream.to_be_bytes());
    }
    out.push(opcode);
    out.extend_from_slice(&[0; 4]);
    FrameStart { offset, header_len: out.len() - offset }
}

/// Starts a v4 response frame with no flags.
pub fn begin_response(out: &mut Vec<u8>, stream: i16, opcode: Opcode) -> FrameStart {
    begin_frame(out, RESPONSE_VERSION, stream, 0, opcode.code())
}

/// Starts a v4 response frame carrying a tracing id and/or warnings: sets the
/// matching flags and writes them at the head of the body, where the spec
/// puts them (tracing id first).
pub fn begin_response_with<S: AsRef<str>>(
    out: &mut Vec<u8>,
    stream: i16,
    opcode: Opcode,
    tracing_id: Option<&[u8; 16]>,
    warnings: &[S],
) -> FrameStart {
    let mut flags = 0;
    if tracing_id.is_some() {
        flags |= FLAG_TRACING;
    }
    if !warnings.is_empty() {
        flags |= FLAG_WARNING;
    }
    let start = begin_frame(out, RESPONSE_VERSION, stream, flags, opcode.code());
    if let Some(id) = tracing_id {
        wire::write_uuid(out, id);
    }
    if !warnings.is_empty() {
        wire::write_string_list(out, warnings);
    }
    start
}

/// Completes the frame begun at `start` (by [`begin_frame`] on this same
/// buffer, not truncated since): everything after its header is the body. With `compression`, a non-empty body is compressed and the
/// compression flag set; an empty body is left as is, since compression is
/// optional per frame and some drivers mishandle compressed empty bodies.
pub fn finish_frame(out: &mut Vec<u8>, start: FrameStart, compression: Option<Compression>) -> Result<(), FrameError> {
    let body_at = start.body_offset();
    if let Some(compression) = compression.filter(|_| out.len() > body_at) {
        let mut compressed = Vec::new();
        compression.compress(&out[body_at..], &mut compressed)?;
        out.truncate(body_at);
        out.extend_from_slice(&compressed);
        out[start.offset + 1] |= FLAG_COMPRESSION;
    }
    let length = out.len() - body_at;
    let field = u32::try_from(length).map_err(|_| FrameError::BodyTooLong { length })?;
    out[body_at - 4..body_at].copy_from_slice(&field.to_be_bytes());
    Ok(())
}

/// Writes a 9-byte v4 response header for a body of `body_len` bytes.
pub fn encode_response_header(out: &mut Vec<u8>, stream: i16, flags: u8, opcode: Opcode, body_len: u32) {
    out.push(RESPONSE_VERSION);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.push(opcode.code());
    out.extend_from_slice(&body_len.to_be_bytes());
}

/// Writes a whole v4 response frame for an already built body.
pub fn encode_response(
    out: &mut Vec<u8>,
    stream: i16,
    opcode: Opcode,
    body: &[u8],
    compression: Option<Compression>,
) -> Result<(), FrameError> {
    let start = begin_response(out, stream, opcode);
    out.extend_from_slice(body);
    finish_frame(out, start, compression)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(stream: i16, opcode: u8, body: &[u8]) -> Vec<u8> {
        let mut out = vec![REQUEST_VERSION, 0];
        out.extend_from_slice(&stream.to_be_bytes());
        out.push(opcode);
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    #[test]
    fn decodes_a_whole_frame_and_waits_for_partial_ones() {
        let frame = request(7, 0x07, b"abc");
        for cut in 0..frame.len() {
            assert_eq!(decode_frame(&frame[..cut], 100), Ok(None), "cut at {cut}");
        }
        let header = decode_frame(&frame, 100).ok().flatten().expect("whole frame");
        assert_eq!(header.stream, 7);
        assert_eq!(header.opcode, 0x07);
        assert_eq!(header.length, 3);
        assert_eq!(&frame[header.body_range()], b"abc");
        assert_eq!(header.frame_len(), frame.len());
    }

    #[test]
    fn frame_decoder_splits_consecutive_frames() {
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&request(1, 0x05, b""));
        buf.extend_from_slice(&request(2, 0x07, b"xy"));
        buf.extend_from_slice(&request(3, 0x07, b"z")[..5]);
        let decoder = FrameDecoder::new(1024);
        let first = decoder.decode(&mut buf).ok().flatten().expect("first");
        assert_eq!((first.header.stream, first.body.len()), (1, 0));
        let second = decoder.decode(&mut buf).ok().flatten().expect("second");
        assert_eq!((second.header.stream, &second.body[..]), (2, &b"xy"[..]));
        assert_eq!(decoder.decode(&mut buf), Ok(None));
        assert_eq!(buf.len(), 5);
    }

    #[test]
    fn unsupported_versions_keep_the_stream() {
        for version in [1u8, 2, 3, 5, 6, 0x45] {
            let mut frame = request(300, 0x05, b"");
            frame[0] = version;
            if version < 3 {
                frame[2] = 0xFE; // one-byte stream -2
            }
            let err = decode_frame(&frame[..4], 100).expect_err("error");
            let stream = if version < 3 { -2 } else { 300 };
            assert_eq!(err, FrameError::UnsupportedVersion { version, stream });
            assert!(err.to_string().contains("unsupported protocol version"));
            assert!(err.to_string().starts_with("Invalid or unsupported protocol version"));
        }
        let v5 = FrameError::UnsupportedVersion { version: 5, stream: 0 };
        assert_eq!(v5.response_version(), 0x84);
        assert_eq!(
            v5.to_string(),
            "Invalid or unsupported protocol version (5); the lowest supported version is 4 and the greatest is 4"
        );
        assert_eq!(FrameError::UnsupportedVersion { version: 2, stream: 0 }.response_version(), 0x82);
    }

    #[test]
    fn oversized_frames_fail_at_the_header() {
        let mut header = request(9, 0x07, b"");
        header[5..9].copy_from_slice(&(300u32 * 1024 * 1024).to_be_bytes());
        let err = decode_frame(&header, DEFAULT_MAX_FRAME_BYTES).expect_err("too large");
        assert_eq!(err.stream(), Some(9));
        assert_eq!(err.to_string(), "frame of 300 MB exceeds native_transport_max_frame_size_in_mb (256 MB)");
        assert!(!err.is_fatal());
    }

    #[test]
    fn response_frames_from_clients_are_rejected() {
        let mut frame = request(4, 0x07, b"");
        frame[0] = RESPONSE_VERSION;
        assert_eq!(decode_frame(&frame, 10), Err(FrameError::WrongDirection { stream: 4 }));
    }

    #[test]
    fn begin_and_finish_patch_the_length() {
        let mut out = vec![0xEE]; // earlier bytes in the buffer stay untouched
        let start = begin_response(&mut out, -1, Opcode::Event);
        out.extend_from_slice(b"hello");
        assert_eq!(finish_frame(&mut out, start, None), Ok(()));
        assert_eq!(out, [0xEE, 0x84, 0, 0xFF, 0xFF, 0x0C, 0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o']);
        let mut direct = Vec::new();
        encode_response_header(&mut direct, -1, 0, Opcode::Event, 5);
        assert_eq!(direct, out[1..10]);
    }

    #[test]
    fn tracing_and_warnings_lead_the_body() {
        let mut out = Vec::new();
        let start = begin_response_with(&mut out, 3, Opcode::Result, Some(&[9; 16]), &["careful"]);
        assert_eq!(finish_frame(&mut out, start, None), Ok(()));
        assert_eq!(out[1], FLAG_TRACING | FLAG_WARNING);
        let mut r = wire::Reader::new(&out[HEADER_LEN..]);
        assert_eq!(r.read_uuid(), Ok([9; 16]));
        assert_eq!(r.read_string_list(), Ok(vec!["careful"]));
    }

    #[test]
    fn compressed_responses_round_trip() {
        for compression in [Compression::Lz4, Compression::Snappy] {
            let body = b"abcabcabcabcabcabcabcabcabcabcabcabc".repeat(10);
            let mut out = Vec::new();
            assert_eq!(encode_response(&mut out, 5, Opcode::Result, &body, Some(compression)), Ok(()));
            assert_eq!(out[1], FLAG_COMPRESSION);
            // Re-read it as if it were a request to reuse the decoder.
            out[0] = REQUEST_VERSION;
            let mut buf = BytesMut::from(&out[..]);
            let frame = FrameDecoder::new(1 << 20).decode(&mut buf).ok().flatten().expect("frame");
            assert!(frame.body.len() < body.len());
            let plain = frame.into_body(Some(compression), 1 << 20).expect("decompress");
            assert_eq!(&plain[..], &body[..]);
        }
    }

    #[test]
    fn empty_bodies_are_not_compressed() {
        let mut out = Vec::new();
        assert_eq!(encode_response(&mut out, 0, Opcode::Ready, b"", Some(Compression::Lz4)), Ok(()));
        assert_eq!(out, [0x84, 0, 0, 0, 0x02, 0, 0, 0, 0]);
    }

    #[test]
    fn compressed_flag_without_negotiation_is_an_error() {
        let mut frame = request(2, 0x07, b"xx");
        frame[1] = FLAG_COMPRESSION;
        let mut buf = BytesMut::from(&frame[..]);
        let frame = FrameDecoder::new(100).decode(&mut buf).ok().flatten().expect("frame");
        assert_eq!(frame.into_body(None, 100), Err(FrameError::CompressionNotNegotiated { stream: 2 }));
    }

    #[test]
    fn legacy_header_for_old_versions() {
        let mut out = Vec::new();
        let start = begin_frame(&mut out, 0x82, -2, 0, Opcode::Error.code());
        out.push(1);
        assert_eq!(finish_frame(&mut out, start, None), Ok(()));
        assert_eq!(out, [0x82, 0, 0xFE, 0x00, 0, 0, 0, 1, 1]);
    }

    #[test]
    fn opcodes_round_trip() {
        for byte in 0..=0xFFu8 {
            if let Some(op) = Opcode::from_u8(byte) {
                assert_eq!(op.code(), byte);
                assert!(!op.name().is_empty());
            }
        }
        assert_eq!(Opcode::from_u8(0x04), None);
    }
}
