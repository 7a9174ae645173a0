//! The demo's events: a steady trickle of plausible events, so the stream moves at once.
//!
//! Three tenants each run a small GPU fleet: pools are created and updated, nodes join,
//! report their status and sometimes lose a GPU or their connection, and reservations go
//! through `placed → active → released | ended`. Every tick (a few per second) one
//! transaction publishes one or two events with [`outbox_pg::publish_many`], the way an
//! application would: the events describe changes made in that same transaction.

use std::time::Duration;

use outbox_core::NewEvent;
use outbox_pg::sqlx::PgPool;
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// The demo's tenants; the dev admin token belongs to the first.
pub const TENANTS: [&str; 3] = ["acme", "globex", "initech"];

/// Time between transactions.
const TICK: Duration = Duration::from_millis(350);

const GPU_MODELS: [&str; 3] = ["H100", "A100", "L40S"];
const SITES: [&str; 3] = ["fra1", "ams2", "iad1"];
const USERS: [&str; 4] = ["ada", "grace", "linus", "barbara"];

/// Publishes forever (until the task is aborted); a failed transaction is logged and skipped.
pub async fn run(pool: PgPool) {
    let mut world = World::new(StdRng::from_os_rng());
    let mut tick = tokio::time::interval(TICK);
    loop {
        tick.tick().await;
        let events = world.next();
        if let Err(error) = publish(&pool, &events).await {
            tracing::warn!(%error, "demo: publishing failed");
        }
    }
}

async fn publish(pool: &PgPool, events: &[NewEvent]) -> outbox_pg::Result<()> {
    let mut tx = pool.begin().await?;
    outbox_pg::publish_many(&mut *tx, events).await?;
    tx.commit().await?;
    Ok(())
}

/// One tenant's fleet.
#[derive(Default)]
struct Fleet {
    pools: Vec<String>,
    nodes: Vec<Node>,
    reservations: Vec<Reservation>,
}

struct Node {
    id: String,
    pool: String,
    connected: bool,
}

struct Reservation {
    id: String,
    pool: String,
    node: Option<String>,
    gpus: u32,
}

/// The simulated state of every tenant.
struct World {
    rng: StdRng,
    fleets: Vec<Fleet>,
}

impl World {
    fn new(rng: StdRng) -> World {
        World { rng, fleets: TENANTS.iter().map(|_| Fleet::default()).collect() }
    }

    /// The events of the next transaction: one change of one tenant's fleet.
    fn next(&mut self) -> Vec<NewEvent> {
        let index = self.rng.random_range(0..TENANTS.len());
        let tenant = TENANTS[index];
        let mut fleet = std::mem::take(&mut self.fleets[index]);
        let events = self.step(tenant, &mut fleet);
        self.fleets[index] = fleet;
        events
    }

    fn step(&mut self, tenant: &str, fleet: &mut Fleet) -> Vec<NewEvent> {
        if fleet.pools.len() < 2 {
            return vec![self.create_pool(tenant, fleet)];
        }
        if fleet.nodes.len() < 4 {
            return vec![self.join_node(tenant, fleet)];
        }
        match self.rng.random_range(0..100) {
            0..35 => self.reservation_step(tenant, fleet),
            35..70 => vec![self.node_status(tenant, fleet)],
            70..80 => vec![self.connectivity(tenant, fleet)],
            80..85 => vec![self.gpu_missing(tenant, fleet)],
            85..93 => vec![self.update_pool(tenant, fleet)],
            _ if fleet.nodes.len() < 12 => vec![self.join_node(tenant, fleet)],
            _ => vec![self.node_status(tenant, fleet)],
        }
    }

    fn id(&mut self, prefix: &str) -> String {
        format!("{prefix}_{:08x}", self.rng.random::<u32>())
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        items.choose(&mut self.rng).expect("a non-empty list")
    }

    fn create_pool(&mut self, tenant: &str, fleet: &mut Fleet) -> NewEvent {
        let id = self.id("pool");
        let model = *self.pick(&GPU_MODELS);
        let data = json!({"poolId": id, "name": format!("{}-{}", model.to_lowercase(), fleet.pools.len() + 1),
            "siteId": self.pick(&SITES), "gpuModel": model, "capacityGpus": 0});
        fleet.pools.push(id.clone());
        event("pool.created", tenant, "pool", &id, data)
    }

    fn update_pool(&mut self, tenant: &str, fleet: &Fleet) -> NewEvent {
        let id = self.pick(&fleet.pools).clone();
        let nodes = fleet.nodes.iter().filter(|n| n.pool == id).count();
        let data = json!({"poolId": id, "capacityGpus": nodes * 8, "offered": self.rng.random_bool(0.8)});
        event("pool.updated", tenant, "pool", &id, data)
    }

    fn join_node(&mut self, tenant: &str, fleet: &mut Fleet) -> NewEvent {
        let id = self.id("node");
        let pool = self.pick(&fleet.pools).clone();
        let hostname = format!("gpu-{}-{:02}", self.pick(&SITES), fleet.nodes.len() + 1);
        let data = json!({"nodeId": id, "poolId": pool, "hostname": hostname, "gpus": 8,
            "gpuModel": self.pick(&GPU_MODELS), "daemonVersion": "1.14.2"});
        fleet.nodes.push(Node { id: id.clone(), pool, connected: true });
        event("node.joined", tenant, "node", &id, data)
    }

