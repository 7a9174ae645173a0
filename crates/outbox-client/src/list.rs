//! History: one page of `GET /events` ([`ListQuery`], [`Page`]) and the pager that walks
//! every page ([`crate::Client::pager`]).

use std::collections::VecDeque;

use outbox_core::{Event, Position};
use serde::Deserialize;

use crate::{Client, Events, Result};

/// What `GET /events` reads (SPEC §5.3). The default reads the caller's tenant from the
/// oldest stored event, 100 at a time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListQuery {
    /// Another tenant than the token's (needs the `admin` scope).
    pub tenant_id: Option<String>,
    /// Type patterns (`reservation.*`, `node.joined`); empty means every type.
    pub types: Vec<String>,
    /// Only events about this exact subject (`reservation/rsv_01`).
    pub subject: Option<String>,
    /// Start strictly after this position; `None` starts at the oldest stored event.
    pub cursor: Option<Position>,
    /// Events per page, 1–1000 (the server's default is 100; at most 200 with `subject`).
    pub limit: Option<u32>,
}

impl ListQuery {
    /// The query string.
    pub(crate) fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        if let Some(tenant) = &self.tenant_id {
            pairs.push(("tenantId", tenant.clone()));
        }
        if !self.types.is_empty() {
            pairs.push(("types", self.types.join(",")));
        }
        if let Some(subject) = &self.subject {
            pairs.push(("subject", subject.clone()));
        }
        if let Some(cursor) = self.cursor {
            pairs.push(("cursor", cursor.colon()));
        }
        if let Some(limit) = self.limit {
            pairs.push(("limit", limit.to_string()));
        }
        pairs
    }
}

/// One page of history: events oldest first, and where the next page starts.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Page {
    /// The events, in `(txid, seq)` order.
    pub items: Vec<Event>,
    /// Present only when more rows follow: pass it as the next [`ListQuery::cursor`]. It can
    /// be past the last item when a filter skipped rows.
    #[serde(default)]
    pub cursor: Option<Position>,
}

impl Page {
    /// Where a reader that asked after `asked` has read everything up to: the page's cursor,
    /// else its last item, else `asked` itself.
    pub fn position(&self, asked: Option<Position>) -> Option<Position> {
        self.cursor.or_else(|| self.items.last().map(|event| event.sequence)).or(asked)
    }
}

/// Walks pages until one comes without a cursor.
pub(crate) fn pager(client: Client, query: ListQuery) -> Events {
    let state = Pager { client, query, buffered: VecDeque::new(), finished: false };
    Events::new(futures_util::stream::unfold(state, |mut pager| async move {
        let item = pager.next().await?;
        Some((item, pager))
    }))
}

struct Pager {
    client: Client,
    query: ListQuery,
    buffered: VecDeque<Event>,
    finished: bool,
}

impl Pager {
    async fn next(&mut self) -> Option<Result<Event>> {
        loop {
            if let Some(event) = self.buffered.pop_front() {
                return Some(Ok(event));
            }
            if self.finished {
                return None;
            }
            match self.client.list(&self.query).await {
                Ok(page) => {
                    self.finished = page.cursor.is_none();
                    self.query.cursor = page.position(self.query.cursor);
                    self.buffered.extend(page.items);
                }
                Err(error) => {
                    self.finished = true;
                    return Some(Err(error));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_string_names_what_is_set() {
        assert!(ListQuery::default().pairs().is_empty());
        let query = ListQuery {
            tenant_id: Some("globex".into()),
            types: vec!["node.*".into(), "pool.created".into()],
            subject: Some("node/n1".into()),
            cursor: Some(Position::new(7, 9)),
            limit: Some(10),
        };
        let pairs = query.pairs();
        let expect = [
            ("tenantId", "globex"),
            ("types", "node.*,pool.created"),
            ("subject", "node/n1"),
            ("cursor", "7:9"),
            ("limit", "10"),
        ];
        assert_eq!(pairs.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>(), expect);
    }

    #[test]
    fn a_page_reads_the_wire_form_and_knows_its_position() {
        let page: Page = serde_json::from_str(r#"{"items":[],"cursor":"10:4"}"#).unwrap();
        assert_eq!(page.position(None), Some(Position::new(10, 4)));
        let last: Page = serde_json::from_value(serde_json::json!({"items":[{
            "id":"evt_1","type":"a.b","tenantId":"acme","subject":"a/1",
            "time":"2026-09-24T10:15:02.114Z","sequence":"12.3","data":{}}]}))
        .unwrap();
        assert_eq!(last.position(Some(Position::new(1, 1))), Some(Position::new(12, 3)));
        let empty: Page = serde_json::from_str(r#"{"items":[]}"#).unwrap();
        assert_eq!(empty.position(Some(Position::new(5, 5))), Some(Position::new(5, 5)));
        assert_eq!(empty.position(None), None);
    }
}
