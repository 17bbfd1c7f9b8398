//! Request message bodies of the CQL native protocol v4 (spec 4.1): STARTUP,
//! AUTH_RESPONSE, OPTIONS, QUERY, PREPARE, EXECUTE, BATCH and REGISTER.
//!
//! Invariants:
//! - decoding takes the (decompressed) body as [`Bytes`] and never copies a
//!   bound value, prepared id or paging state: they are slices of the body;
//! - every length is checked against the bytes present before use (see
//!   [`crate::wire`]); any input yields a [`Request`] or a [`RequestError`],
//!   never a panic;
//! - trailing bytes after a well-formed body are ignored, as the spec asks of
//!   readers so that extensions can append fields (ScyllaDB's tablet routing
//!   appends a byte to EXECUTE);
//! - consistency codes are validated; everything else semantic (page size
//!   sign, serial consistency being SERIAL/LOCAL_SERIAL) is left to the
//!   executor, which knows the statement.

use std::collections::HashMap;

use bytes::Bytes;
use thiserror::Error;

use crate::frame::{Opcode, FLAG_CUSTOM_PAYLOAD};
use shoal_coordinator::ConsistencyLevel;

use crate::wire::{RawValue, Reader, WireError};

/// QUERY/EXECUTE flag: values follow.
pub const QUERY_FLAG_VALUES: u8 = 0x01;
/// QUERY/EXECUTE flag: the client already has the result metadata.
pub const QUERY_FLAG_SKIP_METADATA: u8 = 0x02;
pub const QUERY_FLAG_PAGE_SIZE: u8 = 0x04;
pub const QUERY_FLAG_PAGING_STATE: u8 = 0x08;
pub const QUERY_FLAG_SERIAL_CONSISTENCY: u8 = 0x10;
pub const QUERY_FLAG_DEFAULT_TIMESTAMP: u8 = 0x20;
pub const QUERY_FLAG_NAMES_FOR_VALUES: u8 = 0x40;

/// A bound variable's value: the CQL layer's own type, decoded straight
/// into it so requests reach execution without a conversion.
pub use shoal_cql::BoundValue;

/// `<query_parameters>` of QUERY and EXECUTE (spec 4.1.4).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct QueryParams {
    pub consistency: ConsistencyLevel,
    pub values: Vec<BoundValue>,
    /// The bind marker names, one per value, when flag 0x40 was set.
    pub names: Option<Vec<String>>,
    pub skip_metadata: bool,
    pub page_size: Option<i32>,
    pub paging_state: Option<Bytes>,
    pub serial_consistency: Option<ConsistencyLevel>,
    /// Microseconds since the epoch; never `i64::MIN`.
    pub timestamp: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchType {
    Logged,
    Unlogged,
    Counter,
}

/// What a batch statement runs: CQL text or a prepared statement id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchQuery {
    Query(String),
    Prepared(Bytes),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchStatement {
    pub query: BatchQuery,
    pub values: Vec<BoundValue>,
    /// Value names, when the batch flags carried 0x40.
    pub names: Option<Vec<String>>,
}

/// A BATCH request (spec 4.1.7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub batch_type: BatchType,
    pub statements: Vec<BatchStatement>,
    pub consistency: ConsistencyLevel,
    pub serial_consistency: Option<ConsistencyLevel>,
    pub timestamp: Option<i64>,
}

/// A decoded request message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Options such as `CQL_VERSION` and `COMPRESSION`; on duplicate keys the
    /// last one wins.
    Startup {
        options: HashMap<String, String>,
    },
    Options,
    Query {
        query: String,
        params: QueryParams,
    },
    Prepare {
        query: String,
    },
    Execute {
        id: Bytes,
        params: QueryParams,
    },
    Batch(Batch),
    Register {
        events: Vec<String>,
    },
    /// The SASL token; `None` when the client sent a null `[bytes]`.
    AuthResponse {
        token: Option<Bytes>,
    },
}

