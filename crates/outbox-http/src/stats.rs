//! Counters of what this service served, for a host's metrics (`GET /metrics` in the
//! bundled server). Plain atomics: reading them costs nothing and needs no metrics
//! framework; the host renders them in whatever format it serves.

use std::sync::atomic::{AtomicU64, Ordering};

use dashmap::DashMap;

/// What an [`OutboxService`](crate::OutboxService) and its clones served since it was built.
#[derive(Debug, Default)]
pub struct HttpStats {
    list_requests: AtomicU64,
    streams_opened: AtomicU64,
    events_sent: DashMap<String, AtomicU64>,
}

impl HttpStats {
    /// `GET /events` requests answered with a page.
    pub fn list_requests(&self) -> u64 {
        self.list_requests.load(Ordering::Relaxed)
    }

    /// `GET /watch` streams opened.
    pub fn streams_opened(&self) -> u64 {
        self.streams_opened.load(Ordering::Relaxed)
    }

    /// Events sent on live streams, per tenant, sorted by tenant. One entry per tenant that
    /// was streamed to: a host that renders them should group tenants into a few classes.
    pub fn events_sent(&self) -> Vec<(String, u64)> {
        let mut sent: Vec<(String, u64)> =
            self.events_sent.iter().map(|entry| (entry.key().clone(), entry.value().load(Ordering::Relaxed))).collect();
        sent.sort();
        sent
    }

    pub(crate) fn listed(&self) {
        self.list_requests.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn opened(&self) {
        self.streams_opened.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn sent(&self, tenant: &str, events: u64) {
        if events == 0 {
            return;
        }
        if let Some(counter) = self.events_sent.get(tenant) {
            counter.fetch_add(events, Ordering::Relaxed);
            return;
        }
        self.events_sent.entry(tenant.to_owned()).or_default().fetch_add(events, Ordering::Relaxed);
    }
}
