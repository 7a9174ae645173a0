//! The scopes a [`Grant`](crate::Grant) can hold (SPEC §5.2).
//!
//! `admin` implies every other scope ([`Grant::has_scope`](crate::Grant::has_scope)).

/// Read history and open live streams.
pub const EVENTS_READ: &str = "events:read";
/// Publish events (`POST /events`).
pub const EVENTS_WRITE: &str = "events:write";
/// Manage the grant's own tenant's webhooks.
pub const WEBHOOKS_WRITE: &str = "webhooks:write";
/// Everything, including reading other tenants and managing sinks, dead letters and streams.
pub const ADMIN: &str = "admin";
