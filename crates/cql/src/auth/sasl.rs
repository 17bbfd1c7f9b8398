//! The SASL PLAIN token of an AUTH_RESPONSE (RFC 4616):
//! `[authzid] NUL authcid NUL passwd`, decoded as Cassandra's
//! `PlainTextSaslAuthenticator` does — the last two fields are the user
//! and password, an authorization id before them is ignored.
//!
//! Total: any bytes give credentials or a [`SaslError`], never a panic.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SaslError {
    #[error("Authentication ID must not be null")]
    NoUsername,
    #[error("Password must not be null")]
    NoPassword,
    #[error("Credentials must be UTF-8")]
    NotUtf8,
}

/// The user and password of a SASL PLAIN `token`.
pub fn decode_plain(token: &[u8]) -> Result<Credentials, SaslError> {
    let mut fields = token.rsplitn(3, |b| *b == 0);
    let password = fields.next().unwrap_or_default();
    // Without a NUL there is no user field at all.
    let username = fields.next().ok_or(SaslError::NoUsername)?;
    if username.is_empty() {
        return Err(SaslError::NoUsername);
    }
    if password.is_empty() {
        return Err(SaslError::NoPassword);
    }
    let text = |bytes: &[u8]| String::from_utf8(bytes.to_vec()).map_err(|_| SaslError::NotUtf8);
    Ok(Credentials { username: text(username)?, password: text(password)? })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_tokens() {
        let plain = decode_plain(b"\0cassandra\0secret").expect("a token");
        assert_eq!((plain.username.as_str(), plain.password.as_str()), ("cassandra", "secret"));
        let with_authzid = decode_plain(b"admin\0bob\0pw").expect("a token");
        assert_eq!(with_authzid.username, "bob");
        assert_eq!(decode_plain(b""), Err(SaslError::NoUsername));
        assert_eq!(decode_plain(b"password-only"), Err(SaslError::NoUsername));
        assert_eq!(decode_plain(b"\0\0pw"), Err(SaslError::NoUsername));
        assert_eq!(decode_plain(b"\0bob\0"), Err(SaslError::NoPassword));
        assert_eq!(decode_plain(b"\0b\xffb\0pw"), Err(SaslError::NotUtf8));
    }
}
