//! Idle reclaim and restore: the warning, extensions, the reclaim task's
//! end (snapshot ready, GPUs refunded, state `reclaimed`, one commit) and
//! restore (GPUs allocated by the scheduling core on the machine's node,
//! quota deducted, state `creating` from its snapshot, one commit).
//! Calling off a queued reclaim and backing off after a failed one are in
//! [`withdraw`].

mod elsewhere;
mod stop;
mod withdraw;

pub(crate) use stop::stop_as;
pub use stop::{is_stop, start, stop};
pub use withdraw::call_off_if_withdrawn;
pub(crate) use withdraw::{exempted, withdraw};

use super::{begin, lease::fenced, machine, snapshot, task, Lease};
use crate::{accounts::User, audit, cluster, db::Pool, machines::visibility, now, PlatformError};
use gantry_core::{
    alloc::{allocate, AllocationRequest, ClusterView},
    reclaim::MachineEventKind,
    snapshot::{SnapshotOrigin, SnapshotState},
    task::{accepts, MachineState, TaskKind, TaskState},
};
use sqlx::SqliteConnection;

/// Warns a machine that is not yet warned; `false` when it already was
/// (or is no longer running/stopped).
pub async fn warn(pool: &Pool, machine_id: i64, until: i64, detail: &str) -> Result<bool, PlatformError> {
    let mut tx = begin(pool).await?;
    let done = sqlx::query(
        "UPDATE machines SET reclaim_deadline = ?, reclaim_extensions = 0, rev = rev + 1
         WHERE id = ? AND reclaim_deadline IS NULL AND state IN ('running', 'stopped')",
    )
    .bind(until)
    .bind(machine_id)
    .execute(&mut *tx)
    .await?;
    if done.rows_affected() == 0 {
        return Ok(false);
    }
    snapshot::event(&mut tx, machine_id, MachineEventKind::ReclaimWarning, detail).await?;
    audit::record(&mut *tx, None, "reclaim.warn", &format!("machine #{machine_id}: {detail}")).await?;
    // In the warning's commit: a reclaim needs this warning, so its owner's
    // channels have it queued before the machine can be reclaimed.
    let body = format!("{detail}. Deadline: {} UTC.", gantry_core::time::format_utc(until));
    let subject = |name: &str| format!("Machine {name} will be reclaimed unless it is used or extended");
    crate::notifications::notify_machine_owner(
        &mut tx,
        machine_id,
        crate::notifications::Kind::ReclaimWarning,
        subject,
        &body,
    )
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// Withdraws a warning (the GPUs are busy again, or it became exempt),
/// and cancels the reclaim it queued if no runner has started it yet.
pub async fn clear(pool: &Pool, machine_id: i64, reason: &str) -> Result<bool, PlatformError> {
    let mut tx = begin(pool).await?;
    if !withdraw(&mut tx, machine_id, reason).await? {
        return Ok(false);
    }
    tx.commit().await?;
    Ok(true)
}

/// The owner (or an admin) pushes the deadline back, within the limit, on
/// a running or stopped machine. A reclaim already queued for the passed
/// deadline is cancelled in the same commit; one a runner has begun is
/// not stopped: the extension is refused, saying so.
pub async fn extend(
    pool: &Pool,
    who: &User,
    machine_id: i64,
    settings: &gantry_core::reclaim::ReclaimSettings,
) -> Result<i64, PlatformError> {
    let mut tx = begin(pool).await?;
    let (cond, bind) = visibility(who, "group_id");
    let row: Option<(String, i64, Option<i64>, i64, String)> = sqlx::query_as(&format!(
        "SELECT name, owner_id, reclaim_deadline, reclaim_extensions, state FROM machines WHERE id = ? AND ({cond})"
    ))
    .bind(machine_id)
    .bind(bind)
    .fetch_optional(&mut *tx)
    .await?;
    let (name, owner, deadline, used, state) = row.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    let state = state.parse::<MachineState>()?;
    if !who.acts_for(owner) {
        return Err(PlatformError::Conflict("only the machine's owner, or an admin, can extend it".into()));
    }
    if !matches!(state, MachineState::Running | MachineState::Stopped) {
        return Err(PlatformError::Conflict(format!("machine {name} is {state}: it has no reclaim warning to extend")));
    }
    if let Some(task_id) = withdraw::begun(&mut tx, machine_id).await? {
        return Err(PlatformError::Conflict(format!(
            "machine {name} is being reclaimed now (task #{task_id}): it is being snapshotted and its GPUs returned; \
             once that is done, restore it from its page"
        )));
    }
    let standing = gantry_core::reclaim::Standing { deadline, extensions_used: used as u32, ..Default::default() };
    let until = gantry_core::reclaim::extend(settings, &standing, now()).map_err(PlatformError::Conflict)?;
    sqlx::query("UPDATE machines SET reclaim_deadline = ?, reclaim_extensions = reclaim_extensions + 1, rev = rev + 1 WHERE id = ?")
        .bind(until)
        .bind(machine_id)
        .execute(&mut *tx)
        .await?;
    let mut detail = format!(
        "{} extended the reclaim deadline to {} UTC (extension {} of {})",
        who.username,
        gantry_core::time::format_utc(until),
        used + 1,
        settings.extensions_allowed
    );
    if let Some(task_id) = withdraw::extended(&mut tx, machine_id, &who.username).await? {
        detail.push_str(&format!("; the queued reclaim (task #{task_id}) was cancelled"));
    }
    snapshot::event(&mut tx, machine_id, MachineEventKind::Extended, &detail).await?;
    audit::record(&mut *tx, Some(who.id), "reclaim.extend", &format!("machine {name}: {detail}")).await?;
    tx.commit().await?;
    Ok(until)
}

/// Queues the reclaim of a warned machine whose deadline passed at `now`
/// (the pass's clock): a `creating` snapshot and a `reclaim` task for the
/// dispatcher. The pass decided on what it read before; an extension, a
/// withdrawn warning or an exemption committed since wins (`None`). So
/// does a reclaim that failed since the warning: the deadline is pushed
/// back instead (see [`withdraw`]), so a failing reclaim is not retried
/// at every pass.
///
/// `decided_on_start`: when the machine last started, as the pass read it
/// (see [`last_started`]); a start committed since — a restart that
/// finished while the pass went through other machines — wins too: its
/// idleness no longer covers the window.
pub async fn queue(
    pool: &Pool,
    machine_id: i64,
    now: i64,
    decided_on_start: Option<i64>,
    why: &str,
) -> Result<Option<i64>, PlatformError> {
    // Read before the transaction: it holds the only writer connection.
    let settings = crate::reclaim::load_settings(pool).await?.reclaim;
    let mut tx = begin(pool).await?;
    let cur = machine::current(&mut tx, machine_id).await?;
    if accepts(&cur.name, cur.state, TaskKind::Reclaim).is_err()
        || busy(&mut tx, machine_id).await?
        || !still_due(&mut tx, machine_id, now).await?
    {
        return Ok(None);
    }
    if let Some(decided) = decided_on_start {
        if last_started(&mut tx, machine_id).await? > decided {
            return Ok(None);
        }
    }
    if withdraw::back_off(&mut tx, machine_id, now, &settings).await?.is_some() {
        tx.commit().await?;
        return Ok(None);
    }
    let (owner, deadline, extensions): (i64, Option<i64>, i64) =
        sqlx::query_as("SELECT owner_id, reclaim_deadline, reclaim_extensions FROM machines WHERE id = ?")
            .bind(machine_id)
            .fetch_one(&mut *tx)
            .await?;
    // The warning it was queued for: its runner stops if that changed.
    let payload = serde_json::json!({ "deadline": deadline, "extensions": extensions });
    let queued = Queued { machine_id, cur: &cur, requester: owner, label: "reclaimed", payload, why };
    let task_id = queued.insert(&mut tx).await?;
    audit::record(&mut *tx, None, "machine.reclaim", &format!("machine {}: {why}", cur.name)).await?;
    tx.commit().await?;
    Ok(Some(task_id))
}

/// A reclaim task about to be queued: the idle reclaim's and a person's
/// stop ([`stop`]) are the same task, run by the same steps.
struct Queued<'a> {
    machine_id: i64,
    cur: &'a machine::Current,
    /// Who the task names: the owner for the idle reclaim.
    requester: i64,
    /// The restore-point snapshot's name, before the time it was taken.
    label: &'a str,
    /// What the runner reads besides the snapshot's id.
    payload: serde_json::Value,
    why: &'a str,
}

