//! Response message bodies of the CQL native protocol v4 (spec 4.2): ERROR,
//! READY, AUTHENTICATE, SUPPORTED, RESULT (Void, Rows, Set_keyspace,
//! Prepared, Schema_change), EVENT, AUTH_CHALLENGE and AUTH_SUCCESS.
//!
//! Every writer appends a body to a `Vec<u8>`, normally right after the
//! header that [`crate::frame::begin_response`] wrote into the same buffer,
//! and never fails: values the protocol cannot hold are clamped as described
//! in [`crate::wire`].
//!
//! Rows are the hot path. [`RowsWriter`] writes the metadata up front and
//! then each cell straight into the frame buffer; the row count is patched
//! into a placeholder at [`RowsWriter::finish`]. The paging state belongs in
//! the metadata, before the rows, but is only known once the page is full, so
//! `finish` splices it in with one `memmove` of the rows written so far. That
//! costs nothing for unpaged results and last pages (the common case) and one
//! linear move otherwise, instead of always staging rows in a second buffer.

use std::net::SocketAddr;

use bytes::Bytes;
use shoal_schema::CqlType;
use thiserror::Error;

use crate::frame::{begin_frame, finish_frame, FrameError, Opcode};
use crate::request::RequestError;
use crate::wire::*;

/// RESULT kinds (spec 4.2.5).
pub const RESULT_VOID: i32 = 0x0001;
pub const RESULT_ROWS: i32 = 0x0002;
pub const RESULT_SET_KEYSPACE: i32 = 0x0003;
pub const RESULT_PREPARED: i32 = 0x0004;
pub const RESULT_SCHEMA_CHANGE: i32 = 0x0005;

/// Rows/Prepared metadata flags (spec 4.2.5.2).
pub const METADATA_GLOBAL_TABLES_SPEC: i32 = 0x0001;
pub const METADATA_HAS_MORE_PAGES: i32 = 0x0002;
pub const METADATA_NO_METADATA: i32 = 0x0004;

/// The kind of write that timed out or failed (spec 9, Write_timeout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteType {
    Simple,
    Batch,
    UnloggedBatch,
    Counter,
    BatchLog,
    Cas,
    View,
    Cdc,
}

impl WriteType {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteType::Simple => "SIMPLE",
            WriteType::Batch => "BATCH",
            WriteType::UnloggedBatch => "UNLOGGED_BATCH",
            WriteType::Counter => "COUNTER",
            WriteType::BatchLog => "BATCH_LOG",
            WriteType::Cas => "CAS",
            WriteType::View => "VIEW",
            WriteType::Cdc => "CDC",
        }
    }
}

/// An error code with the extra fields it carries (spec 9). Consistency
/// levels are protocol codes (`shoal_coordinator::ConsistencyLevel::code`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    ServerError,
    ProtocolError,
    BadCredentials,
    Unavailable {
        consistency: u16,
        required: i32,
        alive: i32,
    },
    Overloaded,
    IsBootstrapping,
    TruncateError,
    WriteTimeout {
        consistency: u16,
        received: i32,
        block_for: i32,
        write_type: WriteType,
    },
    ReadTimeout {
        consistency: u16,
        received: i32,
        block_for: i32,
        data_present: bool,
    },
    ReadFailure {
        consistency: u16,
        received: i32,
        block_for: i32,
        num_failures: i32,
        data_present: bool,
    },
    FunctionFailure {
        keyspace: String,
        function: String,
        arg_types: Vec<String>,
    },
    WriteFailure {
        consistency: u16,
        received: i32,
        block_for: i32,
        num_failures: i32,
        write_type: WriteType,
    },
    SyntaxError,
    Unauthorized,
    Invalid,
    ConfigError,
    /// `table` is empty when a keyspace already exists.
    AlreadyExists {
        keyspace: String,
        table: String,
    },
    Unprepared {
        id: Bytes,
    },
}

