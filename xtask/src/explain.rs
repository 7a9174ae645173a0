//! `cargo xtask explain`: the plans of the xmin reads on a large outbox.
//!
//! Fills a scratch database with `rows` events of 100 tenants in 100 transactions, then
//! explains the global and the tenant read exactly as `outbox_pg::read_page` issues them, both
//! with the planner's custom plan and with the generic plan a cached prepared statement may
//! switch to. Fails when a plan reads the outbox without an index or sorts it.

use anyhow::{Context, bail};
use outbox_core::{Pattern, Position};
use outbox_pg::internal::read::{HEAD_STATEMENT, statement};
use outbox_pg::{MAX_LIMIT, ReadRequest};
use serde_json::Value;

use outbox_services::{ScratchDatabase, postgres};

pub(crate) fn run(rows: u64) -> anyhow::Result<()> {
    let server = postgres()?;
    outbox_services::runtime()?.block_on(async {
        let db = ScratchDatabase::create(&server.url(), "outbox_explain").await?;
        let result = explain_all(&db.pool, rows).await;
        db.drop_now().await?;
        result
    })
}

async fn explain_all(pool: &sqlx::PgPool, rows: u64) -> anyhow::Result<()> {
    fill(pool, rows).await?;
    let middle = outbox_pg::testkit::position_at(pool, rows / 2).await?.context("no row in the middle")?;
    let mut failures = Vec::new();
    for (title, request, index) in &cases(middle)? {
        for mode in ["force_custom_plan", "force_generic_plan"] {
            let plan = explain(pool, request, mode).await?;
            println!("-- {title} ({mode}, {rows} rows)\n{}\n", plan.text);
            if let Err(problem) = check_plan(&plan.json, index) {
                failures.push(format!("{title} ({mode}): {problem}"));
            }
        }
    }
    let head = explain_head(pool).await?;
    println!("-- head ({rows} rows)\n{}\n", head.text);
    if let Err(problem) = check_plan(&head.json, "outbox_txid_seq") {
        failures.push(format!("head: {problem}"));
    }
    if !failures.is_empty() {
        bail!("a read plan does not use an index range scan:\n  {}", failures.join("\n  "));
    }
    println!("every read uses an index range scan and no sort of the table");
    Ok(())
}

/// Each read explained: its title, the request and the index its plan must walk.
fn cases(middle: Position) -> anyhow::Result<Vec<(&'static str, ReadRequest, &'static str)>> {
    Ok(vec![
        ("global read from the start", ReadRequest::all().limit(100), "outbox_txid_seq"),
        ("global read from the middle", ReadRequest::all().after(middle).limit(100), "outbox_txid_seq"),
        ("tenant read from the start", ReadRequest::tenant("tenant-7").limit(100), "outbox_tenant_cursor"),
        (
            "tenant read from the middle",
            ReadRequest::tenant("tenant-7").after(middle).limit(100),
            "outbox_tenant_cursor",
        ),
        (
            "tenant read with a type filter",
            ReadRequest::tenant("tenant-7").types([Pattern::parse("node.*")?]).after(middle).limit(100),
            "outbox_tenant_cursor",
        ),
        (
            "tenant read with a subject filter",
            ReadRequest::tenant("tenant-7").subject("node/n7").after(middle).limit(200),
            "outbox_tenant_cursor",
        ),
        ("global read of the largest page", ReadRequest::all().after(middle).limit(MAX_LIMIT), "outbox_txid_seq"),
        (
            "tenant read of the largest page",
            ReadRequest::tenant("tenant-7").after(middle).limit(MAX_LIMIT),
            "outbox_tenant_cursor",
        ),
        ("global read newest first", ReadRequest::all().descending(true).limit(100), "outbox_txid_seq"),
        (
            "tenant read newest first from the middle",
            ReadRequest::tenant("tenant-7").descending(true).after(middle).limit(100),
            "outbox_tenant_cursor",
        ),
        (
            "tenant read newest first with a type filter",
            ReadRequest::tenant("tenant-7").types([Pattern::parse("node.*")?]).descending(true).limit(100),
            "outbox_tenant_cursor",
        ),
    ])
}

