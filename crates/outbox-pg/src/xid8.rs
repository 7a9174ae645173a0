//! `xid8`, PostgreSQL's 64-bit transaction id, which sqlx does not decode by itself.

use outbox_core::Position;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{PgArgumentBuffer, PgTypeInfo, PgValueFormat, PgValueRef};
use sqlx::{Decode, Encode, Postgres, Type};

/// A PostgreSQL `xid8` value (OID 5069), bound and decoded in binary as an unsigned 64-bit number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub(crate) struct Xid8(pub(crate) u64);

const XID8_OID: Oid = Oid(5069);

/// The position of an outbox row from its `txid` and `seq` columns (`seq` is a bigserial,
/// never negative).
pub(crate) fn position(txid: Xid8, seq: i64) -> Position {
    Position::new(txid.0, u64::try_from(seq).unwrap_or(0))
}

/// The `seq` column's value for `position`, its inverse (a `seq` past `i64::MAX` cannot
/// exist, and binds as the largest one).
pub(crate) fn seq_column(position: Position) -> i64 {
    i64::try_from(position.seq).unwrap_or(i64::MAX)
}

impl Type<Postgres> for Xid8 {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(XID8_OID)
    }
}

impl Encode<'_, Postgres> for Xid8 {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        buf.extend_from_slice(&self.0.to_be_bytes());
        Ok(IsNull::No)
    }
}

impl Decode<'_, Postgres> for Xid8 {
    fn decode(value: PgValueRef<'_>) -> Result<Xid8, BoxDynError> {
        match value.format() {
            PgValueFormat::Binary => {
                let bytes: [u8; 8] = value.as_bytes()?.try_into().map_err(|_| "xid8 is not 8 bytes")?;
                Ok(Xid8(u64::from_be_bytes(bytes)))
            }
            PgValueFormat::Text => Ok(Xid8(value.as_str()?.parse()?)),
        }
    }
}