impl ErrorKind {
    /// The `[int]` error code.
    pub fn code(&self) -> i32 {
        match self {
            ErrorKind::ServerError => 0x0000,
            ErrorKind::ProtocolError => 0x000A,
            ErrorKind::BadCredentials => 0x0100,
            ErrorKind::Unavailable { .. } => 0x1000,
            ErrorKind::Overloaded => 0x1001,
            ErrorKind::IsBootstrapping => 0x1002,
            ErrorKind::TruncateError => 0x1003,
            ErrorKind::WriteTimeout { .. } => 0x1100,
            ErrorKind::ReadTimeout { .. } => 0x1200,
            ErrorKind::ReadFailure { .. } => 0x1300,
            ErrorKind::FunctionFailure { .. } => 0x1400,
            ErrorKind::WriteFailure { .. } => 0x1500,
            ErrorKind::SyntaxError => 0x2000,
            ErrorKind::Unauthorized => 0x2100,
            ErrorKind::Invalid => 0x2200,
            ErrorKind::ConfigError => 0x2300,
            ErrorKind::AlreadyExists { .. } => 0x2400,
            ErrorKind::Unprepared { .. } => 0x2500,
        }
    }
}

/// The body of an ERROR response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorBody {
    pub kind: ErrorKind,
    pub message: String,
}

impl ErrorBody {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> ErrorBody {
        ErrorBody { kind, message: message.into() }
    }

    pub fn protocol(message: impl Into<String>) -> ErrorBody {
        ErrorBody::new(ErrorKind::ProtocolError, message)
    }

    pub fn server(message: impl Into<String>) -> ErrorBody {
        ErrorBody::new(ErrorKind::ServerError, message)
    }

    pub fn invalid(message: impl Into<String>) -> ErrorBody {
        ErrorBody::new(ErrorKind::Invalid, message)
    }

    pub fn syntax(message: impl Into<String>) -> ErrorBody {
        ErrorBody::new(ErrorKind::SyntaxError, message)
    }

    /// Appends the ERROR body: code, message, then the code's extra fields.
    pub fn write(&self, out: &mut Vec<u8>) {
        write_int(out, self.kind.code());
        write_string(out, &self.message);
        self.write_extras(out);
    }

    fn write_extras(&self, out: &mut Vec<u8>) {
        match &self.kind {
            ErrorKind::Unavailable { consistency, required, alive } => {
                write_consistency(out, *consistency);
                write_int(out, *required);
                write_int(out, *alive);
            }
            ErrorKind::WriteTimeout { consistency, received, block_for, write_type } => {
                write_counts(out, *consistency, *received, *block_for);
                write_string(out, write_type.as_str());
            }
            ErrorKind::ReadTimeout { consistency, received, block_for, data_present } => {
                write_counts(out, *consistency, *received, *block_for);
                write_byte(out, u8::from(*data_present));
            }
            ErrorKind::ReadFailure { consistency, received, block_for, num_failures, data_present } => {
                write_counts(out, *consistency, *received, *block_for);
                write_int(out, *num_failures);
                write_byte(out, u8::from(*data_present));
            }
            ErrorKind::FunctionFailure { keyspace, function, arg_types } => {
                write_string(out, keyspace);
                write_string(out, function);
                write_string_list(out, arg_types);
            }
            ErrorKind::WriteFailure { consistency, received, block_for, num_failures, write_type } => {
                write_counts(out, *consistency, *received, *block_for);
                write_int(out, *num_failures);
                write_string(out, write_type.as_str());
            }
            ErrorKind::AlreadyExists { keyspace, table } => {
                write_string(out, keyspace);
                write_string(out, table);
            }
            ErrorKind::Unprepared { id } => write_short_bytes(out, id),
            _ => {}
        }
    }
}

fn write_counts(out: &mut Vec<u8>, consistency: u16, received: i32, block_for: i32) {
    write_consistency(out, consistency);
    write_int(out, received);
    write_int(out, block_for);
}

impl From<&RequestError> for ErrorBody {
    /// Undecodable requests are protocol violations.
    fn from(err: &RequestError) -> ErrorBody {
        ErrorBody::protocol(err.to_string())
    }
}

impl From<&FrameError> for ErrorBody {
    fn from(err: &FrameError) -> ErrorBody {
        ErrorBody::protocol(err.to_string())
    }
}

/// Appends a whole, uncompressed ERROR frame answering a framing error, on
/// the offending stream (0 when unknown) and in the version
/// [`FrameError::response_version`] picks, so that version negotiation works.
pub fn encode_frame_error(out: &mut Vec<u8>, err: &FrameError) -> Result<(), FrameError> {
    let stream = err.stream().unwrap_or(0);
    let start = begin_frame(out, err.response_version(), stream, 0, Opcode::Error.code());
    ErrorBody::from(err).write(out);
    finish_frame(out, start, None)
}

/// READY has an empty body; this exists so every response has a writer.
pub fn write_ready(_out: &mut Vec<u8>) {}

