//! What a meta command does (its item operation) and how it answers: a
//! return code (`HD`, `VA`, `EN`, `NS`, `EX`, `NF`, `ME`) followed by the
//! requested return flags, in request order; `q` hides the codes that mean
//! "as expected": `EN` of mg, `HD` of ms and md, `HD` and `VA` of ma (as
//! memcached 1.6.18 does; it shows md's `NF`, though protocol.txt says `q`
//! hides it).

use bytes::Bytes;
use shoal_coordinator::data::{Arith, Fetch, Item, ItemOp, ItemOutcome, Store, StoreMode};
use shoal_coordinator::ItemResult;

use crate::execute::{lifetime, ttl_s};
use crate::meta::{Meta, MetaCommand};
use crate::reply::Reply;
use crate::request::ProtocolError;
use crate::stats::{self, Stat};

/// The item operation of a meta request (its value cut from `buffer`), and
/// its key.
pub fn item_op<'m>(meta: &'m Meta<'_>, buffer: &Bytes, now_s: i64) -> (&'m [u8], ItemOp) {
    let when = |flag: u8| meta.seconds(flag).map(|s| lifetime(s, now_s));
    let op = match meta.command {
        MetaCommand::Get => ItemOp::Get(Fetch {
            touch: when(b'T'),
            vivify: when(b'N'),
            recache_within_s: meta.seconds(b'R'),
            no_bump: meta.has(b'u'),
        }),
        // `me` looks without touching: no bump, as memcached's debug.
        MetaCommand::Debug => ItemOp::Get(Fetch { no_bump: true, ..Fetch::default() }),
        MetaCommand::Set => {
            stats::bump(Stat::CmdSet);
            ItemOp::Store(Store {
                mode: store_mode(meta.token(b'M')),
                value: crate::batch_bytes::cut(buffer, meta.data),
                flags: meta.number(b'F').map_or(0, |f| f as u32),
                lifetime: when(b'T').unwrap_or(shoal_coordinator::data::Lifetime::Forever),
                compare_cas: meta.number(b'C'),
                new_cas: meta.number(b'E'),
                vivify: when(b'N'),
                stale_if_older: meta.has(b'I'),
            })
        }
        MetaCommand::Delete if meta.has(b'I') => {
            ItemOp::Invalidate { compare_cas: meta.number(b'C'), lifetime: when(b'T'), new_cas: meta.number(b'E') }
        }
        MetaCommand::Delete => ItemOp::Delete { compare_cas: meta.number(b'C') },
        MetaCommand::Arith => ItemOp::Arith(Arith {
            decrement: is_decrement(meta.token(b'M')),
            delta: meta.number(b'D').unwrap_or(1),
            create: when(b'N').map(|l| (meta.number(b'J').unwrap_or(0), l)),
            compare_cas: meta.number(b'C'),
            new_cas: meta.number(b'E'),
            touch: when(b'T'),
        }),
    };
    (&meta.key, op)
}

/// `ms`'s `M` token (validated when parsed): E add, A append, P prepend,
/// R replace, S set (the default).
fn store_mode(token: Option<&[u8]>) -> StoreMode {
    match token.and_then(|t| t.first()).map(u8::to_ascii_uppercase) {
        Some(b'E') => StoreMode::Add,
        Some(b'A') => StoreMode::Append,
        Some(b'P') => StoreMode::Prepend,
        Some(b'R') => StoreMode::Replace,
        _ => StoreMode::Set,
    }
}

/// `ma`'s `M` token: I, + increment (the default), D, - decrement.
fn is_decrement(token: Option<&[u8]>) -> bool {
    matches!(token.and_then(|t| t.first()), Some(b'D' | b'd' | b'-'))
}