impl Queued<'_> {
    /// Inserts the machine's restore-point snapshot (origin reclaim: not
    /// one of the group's snapshots, no quota) and its task, scheduled, in
    /// the caller's transaction; the task's id.
    async fn insert(mut self, tx: &mut SqliteConnection) -> Result<i64, PlatformError> {
        let stamp = gantry_core::time::format_utc(crate::now());
        let name = format!("{} {stamp}", self.label);
        let new = snapshot::NewSnapshot { name: &name, machine_id: self.machine_id, origin: SnapshotOrigin::Reclaim };
        let (snapshot_id, _) = snapshot::insert(&mut *tx, &new).await?;
        let task = task::NewTask {
            kind: TaskKind::Reclaim,
            machine_id: Some(self.machine_id),
            machine_name: &self.cur.name,
            requester_id: self.requester,
            group_id: self.cur.group_id,
            keep_volume: true,
            message: "accepted",
        };
        let task_id = task::insert_pending(&mut *tx, &task).await?;
        self.payload["snapshot_id"] = snapshot_id.into();
        snapshot::set_payload(&mut *tx, task_id, &self.payload).await?;
        task::set_state(&mut *tx, task_id, TaskState::Pending, TaskState::Scheduled, self.why).await?;
        Ok(task_id)
    }
}