    fn node_status(&mut self, tenant: &str, fleet: &Fleet) -> NewEvent {
        let node = self.pick(&fleet.nodes);
        let data = json!({"nodeId": node.id, "gpuUtilization": self.rng.random_range(0.05..0.99_f64),
            "memoryUsedGiB": self.rng.random_range(12..620), "temperatureC": self.rng.random_range(38..84),
            "connected": node.connected});
        event("node.status", tenant, "node", &node.id, data)
    }

    fn connectivity(&mut self, tenant: &str, fleet: &mut Fleet) -> NewEvent {
        let index = self.rng.random_range(0..fleet.nodes.len());
        let node = &mut fleet.nodes[index];
        node.connected = !node.connected;
        let (kind, data) = if node.connected {
            ("node.connected", json!({"nodeId": node.id, "agentVersion": "1.14.2"}))
        } else {
            ("node.disconnected", json!({"nodeId": node.id, "reason": "heartbeat timeout"}))
        };
        event(kind, tenant, "node", &node.id, data)
    }

    fn gpu_missing(&mut self, tenant: &str, fleet: &Fleet) -> NewEvent {
        let node = self.pick(&fleet.nodes);
        let data = json!({"nodeId": node.id, "gpuIndex": self.rng.random_range(0..8), "pciBusId": "0000:3b:00.0"});
        event("node.gpu.missing", tenant, "node", &node.id, data)
    }

    /// Places a reservation, activates one, or ends one (with the node's status, in one transaction).
    fn reservation_step(&mut self, tenant: &str, fleet: &mut Fleet) -> Vec<NewEvent> {
        let waiting = fleet.reservations.iter().position(|r| r.node.is_none());
        let running = fleet.reservations.iter().position(|r| r.node.is_some());
        match self.rng.random_range(0..3) {
            0 if fleet.reservations.len() < 6 => vec![self.place(tenant, fleet)],
            1 if waiting.is_some() => self.activate(tenant, fleet, waiting.unwrap_or_default()),
            _ if running.is_some() => vec![self.finish(tenant, fleet, running.unwrap_or_default())],
            _ => vec![self.place(tenant, fleet)],
        }
    }

    fn place(&mut self, tenant: &str, fleet: &mut Fleet) -> NewEvent {
        let id = self.id("rsv");
        let pool = self.pick(&fleet.pools).clone();
        let gpus = *self.pick(&[1, 2, 4, 8]);
        let data = json!({"reservationId": id, "poolId": pool, "gpus": gpus,
            "requestedBy": self.pick(&USERS), "state": "placed"});
        fleet.reservations.push(Reservation { id: id.clone(), pool, node: None, gpus });
        event("reservation.placed", tenant, "reservation", &id, data)
    }

    fn activate(&mut self, tenant: &str, fleet: &mut Fleet, index: usize) -> Vec<NewEvent> {
        let candidates: Vec<&Node> = fleet.nodes.iter().filter(|n| n.pool == fleet.reservations[index].pool).collect();
        let node_id = match candidates.choose(&mut self.rng) {
            Some(node) => node.id.clone(),
            None => self.pick(&fleet.nodes).id.clone(),
        };
        let reservation = &mut fleet.reservations[index];
        reservation.node = Some(node_id.clone());
        let active = json!({"reservationId": reservation.id, "poolId": reservation.pool, "nodeId": node_id,
            "gpus": reservation.gpus, "state": "active"});
        let status = json!({"nodeId": node_id, "allocatedGpus": reservation.gpus, "connected": true});
        vec![
            event("reservation.active", tenant, "reservation", &reservation.id, active),
            event("node.status", tenant, "node", &node_id, status),
        ]
    }

    fn finish(&mut self, tenant: &str, fleet: &mut Fleet, index: usize) -> NewEvent {
        let reservation = fleet.reservations.remove(index);
        let (kind, state) = if self.rng.random_bool(0.6) {
            ("reservation.released", "released")
        } else {
            ("reservation.ended", "ended")
        };
        let data = json!({"reservationId": reservation.id, "poolId": reservation.pool, "nodeId": reservation.node,
            "state": state, "durationSeconds": self.rng.random_range(60..86_400)});
        event(kind, tenant, "reservation", &reservation.id, data)
    }
}

fn event(kind: &str, tenant: &str, subject_kind: &str, id: &str, data: Value) -> NewEvent {
    NewEvent::new(kind, tenant, format!("{subject_kind}/{id}"), data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_demo_publishes_valid_catalogued_events_across_every_tenant() {
        let mut world = World::new(StdRng::seed_from_u64(7));
        let events: Vec<NewEvent> = (0..2000).flat_map(|_| world.next()).collect();
        outbox_core::validate::validate_batch(&events[..1000], &outbox_core::Limits::default()).unwrap();
        outbox_core::validate::validate_batch(&events[1000..], &outbox_core::Limits::default()).unwrap();
        let catalog = outbox_core::Catalog::control_plane();
        assert!(events.iter().all(|e| catalog.check_type(&e.event_type)));
        for tenant in TENANTS {
            assert!(events.iter().any(|e| e.tenant_id == tenant), "{tenant}");
        }
        for kind in ["pool.created", "node.joined", "reservation.placed", "reservation.active", "node.status"] {
            assert!(events.iter().any(|e| e.event_type == kind), "{kind}");
        }
    }
}
