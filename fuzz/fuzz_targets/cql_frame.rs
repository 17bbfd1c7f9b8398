//! Fuzzes the CQL native protocol v4 request path with arbitrary bytes:
//! splitting frames off a stream (small maximum frame size), decompressing
//! bodies with LZ4 and Snappy, decoding request bodies under every opcode and
//! flag combination, and reading every wire primitive. Nothing may panic; the
//! few properties that must hold on any input are asserted.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use shoal_transport::compression::Compression;
use shoal_transport::frame::{FrameDecoder, FLAG_CUSTOM_PAYLOAD, HEADER_LEN};
use shoal_transport::request::Request;
use shoal_transport::response::{encode_frame_error, ErrorBody};
use shoal_transport::wire::Reader;

/// Small so that oversized-frame and decompression bounds get exercised.
const MAX_FRAME_BYTES: usize = 64 * 1024;
const COMPRESSIONS: [Compression; 2] = [Compression::Lz4, Compression::Snappy];

fuzz_target!(|data: &[u8]| {
    split_frames(data);
    decode_as_every_request(data);
    compression_bounds_and_round_trip(data);
    read_primitives(data);
});

/// Frames from a stream: each decoded body has the header's length, every
/// body decodes or fails cleanly, and every error can be answered.
fn split_frames(data: &[u8]) {
    let decoder = FrameDecoder::new(MAX_FRAME_BYTES);
    let mut buf = BytesMut::from(data);
    loop {
        let before = buf.len();
        match decoder.decode(&mut buf) {
            Ok(Some(frame)) => {
                let header = frame.header;
                assert_eq!(frame.body.len(), header.length as usize);
                assert_eq!(before - buf.len(), HEADER_LEN + frame.body.len());
                for compression in [None, Some(Compression::Lz4), Some(Compression::Snappy)] {
                    if let Ok(body) = frame.clone().into_body(compression, MAX_FRAME_BYTES) {
                        assert!(body.len() <= MAX_FRAME_BYTES);
                        answer(Request::decode_with_flags(header.flags, header.opcode, body));
                    }
                }
            }
            Ok(None) => {
                assert_eq!(buf.len(), before);
                break;
            }
            Err(err) => {
                let mut out = Vec::new();
                assert!(encode_frame_error(&mut out, &err).is_ok());
                break;
            }
        }
    }
}

/// What the server does with a decode error: turn it into an ERROR body.
fn answer<T>(result: Result<T, shoal_transport::request::RequestError>) {
    if let Err(err) = result {
        let mut out = Vec::new();
        ErrorBody::from(&err).write(&mut out);
    }
}

fn decode_as_every_request(data: &[u8]) {
    let body = Bytes::copy_from_slice(data);
    for opcode in 0..=0x11u8 {
        for flags in [0, FLAG_CUSTOM_PAYLOAD] {
            answer(Request::decode_with_flags(flags, opcode, body.clone()));
        }
    }
}

fn compression_bounds_and_round_trip(data: &[u8]) {
    for compression in COMPRESSIONS {
        if let Ok(plain) = compression.decompress(data, MAX_FRAME_BYTES) {
            assert!(plain.len() <= MAX_FRAME_BYTES);
        }
        let mut packed = Vec::new();
        assert!(compression.compress(data, &mut packed).is_ok());
        let back = compression.decompress(&packed, data.len());
        assert_eq!(back.as_deref(), Ok(data), "{compression:?} round trip");
    }
}

/// Reads every primitive from every starting offset of a short prefix.
fn read_primitives(data: &[u8]) {
    for start in 0..data.len().min(8) {
        let input = &data[start..];
        let _ = Reader::new(input).read_type_option();
        let _ = Reader::new(input).read_inet();
        let _ = Reader::new(input).read_string_multimap();
        let _ = Reader::new(input).read_bytes_map();
        let _ = Reader::new(input).read_string_map();
        let _ = Reader::new(input).read_value();
        let _ = Reader::new(input).read_uuid();
    }
}