/// When the machine last (re)started: its latest succeeded create, restart,
/// reinstall, restore or move, else its creation — what idleness must
/// cover the window since.
pub async fn last_started(conn: &mut SqliteConnection, machine_id: i64) -> Result<i64, PlatformError> {
    Ok(sqlx::query_scalar(&format!("SELECT {LAST_STARTED} FROM machines m WHERE m.id = ?"))
        .bind(machine_id)
        .fetch_one(&mut *conn)
        .await?)
}

/// [`last_started`] of machine `m`, as an SQL expression (the pass reads it
/// for every machine in one query).
pub const LAST_STARTED: &str =
    "COALESCE((SELECT MAX(t.updated_at) FROM tasks t WHERE t.machine_id = m.id AND t.state = 'succeeded'
                          AND t.kind IN ('create', 'restart', 'reinstall', 'restore', 'rebalance')), m.created_at)";

/// Warned, past the deadline at `now`, and neither it nor its group exempt.
async fn still_due(conn: &mut SqliteConnection, machine_id: i64, now: i64) -> Result<bool, PlatformError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM machines m JOIN groups g ON g.id = m.group_id
                        WHERE m.id = ? AND m.reclaim_deadline IS NOT NULL AND m.reclaim_deadline <= ?
                          AND NOT m.reclaim_exempt AND NOT g.reclaim_exempt)",
    )
    .bind(machine_id)
    .bind(now)
    .fetch_one(&mut *conn)
    .await?)
}

pub(crate) async fn busy(conn: &mut SqliteConnection, machine_id: i64) -> Result<bool, PlatformError> {
    Ok(sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM tasks WHERE machine_id = ? AND state IN ('pending', 'scheduled', 'running'))",
    )
    .bind(machine_id)
    .fetch_one(&mut *conn)
    .await?)
}

/// The end of a reclaim: snapshot ready, GPUs refunded, container
/// forgotten (the caller removed it), state `reclaimed`, task succeeded.
pub async fn reclaimed(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    snapshot_id: i64,
    size_bytes: i64,
) -> Result<i64, PlatformError> {
    reclaimed_as(pool, lease, machine_id, snapshot_id, size_bytes, machine::Container::Removed).await
}