/// AUTHENTICATE: the authenticator's class name.
pub fn write_authenticate(out: &mut Vec<u8>, authenticator: &str) {
    write_string(out, authenticator);
}

/// SUPPORTED: option name to supported values.
pub fn write_supported<K, L, V>(out: &mut Vec<u8>, options: &[(K, L)])
where
    K: AsRef<str>,
    L: AsRef<[V]>,
    V: AsRef<str>,
{
    write_string_multimap(out, options);
}

pub fn write_auth_challenge(out: &mut Vec<u8>, token: Option<&[u8]>) {
    write_bytes(out, token);
}

pub fn write_auth_success(out: &mut Vec<u8>, token: Option<&[u8]>) {
    write_bytes(out, token);
}

pub fn write_void(out: &mut Vec<u8>) {
    write_int(out, RESULT_VOID);
}

pub fn write_set_keyspace(out: &mut Vec<u8>, keyspace: &str) {
    write_int(out, RESULT_SET_KEYSPACE);
    write_string(out, keyspace);
}

/// A result column or bind marker: where it comes from, its name and type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnSpec<'a> {
    pub keyspace: &'a str,
    pub table: &'a str,
    pub name: &'a str,
    pub ty: &'a CqlType,
}

/// The keyspace and table every column shares, if any (and there are columns).
fn shared_table<'a>(columns: &[ColumnSpec<'a>]) -> Option<(&'a str, &'a str)> {
    let first = columns.first()?;
    columns
        .iter()
        .all(|c| c.keyspace == first.keyspace && c.table == first.table)
        .then_some((first.keyspace, first.table))
}

/// The Global_tables_spec flag for `columns`.
fn table_spec_flag(columns: &[ColumnSpec<'_>]) -> i32 {
    if shared_table(columns).is_some() {
        METADATA_GLOBAL_TABLES_SPEC
    } else {
        0
    }
}

/// `[<global_table_spec>?<col_spec_1>...<col_spec_n>]`, consistent with
/// [`table_spec_flag`].
fn write_column_specs(out: &mut Vec<u8>, columns: &[ColumnSpec<'_>]) {
    let shared = shared_table(columns);
    if let Some((keyspace, table)) = shared {
        write_string(out, keyspace);
        write_string(out, table);
    }
    for column in columns {
        if shared.is_none() {
            write_string(out, column.keyspace);
            write_string(out, column.table);
        }
        write_string(out, column.name);
        write_type_option(out, column.ty);
    }
}

fn count(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// A Prepared result (spec 4.2.5.4).
#[derive(Debug, Clone, Copy)]
pub struct Prepared<'a> {
    pub id: &'a [u8],
    /// One spec per bind marker, in marker order.
    pub bind_columns: &'a [ColumnSpec<'a>],
    /// For each partition key column, in key order, the index of its marker;
    /// empty when some key column has no plain marker.
    pub pk_indexes: &'a [u16],
    /// The columns an execution returns; `None` (or empty) for statements
    /// that return no rows.
    pub result_columns: Option<&'a [ColumnSpec<'a>]>,
    /// Extra bits OR-ed into the bind metadata flags, such as the mask a
    /// server advertises under ScyllaDB's `SCYLLA_LWT_ADD_METADATA_MARK`.
    pub extra_flags: i32,
}

pub fn write_prepared(out: &mut Vec<u8>, prepared: &Prepared<'_>) {
    write_int(out, RESULT_PREPARED);
    write_short_bytes(out, prepared.id);
    let bind = prepared.bind_columns;
    write_int(out, table_spec_flag(bind) | prepared.extra_flags);
    write_int(out, count(bind.len()));
    write_int(out, count(prepared.pk_indexes.len()));
    for index in prepared.pk_indexes {
        write_short(out, *index);
    }
    write_column_specs(out, bind);
    match prepared.result_columns.filter(|columns| !columns.is_empty()) {
        Some(columns) => {
            write_int(out, table_spec_flag(columns));
            write_int(out, count(columns.len()));
            write_column_specs(out, columns);
        }
        None => {
            write_int(out, METADATA_NO_METADATA);
            write_int(out, 0);
        }
    }
}

/// A Rows result was finished in the middle of a row.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("rows result has {cells} cells, not a whole number of rows of {columns} columns")]
pub struct IncompleteRow {
    pub cells: usize,
    pub columns: usize,
}

