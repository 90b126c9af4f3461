//! The group's rules a compute task's machine can never get past — GPUs
//! per machine, allowed models, the whole quota, CPU and memory per
//! machine, the regions it may use — and the size of the nodes there
//! (`size`), told apart from what only has to wait (free capacity, quota
//! in use). Only the head of a group's queue is decided, so a task that can
//! never be admitted must fail rather than wait: everything behind it
//! would wait for ever too.

use crate::{
    accounts::{self, User},
    db::Pool,
    machines::{check_limits, load_policy, CreateMachine},
    transitions, PlatformError,
};
use gantry_core::alloc::{check_ceilings, AllocationRequest};
use sqlx::SqliteConnection;

/// What a task asks of its job machine.
pub(super) struct Ask {
    pub gpus: u32,
    pub gpu_model: Option<String>,
    pub cpu_millis: i64,
    pub memory_mb: i64,
}

/// Why the requester's group (the one admission would charge) can never
/// admit the task's machine, with the numbers; `None` when it may, some day.
/// The same checks as admission, so the two cannot disagree.
pub(super) async fn never_admitted(
    conn: &mut SqliteConnection,
    requester: &User,
    ask: &Ask,
) -> Result<Option<String>, PlatformError> {
    let policy = load_policy(conn, requester.group_id).await?;
    let request = AllocationRequest { gpu_count: ask.gpus, model: ask.gpu_model.clone() };
    if let Err(refusal) = check_ceilings(&policy, &request) {
        return Ok(Some(refusal.to_string()));
    }
    let mut machine = CreateMachine::new(requester.clone(), "job", ask.gpus, 1);
    machine.cpu_millis = Some(ask.cpu_millis);
    machine.memory_mb = Some(ask.memory_mb);
    Ok(check_limits(conn, &machine, &policy).await?.err())
}

/// [`never_admitted`], then the group's region rule against task `id`,
/// then the size of the nodes it may use: a task no node there could hold
/// even idle (too many GPUs of its model, a model none has, more CPUs or
/// memory than any) can never run either. The group's own rules are told
/// first, as they are what the requester can change least.
pub(super) async fn never_admitted_task(
    conn: &mut SqliteConnection,
    requester: &User,
    id: i64,
    ask: &Ask,
) -> Result<Option<String>, PlatformError> {
    if let Some(why) = never_admitted(conn, requester, ask).await? {
        return Ok(Some(why));
    }
    let images = image_places(conn, id).await?;
    if let Some(why) = region_rule(conn, requester, id, &images).await? {
        return Ok(Some(why));
    }
    super::size::no_node_can_hold(conn, requester, ask, &images).await
}

/// Where an image for a task is: region id, region code, architecture.
pub(super) type ImagePlace = (i64, String, String);

