//! Subject and key templates: `outbox.{tenantId}.{type}`, `outbox:{tenantId}`.

use outbox_core::Event;

/// A text with `{tenantId}`, `{type}` and `{subject}` placeholders, filled from each event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    TenantId,
    Type,
    Subject,
}

impl Template {
    /// Parses `text`; an unknown or unclosed placeholder is refused with the reason.
    pub fn parse(text: &str) -> Result<Template, String> {
        if text.is_empty() {
            return Err("must not be empty".into());
        }
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_owned()));
            }
            let close = rest[open..].find('}').ok_or_else(|| format!("unclosed `{{` in {text:?}"))? + open;
            parts.push(match &rest[open + 1..close] {
                "tenantId" => Part::TenantId,
                "type" => Part::Type,
                "subject" => Part::Subject,
                other => {
                    return Err(format!(
                        "unknown placeholder {{{other}}} (known: {{tenantId}}, {{type}}, {{subject}})"
                    ));
                }
            });
            rest = &rest[close + 1..];
        }
        if rest.contains('}') {
            return Err(format!("stray `}}` in {text:?}"));
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_owned()));
        }
        Ok(Template { parts })
    }

    /// The text for `event`.
    pub fn render(&self, event: &Event) -> String {
        let mut out = String::with_capacity(64);
        for part in &self.parts {
            out.push_str(match part {
                Part::Text(text) => text,
                Part::TenantId => &event.tenant_id,
                Part::Type => &event.event_type,
                Part::Subject => &event.subject,
            });
        }
        out
    }

    /// The dot-separated tokens before the first one holding a placeholder, e.g. `outbox` for
    /// `outbox.{tenantId}.{type}`; the whole text when it has no placeholder.
    pub fn fixed_prefix(&self) -> Option<String> {
        let mut fixed = String::new();
        for part in &self.parts {
            match part {
                Part::Text(text) => fixed.push_str(text),
                _ => {
                    let end = fixed.rfind('.')?;
                    return Some(fixed[..end].to_owned()).filter(|prefix| !prefix.is_empty());
                }
            }
        }
        Some(fixed)
    }

    /// Whether the template has no placeholder.
    pub fn is_fixed(&self) -> bool {
        self.parts.iter().all(|part| matches!(part, Part::Text(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_prefix(template: &str, expect: Option<&str>) {
        assert_eq!(Template::parse(template).unwrap().fixed_prefix().as_deref(), expect, "{template}");
    }

    #[test]
    fn the_fixed_prefix_is_the_tokens_before_the_first_placeholder() {
        check_prefix("outbox.{tenantId}.{type}", Some("outbox"));
        check_prefix("a.b.{type}", Some("a.b"));
        check_prefix("a.b{type}", Some("a"));
        check_prefix("{tenantId}.events", None);
        check_prefix("x{type}", None);
        check_prefix("events.all", Some("events.all"));
    }

    #[test]
    fn refuses_unknown_and_unclosed_placeholders() {
        assert!(Template::parse("outbox.{tenant}").unwrap_err().contains("unknown placeholder {tenant}"));
        assert!(Template::parse("outbox.{type").unwrap_err().contains("unclosed"));
        assert!(Template::parse("outbox.type}").unwrap_err().contains("stray"));
        assert!(Template::parse("").is_err());
    }
}