/// Streams a Rows result (spec 4.2.5.2) into a frame buffer; see the module
/// docs for the layout strategy.
#[derive(Debug)]
pub struct RowsWriter<'a> {
    out: &'a mut Vec<u8>,
    /// Offset of the metadata `<flags>` [int].
    flags_at: usize,
    /// Offset right after `<columns_count>`: where a paging state goes.
    paging_at: usize,
    /// Offset of the `<rows_count>` placeholder.
    count_at: usize,
    columns: usize,
    cells: usize,
}

impl<'a> RowsWriter<'a> {
    /// Writes the result kind and metadata for `columns` (only their count
    /// when `skip_metadata`, as the client asked) and a row count placeholder.
    pub fn new(out: &'a mut Vec<u8>, columns: &[ColumnSpec<'_>], skip_metadata: bool) -> RowsWriter<'a> {
        write_int(out, RESULT_ROWS);
        let flags_at = out.len();
        let flags = if skip_metadata { METADATA_NO_METADATA } else { table_spec_flag(columns) };
        write_int(out, flags);
        write_int(out, count(columns.len()));
        let paging_at = out.len();
        if !skip_metadata {
            write_column_specs(out, columns);
        }
        let count_at = out.len();
        write_int(out, 0);
        RowsWriter { out, flags_at, paging_at, count_at, columns: columns.len(), cells: 0 }
    }

    /// Appends the next cell (row by row, column by column); `None` is null.
    pub fn push_cell(&mut self, value: Option<&[u8]>) {
        write_bytes(self.out, value);
        self.cells += 1;
    }

    /// Appends the next cell by serializing it straight into the buffer:
    /// `write` must only append the value's bytes; the length is patched after.
    pub fn push_cell_with<F: FnOnce(&mut Vec<u8>)>(&mut self, write: F) {
        let len_at = self.out.len();
        write_int(self.out, 0);
        write(self.out);
        let len = count(self.out.len().saturating_sub(len_at + 4));
        if let Some(field) = self.out.get_mut(len_at..len_at + 4) {
            field.copy_from_slice(&len.to_be_bytes());
        }
        self.cells += 1;
    }

    /// Whole rows pushed so far.
    pub fn rows(&self) -> usize {
        self.cells.checked_div(self.columns).unwrap_or(0)
    }

    /// Bytes of rows written so far, for byte-bounded pages.
    pub fn rows_bytes(&self) -> usize {
        self.out.len() - self.count_at - 4
    }

    /// Patches the row count and, when there are more pages, sets
    /// Has_more_pages and inserts `paging_state` into the metadata. Returns
    /// the row count. A partial last row is an error (the buffer then holds a
    /// body that must not be sent).
    pub fn finish(self, paging_state: Option<&[u8]>) -> Result<usize, IncompleteRow> {
        let rows = self.rows();
        if rows * self.columns != self.cells {
            return Err(IncompleteRow { cells: self.cells, columns: self.columns });
        }
        self.out[self.count_at..self.count_at + 4].copy_from_slice(&count(rows).to_be_bytes());
        if let Some(state) = paging_state {
            let flags_at = self.flags_at;
            let mut flags = [0u8; 4];
            flags.copy_from_slice(&self.out[flags_at..flags_at + 4]);
            let flags = i32::from_be_bytes(flags) | METADATA_HAS_MORE_PAGES;
            self.out[flags_at..flags_at + 4].copy_from_slice(&flags.to_be_bytes());
            let mut encoded = Vec::with_capacity(4 + state.len());
            write_bytes(&mut encoded, Some(state));
            insert_at(self.out, self.paging_at, &encoded);
        }
        Ok(rows)
    }
}

/// Inserts `bytes` at `at`, moving the tail once.
fn insert_at(out: &mut Vec<u8>, at: usize, bytes: &[u8]) {
    let old_len = out.len();
    out.resize(old_len + bytes.len(), 0);
    out.copy_within(at..old_len, at + bytes.len());
    out[at..at + bytes.len()].copy_from_slice(bytes);
}

/// CREATED / UPDATED / DROPPED.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaChangeType {
    Created,
    Updated,
    Dropped,
}

impl SchemaChangeType {
    pub fn as_str(self) -> &'static str {
        match self {
            SchemaChangeType::Created => "CREATED",
            SchemaChangeType::Updated => "UPDATED",
            SchemaChangeType::Dropped => "DROPPED",
        }
    }
}

/// What a schema change touched, with the options its target carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaChangeTarget {
    Keyspace { keyspace: String },
    Table { keyspace: String, table: String },
    Type { keyspace: String, name: String },
    Function { keyspace: String, name: String, arg_types: Vec<String> },
    Aggregate { keyspace: String, name: String, arg_types: Vec<String> },
}