/// Writes the answer of `meta`, taking its one outcome from `next`; `now_s`
/// is the clock for remaining TTLs and idle times.
pub fn answer(meta: &Meta<'_>, next: impl FnOnce() -> ItemResult, now_s: i64, reply: &mut Reply<'_>) {
    let outcome = match next() {
        Ok(outcome) => outcome,
        Err(e) => return reply.server_error(&e.to_string()),
    };
    let quiet = meta.has(b'q');
    match (meta.command, outcome) {
        (MetaCommand::Get, ItemOutcome::Found(item)) => {
            stats::bump(Stat::CmdGet);
            stats::bump(Stat::GetHits);
            with_value(meta, &item, meta.has(b'v'), now_s, reply);
        }
        (MetaCommand::Get, _) => {
            stats::bump(Stat::CmdGet);
            stats::bump(Stat::GetMisses);
            if !quiet {
                code(meta, b"EN", None, reply);
            }
        }
        (MetaCommand::Arith, ItemOutcome::Found(item)) => {
            if !quiet {
                with_value(meta, &item, meta.has(b'v'), now_s, reply);
            }
        }
        (MetaCommand::Set, ItemOutcome::Stored { cas }) => {
            stats::bump(Stat::TotalItems);
            if !quiet {
                code(meta, b"HD", Some(cas), reply);
            }
        }
        (MetaCommand::Delete, ItemOutcome::Deleted) => {
            stats::bump(Stat::DeleteHits);
            if !quiet {
                code(meta, b"HD", None, reply);
            }
        }
        (MetaCommand::Delete, ItemOutcome::Missing) => {
            stats::bump(Stat::DeleteMisses);
            code(meta, b"NF", None, reply);
        }
        (MetaCommand::Debug, ItemOutcome::Found(item)) => debug(meta, &item, now_s, reply),
        (MetaCommand::Debug, _) => reply.line(b"EN"),
        (_, ItemOutcome::NotANumber) => reply.error(ProtocolError::NotANumber),
        (_, ItemOutcome::NotStored) => code(meta, b"NS", None, reply),
        (_, ItemOutcome::Exists) => code(meta, b"EX", None, reply),
        (_, _) => code(meta, b"NF", None, reply),
    }
}

/// `VA <size> <flags>\r\n<data>\r\n` (with `v`) or `HD <flags>` for an item.
fn with_value(meta: &Meta<'_>, item: &Item, value: bool, now_s: i64, reply: &mut Reply<'_>) {
    if value {
        reply.bytes(b"VA ");
        reply.number(item.value.len() as u64);
    } else {
        reply.bytes(b"HD");
    }
    for (flag, token) in meta.flags.iter() {
        match flag {
            b'c' => flag_number(reply, b'c', item.cas),
            b'f' => flag_number(reply, b'f', u64::from(item.flags)),
            b's' => flag_number(reply, b's', item.value.len() as u64),
            b't' => {
                reply.bytes(b" t");
                reply.signed(ttl_s(item, now_s));
            }
            b'h' => reply.bytes(if item.access.fetched { b" h1" } else { b" h0" }),
            b'l' => flag_number(reply, b'l', (now_s - item.access.last_s).max(0) as u64),
            _ => echo(meta, flag, token, reply),
        }
    }
    // Z before W: a client never sees both (memcached's order).
    if item.access.token_sent {
        reply.bytes(b" Z");
    }
    if item.access.stale {
        reply.bytes(b" X");
    }
    if item.won {
        reply.bytes(b" W");
    }
    reply.bytes(b"\r\n");
    if value {
        reply.line(&item.value);
    }
}

/// A return code and the flags that echo the request (`O`, `k`, `b`), and
/// the new CAS unique (`c`) of a store.
fn code(meta: &Meta<'_>, code: &[u8], cas: Option<u64>, reply: &mut Reply<'_>) {
    reply.bytes(code);
    for (flag, token) in meta.flags.iter() {
        match (flag, cas) {
            (b'c', Some(cas)) => flag_number(reply, b'c', cas),
            _ => echo(meta, flag, token, reply),
        }
    }
    reply.bytes(b"\r\n");
}

/// The flags that repeat the request: opaque, key, base64.
fn echo(meta: &Meta<'_>, flag: u8, token: &[u8], reply: &mut Reply<'_>) {
    match flag {
        b'O' => {
            reply.bytes(b" O");
            reply.bytes(token);
        }
        b'k' => {
            reply.bytes(b" k");
            reply.bytes(&meta.key_as_sent());
        }
        b'b' if meta.has(b'k') => reply.bytes(b" b"),
        _ => {}
    }
}

fn flag_number(reply: &mut Reply<'_>, flag: u8, n: u64) {
    reply.bytes(&[b' ', flag]);
    reply.number(n);
}

/// `me`: `ME <key> exp=<ttl> la=<idle> cas=<cas> fetch=<yes|no> cls=<class> size=<bytes>`.
/// Shoal has no slab classes: `cls` is 1.
fn debug(meta: &Meta<'_>, item: &Item, now_s: i64, reply: &mut Reply<'_>) {
    reply.bytes(b"ME ");
    reply.bytes(&meta.key_as_sent());
    reply.bytes(b" exp=");
    reply.signed(ttl_s(item, now_s));
    reply.bytes(b" la=");
    reply.number((now_s - item.access.last_s).max(0) as u64);
    reply.bytes(b" cas=");
    reply.number(item.cas);
    reply.bytes(if item.access.fetched { b" fetch=yes" } else { b" fetch=no" });
    reply.bytes(b" cls=1 size=");
    reply.number((meta.key.len() + item.value.len()) as u64);
    reply.bytes(b"\r\n");
}
