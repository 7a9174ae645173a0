//! Authentication of HTTP callers (SPEC §5.2): [`TokenAuthorizer`].
//!
//! A caller sends `Authorization: Bearer <token>`, where the token is either
//!
//! - a static API key from the configuration, stored as its SHA-256: the token's digest is
//!   compared with every configured digest in constant time, all of them every time, so
//!   neither timing nor position tells how close a guess came; or
//! - a JWT signed with HS256 (the configured secret) or RS256 / ES256 (a configured public
//!   key, chosen by the token's `alg`), with the claims `sub` (identity), `tenant_id`,
//!   `scope` (space-separated), `sid` (session), `agent_id`, `delegation_id` and `exp`
//!   (required; 60 s of leeway for clock skew).
//!
//! Anything else, and any token whose session or identity was revoked, is
//! `Unauthenticated`. The secret or a key is never logged or echoed.

use std::path::Path;

use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::config::AuthConfig;
use crate::revocation::Revocations;
use outbox_http::{AuthError, Authorizer, BoxFuture, Grant};

/// The identity an API key's grant carries (`identityId` to revoke it).
pub fn api_key_identity(id: &str) -> String {
    format!("api-key:{id}")
}

/// The claims Outbox reads from (and `outbox token issue` writes into) a JWT.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// The identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub: Option<String>,
    /// The tenant whose events the token reads; required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_id: Option<String>,
    /// Space-separated scopes.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scope: String,
    /// The session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sid: Option<String>,
    /// The agent acting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The delegation the agent acts under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegation_id: Option<String>,
    /// Expiry, seconds since the Unix epoch.
    pub exp: u64,
}

impl Claims {
    fn into_grant(self) -> Result<Grant, AuthError> {
        let tenant_id = self.tenant_id.ok_or_else(|| unauthenticated("the token has no tenant_id claim"))?;
        if !outbox_core::validate::is_valid_tenant_id(&tenant_id) {
            return Err(unauthenticated("the token's tenant_id is not a tenant id"));
        }
        Ok(Grant {
            tenant_id,
            identity_id: self.sub,
            agent_id: self.agent_id,
            delegation_id: self.delegation_id,
            session_id: self.sid,
            scopes: self.scope.split_whitespace().map(str::to_owned).collect(),
            expires_at: i64::try_from(self.exp).ok().and_then(|exp| time::OffsetDateTime::from_unix_timestamp(exp).ok()),
        })
    }
}

/// A configured API key: the digest to match and the grant it gives.
struct ApiKey {
    digest: [u8; 32],
    grant: Grant,
}

/// The bundled server's [`Authorizer`]: JWTs and hashed API keys, minus revocations.
pub struct TokenAuthorizer {
    audience: Option<String>,
    issuer: Option<String>,
    hs256: Option<DecodingKey>,
    rs256: Vec<DecodingKey>,
    es256: Vec<DecodingKey>,
    api_keys: Vec<ApiKey>,
    revocations: Revocations,
}

impl TokenAuthorizer {
    /// Builds the authorizer from `[auth]`, reading the public key files.
    /// Errors name the key and the file.
    pub fn new(config: &AuthConfig, revocations: Revocations) -> anyhow::Result<TokenAuthorizer> {
        let hs256 = config.jwt_secret.as_deref().map(|s| DecodingKey::from_secret(s.as_bytes())).transpose()?;
        let mut authorizer = TokenAuthorizer {
            audience: config.jwt_audience.clone(),
            issuer: config.jwt_issuer.clone(),
            hs256,
            rs256: Vec::new(),
            es256: Vec::new(),
            api_keys: Vec::new(),
            revocations,
        };
        for (index, path) in config.jwt_public_keys.iter().enumerate() {
            authorizer.add_public_key(path).map_err(|e| {
                crate::config::ConfigError(format!("auth.jwt_public_keys[{index}] ({}): {e:#}", path.display()))
            })?;
        }
        for key in &config.api_keys {
            let digest = hex::decode(&key.sha256)?.try_into().map_err(|_| anyhow::anyhow!("a bad api key digest"))?;
            let grant = Grant {
                tenant_id: key.tenant.clone(),
                identity_id: Some(api_key_identity(&key.id)),
                scopes: key.scopes.iter().cloned().collect(),
                ..Grant::default()
            };
            authorizer.api_keys.push(ApiKey { digest, grant });
        }
        Ok(authorizer)
    }