/// A request's custom payload (frame flag 0x04), as `[bytes map]` pairs.
pub type CustomPayload = Vec<(String, Option<Bytes>)>;

/// Why a request body could not be decoded. The server answers it with a
/// ProtocolError (0x000A) carrying this message.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RequestError {
    #[error("unknown request opcode 0x{0:02x}")]
    UnknownOpcode(u8),
    #[error("malformed {request} request: {problem}")]
    Malformed { request: &'static str, problem: BodyError },
}

/// What was wrong inside a request body.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BodyError {
    #[error(transparent)]
    Wire(#[from] WireError),
    #[error("unknown consistency level code 0x{0:04x}")]
    UnknownConsistency(u16),
    #[error("unknown batch type {0}: expected 0 (logged), 1 (unlogged) or 2 (counter)")]
    UnknownBatchType(u8),
    #[error("statement {index} has query kind {kind}: expected 0 (query string) or 1 (prepared id)")]
    InvalidBatchKind { index: usize, kind: u8 },
    #[error("out of bound timestamp, must be in [{min}, {max}] (got {0})", min = i64::MIN + 1, max = i64::MAX)]
    InvalidTimestamp(i64),
}

impl Request {
    /// Decodes the body of a request frame with opcode `opcode`. `body` must
    /// already be decompressed and must not start with a custom payload (see
    /// [`Request::decode_with_flags`]).
    pub fn decode(opcode: u8, body: Bytes) -> Result<Request, RequestError> {
        Request::decode_with_flags(0, opcode, body).map(|(request, _)| request)
    }

    /// Decodes a request body whose frame had header flags `flags`: when the
    /// custom-payload flag is set, the body starts with a `[bytes map]`,
    /// returned alongside the request. Other flags do not change the body.
    pub fn decode_with_flags(
        flags: u8,
        opcode: u8,
        body: Bytes,
    ) -> Result<(Request, Option<CustomPayload>), RequestError> {
        let (op, decode_body) = body_decoder(opcode)?;
        let malformed = |problem| RequestError::Malformed { request: op.name(), problem };
        let mut reader = Reader::new(&body);
        let payload = if flags & FLAG_CUSTOM_PAYLOAD != 0 {
            Some(read_custom_payload(&body, &mut reader).map_err(malformed)?)
        } else {
            None
        };
        let request = decode_body(&body, &mut reader).map_err(malformed)?;
        Ok((request, payload))
    }

    /// The opcode this request travels under.
    pub fn opcode(&self) -> Opcode {
        match self {
            Request::Startup { .. } => Opcode::Startup,
            Request::Options => Opcode::Options,
            Request::Query { .. } => Opcode::Query,
            Request::Prepare { .. } => Opcode::Prepare,
            Request::Execute { .. } => Opcode::Execute,
            Request::Batch(_) => Opcode::Batch,
            Request::Register { .. } => Opcode::Register,
            Request::AuthResponse { .. } => Opcode::AuthResponse,
        }
    }
}

