//! The server's router on 127.0.0.1:0 against a real PostgreSQL (a fresh database per test).

mod auth;
mod fuzz;
mod ops;
mod revocation;
mod routes;
mod subscribers;
mod support;