/// The places of the images that match task `id`'s framework and
/// interpreter, compared as `gantry_core::matching` compares them (trimmed,
/// ASCII case ignored).
async fn image_places(conn: &mut SqliteConnection, id: i64) -> Result<Vec<ImagePlace>, PlatformError> {
    Ok(sqlx::query_as(
        "SELECT DISTINCT r.id, r.code, ri.arch FROM compute_tasks t, master_images m JOIN master_image_links l ON l.master_image_id = m.id
         JOIN region_images ri ON ri.id = l.region_image_id JOIN regions r ON r.id = ri.region_id
         WHERE t.id = ?1 AND lower(trim(m.framework)) = lower(trim(t.framework)) AND lower(trim(m.framework_version)) = lower(trim(t.framework_version))
           AND lower(trim(m.interpreter)) = lower(trim(t.interpreter)) AND lower(trim(m.interpreter_version)) = lower(trim(t.interpreter_version))
         ORDER BY r.code, ri.arch",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await?)
}

/// Framework (+version), interpreter (+version), GPUs, model, CPU, memory.
type TaskAsk = (String, String, String, String, i64, Option<String>, i64, i64);

/// Why the requester's group's region rule means task `id` can never run:
/// the only regions with an image for it, or the only regions with a node
/// big enough for it (GPUs of one model, CPUs and memory it has, not what
/// is free now), are regions the group may not use. `None` when the group
/// may use every region or one of those; a task no region at all could
/// run is not the rule's doing, and is left to `size::no_node_can_hold`.
async fn region_rule(
    conn: &mut SqliteConnection,
    requester: &User,
    id: i64,
    images: &[ImagePlace],
) -> Result<Option<String>, PlatformError> {
    let allowed = crate::policy_access::allowed_regions(conn, requester.group_id).await?;
    if allowed.is_empty() {
        return Ok(None);
    }
    let task: Option<TaskAsk> = sqlx::query_as(
        "SELECT framework, framework_version, interpreter, interpreter_version, gpu_count, gpu_model, cpu_millis, memory_mb FROM compute_tasks WHERE id = ?",
    )
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((framework, framework_version, interpreter, interpreter_version, gpus, gpu_model, cpu_millis, memory_mb)) =
        task
    else {
        return Ok(None);
    };
    let mut with_image: Vec<(i64, String)> = images.iter().map(|(r, code, _)| (*r, code.clone())).collect();
    with_image.dedup();
    // Nodes not lost (a down or draining one may come back), of a size that
    // could take it once empty (0 CPUs declared: size unknown, counted in),
    // with their GPUs gone for now too (they may be reported again), as
    // `size::no_node_can_hold` counts them.
    let big_enough: Vec<(i64, String)> = sqlx::query_as(
        "SELECT DISTINCT r.id, r.code FROM nodes n JOIN regions r ON r.id = n.region_id
         WHERE n.state <> 'lost' AND (n.cpu_count = 0 OR (n.cpu_count * 1000 >= ?1 AND n.memory_mb >= ?2))
           AND COALESCE((SELECT MAX(c) FROM (SELECT COUNT(*) AS c FROM gpus g WHERE g.node_id = n.id AND (?3 IS NULL OR g.model = ?3) GROUP BY g.model)), 0) >= ?4
         ORDER BY r.code",
    )
    .bind(cpu_millis)
    .bind(memory_mb)
    .bind(&gpu_model)
    .bind(gpus)
    .fetch_all(&mut *conn)
    .await?;
    let ruled_out =
        |set: &[(i64, String)]| !set.is_empty() && !set.iter().any(|(r, _)| allowed.iter().any(|(a, _)| a == r));
    let named = |set: &[(i64, String)]| {
        let codes = set.iter().map(|(_, c)| c.as_str()).collect::<Vec<_>>().join(", ");
        match set.len() {
            1 => format!("region {codes}, the only region"),
            _ => format!("regions {codes}, the only regions"),
        }
    };
    let group = &requester.group_name;
    let may_use = crate::policy_access::may_use(&allowed);
    if ruled_out(&with_image) {
        return Ok(Some(format!(
            "group {group} may not use {} with an image for {framework} {framework_version} / {interpreter} {interpreter_version} ({may_use})",
            named(&with_image)
        )));
    }
    if ruled_out(&big_enough) {
        let model = gpu_model.as_deref().map(|m| format!(" {m}")).unwrap_or_default();
        return Ok(Some(format!(
            "group {group} may not use {} with a node that can hold {gpus}{model} GPU(s), {} CPU(s) and {memory_mb} MB of memory ({may_use})",
            named(&big_enough),
            cpu_millis as f64 / 1000.0
        )));
    }
    Ok(None)
}

/// Fails a pending task for good; `false` when it is no longer pending
/// (cancelled meanwhile), which is not an error.
pub(super) async fn fail(pool: &Pool, id: i64, why: &str) -> Result<bool, PlatformError> {
    let mut tx = transitions::begin(pool).await?;
    let failed = transitions::compute::never_admitted(&mut tx, id, &format!("can never start: {why}")).await?;
    tx.commit().await?;
    Ok(failed)
}

/// Checks a task now, at submit (before it can queue behind anything).
pub(super) async fn fail_if_never_admitted(
    pool: &Pool,
    requester: &User,
    id: i64,
    ask: &Ask,
) -> Result<(), PlatformError> {
    let why = never_admitted_task(&mut *pool.acquire().await?, requester, id, ask).await?;
    if let Some(why) = why {
        fail(pool, id, &why).await?;
    }
    Ok(())
}

/// Fails every head of a group's queue that can never be admitted — the
/// rules changed after it was submitted, or it was queued before this
/// check existed — until each head may be admitted some day, so the tasks
/// behind a failed head are decided in the same pass.
pub(super) async fn fail_impossible_heads(pool: &Pool) -> Result<(), PlatformError> {
    loop {
        let heads: Vec<(i64, i64, u32, Option<String>, i64, i64)> = sqlx::query_as(
            "SELECT c.id, c.requester_id, c.gpu_count, c.gpu_model, c.cpu_millis, c.memory_mb FROM compute_tasks c
             WHERE c.state = 'pending' AND c.id = (SELECT MIN(o.id) FROM compute_tasks o WHERE o.group_id = c.group_id AND o.state = 'pending')",
        )
        .fetch_all(pool)
        .await?;
        let mut failed = false;
        for (id, requester_id, gpus, gpu_model, cpu_millis, memory_mb) in heads {
            let Some(requester) = accounts::user_by_id(pool, requester_id).await? else { continue };
            let ask = Ask { gpus, gpu_model, cpu_millis, memory_mb };
            let why = never_admitted_task(&mut *pool.acquire().await?, &requester, id, &ask).await?;
            if let Some(why) = why {
                failed |= fail(pool, id, &why).await?;
            }
        }
        // Each round failed at least one pending task, so this ends.
        if !failed {
            return Ok(());
        }
    }
}

/// Cancels the pending tasks of disabled accounts (of `requester` only,
/// when given); the write lock is taken only when there are some.
pub(super) async fn cancel_disabled(pool: &Pool, requester: Option<i64>) -> Result<(), PlatformError> {
    let any: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM compute_tasks c JOIN users u ON u.id = c.requester_id WHERE c.state = 'pending' AND u.disabled = 1 AND (?1 IS NULL OR u.id = ?1))",
    )
    .bind(requester)
    .fetch_one(pool)
    .await?;
    if any {
        let mut tx = transitions::begin(pool).await?;
        transitions::compute::cancel_pending_of_disabled(&mut tx, requester).await?;
        tx.commit().await?;
    }
    Ok(())
}