/// [`reclaimed`] for a reclaim whose runner gives up once its image was
/// made (the engine stopped answering after the commit): the image is the
/// machine's restore point all the same, and a container that may still
/// be there is left to the collector with its GPUs (see
/// [`machine::release_as`]). Before, such a reclaim failed its snapshot and
/// left the machine without a container and no way back but a reinstall.
pub async fn reclaimed_as(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    snapshot_id: i64,
    size_bytes: i64,
    container: machine::Container,
) -> Result<i64, PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    snapshot::mark_ready(&mut tx, snapshot_id, size_bytes).await?;
    let held = machine::current(&mut tx, machine_id).await?.held;
    // A person's stop ends the same way; only its words differ.
    let stop = is_stop(&snapshot::payload(&mut tx, lease.task_id).await?);
    let (message, action) = if stop {
        (format!("shut down by its owner's stop; its filesystem is saved and {held} GPU(s) returned to the group's quota; Start brings it back"), "machine.stopped")
    } else {
        (format!("reclaimed after being idle; snapshot kept and {held} GPU(s) returned to the group's quota; restore brings it back"), "machine.reclaimed")
    };
    let refunded = machine::release_as(&mut tx, machine_id, MachineState::Reclaimed, &message, container).await?;
    sqlx::query(
        "UPDATE machines SET restore_snapshot_id = ?, reclaim_deadline = NULL, reclaim_extensions = 0, shut_down = ? WHERE id = ?",
    )
    .bind(snapshot_id)
    .bind(stop)
    .bind(machine_id)
    .execute(&mut *tx)
    .await?;
    snapshot::event(&mut tx, machine_id, MachineEventKind::Reclaimed, &message).await?;
    // Its owner asked for a stop and knows; an idle reclaim is news.
    if !stop {
        let subject = |name: &str| format!("Machine {name} was reclaimed");
        crate::notifications::notify_machine_owner(
            &mut tx,
            machine_id,
            crate::notifications::Kind::Reclaim,
            subject,
            &message,
        )
        .await?;
    }
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Succeeded, &message).await?;
    audit::record(&mut *tx, None, action, &format!("machine #{machine_id}: {message}")).await?;
    tx.commit().await?;
    // GPUs came back: a start waiting for them begins now (its own
    // admission; a failure there is the line's, not this stop's).
    crate::schedules::serve_after(pool, "a stop").await;
    Ok(refunded)
}

/// One-click restore of a reclaimed machine: its GPUs are chosen by the
/// scheduling core among its node's (where its volume and snapshot are),
/// within the group's quota; a refusal is recorded as a failed task with
/// the reason and changes nothing else.
pub async fn restore(pool: &Pool, who: &User, machine_id: i64) -> Result<i64, PlatformError> {
    restore_as(pool, who, machine_id, "restore", OnRefusal::Record).await
}

/// What a refused restore or start leaves behind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OnRefusal {
    /// A failed task with the reason: a person asked and is told.
    Record,
    /// Nothing at all: a queued start that keeps its place in the line
    /// (a failed task at every try would bury the machine's history).
    Nothing,
}

