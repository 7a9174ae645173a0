//! [`WebhookRoute`]: one webhook route, chosen once from the path after `/webhooks` and
//! the method; the `Allow` of a 405 comes from the same table ([`WebhookRoute::served`]).

use http::Method;

use crate::route::Reads;

/// One webhook route and the ids its path names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WebhookRoute<'a> {
    /// `POST /webhooks`
    Create,
    /// `GET /webhooks`
    List,
    /// `GET /webhooks/{id}`
    Get(&'a str),
    /// `PATCH /webhooks/{id}`
    Update(&'a str),
    /// `DELETE /webhooks/{id}`
    Delete(&'a str),
    /// `POST /webhooks/{id}/rotate-secret`
    RotateSecret(&'a str),
    /// `GET /webhooks/{id}/attempts`
    Attempts(&'a str),
    /// `POST /webhooks/{id}/ping`
    Ping(&'a str),
    /// `GET /webhooks/{id}/dead-letters`
    DeadLetters(&'a str),
    /// `POST /webhooks/{id}/dead-letters/replay`
    ReplayAll(&'a str),
    /// `POST /webhooks/{id}/dead-letters/{dl}/replay`
    Replay(&'a str, &'a str),
    /// `DELETE /webhooks/{id}/dead-letters/{dl}`
    Discard(&'a str, &'a str),
}

impl<'a> WebhookRoute<'a> {
    /// Each method the path at `segments` serves and the route it means (none: no such path).
    pub(crate) fn served(segments: &[&'a str]) -> Vec<(Method, WebhookRoute<'a>)> {
        use WebhookRoute as R;
        match *segments {
            [] => vec![(Method::GET, R::List), (Method::POST, R::Create)],
            [""] | ["", ..] => Vec::new(),
            [id] => vec![(Method::GET, R::Get(id)), (Method::PATCH, R::Update(id)), (Method::DELETE, R::Delete(id))],
            [id, "rotate-secret"] => vec![(Method::POST, R::RotateSecret(id))],
            [id, "attempts"] => vec![(Method::GET, R::Attempts(id))],
            [id, "ping"] => vec![(Method::POST, R::Ping(id))],
            [id, "dead-letters"] => vec![(Method::GET, R::DeadLetters(id))],
            [id, "dead-letters", "replay"] => vec![(Method::POST, R::ReplayAll(id))],
            [id, "dead-letters", letter, "replay"] => vec![(Method::POST, R::Replay(id, letter))],
            [id, "dead-letters", letter] if !letter.is_empty() => vec![(Method::DELETE, R::Discard(id, letter))],
            _ => Vec::new(),
        }
    }
}

impl Reads for WebhookRoute<'_> {
    fn parameters(&self) -> &'static [&'static str] {
        match self {
            WebhookRoute::List => &["tenantId", "cursor", "limit"],
            WebhookRoute::DeadLetters(_) => &["tenantId", "cursor", "limit", "replayed"],
            _ => &["tenantId"],
        }
    }

    fn has_body(&self) -> bool {
        matches!(
            self,
            WebhookRoute::Create | WebhookRoute::Update(_) | WebhookRoute::RotateSecret(_) | WebhookRoute::ReplayAll(_)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::{allow, pick};

    #[track_caller]
    fn check(path: &[&str], expect: Option<&str>) {
        let served = WebhookRoute::served(path);
        assert_eq!((!served.is_empty()).then(|| allow(&served)).as_deref(), expect, "{path:?}");
    }

    #[test]
    fn every_path_and_its_methods() {
        check(&[], Some("GET, POST"));
        check(&["wh_1"], Some("GET, PATCH, DELETE"));
        check(&["wh_1", "rotate-secret"], Some("POST"));
        check(&["wh_1", "attempts"], Some("GET"));
        check(&["wh_1", "ping"], Some("POST"));
        check(&["wh_1", "dead-letters"], Some("GET"));
        check(&["wh_1", "dead-letters", "replay"], Some("POST"));
        check(&["wh_1", "dead-letters", "7", "replay"], Some("POST"));
        check(&["wh_1", "dead-letters", "7"], Some("DELETE"));
        check(&[""], None);
        check(&["", "ping"], None);
        check(&["wh_1", "pong"], None);
        check(&["wh_1", "dead-letters", ""], None);
        check(&["wh_1", "dead-letters", "7", "retry"], None);
    }

    #[test]
    fn the_method_chooses_among_a_paths_routes() {
        let pick_at = |method: Method| pick("/webhooks/wh_1", &method, WebhookRoute::served(&["wh_1"]));
        assert_eq!(pick_at(Method::GET), Ok(WebhookRoute::Get("wh_1")));
        assert_eq!(pick_at(Method::PATCH), Ok(WebhookRoute::Update("wh_1")));
        assert_eq!(pick_at(Method::DELETE), Ok(WebhookRoute::Delete("wh_1")));
        assert_eq!(pick_at(Method::POST).unwrap_err().message(), "this path serves only GET, PATCH, DELETE");
    }
}