/// A schema change, as a Schema_change result or a SCHEMA_CHANGE event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaChange {
    pub change: SchemaChangeType,
    pub target: SchemaChangeTarget,
}

impl SchemaChange {
    /// `<change_type><target><options>`.
    fn write(&self, out: &mut Vec<u8>) {
        write_string(out, self.change.as_str());
        match &self.target {
            SchemaChangeTarget::Keyspace { keyspace } => {
                write_string(out, "KEYSPACE");
                write_string(out, keyspace);
            }
            SchemaChangeTarget::Table { keyspace, table } => {
                write_string(out, "TABLE");
                write_string(out, keyspace);
                write_string(out, table);
            }
            SchemaChangeTarget::Type { keyspace, name } => {
                write_string(out, "TYPE");
                write_string(out, keyspace);
                write_string(out, name);
            }
            SchemaChangeTarget::Function { keyspace, name, arg_types }
            | SchemaChangeTarget::Aggregate { keyspace, name, arg_types } => {
                let is_function = matches!(self.target, SchemaChangeTarget::Function { .. });
                write_string(out, if is_function { "FUNCTION" } else { "AGGREGATE" });
                write_string(out, keyspace);
                write_string(out, name);
                write_string_list(out, arg_types);
            }
        }
    }
}

pub fn write_schema_change_result(out: &mut Vec<u8>, change: &SchemaChange) {
    write_int(out, RESULT_SCHEMA_CHANGE);
    change.write(out);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopologyChangeType {
    NewNode,
    RemovedNode,
    /// Sent by Cassandra though gone from the v4 spec text; drivers accept it.
    MovedNode,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusChangeType {
    Up,
    Down,
}

/// A server-pushed event (spec 4.2.6); sent with opcode EVENT on stream
/// [`crate::frame::EVENT_STREAM`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    TopologyChange { change: TopologyChangeType, address: SocketAddr },
    StatusChange { change: StatusChangeType, address: SocketAddr },
    SchemaChange(SchemaChange),
}

impl Event {
    /// The REGISTER name of this event's type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Event::TopologyChange { .. } => "TOPOLOGY_CHANGE",
            Event::StatusChange { .. } => "STATUS_CHANGE",
            Event::SchemaChange(_) => "SCHEMA_CHANGE",
        }
    }
}