/// [`restore`], named `word` in its refusal and audit (`machine.{word}`):
/// a shut-down machine's Start is the same admission.
pub(crate) async fn restore_as(
    pool: &Pool,
    who: &User,
    machine_id: i64,
    word: &str,
    on_refusal: OnRefusal,
) -> Result<i64, PlatformError> {
    let mut tx = begin(pool).await?;
    let (cond, bind) = visibility(who, "group_id");
    let row: Option<(i64, Option<i64>, i64, String, Option<i64>, i64, i64, i64)> = sqlx::query_as(&format!(
        "SELECT owner_id, node_id, gpu_count, gpu_model, restore_snapshot_id, cpu_millis, memory_mb, pids_limit FROM machines WHERE id = ? AND ({cond})"
    ))
    .bind(machine_id)
    .bind(bind)
    .fetch_optional(&mut *tx)
    .await?;
    let (owner, node_id, gpu_count, model, snapshot_id, cpu_millis, memory_mb, pids) =
        row.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    // Only CPUs and memory are checked against the node here.
    let limits = crate::executor::Limits { cpu_millis, memory_mb, pids, root_disk_mb: 0 };
    if !who.acts_for(owner) {
        return Err(PlatformError::Conflict(format!("only the machine's owner, or an admin, can {word} it")));
    }
    let cur = machine::current(&mut tx, machine_id).await?;
    accepts(&cur.name, cur.state, TaskKind::Restore).map_err(|_| {
        PlatformError::Conflict(format!("machine {} is {}; {word} is not possible", cur.name, cur.state))
    })?;
    if busy(&mut tx, machine_id).await? {
        return Err(PlatformError::Conflict(format!(
            "machine {} is busy with another operation; wait for it to finish",
            cur.name
        )));
    }
    let snap: Option<(String, String)> = sqlx::query_as("SELECT image_ref, state FROM snapshots WHERE id = ?")
        .bind(snapshot_id)
        .fetch_optional(&mut *tx)
        .await?;
    let reference = match (snap, node_id) {
        (Some((reference, state)), Some(_)) if state.parse() == Ok(SnapshotState::Ready) => reference,
        _ => {
            return Err(PlatformError::Conflict(format!(
                "machine {} has no snapshot to restore from; delete it",
                cur.name
            )))
        }
    };
    let policy = crate::machines::load_policy(&mut tx, cur.group_id).await?;
    let full = cluster::load_view(&mut tx).await?;
    let only =
        ClusterView { nodes: full.nodes.iter().filter(|n| Some(n.id) == node_id).cloned().collect(), ..full.clone() };
    let request = AllocationRequest { gpu_count: gpu_count as u32, model: Some(model) };
    let task_id = task::insert_pending(
        &mut tx,
        &task::NewTask {
            kind: TaskKind::Restore,
            machine_id: Some(machine_id),
            machine_name: &cur.name,
            requester_id: who.id,
            group_id: cur.group_id,
            keep_volume: false,
            message: "accepted",
        },
    )
    .await?;
    // As for any create: the group's per-machine CPU and memory limits as
    // they are now, and a node with as many CPUs as it asks for.
    let mut refused = crate::machines::check_group_limits(&mut tx, cur.group_id, &limits, &policy).await?.err();
    if refused.is_none() {
        if let Some(node) = node_id {
            refused = crate::machines::check_node(&mut tx, node, &limits).await?.err();
        }
    }
    // Its node is fixed: one not taking machines is named as such, rather
    // than as a node without free GPUs.
    if let (None, Some(node)) = (&refused, node_id) {
        let (name, state): (String, String) =
            sqlx::query_as("SELECT name, state FROM nodes WHERE id = ?").bind(node).fetch_one(&mut *tx).await?;
        if state != "ready" {
            refused = Some(format!(
                "its node {name} is {state} and takes no machines (it can only run on its own node, where its volume is)"
            ));
        }
    }
    // Its node is fixed: its region must still be one the group may use.
    if refused.is_none() {
        if let Some(node) = node_id {
            refused = crate::policy_access::refusal_for_nodes(&mut tx, cur.group_id, &policy.group_name, &[node])
                .await?
                .map(|why| format!("{why} (it can only run on its own node, where its volume is)"));
        }
    }
    // Its node's disk must be above the floor, as for any new container.
    if refused.is_none() {
        if let Some(node) = node_id {
            refused = crate::disk::nodes::refusal(&mut tx, node)
                .await?
                .map(|why| format!("{why} (it can only run on its own node, where its volume is)"));
        }
    }
    let placed = match refused {
        Some(reason) => Err(reason),
        // Its volume and snapshot live on one node: only that node's GPUs will do.
        None => match allocate(&only, &policy, &request, now()) {
            Ok(alloc) => Ok(alloc),
            // No room on its node: say so with the numbers, and whether
            // another node of its region would have had room.
            Err(r @ gantry_core::alloc::Refusal::NoCapacity { .. }) => match node_id {
                Some(node) => Err(elsewhere::no_room(&mut tx, node, &full, &policy, &request).await?),
                None => Err(r.to_string()),
            },
            Err(r @ gantry_core::alloc::Refusal::OverQuota { .. }) => Err(r.to_string()),
            Err(r) => Err(format!("{r} (it can only run on its own node, where its volume is)")),
        },
    };
    let alloc = match placed {
        Ok(alloc) => alloc,
        Err(why) => {
            let reason = format!("{word} of {} refused: {why}", cur.name);
            if on_refusal == OnRefusal::Nothing {
                // Dropped: the pending task goes with the transaction.
                return Err(PlatformError::Refused(reason));
            }
            task::set_state(&mut tx, task_id, TaskState::Pending, TaskState::Failed, &reason).await?;
            tx.commit().await?;
            return Err(PlatformError::Refused(reason));
        }
    };
    // The task list shows a start as a start, not as a restore.
    if word == "start" {
        snapshot::set_payload(&mut tx, task_id, &serde_json::json!({ "start": true })).await?;
    }
    machine::move_to(&mut tx, machine_id, MachineState::Creating, None, "restoring from its snapshot").await?;
    for gpu in &alloc.gpus {
        sqlx::query("INSERT INTO machine_gpus (gpu_id, machine_id) SELECT id, ? FROM gpus WHERE uuid = ?")
            .bind(machine_id)
            .bind(&gpu.uuid)
            .execute(&mut *tx)
            .await?;
    }
    let done =
        sqlx::query("UPDATE groups SET gpus_in_use = gpus_in_use + ?1 WHERE id = ?2 AND gpus_in_use + ?1 <= gpu_quota")
            .bind(gpu_count)
            .bind(cur.group_id)
            .execute(&mut *tx)
            .await?;
    if done.rows_affected() != 1 {
        return Err(PlatformError::Internal("quota check failed; nothing was changed".into()));
    }
    let image = snapshot::image_row(&mut tx, &reference).await?;
    sqlx::query("UPDATE machines SET image_id = ?, from_snapshot_id = ? WHERE id = ?")
        .bind(image)
        .bind(snapshot_id)
        .bind(machine_id)
        .execute(&mut *tx)
        .await?;
    // However it came (a click, a schedule, its turn in the line), a start
    // ends the machine's wait for GPUs.
    sqlx::query("DELETE FROM start_queue WHERE machine_id = ?").bind(machine_id).execute(&mut *tx).await?;
    let gpu_list = alloc.gpus.iter().map(|g| g.index.to_string()).collect::<Vec<_>>().join(",");
    let placed = format!(
        "allocated {gpu_count} × {} on {} (GPU {gpu_list}); restoring from snapshot {reference}",
        alloc.model, alloc.node_name
    );
    task::set_state(&mut tx, task_id, TaskState::Pending, TaskState::Scheduled, &placed).await?;
    audit::record(
        &mut *tx,
        Some(who.id),
        &format!("machine.{word}"),
        &format!("machine {}: {placed}; group quota deducted", cur.name),
    )
    .await?;
    tx.commit().await?;
    Ok(task_id)
}

