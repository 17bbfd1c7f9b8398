//! The CQL language: parsing statement text ([`parser`]), checking it against
//! the schema, and executing it through the coordinator ([`processor`]).
//!
//! Flow of a statement: text → [`parser::parse_statement`] → [`ast`] →
//! for writes, [`restrictions`] and [`modification`] build partition
//! updates; for reads, [`select`] builds a read command and shapes the rows;
//! schema statements become transitions ([`ddl::apply`]) that the
//! coordinator's schema service runs on shard 0; [`schema_file`] is the
//! format it persists.
//! Values are checked against their receiver's type in [`values`], so what
//! reaches storage is always well-formed. [`json`] renders rows and values
//! as JSON (SELECT JSON, `toJson`) and reads JSON into values (INSERT JSON,
//! `fromJson`).

pub mod ast;
pub mod auth;
pub mod bind_types;
pub mod cdc;
mod cdc_log;
mod cdc_streams;
pub mod clients;
mod collection_fcts;
mod compaction_options;
pub mod ddl;
pub mod describe;
mod dropped_columns;
mod durations;
pub mod error;
mod filter_relations;
pub mod format_fcts;
pub mod function_ddl;
pub mod functions;
mod index_ddl;
pub mod json;
mod length_fcts;
pub mod lexer;
pub mod live_config;
pub mod lua;
mod lwt;
pub mod metrics;
pub mod modification;
mod modification_where;
pub mod parser;
pub mod processor;
pub mod protocol_servers;
mod replication_guardrails;
pub mod restrictions;
pub mod result;
pub mod schema_file;
pub mod select;
pub mod system;
mod system_cells;
mod term_casts;
mod term_operations;
pub mod traces;
pub mod user_functions;
pub mod user_types;
mod using_timeout;
pub mod values;
mod view_ddl;

pub use error::{CqlError, CqlResult};
pub use processor::{BatchStatement, QueryOptions, Session};
pub use result::{ColumnSpec, PreparedInfo, QueryResult, Rows};
pub use values::BoundValue;
