//! Which members want a row: an index by tenant, then by type, so that handing a row out
//! costs in proportion to the members that want it, not to every member of the tail.
//!
//! A member sits in exactly one place, so a row reaches it at most once however many of
//! its patterns match: under its tenant (or under "every tenant"), then
//! - in `every` when one of its patterns is `*` (or it has none);
//! - under each of its exact types when none of its patterns has a `*` (a row has one
//!   type, so it matches at most one of them);
//! - in `globs` otherwise, with all its patterns, which are matched row by row.

use std::collections::HashMap;
use std::sync::Arc;

use outbox_core::{Event, Pattern};

use super::Inbox;

/// Whose rows a member wants: one tenant's (or every tenant's), of the types its patterns match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filter {
    /// Only this tenant's rows; `None` for every tenant's.
    pub tenant_id: Option<String>,
    /// Only types matching one of these; empty (or containing `*`) for every type.
    pub patterns: Vec<Pattern>,
}

impl Filter {
    /// Whether `event` passes the filter.
    pub fn matches(&self, event: &Event) -> bool {
        self.tenant_id.as_ref().is_none_or(|tenant| *tenant == event.tenant_id)
            && (self.patterns.is_empty() || self.patterns.iter().any(|p| p.matches(&event.event_type)))
    }

    fn every_type(&self) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(Pattern::is_all)
    }

    fn exact_types(&self) -> Option<Vec<&str>> {
        let exact = self.patterns.iter().all(|p| !p.as_str().contains('*'));
        exact.then(|| {
            let mut types: Vec<&str> = self.patterns.iter().map(Pattern::as_str).collect();
            types.sort_unstable();
            types.dedup();
            types
        })
    }
}

type Members = HashMap<u64, Arc<Inbox>>;

/// The members of one tenant (or of every tenant), by what types they want.
#[derive(Default)]
struct Bucket {
    every: Members,
    exact: HashMap<String, Members>,
    globs: HashMap<u64, (Vec<Pattern>, Arc<Inbox>)>,
}

impl Bucket {
    fn insert(&mut self, id: u64, filter: &Filter, inbox: Arc<Inbox>) {
        if filter.every_type() {
            self.every.insert(id, inbox);
        } else if let Some(types) = filter.exact_types() {
            for event_type in types {
                self.exact.entry(event_type.to_owned()).or_default().insert(id, inbox.clone());
            }
        } else {
            self.globs.insert(id, (filter.patterns.clone(), inbox));
        }
    }

    fn remove(&mut self, id: u64, filter: &Filter) {
        if filter.every_type() {
            self.every.remove(&id);
        } else if let Some(types) = filter.exact_types() {
            for event_type in types {
                if let Some(members) = self.exact.get_mut(event_type) {
                    members.remove(&id);
                    if members.is_empty() {
                        self.exact.remove(event_type);
                    }
                }
            }
        } else {
            self.globs.remove(&id);
        }
    }

    fn is_empty(&self) -> bool {
        self.every.is_empty() && self.exact.is_empty() && self.globs.is_empty()
    }

    fn for_each_match(&self, event_type: &str, visit: &mut impl FnMut(u64, &Arc<Inbox>)) {
        self.every.iter().for_each(|(id, inbox)| visit(*id, inbox));
        if let Some(members) = self.exact.get(event_type) {
            members.iter().for_each(|(id, inbox)| visit(*id, inbox));
        }
        for (id, (patterns, inbox)) in &self.globs {
            if patterns.iter().any(|p| p.matches(event_type)) {
                visit(*id, inbox);
            }
        }
    }
}

/// Every member of a tail, placed by its filter.
#[derive(Default)]
pub(super) struct Index {
    by_tenant: HashMap<String, Bucket>,
    any_tenant: Bucket,
    filters: HashMap<u64, Filter>,
}

impl Index {
    pub(super) fn insert(&mut self, id: u64, filter: Filter, inbox: Arc<Inbox>) {
        match &filter.tenant_id {
            Some(tenant) => self.by_tenant.entry(tenant.clone()).or_default().insert(id, &filter, inbox),
            None => self.any_tenant.insert(id, &filter, inbox),
        }
        self.filters.insert(id, filter);
    }

