//! Items several internode payloads share: an IP address as
//! `[u8 4 or 16][octets]` and text as `[u16 length][UTF-8]`, read with
//! `buf::Reader` (total: any bytes give an item or an error).

use std::net::IpAddr;

use shoal_buf::{Reader, Short};
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    #[error(transparent)]
    Short(#[from] Short),
    #[error("unknown address family {0}")]
    AddressFamily(u8),
    #[error("text is not UTF-8")]
    NotUtf8,
}

pub fn put_ip(out: &mut Vec<u8>, ip: IpAddr) {
    match ip {
        IpAddr::V4(a) => {
            out.push(4);
            out.extend_from_slice(&a.octets());
        }
        IpAddr::V6(a) => {
            out.push(16);
            out.extend_from_slice(&a.octets());
        }
    }
}

pub fn ip_of(r: &mut Reader<'_>) -> Result<IpAddr, WireError> {
    match r.u8("address family")? {
        4 => Ok(IpAddr::from(r.array::<4>("IPv4 address")?)),
        16 => Ok(IpAddr::from(r.array::<16>("IPv6 address")?)),
        family => Err(WireError::AddressFamily(family)),
    }
}

/// Text of at most 65,535 bytes (longer is cut at a character boundary).
pub fn put_text(out: &mut Vec<u8>, text: &str) {
    let mut end = text.len().min(usize::from(u16::MAX));
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    out.extend_from_slice(&(end as u16).to_be_bytes());
    out.extend_from_slice(&text.as_bytes()[..end]);
}

pub fn text_of(r: &mut Reader<'_>) -> Result<String, WireError> {
    let len = usize::from(r.be_u16("text length")?);
    let bytes = r.take(len, "text")?;
    std::str::from_utf8(bytes).map(str::to_string).map_err(|_| WireError::NotUtf8)
}