    fn add_public_key(&mut self, path: &Path) -> anyhow::Result<()> {
        let pem = std::fs::read(path)?;
        if let Ok(key) = DecodingKey::from_rsa_pem(&pem) {
            self.rs256.push(key);
        } else {
            let key = DecodingKey::from_ec_pem(&pem)
                .map_err(|e| anyhow::anyhow!("not an RSA or EC public key in PEM form: {e}"))?;
            self.es256.push(key);
        }
        Ok(())
    }

    /// Authenticates a bearer token (without the revocation check).
    pub fn authenticate(&self, token: &str) -> Result<Grant, AuthError> {
        if let Some(grant) = self.match_api_key(token) {
            return Ok(grant);
        }
        self.decode_jwt(token)?.into_grant()
    }

    /// The grant of the API key whose digest matches, comparing against every key.
    fn match_api_key(&self, token: &str) -> Option<Grant> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for key in &self.api_keys {
            if constant_time_eq(&key.digest, &digest) {
                found = Some(key.grant.clone());
            }
        }
        found
    }

    fn decode_jwt(&self, token: &str) -> Result<Claims, AuthError> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| unauthenticated("invalid token"))?;
        let keys: Vec<&DecodingKey> = match header.alg {
            Algorithm::HS256 => self.hs256.iter().collect(),
            Algorithm::RS256 => self.rs256.iter().collect(),
            Algorithm::ES256 => self.es256.iter().collect(),
            _ => Vec::new(),
        };
        if keys.is_empty() {
            return Err(unauthenticated("invalid token: no key accepts its algorithm"));
        }
        let validation = self.validation(header.alg);
        let mut last = unauthenticated("invalid token");
        for key in keys {
            match jsonwebtoken::decode::<Claims>(token, key, &validation) {
                Ok(data) => return Ok(data.claims),
                Err(error) => last = refusal(error.kind()),
            }
        }
        Err(last)
    }
}

impl TokenAuthorizer {
    /// `exp` required (60 s leeway); `aud` and `iss` checked only when configured, and then required.
    fn validation(&self, alg: Algorithm) -> Validation {
        let mut validation = Validation::new(alg);
        let mut required = vec!["exp"];
        match &self.audience {
            Some(audience) => {
                validation.set_audience(&[audience]);
                required.push("aud");
            }
            None => validation.validate_aud = false,
        }
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        validation.set_required_spec_claims(&required);
        validation
    }
}

impl Authorizer for TokenAuthorizer {
    fn authorize<'a>(&'a self, headers: &'a http::HeaderMap) -> BoxFuture<'a, Result<Grant, AuthError>> {
        Box::pin(async move {
            let token = bearer_token(headers)?;
            let grant = self.authenticate(token)?;
            self.revocations.check(&grant)?;
            Ok(grant)
        })
    }

    fn reauthorize<'a>(&'a self, grant: &'a Grant) -> BoxFuture<'a, Result<bool, AuthError>> {
        Box::pin(async move {
            match self.revocations.check(grant) {
                Ok(()) => Ok(true),
                Err(AuthError::Unauthenticated(_)) => Ok(false),
                Err(other) => Err(other),
            }
        })
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme is case-insensitive).
pub fn bearer_token(headers: &http::HeaderMap) -> Result<&str, AuthError> {
    let value = headers.get(http::header::AUTHORIZATION).ok_or_else(|| unauthenticated("missing bearer token"))?;
    let value = value.to_str().map_err(|_| unauthenticated("malformed Authorization header"))?;
    let (scheme, token) = value.split_once(' ').ok_or_else(|| unauthenticated("malformed Authorization header"))?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(unauthenticated("the Authorization header must be Bearer <token>"));
    }
    Ok(token)
}

fn refusal(kind: &ErrorKind) -> AuthError {
    unauthenticated(match kind {
        ErrorKind::ExpiredSignature => "token expired",
        ErrorKind::InvalidSignature => "invalid token signature",
        ErrorKind::MissingRequiredClaim(_) => "invalid token: a required claim is missing",
        ErrorKind::InvalidAudience => "invalid token: wrong audience",
        ErrorKind::InvalidIssuer => "invalid token: wrong issuer",
        _ => "invalid token",
    })
}

fn unauthenticated(message: &str) -> AuthError {
    AuthError::Unauthenticated(message.to_owned())
}