/// A restore that failed for good: GPUs back, `reclaimed` again (its
/// snapshot and volume are untouched, so it can be tried again). From
/// whatever state its runner left it in — `creating`, or `failed`,
/// `stopped` or `running` as the engine was seen after the start: a
/// restore that could not give up would hold its GPUs for ever.
pub async fn restore_failed(pool: &Pool, lease: &Lease, machine_id: i64, message: &str) -> Result<(), PlatformError> {
    restore_given_up(pool, lease, machine_id, message, machine::Container::Removed).await
}

/// [`restore_failed`], saying whether its container was removed or left
/// to the collector (an unreachable engine; see `machine::release_as`).
pub async fn restore_given_up(
    pool: &Pool,
    lease: &Lease,
    machine_id: i64,
    message: &str,
    container: machine::Container,
) -> Result<(), PlatformError> {
    let mut tx = fenced(pool, lease).await?;
    let shown = format!("restore failed: {message}; GPUs returned, it can be restored again");
    machine::release_as(&mut tx, machine_id, MachineState::Reclaimed, &shown, container).await?;
    task::set_state(&mut tx, lease.task_id, TaskState::Running, TaskState::Failed, message).await?;
    audit::record(&mut *tx, None, "task.failed", &format!("task #{}: {shown}", lease.task_id)).await?;
    tx.commit().await?;
    crate::schedules::serve_after(pool, "a failed restore").await;
    Ok(())
}
