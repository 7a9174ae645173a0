//! Backfill then follow: page the history from a position with `GET /events`, then continue
//! live with `GET /watch` from where the history ended.
//!
//! There is no gap and no duplicate at the switch, even while events are being published:
//! the last page's position (its last item, or the cursor past rows a filter skipped) goes
//! to `/watch` as `Last-Event-ID`, and both routes read with the xmin rule, under which no
//! event can ever appear at or before a position that was handed out.

use std::collections::VecDeque;
use std::time::Duration;

use outbox_core::{Event, Position};

use crate::list::ListQuery;
use crate::watch::{Backoff, Watcher};
use crate::{Client, Events, Result, WatchQuery};

/// What to replay and then follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowQuery {
    /// Type patterns; empty means every type.
    pub types: Vec<String>,
    /// Another tenant than the token's (needs the `admin` scope).
    pub tenant_id: Option<String>,
    /// Replay strictly after this position; `None` replays from the oldest stored event.
    pub after: Option<Position>,
    /// Events per history page, 1–1000 (default 1000).
    pub page_size: u32,
    /// The longest delay between attempts after failures, in history and live (default 30 s).
    pub max_backoff: Duration,
    /// The live stream's [`WatchQuery::idle_timeout`] (default 60 s).
    pub idle_timeout: Duration,
}

impl Default for FollowQuery {
    fn default() -> FollowQuery {
        let watch = WatchQuery::default();
        FollowQuery {
            types: Vec::new(),
            tenant_id: None,
            after: None,
            page_size: 1000,
            max_backoff: watch.max_backoff,
            idle_timeout: watch.idle_timeout,
        }
    }
}

pub(crate) fn follow(client: Client, query: FollowQuery) -> Events {
    let list = ListQuery {
        tenant_id: query.tenant_id.clone(),
        types: query.types.clone(),
        subject: None,
        cursor: query.after,
        limit: Some(query.page_size),
    };
    let backoff = Backoff::new(query.max_backoff);
    let state = Follower {
        client,
        query,
        list,
        backoff,
        buffered: VecDeque::new(),
        replayed: false,
        finished: false,
        live: None,
    };
    Events::new(futures_util::stream::unfold(state, |mut follower| async move {
        let item = follower.next().await?;
        Some((item, follower))
    }))
}

struct Follower {
    client: Client,
    query: FollowQuery,
    list: ListQuery,
    backoff: Backoff,
    buffered: VecDeque<Event>,
    replayed: bool,
    finished: bool,
    live: Option<Watcher>,
}

impl Follower {
    async fn next(&mut self) -> Option<Result<Event>> {
        loop {
            if let Some(live) = self.live.as_mut() {
                return live.next().await;
            }
            if let Some(event) = self.buffered.pop_front() {
                return Some(Ok(event));
            }
            if self.replayed {
                self.live = Some(Watcher::new(self.client.clone(), self.watch_query()));
                continue;
            }
            if self.finished {
                return None;
            }
            if let Err(error) = self.next_page().await {
                self.finished = true;
                return Some(Err(error));
            }
        }
    }

    /// Reads the next history page, waiting out transient failures with the backoff.
    async fn next_page(&mut self) -> Result<()> {
        loop {
            match self.client.list(&self.list).await {
                Ok(page) => {
                    self.backoff.reset();
                    self.replayed = page.cursor.is_none();
                    self.list.cursor = page.position(self.list.cursor);
                    self.buffered.extend(page.items);
                    return Ok(());
                }
                Err(error) if error.is_transient() => {
                    let delay = self.backoff.failed();
                    tracing::warn!(error = %crate::error::chain(&error), ?delay, "outbox follow: retrying the history page");
                    tokio::time::sleep(delay).await;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Live from where the history ended; from the very start when the history was empty.
    fn watch_query(&self) -> WatchQuery {
        WatchQuery {
            types: self.query.types.clone(),
            tenant_id: self.query.tenant_id.clone(),
            last_event_id: Some(self.list.cursor.unwrap_or(Position::START)),
            max_backoff: self.query.max_backoff,
            idle_timeout: self.query.idle_timeout,
        }
    }
}
