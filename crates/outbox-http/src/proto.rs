//! The protobuf form of events (`proto/outbox/v1/event.proto`, package `outbox.v1`): the
//! generated messages of [`outbox_proto`], re-exported for hosts. `GET /events` answers an
//! [`EventPage`] when asked with `Accept: application/x-protobuf`.

pub use outbox_proto::{Event, EventPage};