pub fn write_event(out: &mut Vec<u8>, event: &Event) {
    write_string(out, event.type_name());
    match event {
        Event::TopologyChange { change, address } => {
            write_string(
                out,
                match change {
                    TopologyChangeType::NewNode => "NEW_NODE",
                    TopologyChangeType::RemovedNode => "REMOVED_NODE",
                    TopologyChangeType::MovedNode => "MOVED_NODE",
                },
            );
            write_inet(out, *address);
        }
        Event::StatusChange { change, address } => {
            write_string(out, if *change == StatusChangeType::Up { "UP" } else { "DOWN" });
            write_inet(out, *address);
        }
        Event::SchemaChange(change) => change.write(out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{begin_response, HEADER_LEN};

    fn spec<'a>(table: &'a str, name: &'a str, ty: &'a CqlType) -> ColumnSpec<'a> {
        ColumnSpec { keyspace: "ks", table, name, ty }
    }

    /// Concatenates byte pieces, for hand-written expected layouts.
    fn cat(pieces: &[&[u8]]) -> Vec<u8> {
        pieces.concat()
    }

    #[test]
    fn rows_layout_by_hand() {
        let int = CqlType::Int;
        let text = CqlType::Text;
        let columns = [spec("t", "k", &int), spec("t", "v", &text)];
        let mut out = Vec::new();
        let mut rows = RowsWriter::new(&mut out, &columns, false);
        rows.push_cell(Some(&[0, 0, 0, 1]));
        rows.push_cell(Some(b"a"));
        rows.push_cell_with(|buf| buf.extend_from_slice(&[0, 0, 0, 2]));
        rows.push_cell(None);
        assert_eq!(rows.finish(None), Ok(2));
        let expected = cat(&[
            &[0, 0, 0, 2],          // kind Rows
            &[0, 0, 0, 1],          // flags Global_tables_spec
            &[0, 0, 0, 2],          // columns_count
            &[0, 2, b'k', b's'],    // keyspace
            &[0, 1, b't'],          // table
            &[0, 1, b'k', 0, 0x09], // k int
            &[0, 1, b'v', 0, 0x0D], // v varchar
            &[0, 0, 0, 2],          // rows_count
            &[0, 0, 0, 4, 0, 0, 0, 1],
            &[0, 0, 0, 1, b'a'],
            &[0, 0, 0, 4, 0, 0, 0, 2],
            &[0xFF, 0xFF, 0xFF, 0xFF], // null
        ]);
        assert_eq!(out, expected);
    }

    #[test]
    fn rows_with_paging_state_and_mixed_tables() {
        let int = CqlType::Int;
        let columns = [spec("t1", "a", &int), spec("t2", "b", &int)];
        let mut out = Vec::new();
        let mut rows = RowsWriter::new(&mut out, &columns, false);
        rows.push_cell(Some(&[7]));
        rows.push_cell(Some(&[8]));
        assert_eq!(rows.rows(), 1);
        assert_eq!(rows.finish(Some(b"PS")), Ok(1));
        let expected = cat(&[
            &[0, 0, 0, 2],
            &[0, 0, 0, 2], // Has_more_pages, no global spec
            &[0, 0, 0, 2],
            &[0, 0, 0, 2, b'P', b'S'], // paging state
            &[0, 2, b'k', b's', 0, 2, b't', b'1', 0, 1, b'a', 0, 0x09],
            &[0, 2, b'k', b's', 0, 2, b't', b'2', 0, 1, b'b', 0, 0x09],
            &[0, 0, 0, 1],
            &[0, 0, 0, 1, 7, 0, 0, 0, 1, 8],
        ]);
        assert_eq!(out, expected);
    }

    #[test]
    fn rows_without_metadata() {
        let int = CqlType::Int;
        let columns = [spec("t", "a", &int)];
        let mut out = Vec::new();
        let rows = RowsWriter::new(&mut out, &columns, true);
        assert_eq!(rows.finish(Some(b"")), Ok(0));
        let expected = cat(&[&[0, 0, 0, 2], &[0, 0, 0, 6], &[0, 0, 0, 1], &[0, 0, 0, 0], &[0, 0, 0, 0]]);
        assert_eq!(out, expected);
    }

    #[test]
    fn rows_after_a_frame_header_and_partial_rows() {
        let int = CqlType::Int;
        let columns = [spec("t", "a", &int), spec("t", "b", &int)];
        let mut out = Vec::new();
        let _start = begin_response(&mut out, 1, Opcode::Result);
        let mut rows = RowsWriter::new(&mut out, &columns, true);
        rows.push_cell(None);
        assert_eq!(rows.finish(Some(b"x")), Err(IncompleteRow { cells: 1, columns: 2 }));
        // The header in front is untouched.
        assert_eq!(&out[..HEADER_LEN], &[0x84, 0, 0, 1, 0x08, 0, 0, 0, 0]);
    }

    #[test]
    fn prepared_layout_by_hand() {
        let int = CqlType::Int;
        let text = CqlType::Text;
        let bind = [spec("t", "k", &int), spec("t", "c", &text)];
        let result = [spec("t", "v", &text)];
        let prepared = Prepared {
            id: &[0xAA, 0xBB],
            bind_columns: &bind,
            pk_indexes: &[0],
            result_columns: Some(&result),
            extra_flags: 0,
        };
        let mut out = Vec::new();
        write_prepared(&mut out, &prepared);
        let expected = cat(&[
            &[0, 0, 0, 4],       // kind Prepared
            &[0, 2, 0xAA, 0xBB], // id
            &[0, 0, 0, 1],       // flags Global_tables_spec
            &[0, 0, 0, 2],       // columns_count
            &[0, 0, 0, 1],       // pk_count
            &[0, 0],             // pk_index 0
            &[0, 2, b'k', b's', 0, 1, b't'],
            &[0, 1, b'k', 0, 0x09],
            &[0, 1, b'c', 0, 0x0D],
            &[0, 0, 0, 1], // result flags
            &[0, 0, 0, 1], // result columns_count
            &[0, 2, b'k', b's', 0, 1, b't'],
            &[0, 1, b'v', 0, 0x0D],
        ]);
        assert_eq!(out, expected);
    }

    #[test]
    fn prepared_without_markers_or_results() {
        let prepared =
            Prepared { id: &[1], bind_columns: &[], pk_indexes: &[], result_columns: None, extra_flags: i32::MIN };
        let mut out = Vec::new();
        write_prepared(&mut out, &prepared);
        let expected = cat(&[
            &[0, 0, 0, 4],
            &[0, 1, 1],
            &[0x80, 0, 0, 0], // only the extra flag
            &[0, 0, 0, 0],
            &[0, 0, 0, 0],
            &[0, 0, 0, 4], // No_metadata
            &[0, 0, 0, 0],
        ]);
        assert_eq!(out, expected);
    }

    #[test]
    fn error_bodies() {
        let cases = vec![
            (ErrorBody::protocol("bad"), cat(&[&[0, 0, 0, 0x0A], &[0, 3, b'b', b'a', b'd']])),
            (
                ErrorBody::new(ErrorKind::Unavailable { consistency: 4, required: 2, alive: 1 }, ""),
                cat(&[&[0, 0, 0x10, 0], &[0, 0], &[0, 4], &[0, 0, 0, 2], &[0, 0, 0, 1]]),
            ),
            (
                ErrorBody::new(
                    ErrorKind::WriteTimeout {
                        consistency: 1,
                        received: 0,
                        block_for: 1,
                        write_type: WriteType::Simple,
                    },
                    "",
                ),
                cat(&[&[0, 0, 0x11, 0, 0, 0, 0, 1], &[0, 0, 0, 0], &[0, 0, 0, 1], &[0, 6], b"SIMPLE"]),
            ),
            (
                ErrorBody::new(
                    ErrorKind::ReadTimeout { consistency: 1, received: 1, block_for: 1, data_present: false },
                    "",
                ),
                cat(&[&[0, 0, 0x12, 0, 0, 0, 0, 1], &[0, 0, 0, 1], &[0, 0, 0, 1], &[0]]),
            ),
            (
                ErrorBody::new(
                    ErrorKind::ReadFailure {
                        consistency: 1,
                        received: 0,
                        block_for: 1,
                        num_failures: 1,
                        data_present: true,
                    },
                    "",
                ),
                cat(&[&[0, 0, 0x13, 0, 0, 0, 0, 1], &[0, 0, 0, 0], &[0, 0, 0, 1], &[0, 0, 0, 1], &[1]]),
            ),
            (
                ErrorBody::new(
                    ErrorKind::WriteFailure {
                        consistency: 1,
                        received: 0,
                        block_for: 1,
                        num_failures: 1,
                        write_type: WriteType::Cas,
                    },
                    "",
                ),
                cat(&[&[0, 0, 0x15, 0, 0, 0, 0, 1], &[0, 0, 0, 0], &[0, 0, 0, 1], &[0, 0, 0, 1], &[0, 3], b"CAS"]),
            ),
            (
                ErrorBody::new(
                    ErrorKind::FunctionFailure {
                        keyspace: "k".into(),
                        function: "f".into(),
                        arg_types: vec!["int".into()],
                    },
                    "",
                ),
                cat(&[&[0, 0, 0x14, 0, 0, 0], &[0, 1, b'k', 0, 1, b'f'], &[0, 1, 0, 3], b"int"]),
            ),
            (
                ErrorBody::new(ErrorKind::AlreadyExists { keyspace: "k".into(), table: String::new() }, ""),
                cat(&[&[0, 0, 0x24, 0, 0, 0], &[0, 1, b'k', 0, 0]]),
            ),
            (
                ErrorBody::new(ErrorKind::Unprepared { id: Bytes::from_static(&[9, 9]) }, ""),
                cat(&[&[0, 0, 0x25, 0, 0, 0], &[0, 2, 9, 9]]),
            ),
        ];
        for (body, expected) in cases {
            let mut out = Vec::new();
            body.write(&mut out);
            assert_eq!(out, expected, "{:?}", body.kind);
        }
    }

    #[test]
    fn codes_without_extras() {
        let kinds = [
            (ErrorKind::ServerError, 0x0000),
            (ErrorKind::BadCredentials, 0x0100),
            (ErrorKind::Overloaded, 0x1001),
            (ErrorKind::IsBootstrapping, 0x1002),
            (ErrorKind::TruncateError, 0x1003),
            (ErrorKind::SyntaxError, 0x2000),
            (ErrorKind::Unauthorized, 0x2100),
            (ErrorKind::Invalid, 0x2200),
            (ErrorKind::ConfigError, 0x2300),
        ];
        for (kind, code) in kinds {
            let mut out = Vec::new();
            ErrorBody::new(kind, "m").write(&mut out);
            let mut expected = i32::to_be_bytes(code).to_vec();
            expected.extend_from_slice(&[0, 1, b'm']);
            assert_eq!(out, expected);
        }
    }

    #[test]
    fn unsupported_version_error_frame() {
        let err = FrameError::UnsupportedVersion { version: 5, stream: 0 };
        let mut out = Vec::new();
        assert_eq!(encode_frame_error(&mut out, &err), Ok(()));
        assert_eq!(&out[..5], &[0x84, 0, 0, 0, 0x00]);
        let mut r = Reader::new(&out[HEADER_LEN..]);
        assert_eq!(r.read_int(), Ok(0x000A));
        let message = r.read_string().unwrap_or_default();
        assert!(message.contains("unsupported protocol version (5)"));
        let err = FrameError::UnsupportedVersion { version: 1, stream: 3 };
        let mut out = Vec::new();
        assert_eq!(encode_frame_error(&mut out, &err), Ok(()));
        assert_eq!(&out[..4], &[0x81, 0, 3, 0x00]);
        let len = u32::from_be_bytes([out[4], out[5], out[6], out[7]]) as usize;
        assert_eq!(out.len(), 8 + len);
    }

    #[test]
    fn simple_results_and_auth() {
        let mut out = Vec::new();
        write_void(&mut out);
        write_set_keyspace(&mut out, "ks");
        write_ready(&mut out);
        write_authenticate(&mut out, "org.apache.cassandra.auth.PasswordAuthenticator");
        write_auth_challenge(&mut out, Some(b"c"));
        write_auth_success(&mut out, None);
        write_supported(&mut out, &[("COMPRESSION", ["lz4", "snappy"])]);
        let mut r = Reader::new(&out);
        assert_eq!(r.read_int(), Ok(RESULT_VOID));
        assert_eq!(r.read_int(), Ok(RESULT_SET_KEYSPACE));
        assert_eq!(r.read_string(), Ok("ks"));
        assert_eq!(r.read_string(), Ok("org.apache.cassandra.auth.PasswordAuthenticator"));
        assert_eq!(r.read_bytes(), Ok(Some(&b"c"[..])));
        assert_eq!(r.read_bytes(), Ok(None));
        assert_eq!(r.read_string_multimap(), Ok(vec![("COMPRESSION", vec!["lz4", "snappy"])]));
        assert!(r.is_empty());
    }

    #[test]
    fn schema_changes_and_events() {
        let change = SchemaChange {
            change: SchemaChangeType::Created,
            target: SchemaChangeTarget::Function {
                keyspace: "ks".into(),
                name: "f".into(),
                arg_types: vec!["int".into(), "text".into()],
            },
        };
        let mut out = Vec::new();
        write_schema_change_result(&mut out, &change);
        let mut r = Reader::new(&out);
        assert_eq!(r.read_int(), Ok(RESULT_SCHEMA_CHANGE));
        assert_eq!(r.read_string(), Ok("CREATED"));
        assert_eq!(r.read_string(), Ok("FUNCTION"));
        assert_eq!(r.read_string(), Ok("ks"));
        assert_eq!(r.read_string(), Ok("f"));
        assert_eq!(r.read_string_list(), Ok(vec!["int", "text"]));
        assert!(r.is_empty());

        let table = Event::SchemaChange(SchemaChange {
            change: SchemaChangeType::Dropped,
            target: SchemaChangeTarget::Table { keyspace: "ks".into(), table: "t".into() },
        });
        let mut out = Vec::new();
        write_event(&mut out, &table);
        let mut r = Reader::new(&out);
        let fields: Vec<_> = (0..5).map(|_| r.read_string().unwrap_or("?")).collect();
        assert_eq!(fields, ["SCHEMA_CHANGE", "DROPPED", "TABLE", "ks", "t"]);

        let address: SocketAddr = "10.0.0.7:9042".parse().expect("test address");
        for (event, kind, change) in [
            (Event::StatusChange { change: StatusChangeType::Up, address }, "STATUS_CHANGE", "UP"),
            (Event::TopologyChange { change: TopologyChangeType::NewNode, address }, "TOPOLOGY_CHANGE", "NEW_NODE"),
        ] {
            let mut out = Vec::new();
            write_event(&mut out, &event);
            let mut r = Reader::new(&out);
            assert_eq!(r.read_string(), Ok(kind));
            assert_eq!(r.read_string(), Ok(change));
            assert_eq!(r.read_inet(), Ok(address));
            assert!(r.is_empty());
        }
    }
}