/// `rows` events over 100 tenants, written by 100 transactions.
async fn fill(pool: &sqlx::PgPool, rows: u64) -> anyhow::Result<()> {
    let per_tx = i64::try_from(rows.div_ceil(100))?;
    eprintln!("xtask: writing {rows} rows in 100 transactions");
    for batch in 0..100_i64 {
        sqlx::query(
            "INSERT INTO outbox (topic, payload)
             SELECT CASE WHEN g % 3 = 0 THEN 'reservation.active' ELSE 'node.joined' END,
                    jsonb_build_object('id', 'evt_' || g, 'tenantId', 'tenant-' || (g % 100),
                                       'subject', 'node/n' || (g % 1000), 'data', jsonb_build_object('n', g))
             FROM generate_series($1 * $2 + 1, ($1 + 1) * $2) g",
        )
        .bind(batch)
        .bind(per_tx)
        .execute(pool)
        .await?;
    }
    sqlx::query("ANALYZE outbox").execute(pool).await?;
    Ok(())
}

struct Plan {
    text: String,
    json: Value,
}

async fn explain(pool: &sqlx::PgPool, request: &ReadRequest, mode: &str) -> anyhow::Result<Plan> {
    let mut conn = pool.acquire().await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("SET plan_cache_mode = {mode}"))).execute(&mut *conn).await?;
    let prepare = format!(
        "PREPARE read_plan(xid8, bigint, bigint, bigint, text, text[], text, int, int) AS {}",
        statement(request)
    );
    sqlx::raw_sql(sqlx::AssertSqlSafe(prepare)).execute(&mut *conn).await?;
    let after = request.bound();
    let tenant = request.tenant_id.as_ref().map_or("NULL".to_owned(), |t| format!("'{t}'"));
    let patterns = match request.like_patterns() {
        None => "NULL".to_owned(),
        Some(likes) => {
            let quoted: Vec<String> = likes.iter().map(|like| format!("'{like}'")).collect();
            format!("ARRAY[{}]", quoted.join(","))
        }
    };
    let (scan, hits) = (request.rows_to_scan(), request.limit + 1);
    let subject = request.subject.as_ref().map_or("NULL".to_owned(), |s| format!("'{s}'"));
    let lane = request.lane.map_or("NULL, NULL".to_owned(), |lane| format!("{}, {}", lane.index, lane.of));
    let args = format!("'{}', {}, {scan}, {hits}, {tenant}, {patterns}, {subject}, {lane}", after.txid, after.seq);
    let text_sql = format!("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE read_plan({args})");
    let lines: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(text_sql)).fetch_all(&mut *conn).await?;
    let json_sql = format!("EXPLAIN (FORMAT JSON, COSTS OFF) EXECUTE read_plan({args})");
    let json: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(json_sql)).fetch_one(&mut *conn).await?;
    sqlx::raw_sql("DEALLOCATE read_plan; RESET plan_cache_mode").execute(&mut *conn).await?;
    Ok(Plan { text: lines.join("\n"), json })
}

async fn explain_head(pool: &sqlx::PgPool) -> anyhow::Result<Plan> {
    let text_sql = format!("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) {HEAD_STATEMENT}");
    let lines: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(text_sql)).fetch_all(pool).await?;
    let json_sql = format!("EXPLAIN (FORMAT JSON, COSTS OFF) {HEAD_STATEMENT}");
    let json: Value = sqlx::query_scalar(sqlx::AssertSqlSafe(json_sql)).fetch_one(pool).await?;
    Ok(Plan { text: lines.join("\n"), json })
}

/// The outbox must be read through `index` and never sequentially scanned or sorted.
fn check_plan(plan: &Value, index: &str) -> Result<(), String> {
    let mut nodes = Vec::new();
    collect(&plan[0]["Plan"], &mut nodes);
    let outbox_scans: Vec<&Value> = nodes.iter().copied().filter(|n| n["Relation Name"] == "outbox").collect();
    let by_index = |n: &&&Value| matches!(n["Node Type"].as_str(), Some("Index Scan" | "Index Only Scan"));
    if let Some(scan) = outbox_scans.iter().find(|n| !by_index(n)) {
        return Err(format!("the outbox is read by a {} node", scan["Node Type"]));
    }
    if !outbox_scans.iter().any(|n| n["Index Name"] == index) {
        return Err(format!("the outbox is not read through {index}"));
    }
    let sorts_the_table = nodes.iter().any(|n| n["Node Type"] == "Sort" && reads_outbox_directly(n));
    if sorts_the_table {
        return Err("a Sort node reads the outbox table".into());
    }
    Ok(())
}

fn collect<'a>(node: &'a Value, into: &mut Vec<&'a Value>) {
    into.push(node);
    for child in node["Plans"].as_array().into_iter().flatten() {
        collect(child, into);
    }
}

/// Whether a node's subtree reads the outbox table itself (not through a CTE's result).
fn reads_outbox_directly(node: &Value) -> bool {
    node["Relation Name"] == "outbox"
        || node["Plans"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|child| child["Node Type"] != "CTE Scan" && reads_outbox_directly(child))
}
