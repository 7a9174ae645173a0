//! Request and response bodies: a whole response from bytes, a request body read up to a limit.
//!
//! A host reads the bodies of its own routes with [`read_limited`], so that every route
//! refuses an oversized body the same way.

use bytes::{Bytes, BytesMut};
use http_body::Body as HttpBody;
use http_body_util::{BodyExt, Full};
use outbox_core::ErrorCode;

use crate::{ApiError, Body};

/// A complete response body.
pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    BodyExt::boxed(Full::new(bytes.into()))
}

/// Reads a request body whole, refusing it with `PAYLOAD_TOO_LARGE` as soon as it is known
/// to exceed `limit` bytes (from its declared size, or while reading). A body that fails
/// while being read is `INVALID_INPUT`.
pub async fn read_limited<B>(body: B, limit: usize) -> Result<Bytes, ApiError>
where
    B: HttpBody<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    let declared = usize::try_from(body.size_hint().lower()).unwrap_or(usize::MAX);
    if declared > limit {
        return Err(too_large(limit));
    }
    let mut body = Box::pin(body);
    let mut collected = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::invalid(format!("reading the request body failed: {e}")))?;
        let Ok(data) = frame.into_data() else { continue };
        if collected.len() + data.len() > limit {
            return Err(too_large(limit));
        }
        collected.extend_from_slice(&data);
    }
    Ok(collected.freeze())
}

/// A JSON request body as `T`, or `INVALID_INPUT` saying why it is not one.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|error| ApiError::invalid(format!("the body is not a valid request: {error}")))
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(ErrorCode::PayloadTooLarge, format!("the request body must be at most {limit} bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reads_a_body_within_the_limit_and_refuses_a_larger_one() {
        let body = Full::new(Bytes::from_static(b"0123456789"));
        assert_eq!(read_limited(body.clone(), 10).await.unwrap(), "0123456789");
        let refused = read_limited(body, 9).await.unwrap_err();
        assert_eq!(refused.code(), ErrorCode::PayloadTooLarge);
    }
}