    /// Removes a member; a member that is not there (already detached) is no error.
    pub(super) fn remove(&mut self, id: u64) {
        let Some(filter) = self.filters.remove(&id) else { return };
        match &filter.tenant_id {
            Some(tenant) => {
                if let Some(bucket) = self.by_tenant.get_mut(tenant) {
                    bucket.remove(id, &filter);
                    if bucket.is_empty() {
                        self.by_tenant.remove(tenant);
                    }
                }
            }
            None => self.any_tenant.remove(id, &filter),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.filters.len()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// Calls `visit` once for every member that wants `event`.
    pub(super) fn for_each_match(&self, event: &Event, mut visit: impl FnMut(u64, &Arc<Inbox>)) {
        if let Some(bucket) = self.by_tenant.get(&event.tenant_id) {
            bucket.for_each_match(&event.event_type, &mut visit);
        }
        self.any_tenant.for_each_match(&event.event_type, &mut visit);
    }

    /// Removes every member, returning their inboxes.
    pub(super) fn drain(&mut self) -> Vec<Arc<Inbox>> {
        let mut inboxes: Vec<Arc<Inbox>> = Vec::with_capacity(self.len());
        let mut take = |bucket: Bucket| {
            inboxes.extend(bucket.every.into_values());
            inboxes.extend(bucket.exact.into_values().flat_map(HashMap::into_values));
            inboxes.extend(bucket.globs.into_values().map(|(_, inbox)| inbox));
        };
        take(std::mem::take(&mut self.any_tenant));
        self.by_tenant.drain().for_each(|(_, bucket)| take(bucket));
        self.filters.clear();
        // A member under several exact types appears once per type.
        inboxes.sort_by_key(Arc::as_ptr);
        inboxes.dedup_by_key(|inbox| Arc::as_ptr(inbox));
        inboxes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outbox_core::Position;
    use serde_json::json;

    fn filter(tenant: Option<&str>, patterns: &[&str]) -> Filter {
        Filter {
            tenant_id: tenant.map(str::to_owned),
            patterns: patterns.iter().map(|p| Pattern::parse(p).unwrap()).collect(),
        }
    }

    fn event(tenant: &str, event_type: &str) -> Event {
        Event {
            id: "evt_1".into(),
            event_type: event_type.into(),
            tenant_id: tenant.into(),
            subject: "node/n1".into(),
            time: time::OffsetDateTime::UNIX_EPOCH,
            sequence: Position::new(1, 1),
            data: json!({}).into(),
        }
    }

    /// Each member is visited at most once per row, exactly when its filter matches.
    #[test]
    fn a_row_reaches_each_matching_member_once() {
        let filters = [
            filter(Some("acme"), &["*"]),
            filter(Some("acme"), &[]),
            filter(Some("acme"), &["node.joined", "node.left", "node.joined"]),
            filter(Some("acme"), &["node.*", "node.joined"]),
            filter(Some("globex"), &["*"]),
            filter(None, &["*.joined"]),
            filter(None, &["reservation.active"]),
        ];
        let mut index = Index::default();
        for (id, filter) in filters.iter().enumerate() {
            index.insert(id as u64, filter.clone(), Arc::new(Inbox::new(1)));
        }
        for (tenant, event_type) in [("acme", "node.joined"), ("acme", "node.left"), ("globex", "reservation.active")] {
            let row = event(tenant, event_type);
            let mut visited = Vec::new();
            index.for_each_match(&row, |id, _| visited.push(id as usize));
            visited.sort_unstable();
            let expected: Vec<usize> = (0..filters.len()).filter(|&id| filters[id].matches(&row)).collect();
            assert_eq!(visited, expected, "{tenant} {event_type}");
        }
        assert_eq!(index.len(), filters.len());
        index.remove(2);
        index.remove(2);
        let mut visited = Vec::new();
        index.for_each_match(&event("acme", "node.left"), |id, _| visited.push(id));
        visited.sort_unstable();
        assert_eq!(visited, [0, 1, 3]);
        assert_eq!(index.drain().len(), filters.len() - 1);
        assert!(index.is_empty());
    }
}
