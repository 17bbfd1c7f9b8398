//! What a request sent with the TRACING flag records about itself: the
//! command and description Cassandra shows in `system_traces.sessions`, and
//! its parameters (consistency, query text - a prepared statement's too -,
//! page size).

use std::collections::BTreeMap;
use std::net::IpAddr;

use shoal_cql::traces::Trace;

use crate::request::{QueryParams, Request};

/// Starts the trace of `request`, or `None` for requests that carry no
/// statement (STARTUP, OPTIONS, REGISTER, AUTH_RESPONSE), which Cassandra
/// does not trace either.
pub(crate) fn begin(client: IpAddr, request: &Request) -> Option<Trace> {
    let mut parameters = BTreeMap::new();
    let (command, description) = match request {
        Request::Query { query, params } => {
            parameters.insert("query".to_string(), query.clone());
            add_params(&mut parameters, params);
            ("QUERY", "Execute CQL3 query")
        }
        Request::Execute { id, params } => {
            // Cassandra records the prepared statement's text, so a trace
            // says what ran.
            if let Some(text) = shoal_cql::processor::prepared_text(id) {
                parameters.insert("query".to_string(), text.to_string());
            }
            add_params(&mut parameters, params);
            ("EXECUTE", "Execute CQL3 prepared query")
        }
        Request::Prepare { query } => {
            parameters.insert("query".to_string(), query.clone());
            ("PREPARE", "Preparing CQL3 query")
        }
        Request::Batch(batch) => {
            parameters.insert("consistency_level".to_string(), batch.consistency.name().to_string());
            ("BATCH", "Execute batch of CQL3 queries")
        }
        Request::Startup { .. } | Request::Options | Request::Register { .. } | Request::AuthResponse { .. } => {
            return None
        }
    };
    Some(Trace::begin(client, command, description, parameters))
}

fn add_params(parameters: &mut BTreeMap<String, String>, params: &QueryParams) {
    parameters.insert("consistency_level".to_string(), params.consistency.name().to_string());
    if let Some(serial) = params.serial_consistency {
        parameters.insert("serial_consistency_level".to_string(), serial.name().to_string());
    }
    if let Some(page_size) = params.page_size {
        parameters.insert("page_size".to_string(), page_size.to_string());
    }
}
