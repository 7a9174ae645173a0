//! The event catalog: the families of events a deployment publishes (SPEC §3.4).
//!
//! The catalog belongs to the host. It starts [`Catalog::empty`] (Outbox's own families
//! alone, [`Catalog::OWN`]) or [`Catalog::new`] with the host's entries, or from the
//! [`Catalog::control_plane`] preset (the 31 families of the control plane whose events
//! subsystem Outbox re-creates, `seeds/event-catalog.txt`; the bundled server's default),
//! and grows with [`Catalog::with_extra`]. Outbox's own families are always present.
//! `GET /event-types` returns the entries, strict publishing asks [`Catalog::check_type`],
//! and a webhook pattern that [`Catalog::can_match`] finds no entry for is refused.

use std::cmp::Reverse;

use crate::Pattern;
use crate::validate::is_valid_type;

/// One family of events: its type or type pattern, what its subject looks like, who publishes it and what it means.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogEntry {
    /// The exact type (`quota.updated`) or family pattern (`node.*`).
    #[serde(rename = "type")]
    pub pattern: Pattern,
    /// The form of the events' subject, e.g. `node/{id}`.
    pub subject: String,
    /// The module that publishes the family.
    pub module: String,
    /// What the family's events mean, in a sentence.
    pub description: String,
}

impl CatalogEntry {
    /// An entry for the family `pattern`.
    pub fn new(
        pattern: Pattern,
        subject: impl Into<String>,
        module: impl Into<String>,
        description: impl Into<String>,
    ) -> CatalogEntry {
        CatalogEntry { pattern, subject: subject.into(), module: module.into(), description: description.into() }
    }

    /// How specific the entry is: an exact type beats any pattern, then more literal characters win.
    fn specificity(&self) -> (bool, usize) {
        let text = self.pattern.as_str();
        (!text.contains('*'), text.bytes().filter(|&b| b != b'*').count())
    }
}

/// The list of event families: the host's, in the order given, then Outbox's own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// The host's entries, then the [`Catalog::OWN`] ones (always the last `OWN.len()`).
    entries: Vec<CatalogEntry>,
}

impl Catalog {
    /// The families Outbox itself publishes, present in every catalog: type, subject,
    /// module, description.
    pub const OWN: &'static [(&'static str, &'static str, &'static str, &'static str)] = &[
        (
            "webhook.ping",
            "webhook/{id}",
            "outbox",
            "A test delivery to a webhook subscription (POST /webhooks/{id}/ping)",
        ),
        (
            "webhook.disabled",
            "webhook/{id}",
            "outbox",
            "A webhook subscription was disabled: its endpoint answered 410 (gone), or every attempt failed for disable_after (failing): { webhookId, reason, failingSince }",
        ),
    ];

    /// Outbox's own families alone: where a host that declares its own starts.
    pub fn empty() -> Catalog {
        Catalog { entries: rows(Catalog::OWN) }
    }

    /// The host's `entries`, then Outbox's own families.
    pub fn new(entries: impl IntoIterator<Item = CatalogEntry>) -> Catalog {
        Catalog::empty().with_extra(entries)
    }

    /// The preset of the control plane whose events subsystem Outbox re-creates: its 31
    /// families (`site.*`, `node.*`, `sandbox.*`, …, in the order of
    /// `seeds/event-catalog.txt`), then Outbox's own. The bundled server's default.
    pub fn control_plane() -> Catalog {
        Catalog::new(rows(&CONTROL_PLANE))
    }

    /// This catalog with `extra` families after the host's entries so far (and before
    /// Outbox's own).
    pub fn with_extra(mut self, extra: impl IntoIterator<Item = CatalogEntry>) -> Catalog {
        let own = self.entries.split_off(self.entries.len() - Catalog::OWN.len());
        self.entries.extend(extra);
        self.entries.extend(own);
        self
    }

    /// Every entry: the host's in order, then Outbox's own.
    pub fn entries(&self) -> &[CatalogEntry] {
        &self.entries
    }

    /// Whether `event_type` belongs to the catalog: it is a valid type (SPEC §3.2)
    /// and some entry's pattern matches it.
    pub fn check_type(&self, event_type: &str) -> bool {
        self.entry_for(event_type).is_some()
    }

    /// The entry that describes `event_type`, or `None` when the type is invalid
    /// or no entry matches it.
    ///
    /// When several entries match, the most specific wins: an exact type before
    /// any pattern, then the pattern with the most literal (non-`*`) characters,
    /// then the earliest entry. So `node.condition.changed` finds its own row,
    /// not `node.*`, and `node.gpu.added` finds `node.gpu.*`.
    pub fn entry_for(&self, event_type: &str) -> Option<&CatalogEntry> {
        if !is_valid_type(event_type) {
            return None;
        }
        // `min_by_key` keeps the first of equals, so ties go to the earliest entry.
        self.entries
            .iter()
            .filter(|entry| entry.pattern.matches(event_type))
            .min_by_key(|entry| Reverse(entry.specificity()))
    }

    /// The first entry whose pattern some valid type matches together with
    /// `pattern` (see [`Pattern::intersects`]), or `None` when no event in the
    /// catalog could ever match `pattern`: such a subscription is refused.
    pub fn can_match(&self, pattern: &Pattern) -> Option<&CatalogEntry> {
        self.entries.iter().find(|entry| entry.pattern.intersects(pattern))
    }
}

