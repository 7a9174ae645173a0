//! Query strings: the parameters a route takes, and the values they share.
//!
//! A parameter the route does not know, or one given twice, is refused rather
//! than ignored, so that a typo (`?tenant=` for `?tenantId=`) is an error and
//! not a silently wider answer.

use outbox_core::pattern;
use outbox_core::{Pattern, Position};

use crate::ApiError;

/// A route's decoded query parameters.
#[derive(Debug, Default)]
pub(crate) struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    /// Decodes `query` (`application/x-www-form-urlencoded`), refusing parameters not in
    /// `known` and parameters given more than once.
    pub(crate) fn parse(query: Option<&str>, known: &[&str]) -> Result<Query, ApiError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for (name, value) in form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
            if !known.contains(&name.as_ref()) {
                return Err(unknown(&name, known));
            }
            if pairs.iter().any(|(seen, _)| *seen == name) {
                return Err(ApiError::invalid(format!("query parameter {name} is given more than once")));
            }
            pairs.push((name.into_owned(), value.into_owned()));
        }
        Ok(Query { pairs })
    }

    /// The value of `name`, if given.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.pairs.iter().find(|(seen, _)| seen == name).map(|(_, value)| value.as_str())
    }
}

fn unknown(name: &str, known: &[&str]) -> ApiError {
    if known.is_empty() {
        return ApiError::invalid(format!("unknown query parameter {name:?}: this route takes none"));
    }
    ApiError::invalid(format!("unknown query parameter {name:?}; this route takes {}", known.join(", ")))
}

/// A position given as parameter or header `name`, in either text form.
pub(crate) fn position(name: &str, text: &str) -> Result<Position, ApiError> {
    Position::parse(text).map_err(|e| ApiError::invalid(format!("{name}: {e}")))
}

/// A subject given as parameter `name`, checked against the rule of SPEC §3.2 (a text
/// that breaks it can match no event, and some, such as one holding NUL, PostgreSQL refuses).
pub(crate) fn subject(name: &str, text: &str) -> Result<String, ApiError> {
    outbox_core::validate::check_subject(text).map_err(|rule| ApiError::invalid(format!("{name} {rule}")))?;
    Ok(text.to_owned())
}

/// `types` (1 to 20 comma-separated patterns) or `type` (one pattern; a trailing `.` means
/// the family: `node.` is `node.*`). Neither gives `None`; both are refused.
pub(crate) fn type_filter(types: Option<&str>, single: Option<&str>) -> Result<Option<Vec<Pattern>>, ApiError> {
    match (types, single) {
        (Some(_), Some(_)) => Err(ApiError::invalid("give either types or type, not both")),
        (Some(list), None) => pattern_list(list).map(Some),
        (None, Some(one)) => family(one).map(|pattern| Some(vec![pattern])),
        (None, None) => Ok(None),
    }
}

/// 1 to 20 comma-separated patterns of 1 to 128 characters each.
pub(crate) fn pattern_list(list: &str) -> Result<Vec<Pattern>, ApiError> {
    pattern::parse_list(list).map_err(|e| ApiError::invalid(format!("types: {e}")))
}

/// One pattern, where a trailing `.` stands for the whole family.
fn family(text: &str) -> Result<Pattern, ApiError> {
    let expanded = match text.strip_suffix('.') {
        Some("") => return Err(ApiError::invalid("type: a family needs a name before its trailing dot")),
        Some(_) => format!("{text}*"),
        None => text.to_owned(),
    };
    Pattern::parse(&expanded).map_err(|e| ApiError::invalid(format!("type: {e}")))
}

/// A number parameter `name` in `range`, or `default` when absent.
pub(crate) fn number_in(
    name: &str,
    text: Option<&str>,
    range: std::ops::RangeInclusive<usize>,
    default: usize,
) -> Result<usize, ApiError> {
    let Some(text) = text else { return Ok(default) };
    let refuse =
        || ApiError::invalid(format!("{name} must be a whole number from {} to {}", range.start(), range.end()));
    let number: usize = text.parse().map_err(|_| refuse())?;
    if range.contains(&number) { Ok(number) } else { Err(refuse()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use outbox_core::ErrorCode;

    #[track_caller]
    fn check_types(types: Option<&str>, single: Option<&str>, expect: Result<Option<&[&str]>, ()>) {
        let got = type_filter(types, single);
        let got = got.map(|patterns| patterns.map(|p| p.iter().map(|p| p.as_str().to_owned()).collect::<Vec<_>>()));
        let expect = expect.map(|patterns| patterns.map(|p| p.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>()));
        match (got, expect) {
            (Ok(got), Ok(expect)) => assert_eq!(got, expect),
            (Err(error), Err(())) => assert_eq!(error.code(), ErrorCode::InvalidInput),
            (got, expect) => panic!("{types:?} {single:?}: got {got:?}, expected {expect:?}"),
        }
    }

    #[test]
    fn type_filters() {
        check_types(None, None, Ok(None));
        check_types(Some("node.*,reservation.active"), None, Ok(Some(&["node.*", "reservation.active"])));
        check_types(None, Some("node."), Ok(Some(&["node.*"])));
        check_types(None, Some("node.gpu."), Ok(Some(&["node.gpu.*"])));
        check_types(None, Some("node.joined"), Ok(Some(&["node.joined"])));
        check_types(None, Some("."), Err(()));
        check_types(None, Some(""), Err(()));
        check_types(Some(""), None, Err(()));
        check_types(Some("a,,b"), None, Err(()));
        check_types(Some(&vec!["a.b"; 21].join(",")), None, Err(()));
        check_types(Some(&"a".repeat(129)), None, Err(()));
        check_types(Some("Node.*"), None, Err(()));
        check_types(Some("a.*"), Some("a."), Err(()));
    }

    #[test]
    fn unknown_and_repeated_parameters_are_refused() {
        assert!(Query::parse(Some("limit=5&cursor=1.2"), &["limit", "cursor"]).is_ok());
        assert!(Query::parse(Some("tenant=acme"), &["tenantId"]).is_err());
        assert!(Query::parse(Some("limit=5&limit=6"), &["limit"]).is_err());
        let query = Query::parse(Some("types=node.%2A%2Creservation.*"), &["types"]).unwrap();
        assert_eq!(query.get("types"), Some("node.*,reservation.*"));
    }

    #[test]
    fn subjects_follow_their_rule() {
        assert_eq!(subject("subject", "node/n1").unwrap(), "node/n1");
        for bad in ["", "node", "node/", "/n1", "Node/n1", "node/n\u{0}1", "node/n 1", "node/n1/x"] {
            let error = subject("subject", bad).unwrap_err();
            assert_eq!(error.code(), ErrorCode::InvalidInput, "{bad:?}");
            assert!(error.message().starts_with("subject must be <kind>/<id>"), "{bad:?}: {error}");
        }
    }

    #[test]
    fn numbers_stay_in_their_range() {
        assert_eq!(number_in("limit", None, 1..=1000, 100).unwrap(), 100);
        assert_eq!(number_in("limit", Some("1000"), 1..=1000, 100).unwrap(), 1000);
        assert!(number_in("limit", Some("0"), 1..=1000, 100).is_err());
        assert!(number_in("limit", Some("1001"), 1..=1000, 100).is_err());
        assert!(number_in("limit", Some("-1"), 1..=1000, 100).is_err());
        assert!(number_in("limit", Some("ten"), 1..=1000, 100).is_err());
    }
}
