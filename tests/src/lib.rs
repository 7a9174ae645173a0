//! End-to-end tests of the `outbox` binary live in `e2e/`.