impl Default for Catalog {
    /// [`Catalog::empty`]: Outbox's own families alone.
    fn default() -> Catalog {
        Catalog::empty()
    }
}

/// Entries from constant rows, whose patterns are known to be valid.
fn rows(rows: &[(&str, &str, &str, &str)]) -> Vec<CatalogEntry> {
    rows.iter()
        .map(|&(pattern, subject, module, description)| {
            let pattern = Pattern::parse(pattern).expect("every constant catalog pattern is valid");
            CatalogEntry::new(pattern, subject, module, description)
        })
        .collect()
}

/// The rows of `seeds/event-catalog.txt` but Outbox's own (`webhook.ping`, beside which
/// Outbox publishes `webhook.disabled`): type or
/// pattern, subject, module, description.
#[rustfmt::skip]
const CONTROL_PLANE: [(&str, &str, &str, &str); 31] = [
    ("site.*", "site/{id}", "server", "Sites created, updated and deleted"),
    ("project.*", "project/{id}", "server", "Projects created, changed and archived (project.archived: { projectId, name })"),
    ("tenant.*", "tenant/{id}", "server", "IAM tenant mirrored as suspended, deleted or active again (tenant.state-changed: { tenantId, state, previous, reason }); a deleted tenant fully released by every module (tenant.torn-down)"),
    ("pool.*", "pool/{id}", "capacity", "Pools created, updated, offered, unoffered and archived"),
    ("quota.updated", "pool/{id}", "capacity", "A tenant quota on a pool changed"),
    ("quota.budget-exceeded", "pool/{id}", "capacity", "A tenant's IAM budget was spent and the pool offer's onBudgetExceeded applied (notify, stop-new or drain)"),
    ("reservation.*", "reservation/{id}", "capacity", "Reservation lifecycle (placed, active, released, ended, …) and awaiting-confirmation"),
    ("reservation.reassigned", "reservation/{id}", "capacity", "An offboarded identity's reservation moved to its successor (§12.7): { reservationId, from, to, reason }"),
    ("node.*", "node/{id}", "server", "Node lifecycle and connectivity: joined, acceptance.*, adopted, connected, disconnected, unreachable, lost, drained, deleted, status, command.queued, ssh-cert.issued, report-failed"),
    ("node.command.cancel-requested", "node/{id}", "server", "Cancelling a command was requested ({ nodeId, commandId, kind, state })"),
    ("node.condition.changed", "node/{id}", "inventory", "A hygiene or pressure condition was raised or cleared (DriverMismatch, CertExpiring, DaemonOutdated, Cpu/Memory/DiskPressure): { condition, status, reason, noSchedule }"),
    ("node.remediation.*", "node/{id}", "provision", "Health remediation started, succeeded or escalated to an operator"),
    ("pool.remediation.paused", "node/{id}", "provision", "The remediation circuit breaker held a pool back (too many nodes turned unhealthy)"),
    ("node.inventory.changed", "node/{id}", "inventory", "A node reported a different inventory"),
    ("node.gpu.*", "node/{id}", "inventory", "A GPU appeared or went missing"),
    ("node.mig.*", "node/{id}", "inventory", "A MIG layout changed"),
    ("node.disk.*", "node/{id}", "inventory", "A disk was replaced"),
    ("node.driver.*", "node/{id}", "inventory", "A driver changed"),
    ("node.enrolled", "node/{id}", "metal", "A bare-metal machine enrolled"),
    ("node.pxe-mac.discovered", "node/{id}", "metal", "PXE discovery found the MAC of a machine enrolled without MACs, first seen under its product UUID right after metal power-cycled it: a candidate for metal.confirmMac, or bound at once on a pool that trusts its provisioning network ({ nodeId, mac, productUuid, siteId, agentNodeId, bound })"),
    ("node.pxe-mac.confirmed", "node/{id}", "metal", "An operator bound a machine's PXE MAC with metal.confirmMac ({ nodeId, mac, discovered, requestId })"),
    ("node.provision.*", "node/{id}", "metal", "Provisioning state transitions of a bare-metal node"),
    ("command.settled", "command/{id}", "gateway", "A command reached a terminal state"),
    ("workflow.*", "workflow/{id}", "provision", "Provisioning workflow transitions"),
    ("instance.*", "instance/{id}", "vps", "VPS instance lifecycle"),
    ("sandbox.*", "sandbox/{id}", "vps", "Sandbox lifecycle (§3.7): created, ready (its instance first runs), extended, expiring (once, before expiry: { expiresAt }), expired (before the delete), withdrawn (its agent or delegation ended, or its owner left without a successor: { reason }), reassigned ({ from, to, reason }), deleted; data { templateId, instanceId, poolId }"),
    ("sandbox.snapshot.*", "sandbox/{id}", "vps", "A sandbox snapshot settled: ready { snapshotId, includeMemory, sha256, sizeBytes } or failed { snapshotId, reason }"),
    ("fleet.*", "fleet/{id}", "fleet", "FleetConfig converged or drifted"),
    ("rollout.*", "rollout/{id}", "rollout", "Daemon rollouts started, paused, resumed, aborted, completed"),
    ("tunnel.*", "tunnel/{id}", "server", "Tunnels issued and closed"),
    ("security.*", "varies", "server", "Join tokens, site tokens, refused joins, revoked certificates, secrets"),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> Pattern {
        Pattern::parse(text).unwrap()
    }

    #[test]
    fn the_control_plane_preset_is_the_32_seed_rows_in_order_then_outboxs_own() {
        let catalog = Catalog::control_plane();
        assert_eq!(catalog.entries().len(), 33);
        let first = &catalog.entries()[0];
        assert_eq!(
            (first.pattern.as_str(), first.subject.as_str(), first.module.as_str()),
            ("site.*", "site/{id}", "server")
        );
        assert_eq!(catalog.entries()[31].pattern.as_str(), "webhook.ping");
    }

    #[test]
    fn an_empty_catalog_holds_outboxs_own_families_alone() {
        let empty = Catalog::empty();
        let own: Vec<&str> = empty.entries().iter().map(|entry| entry.pattern.as_str()).collect();
        assert_eq!(own, ["webhook.ping", "webhook.disabled"]);
        assert_eq!(Catalog::default(), empty);
        assert_eq!(Catalog::new([]), empty);
        assert!(!empty.check_type("node.joined"));
        assert!(empty.check_type("webhook.ping"));
    }

    #[test]
    fn every_constant_family_can_hold_a_valid_type() {
        for entry in Catalog::control_plane().entries() {
            assert!(entry.pattern.intersects(&Pattern::all()), "{} matches no valid type", entry.pattern);
        }
    }

    #[track_caller]
    fn check_entry(event_type: &str, expect: Option<&str>) {
        let catalog = Catalog::control_plane();
        let got = catalog.entry_for(event_type).map(|entry| entry.pattern.as_str());
        assert_eq!(got, expect, "{event_type:?}");
        assert_eq!(catalog.check_type(event_type), expect.is_some(), "{event_type:?}");
    }

    #[test]
    fn the_most_specific_entry_describes_a_type() {
        check_entry("node.condition.changed", Some("node.condition.changed"));
        check_entry("node.connected", Some("node.*"));
        check_entry("node.gpu.added", Some("node.gpu.*"));
        check_entry("node.remediation.started", Some("node.remediation.*"));
        check_entry("pool.remediation.paused", Some("pool.remediation.paused"));
        check_entry("pool.created", Some("pool.*"));
        check_entry("reservation.reassigned", Some("reservation.reassigned"));
        check_entry("reservation.active", Some("reservation.*"));
        check_entry("sandbox.snapshot.ready", Some("sandbox.snapshot.*"));
        check_entry("quota.updated", Some("quota.updated"));
        check_entry("quota.deleted", None);
        check_entry("webhook.ping", Some("webhook.ping"));
        check_entry("nothing.happened", None);
        check_entry("node.", None); // matches node.* but is not a valid type
        check_entry("Node.connected", None);
    }

    #[track_caller]
    fn check_can_match(webhook_pattern: &str, expect: Option<&str>) {
        let catalog = Catalog::control_plane();
        let got = catalog.can_match(&pattern(webhook_pattern)).map(|entry| entry.pattern.as_str());
        assert_eq!(got, expect, "{webhook_pattern:?}");
    }

    #[test]
    fn can_match_refuses_patterns_nothing_matches() {
        check_can_match("node.gpu.*", Some("node.*"));
        check_can_match("*.deleted", Some("site.*"));
        check_can_match("*", Some("site.*"));
        check_can_match("quota.updated", Some("quota.updated"));
        check_can_match("quota.*", Some("quota.updated"));
        check_can_match("command.*", Some("command.settled"));
        check_can_match("webhook.ping", Some("webhook.ping"));
        check_can_match("nothing.*", None);
        check_can_match("webhook.pong", None);
        check_can_match("node", None);
        check_can_match("node..*", None);
    }

    #[test]
    fn with_extra_adds_families_before_outboxs_own() {
        let family = CatalogEntry::new(pattern("billing.*"), "invoice/{id}", "billing", "Invoices issued and paid");
        let catalog = Catalog::control_plane().with_extra([family.clone()]);
        assert_eq!(catalog.entries().len(), 34);
        assert_eq!(catalog.entries()[31], family);
        assert_eq!(catalog.entries()[32].pattern.as_str(), "webhook.ping");
        assert!(catalog.check_type("billing.invoice-paid"));
        assert_eq!(catalog.entry_for("billing.invoice-paid"), Some(&family));
        assert_eq!(catalog.can_match(&pattern("billing.invoice.*")), Some(&family));
        assert!(!Catalog::control_plane().check_type("billing.invoice-paid"));
        assert_eq!(Catalog::control_plane().can_match(&pattern("billing.invoice.*")), None);

        let order = CatalogEntry::new(pattern("order.*"), "order/{id}", "shop", "Orders placed and shipped");
        let shop = Catalog::new([order.clone()]).with_extra([family.clone()]);
        let patterns: Vec<&str> = shop.entries().iter().map(|entry| entry.pattern.as_str()).collect();
        assert_eq!(patterns, ["order.*", "billing.*", "webhook.ping", "webhook.disabled"]);
        assert!(shop.check_type("order.created"));
        assert!(!shop.check_type("node.joined"), "a host's catalog holds none of the preset's families");
    }

    #[test]
    fn an_entry_serializes_with_its_pattern_as_type() {
        let catalog = Catalog::control_plane();
        let json = serde_json::to_value(&catalog.entries()[4]).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "type": "quota.updated",
                "subject": "pool/{id}",
                "module": "capacity",
                "description": "A tenant quota on a pool changed",
            })
        );
    }
}