/// Compares two digests without an early exit.
fn constant_time_eq(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let difference = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(difference) == 0
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use jsonwebtoken::{EncodingKey, Header};

    use super::*;
    use crate::config::ApiKeyConfig;

    const SECRET: &str = "an-hs256-secret-of-at-least-32-bytes";
    const KEYS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/keys");

    fn config() -> AuthConfig {
        AuthConfig {
            jwt_secret: Some(SECRET.into()),
            jwt_public_keys: vec![format!("{KEYS}/rsa-public.pem").into(), format!("{KEYS}/ec-public.pem").into()],
            jwt_audience: None,
            jwt_issuer: None,
            api_keys: vec![ApiKeyConfig {
                id: "ops".into(),
                sha256: hex::encode(Sha256::digest(b"obx_the-ops-key")),
                tenant: "acme".into(),
                scopes: vec!["events:read".into()],
            }],
        }
    }

    fn authorizer() -> TokenAuthorizer {
        let revocations = Revocations::new();
        revocations.assume_fresh();
        TokenAuthorizer::new(&config(), revocations).unwrap()
    }

    fn claims(exp_from_now: i64) -> Claims {
        Claims {
            sub: Some("usr_1".into()),
            tenant_id: Some("acme".into()),
            scope: "events:read  admin".into(),
            sid: Some("ses_1".into()),
            agent_id: Some("agt_1".into()),
            delegation_id: Some("dlg_1".into()),
            exp: (jsonwebtoken::get_current_timestamp() as i64 + exp_from_now) as u64,
        }
    }

    fn sign(alg: Algorithm, key: &EncodingKey, claims: &Claims) -> String {
        jsonwebtoken::encode(&Header::new(alg), claims, key).unwrap()
    }

    fn hs256(secret: &str, claims: &Claims) -> String {
        sign(Algorithm::HS256, &EncodingKey::from_secret(secret.as_bytes()).unwrap(), claims)
    }

    fn pem(name: &str) -> Vec<u8> {
        std::fs::read(format!("{KEYS}/{name}")).unwrap()
    }

    #[track_caller]
    fn refused(token: &str, fragment: &str) {
        match authorizer().authenticate(token) {
            Err(AuthError::Unauthenticated(message)) => assert!(message.contains(fragment), "{message}"),
            other => panic!("expected Unauthenticated({fragment}), got {other:?}"),
        }
    }

    #[test]
    fn an_hs256_token_gives_its_claims() {
        let claims = claims(3600);
        let grant = authorizer().authenticate(&hs256(SECRET, &claims)).unwrap();
        let expected = Grant {
            tenant_id: "acme".into(),
            identity_id: Some("usr_1".into()),
            agent_id: Some("agt_1".into()),
            delegation_id: Some("dlg_1".into()),
            session_id: Some("ses_1".into()),
            scopes: ["admin".to_owned(), "events:read".to_owned()].into(),
            expires_at: Some(time::OffsetDateTime::from_unix_timestamp(claims.exp as i64).unwrap()),
        };
        assert_eq!(grant, expected);
    }

    #[test]
    fn rs256_and_es256_tokens_verify_with_the_public_keys() {
        let rsa = EncodingKey::from_rsa_pem(&pem("rsa-private.pem")).unwrap();
        let ec = EncodingKey::from_ec_pem(&pem("ec-private.pem")).unwrap();
        let grant = authorizer().authenticate(&sign(Algorithm::RS256, &rsa, &claims(60))).unwrap();
        assert_eq!(grant.session_id.as_deref(), Some("ses_1"));
        let grant = authorizer().authenticate(&sign(Algorithm::ES256, &ec, &claims(60))).unwrap();
        assert_eq!(grant.tenant_id, "acme");
    }

    #[test]
    fn bad_tokens_are_refused() {
        refused(&hs256(SECRET, &claims(-3600)), "token expired");
        refused(&hs256("another-secret-of-at-least-32-bytes!", &claims(60)), "invalid token signature");
        let no_tenant = Claims { tenant_id: None, ..claims(60) };
        refused(&hs256(SECRET, &no_tenant), "no tenant_id");
        let bad_tenant = Claims { tenant_id: Some("a b".into()), ..claims(60) };
        refused(&hs256(SECRET, &bad_tenant), "tenant_id");
        // alg "none": the header is refused before any key is tried.
        let encode = |json: &str| URL_SAFE_NO_PAD.encode(json);
        let unsigned = format!(
            "{}.{}.",
            encode(r#"{"alg":"none","typ":"JWT"}"#),
            encode(r#"{"tenant_id":"acme","exp":9999999999}"#)
        );
        refused(&unsigned, "invalid token");
        // No exp at all.
        let no_exp = format!("{}.{}.x", encode(r#"{"alg":"HS256"}"#), encode(r#"{"tenant_id":"acme"}"#));
        refused(&no_exp, "invalid token");
        // An HS256 token signed with the RSA public key's bytes (algorithm confusion) fails.
        refused(&hs256(&String::from_utf8(pem("rsa-public.pem")).unwrap(), &claims(60)), "signature");
        refused("garbage", "invalid token");
    }

    #[test]
    fn audience_and_issuer_are_checked_only_when_configured() {
        let with = |aud: &str, iss: &str| {
            let mut value = serde_json::to_value(claims(60)).unwrap();
            value["aud"] = aud.into();
            value["iss"] = iss.into();
            let key = EncodingKey::from_secret(SECRET.as_bytes()).unwrap();
            jsonwebtoken::encode(&Header::new(Algorithm::HS256), &value, &key).unwrap()
        };
        assert!(authorizer().authenticate(&with("anything", "anyone")).is_ok(), "unconfigured: not checked");
        let config = AuthConfig {
            jwt_audience: Some("outbox".into()),
            jwt_issuer: Some("https://iam.example".into()),
            ..config()
        };
        let strict = TokenAuthorizer::new(&config, Revocations::new()).unwrap();
        assert!(strict.authenticate(&with("outbox", "https://iam.example")).is_ok());
        let error = strict.authenticate(&with("billing", "https://iam.example")).unwrap_err();
        assert!(error.to_string().contains("audience"), "{error}");
        let error = strict.authenticate(&with("outbox", "https://evil.example")).unwrap_err();
        assert!(error.to_string().contains("issuer"), "{error}");
        let error = strict.authenticate(&hs256(SECRET, &claims(60))).unwrap_err();
        assert!(error.to_string().contains("required claim"), "{error}");
    }

    #[test]
    fn rs256_refused_without_a_key_for_it() {
        let rsa = EncodingKey::from_rsa_pem(&pem("rsa-private.pem")).unwrap();
        let revocations = Revocations::new();
        let only_secret = AuthConfig { jwt_secret: Some(SECRET.into()), ..AuthConfig::default() };
        let authorizer = TokenAuthorizer::new(&only_secret, revocations).unwrap();
        let error = authorizer.authenticate(&sign(Algorithm::RS256, &rsa, &claims(60))).unwrap_err();
        assert!(error.to_string().contains("no key accepts"), "{error}");
    }

    #[test]
    fn an_api_key_gives_its_configured_grant() {
        let grant = authorizer().authenticate("obx_the-ops-key").unwrap();
        assert_eq!(grant.tenant_id, "acme");
        assert_eq!(grant.identity_id.as_deref(), Some("api-key:ops"));
        assert!(grant.has_scope("events:read") && !grant.has_scope("admin"));
        refused("obx_the-ops-keY", "invalid token");
    }

    #[test]
    fn a_bad_public_key_file_is_named() {
        let config =
            AuthConfig { jwt_public_keys: vec![format!("{KEYS}/missing.pem").into()], ..AuthConfig::default() };
        let error = TokenAuthorizer::new(&config, Revocations::new()).err().unwrap();
        assert!(format!("{error:#}").contains("auth.jwt_public_keys[0]"), "{error:#}");
    }

    #[test]
    fn bearer_headers() {
        let headers = |value: &str| {
            let mut map = http::HeaderMap::new();
            map.insert(http::header::AUTHORIZATION, value.parse().unwrap());
            map
        };
        assert_eq!(bearer_token(&headers("Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer_token(&headers("bearer  abc ")).unwrap(), "abc");
        assert!(bearer_token(&headers("Basic abc")).is_err());
        assert!(bearer_token(&headers("Bearer ")).is_err());
        assert!(bearer_token(&http::HeaderMap::new()).is_err());
    }

    #[tokio::test]
    async fn revoked_sessions_are_refused_and_reauthorize_says_false() {
        let revocations = Revocations::new();
        let authorizer = TokenAuthorizer::new(&config(), revocations.clone()).unwrap();
        let mut headers = http::HeaderMap::new();
        let bearer = format!("Bearer {}", hs256(SECRET, &claims(60)));
        headers.insert(http::header::AUTHORIZATION, bearer.parse().unwrap());
        let stale = authorizer.authorize(&headers).await.unwrap_err();
        assert!(matches!(stale, AuthError::Unavailable(_)), "never read: {stale:?}");
        revocations.assume_fresh();
        let grant = authorizer.authorize(&headers).await.unwrap();
        assert!(authorizer.reauthorize(&grant).await.unwrap());
        revocations.insert(&outbox_http::Selector::Session("ses_1".into()));
        let revoked = authorizer.authorize(&headers).await.unwrap_err();
        assert!(matches!(&revoked, AuthError::Unauthenticated(m) if m == "token revoked"), "{revoked:?}");
        assert!(!authorizer.reauthorize(&grant).await.unwrap());
    }
}
