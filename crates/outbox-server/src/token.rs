//! Minting HS256 tokens (`outbox token issue`, and the admin token `outbox dev` prints).

use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header};

use crate::auth::Claims;

/// What a token says about its holder.
#[derive(Debug, Clone, Default)]
pub struct TokenRequest {
    /// `tenant_id`.
    pub tenant: String,
    /// `scope`, space-separated.
    pub scopes: String,
    /// How long the token lives.
    pub ttl: Duration,
    /// `sub`.
    pub sub: Option<String>,
    /// `sid`.
    pub sid: Option<String>,
}

/// Signs a token for `request` with the HS256 `secret`.
pub fn issue(secret: &str, request: &TokenRequest) -> anyhow::Result<String> {
    let exp = jsonwebtoken::get_current_timestamp() + request.ttl.as_secs();
    let claims = Claims {
        sub: request.sub.clone(),
        tenant_id: Some(request.tenant.clone()),
        scope: request.scopes.split_whitespace().collect::<Vec<_>>().join(" "),
        sid: request.sid.clone(),
        exp,
        ..Claims::default()
    };
    let key = EncodingKey::from_secret(secret.as_bytes())?;
    Ok(jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key)?)
}

/// Parses a lifetime: a number of seconds, or a number with `s`, `m`, `h` or `d` (`90s`, `1h`, `7d`).
pub fn parse_ttl(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().map_err(|_| format!("{text:?} is not a lifetime such as 90s, 15m, 1h or 7d"))?;
    let seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return Err(format!("{text:?}: the unit must be s, m, h or d")),
    };
    match number.checked_mul(seconds) {
        Some(0) => Err("the lifetime must be longer than 0".into()),
        Some(total) => Ok(Duration::from_secs(total)),
        None => Err(format!("{text:?} is too long")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check(text: &str, expect: Result<u64, &str>) {
        match (parse_ttl(text), expect) {
            (Ok(got), Ok(seconds)) => assert_eq!(got.as_secs(), seconds, "{text}"),
            (Err(message), Err(fragment)) => assert!(message.contains(fragment), "{text}: {message}"),
            (got, expect) => panic!("{text}: got {got:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn lifetimes() {
        check("90", Ok(90));
        check("90s", Ok(90));
        check("15m", Ok(900));
        check("1h", Ok(3600));
        check("7d", Ok(604_800));
        check("0h", Err("longer than 0"));
        check("1w", Err("unit"));
        check("h", Err("not a lifetime"));
        check("-1h", Err("not a lifetime"));
        check("99999999999999999999d", Err("not a lifetime"));
        check("999999999999999999d", Err("too long"));
    }
}