/// Decodes one request kind's body from a reader over `body` (the `Bytes`
/// is there to slice values out of without copying).
type BodyDecoder = fn(&Bytes, &mut Reader<'_>) -> Result<Request, BodyError>;

/// The decoder for a request opcode; response opcodes are unknown requests.
fn body_decoder(opcode: u8) -> Result<(Opcode, BodyDecoder), RequestError> {
    let op = Opcode::from_u8(opcode).ok_or(RequestError::UnknownOpcode(opcode))?;
    let decoder: BodyDecoder = match op {
        Opcode::Startup => decode_startup,
        Opcode::Options => |_, _| Ok(Request::Options),
        Opcode::Query => decode_query,
        Opcode::Prepare => |_, r| Ok(Request::Prepare { query: r.read_long_string()?.to_string() }),
        Opcode::Execute => decode_execute,
        Opcode::Batch => |body, r| Ok(Request::Batch(read_batch(body, r)?)),
        Opcode::Register => decode_register,
        Opcode::AuthResponse => {
            |body, r| Ok(Request::AuthResponse { token: r.read_bytes()?.map(|t| body.slice_ref(t)) })
        }
        _ => return Err(RequestError::UnknownOpcode(opcode)),
    };
    Ok((op, decoder))
}

fn decode_startup(_: &Bytes, r: &mut Reader<'_>) -> Result<Request, BodyError> {
    let pairs = r.read_string_map()?;
    let options = pairs.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    Ok(Request::Startup { options })
}

fn decode_query(body: &Bytes, r: &mut Reader<'_>) -> Result<Request, BodyError> {
    let query = r.read_long_string()?.to_string();
    Ok(Request::Query { query, params: read_query_params(body, r)? })
}

fn decode_execute(body: &Bytes, r: &mut Reader<'_>) -> Result<Request, BodyError> {
    let id = body.slice_ref(r.read_short_bytes()?);
    Ok(Request::Execute { id, params: read_query_params(body, r)? })
}

fn decode_register(_: &Bytes, r: &mut Reader<'_>) -> Result<Request, BodyError> {
    let events = r.read_string_list()?.into_iter().map(str::to_string).collect();
    Ok(Request::Register { events })
}

fn read_custom_payload(body: &Bytes, r: &mut Reader<'_>) -> Result<CustomPayload, BodyError> {
    let pairs = r.read_bytes_map()?;
    Ok(pairs.into_iter().map(|(key, value)| (key.to_string(), value.map(|v| body.slice_ref(v)))).collect())
}

fn read_consistency(r: &mut Reader<'_>) -> Result<ConsistencyLevel, BodyError> {
    let code = r.read_consistency()?;
    ConsistencyLevel::from_code(code).ok_or(BodyError::UnknownConsistency(code))
}

fn read_timestamp(r: &mut Reader<'_>) -> Result<i64, BodyError> {
    // i64::MIN is Cassandra's "no timestamp" marker, so a client cannot send it.
    match r.read_long()? {
        i64::MIN => Err(BodyError::InvalidTimestamp(i64::MIN)),
        ts => Ok(ts),
    }
}

fn bound_value(body: &Bytes, raw: RawValue<'_>) -> BoundValue {
    match raw {
        RawValue::Value(bytes) => BoundValue::Value(body.slice_ref(bytes)),
        RawValue::Null => BoundValue::Null,
        RawValue::Unset => BoundValue::Unset,
    }
}

/// A `[short] n` followed by n values, each preceded by a `[string]` name
/// when `with_names`.
fn read_values(
    body: &Bytes,
    r: &mut Reader<'_>,
    with_names: bool,
) -> Result<(Vec<BoundValue>, Option<Vec<String>>), BodyError> {
    let n = usize::from(r.read_short()?);
    let mut values = Vec::with_capacity(r.capacity_for(n, 4));
    let mut names = with_names.then(|| Vec::with_capacity(r.capacity_for(n, 6)));
    for _ in 0..n {
        if let Some(names) = names.as_mut() {
            names.push(r.read_string()?.to_string());
        }
        values.push(bound_value(body, r.read_value()?));
    }
    Ok((values, names))
}

fn read_query_params(body: &Bytes, r: &mut Reader<'_>) -> Result<QueryParams, BodyError> {
    let consistency = read_consistency(r)?;
    let flags = r.read_byte()?;
    let mut params =
        QueryParams { consistency, skip_metadata: flags & QUERY_FLAG_SKIP_METADATA != 0, ..QueryParams::default() };
    if flags & QUERY_FLAG_VALUES != 0 {
        let (values, names) = read_values(body, r, flags & QUERY_FLAG_NAMES_FOR_VALUES != 0)?;
        params.values = values;
        params.names = names;
    }
    if flags & QUERY_FLAG_PAGE_SIZE != 0 {
        params.page_size = Some(r.read_int()?);
    }
    if flags & QUERY_FLAG_PAGING_STATE != 0 {
        params.paging_state = r.read_bytes()?.map(|state| body.slice_ref(state));
    }
    if flags & QUERY_FLAG_SERIAL_CONSISTENCY != 0 {
        params.serial_consistency = Some(read_consistency(r)?);
    }
    if flags & QUERY_FLAG_DEFAULT_TIMESTAMP != 0 {
        params.timestamp = Some(read_timestamp(r)?);
    }
    Ok(params)
}

/// Decodes a BATCH. The names flag (0x40) comes *after* the statements whose
/// values it governs (CASSANDRA-10246), so the body is read assuming no names
/// first; when that fails or turns up the flag, it is read again with names
/// and that reading is kept if it parses and carries the flag.
fn read_batch(body: &Bytes, r: &mut Reader<'_>) -> Result<Batch, BodyError> {
    let start = r.clone();
    match read_batch_assuming(body, r, false) {
        Ok((batch, flags)) if flags & QUERY_FLAG_NAMES_FOR_VALUES == 0 => Ok(batch),
        first => {
            let mut again = start;
            match read_batch_assuming(body, &mut again, true) {
                Ok((batch, flags)) if flags & QUERY_FLAG_NAMES_FOR_VALUES != 0 => {
                    *r = again;
                    Ok(batch)
                }
                // Names announced but the body reads only without them: take
                // it as written rather than fail.
                _ => first.map(|(batch, _)| batch),
            }
        }
    }
}

fn read_batch_assuming(body: &Bytes, r: &mut Reader<'_>, with_names: bool) -> Result<(Batch, u8), BodyError> {
    let batch_type = match r.read_byte()? {
        0 => BatchType::Logged,
        1 => BatchType::Unlogged,
        2 => BatchType::Counter,
        other => return Err(BodyError::UnknownBatchType(other)),
    };
    let n = usize::from(r.read_short()?);
    // Smallest statement: kind byte, empty [short bytes] id, zero values.
    let mut statements = Vec::with_capacity(r.capacity_for(n, 5));
    for index in 0..n {
        let query = match r.read_byte()? {
            0 => BatchQuery::Query(r.read_long_string()?.to_string()),
            1 => BatchQuery::Prepared(body.slice_ref(r.read_short_bytes()?)),
            kind => return Err(BodyError::InvalidBatchKind { index, kind }),
        };
        let (values, names) = read_values(body, r, with_names)?;
        statements.push(BatchStatement { query, values, names });
    }
    let consistency = read_consistency(r)?;
    // The low four flag bits have no meaning for BATCH and are ignored.
    let flags = r.read_byte()?;
    let mut batch = Batch { batch_type, statements, consistency, serial_consistency: None, timestamp: None };
    if flags & QUERY_FLAG_SERIAL_CONSISTENCY != 0 {
        batch.serial_consistency = Some(read_consistency(r)?);
    }
    if flags & QUERY_FLAG_DEFAULT_TIMESTAMP != 0 {
        batch.timestamp = Some(read_timestamp(r)?);
    }
    Ok((batch, flags))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::*;

    /// A minimal client-side encoder, enough to produce every request kind.
    fn encode_params(out: &mut Vec<u8>, p: &QueryParams) {
        write_consistency(out, p.consistency.code());
        let mut flags = 0;
        if !p.values.is_empty() || p.names.is_some() {
            flags |= QUERY_FLAG_VALUES;
        }
        if p.names.is_some() {
            flags |= QUERY_FLAG_NAMES_FOR_VALUES;
        }
        if p.skip_metadata {
            flags |= QUERY_FLAG_SKIP_METADATA;
        }
        if p.page_size.is_some() {
            flags |= QUERY_FLAG_PAGE_SIZE;
        }
        if p.paging_state.is_some() {
            flags |= QUERY_FLAG_PAGING_STATE;
        }
        if p.serial_consistency.is_some() {
            flags |= QUERY_FLAG_SERIAL_CONSISTENCY;
        }
        if p.timestamp.is_some() {
            flags |= QUERY_FLAG_DEFAULT_TIMESTAMP;
        }
        write_byte(out, flags);
        if flags & QUERY_FLAG_VALUES != 0 {
            encode_values(out, &p.values, p.names.as_deref());
        }
        if let Some(size) = p.page_size {
            write_int(out, size);
        }
        if let Some(state) = &p.paging_state {
            write_bytes(out, Some(state));
        }
        if let Some(serial) = p.serial_consistency {
            write_consistency(out, serial.code());
        }
        if let Some(ts) = p.timestamp {
            write_long(out, ts);
        }
    }

    fn encode_values(out: &mut Vec<u8>, values: &[BoundValue], names: Option<&[String]>) {
        write_short(out, values.len() as u16);
        for (i, value) in values.iter().enumerate() {
            if let Some(names) = names {
                write_string(out, &names[i]);
            }
            match value {
                BoundValue::Value(v) => write_value(out, RawValue::Value(v)),
                BoundValue::Null => write_value(out, RawValue::Null),
                BoundValue::Unset => write_value(out, RawValue::Unset),
            }
        }
    }

    fn encode_batch(out: &mut Vec<u8>, b: &Batch, with_names: bool) {
        write_byte(out, b.batch_type as u8);
        write_short(out, b.statements.len() as u16);
        for s in &b.statements {
            match &s.query {
                BatchQuery::Query(q) => {
                    write_byte(out, 0);
                    write_long_string(out, q);
                }
                BatchQuery::Prepared(id) => {
                    write_byte(out, 1);
                    write_short_bytes(out, id);
                }
            }
            encode_values(out, &s.values, s.names.as_deref().filter(|_| with_names));
        }
        write_consistency(out, b.consistency.code());
        let mut flags = 0;
        if b.serial_consistency.is_some() {
            flags |= QUERY_FLAG_SERIAL_CONSISTENCY;
        }
        if b.timestamp.is_some() {
            flags |= QUERY_FLAG_DEFAULT_TIMESTAMP;
        }
        if with_names {
            flags |= QUERY_FLAG_NAMES_FOR_VALUES;
        }
        write_byte(out, flags);
        if let Some(serial) = b.serial_consistency {
            write_consistency(out, serial.code());
        }
        if let Some(ts) = b.timestamp {
            write_long(out, ts);
        }
    }

    fn encode(request: &Request) -> Vec<u8> {
        let mut out = Vec::new();
        match request {
            Request::Startup { options } => {
                let pairs: Vec<(&String, &String)> = options.iter().collect();
                write_string_map(&mut out, &pairs);
            }
            Request::Options => {}
            Request::Query { query, params } => {
                write_long_string(&mut out, query);
                encode_params(&mut out, params);
            }
            Request::Prepare { query } => write_long_string(&mut out, query),
            Request::Execute { id, params } => {
                write_short_bytes(&mut out, id);
                encode_params(&mut out, params);
            }
            Request::Batch(b) => {
                let with_names = b.statements.iter().any(|s| s.names.is_some());
                encode_batch(&mut out, b, with_names);
            }
            Request::Register { events } => write_string_list(&mut out, events),
            Request::AuthResponse { token } => write_bytes(&mut out, token.as_deref()),
        }
        out
    }

    fn full_params() -> QueryParams {
        QueryParams {
            consistency: ConsistencyLevel::LocalQuorum,
            values: vec![
                BoundValue::Value(Bytes::from_static(&[0, 0, 0, 42])),
                BoundValue::Null,
                BoundValue::Unset,
                BoundValue::Value(Bytes::new()),
            ],
            names: Some(vec!["a".into(), "b".into(), "c".into(), "d".into()]),
            skip_metadata: true,
            page_size: Some(5000),
            paging_state: Some(Bytes::from_static(b"state")),
            serial_consistency: Some(ConsistencyLevel::LocalSerial),
            timestamp: Some(1_700_000_000_000_000),
        }
    }

    fn sample_requests() -> Vec<Request> {
        let options = [("CQL_VERSION", "3.0.0"), ("COMPRESSION", "lz4")]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let plain = QueryParams { consistency: ConsistencyLevel::One, ..QueryParams::default() };
        let statements = vec![
            BatchStatement {
                query: BatchQuery::Query("INSERT INTO t (k) VALUES (?)".into()),
                values: vec![BoundValue::Value(Bytes::from_static(b"k1"))],
                names: None,
            },
            BatchStatement {
                query: BatchQuery::Prepared(Bytes::from_static(&[0xAB; 16])),
                values: vec![BoundValue::Null, BoundValue::Unset],
                names: None,
            },
        ];
        vec![
            Request::Startup { options },
            Request::Options,
            Request::Query { query: "SELECT * FROM ks.t".into(), params: plain.clone() },
            Request::Query { query: "SELECT * FROM ks.t WHERE k = :a".into(), params: full_params() },
            Request::Prepare { query: "SELECT k FROM t WHERE k = ?".into() },
            Request::Execute { id: Bytes::from_static(&[1; 16]), params: QueryParams { names: None, ..full_params() } },
            Request::Batch(Batch {
                batch_type: BatchType::Unlogged,
                statements,
                consistency: ConsistencyLevel::Quorum,
                serial_consistency: Some(ConsistencyLevel::Serial),
                timestamp: Some(-5),
            }),
            Request::Register {
                events: vec!["TOPOLOGY_CHANGE".into(), "STATUS_CHANGE".into(), "SCHEMA_CHANGE".into()],
            },
            Request::AuthResponse { token: Some(Bytes::from_static(b"\0cassandra\0cassandra")) },
            Request::AuthResponse { token: None },
        ]
    }

    #[test]
    fn every_request_kind_round_trips() {
        for request in sample_requests() {
            let body = Bytes::from(encode(&request));
            let opcode = request.opcode().code();
            assert_eq!(Request::decode(opcode, body), Ok(request));
        }
    }

    #[test]
    fn batch_with_names_round_trips() {
        let batch = Batch {
            batch_type: BatchType::Logged,
            statements: vec![BatchStatement {
                query: BatchQuery::Query("INSERT INTO t (k, v) VALUES (:k, :v)".into()),
                values: vec![BoundValue::Value(Bytes::from_static(b"1")), BoundValue::Null],
                names: Some(vec!["k".into(), "v".into()]),
            }],
            consistency: ConsistencyLevel::One,
            serial_consistency: None,
            timestamp: None,
        };
        let request = Request::Batch(batch);
        let body = Bytes::from(encode(&request));
        assert_eq!(Request::decode(Opcode::Batch.code(), body), Ok(request));
    }

    #[test]
    fn truncated_bodies_are_errors_at_every_length() {
        for request in sample_requests() {
            let body = encode(&request);
            let opcode = request.opcode().code();
            for cut in 0..body.len() {
                let result = Request::decode(opcode, Bytes::copy_from_slice(&body[..cut]));
                assert!(
                    matches!(result, Err(RequestError::Malformed { .. })),
                    "{:?} cut at {cut} of {} gave {result:?}",
                    request.opcode(),
                    body.len()
                );
            }
        }
    }

    #[test]
    fn trailing_bytes_are_ignored() {
        for request in sample_requests() {
            let mut body = encode(&request);
            body.push(0xA3);
            let opcode = request.opcode().code();
            assert_eq!(Request::decode(opcode, Bytes::from(body)), Ok(request));
        }
    }

    #[test]
    fn values_share_the_body_allocation() {
        let request = &sample_requests()[3];
        let body = Bytes::from(encode(request));
        let range = body.as_ptr_range();
        let Ok(Request::Query { params, .. }) = Request::decode(Opcode::Query.code(), body.clone()) else {
            panic!("decode failed");
        };
        let Some(BoundValue::Value(first)) = params.values.first() else { panic!("no value") };
        assert!(range.contains(&first.as_ptr()));
    }

    #[test]
    fn unknown_opcodes_and_response_opcodes_are_rejected() {
        let err = Request::decode(0x1F, Bytes::new()).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("unknown request opcode 0x1f"));
        assert_eq!(Request::decode(0x02, Bytes::new()), Err(RequestError::UnknownOpcode(0x02)));
    }

    #[test]
    fn error_messages_name_the_request_and_problem() {
        let mut body = Vec::new();
        write_long_string(&mut body, "SELECT 1");
        write_consistency(&mut body, 0x0042);
        write_byte(&mut body, 0);
        let err = Request::decode(Opcode::Query.code(), Bytes::from(body)).err().map(|e| e.to_string());
        assert_eq!(err.as_deref(), Some("malformed QUERY request: unknown consistency level code 0x0042"));

        let err =
            Request::decode(Opcode::Query.code(), Bytes::from_static(&[0, 0, 0, 9, b'x'])).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("malformed QUERY request: frame body too short: needed 9 bytes for [long string] at offset 4, 1 left")
        );
    }

    #[test]
    fn bad_batch_type_kind_and_timestamp() {
        let batch_body = |kind: u8| {
            let mut b = vec![0u8, 0, 1, kind];
            write_short_bytes(&mut b, b"id");
            write_short(&mut b, 0);
            write_consistency(&mut b, 1);
            write_byte(&mut b, QUERY_FLAG_DEFAULT_TIMESTAMP);
            write_long(&mut b, i64::MIN);
            Bytes::from(b)
        };
        let batch = Opcode::Batch.code();
        assert!(matches!(
            Request::decode(batch, batch_body(7)),
            Err(RequestError::Malformed { problem: BodyError::InvalidBatchKind { index: 0, kind: 7 }, .. })
        ));
        assert!(matches!(
            Request::decode(batch, batch_body(1)),
            Err(RequestError::Malformed { problem: BodyError::InvalidTimestamp(i64::MIN), .. })
        ));
        assert!(matches!(
            Request::decode(batch, Bytes::from_static(&[3, 0, 0])),
            Err(RequestError::Malformed { problem: BodyError::UnknownBatchType(3), .. })
        ));
    }

    #[test]
    fn custom_payload_precedes_the_body() {
        let request = Request::Prepare { query: "SELECT 1".into() };
        let mut body = Vec::new();
        write_bytes_map(&mut body, &[("tablets", Some(b"x".to_vec())), ("none", None)]);
        body.extend_from_slice(&encode(&request));
        let decoded = Request::decode_with_flags(FLAG_CUSTOM_PAYLOAD, 0x09, Bytes::from(body));
        let payload = vec![("tablets".to_string(), Some(Bytes::from_static(b"x"))), ("none".to_string(), None)];
        assert_eq!(decoded, Ok((request.clone(), Some(payload))));
        let plain = Request::decode_with_flags(0, 0x09, Bytes::from(encode(&request)));
        assert_eq!(plain, Ok((request, None)));
    }

    #[test]
    fn hostile_counts_do_not_allocate() {
        // 65535 values claimed, none present.
        let mut body = Vec::new();
        write_short_bytes(&mut body, b"id");
        write_consistency(&mut body, 1);
        write_byte(&mut body, QUERY_FLAG_VALUES | QUERY_FLAG_NAMES_FOR_VALUES);
        write_short(&mut body, u16::MAX);
        assert!(Request::decode(Opcode::Execute.code(), Bytes::from(body)).is_err());
        assert!(Request::decode(Opcode::Batch.code(), Bytes::from_static(&[0, 0xFF, 0xFF])).is_err());
    }
}
