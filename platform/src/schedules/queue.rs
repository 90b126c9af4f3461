//! "Start when GPUs are free": a start refused for lack of room waits in
//! its group's line, first come first served, until room appears (a
//! machine stops or is deleted, the quota is raised, GPUs come back). Each
//! try is the start itself — the same admission, on the machine's node —
//! with a refusal leaving nothing behind, so a waiting machine's history
//! shows its start only once it begins. A successful start or restore,
//! however it came, ends the machine's wait (`transitions::reclaim`).

use super::QueuePlace;
use crate::{
    accounts::User,
    audit,
    db::Pool,
    machines::visibility,
    transitions::{
        begin,
        reclaim::{restore_as, OnRefusal},
    },
    PlatformError,
};
use gantry_core::start_queue::{self, Waiting};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;
use tokio::sync::Notify;

/// What a start did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum StartOutcome {
    /// Admitted: the start's task.
    Started { task_id: i64 },
    /// No room: it waits in the line (`place.text`: "2nd in line in group
    /// ml-team"); `why` is the refusal it waits out.
    Queued { place: QueuePlace, why: String },
}

/// Starts a shut-down (or reclaimed) machine. With `queue`, a start with
/// no room waits in the group's line instead of being refused, and one
/// asked for while others of the group wait goes behind them.
pub async fn start(pool: &Pool, who: &User, machine_id: i64, queue: bool) -> Result<StartOutcome, PlatformError> {
    if !queue {
        return restore_as(pool, who, machine_id, "start", OnRefusal::Record)
            .await
            .map(|task_id| StartOutcome::Started { task_id });
    }
    if let Some(place) = queue_place(pool, machine_id).await? {
        // Visible to the asker? (A second click answers the same place.)
        check_may_act(pool, who, machine_id).await?;
        return Ok(StartOutcome::Queued { place, why: "already waiting for GPUs".into() });
    }
    let line_before = group_line_len(pool, machine_id).await?;
    let why = if line_before > 0 {
        check_may_act(pool, who, machine_id).await?;
        format!("{line_before} start(s) of its group already wait for GPUs")
    } else {
        match restore_as(pool, who, machine_id, "start", OnRefusal::Nothing).await {
            Ok(task_id) => return Ok(StartOutcome::Started { task_id }),
            Err(PlatformError::Refused(why)) => why,
            Err(e) => return Err(e),
        }
    };
    let mut tx = begin(pool).await?;
    let (group_id, name): (i64, String) =
        sqlx::query_as("SELECT group_id, name FROM machines WHERE id = ?").bind(machine_id).fetch_one(&mut *tx).await?;
    sqlx::query(
        "INSERT INTO start_queue (machine_id, group_id, requester_id, queued_at, why) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (machine_id) DO NOTHING",
    )
    .bind(machine_id)
    .bind(group_id)
    .bind(who.id)
    .bind(crate::now())
    .bind(&why)
    .execute(&mut *tx)
    .await?;
    let detail = format!("machine {name}: start waits for GPUs ({why})");
    audit::record(&mut *tx, Some(who.id), "machine.start_queued", &detail).await?;
    tx.commit().await?;
    let place =
        queue_place(pool, machine_id).await?.ok_or_else(|| PlatformError::Internal("queue entry gone".into()))?;
    Ok(StartOutcome::Queued { place, why })
}

/// Visible to `who` and theirs (or `who` is an admin), and a machine a
/// start applies to; else the error the start would give.
async fn check_may_act(pool: &Pool, who: &User, machine_id: i64) -> Result<(), PlatformError> {
    let (cond, bind) = visibility(who, "group_id");
    let row: Option<(i64, String, String)> =
        sqlx::query_as(&format!("SELECT owner_id, name, state FROM machines WHERE id = ? AND ({cond})"))
            .bind(machine_id)
            .bind(bind)
            .fetch_optional(pool)
            .await?;
    let (owner, name, state) = row.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    if !who.acts_for(owner) {
        return Err(PlatformError::Conflict("only the machine's owner, or an admin, can start it".into()));
    }
    if state != "reclaimed" {
        return Err(PlatformError::Conflict(format!("machine {name} is {state}; start is not possible")));
    }
    Ok(())
}

async fn group_line_len(pool: &Pool, machine_id: i64) -> Result<i64, PlatformError> {
    Ok(sqlx::query_scalar(
        "SELECT COUNT(*) FROM start_queue q JOIN machines m ON m.id = ? WHERE q.group_id = m.group_id",
    )
    .bind(machine_id)
    .fetch_one(pool)
    .await?)
}

/// The owner (or an admin) takes a waiting start out of the line; the
/// ones behind it move up.
pub async fn cancel_queued_start(pool: &Pool, who: &User, machine_id: i64) -> Result<(), PlatformError> {
    let mut tx = begin(pool).await?;
    let (cond, bind) = visibility(who, "group_id");
    let row: Option<(i64, String)> =
        sqlx::query_as(&format!("SELECT owner_id, name FROM machines WHERE id = ? AND ({cond})"))
            .bind(machine_id)
            .bind(bind)
            .fetch_optional(&mut *tx)
            .await?;
    let (owner, name) = row.ok_or_else(|| PlatformError::NotFound("machine".into()))?;
    if !who.acts_for(owner) {
        return Err(PlatformError::Conflict(format!(
            "only machine {name}'s owner, or an admin, can cancel its waiting start"
        )));
    }
    let gone = sqlx::query("DELETE FROM start_queue WHERE machine_id = ?").bind(machine_id).execute(&mut *tx).await?;
    if gone.rows_affected() == 0 {
        return Err(PlatformError::Conflict(format!("machine {name}'s start is not waiting for GPUs")));
    }
    let detail = format!("machine {name}: waiting start cancelled by {}", who.username);
    audit::record(&mut *tx, Some(who.id), "machine.start_cancelled", &detail).await?;
    tx.commit().await?;
    Ok(())
}

async fn line(pool: &Pool) -> Result<Vec<Waiting>, PlatformError> {
    let rows: Vec<(i64, i64, i64, i64, i64)> = sqlx::query_as(
        "SELECT q.id, q.machine_id, q.group_id, q.queued_at, m.gpu_count FROM start_queue q JOIN machines m ON m.id = q.machine_id",
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, machine_id, group_id, queued_at, gpus)| Waiting {
            id,
            machine_id,
            group_id,
            queued_at,
            gpus: gpus.clamp(0, i64::from(u32::MAX)) as u32,
        })
        .collect())
}

/// A machine's place in its group's line, while its start waits.
pub async fn queue_place(pool: &Pool, machine_id: i64) -> Result<Option<QueuePlace>, PlatformError> {
    let waiting = line(pool).await?;
    let Some(me) = waiting.iter().find(|w| w.machine_id == machine_id) else { return Ok(None) };
    let place = start_queue::place(&waiting, machine_id).unwrap_or(1);
    let group_name: String =
        sqlx::query_scalar("SELECT name FROM groups WHERE id = ?").bind(me.group_id).fetch_one(pool).await?;
    let text = start_queue::describe(place, &group_name);
    Ok(Some(QueuePlace { place, group_name, queued_at: me.queued_at, text }))
}

fn signal() -> &'static Notify {
    static WAKE: OnceLock<Notify> = OnceLock::new();
    WAKE.get_or_init(Notify::new)
}

/// Room may have appeared (GPUs were returned): the loop serves the line
/// now rather than at its next tick.
pub fn wake() {
    signal().notify_one();
}

/// Waits for [`wake`] (the loop's).
pub(super) async fn woken() {
    signal().notified().await
}

/// [`serve`] right after a commit that returned GPUs or raised a quota
/// (`what` names it in the log): a failure is the line's, not that
/// operation's, and the schedule loop's next pass tries again.
pub async fn serve_after(pool: &Pool, what: &str) {
    if let Err(e) = serve(pool).await {
        tracing::error!(error = %e, "serving the start queue after {what} failed; the schedule loop tries again");
    }
}

/// Tries each group's head whose quota has room for it; the machines whose
/// start began. A start that cannot be made for another reason than room
/// (the machine was deleted, started by hand, its node went) leaves the
/// line, saying why.
pub async fn serve(pool: &Pool) -> Result<Vec<i64>, PlatformError> {
    // Waits that no longer apply end first.
    sqlx::query("DELETE FROM start_queue WHERE machine_id IN (SELECT id FROM machines WHERE state <> 'reclaimed')")
        .execute(pool)
        .await?;
    let waiting = line(pool).await?;
    if waiting.is_empty() {
        return Ok(Vec::new());
    }
    let free: Vec<(i64, i64)> =
        sqlx::query_as("SELECT id, gpu_quota - gpus_in_use FROM groups").fetch_all(pool).await?;
    let free_of = |g: i64| free.iter().find(|(id, _)| *id == g).map(|(_, n)| *n).unwrap_or(0);
    let mut began = Vec::new();
    for head in start_queue::to_try(&waiting, free_of) {
        let owner: i64 = sqlx::query_scalar("SELECT owner_id FROM machines WHERE id = ?")
            .bind(head.machine_id)
            .fetch_one(pool)
            .await?;
        // The start is the owner's: they asked for it (or an admin did on
        // their behalf), and they may always start their machine.
        let Some(who) = crate::accounts::user_by_id(pool, owner).await? else { continue };
        match restore_as(pool, &who, head.machine_id, "start", OnRefusal::Nothing).await {
            Ok(task_id) => {
                super::tell::queued_start_began(pool, head.machine_id, task_id).await;
                began.push(head.machine_id);
            }
            Err(PlatformError::Refused(why)) => {
                sqlx::query("UPDATE start_queue SET why = ? WHERE machine_id = ?")
                    .bind(why)
                    .bind(head.machine_id)
                    .execute(pool)
                    .await?;
            }
            Err(e @ (PlatformError::Conflict(_) | PlatformError::NotFound(_))) => {
                tracing::warn!(machine = head.machine_id, error = %e, "a waiting start leaves the line");
                sqlx::query("DELETE FROM start_queue WHERE machine_id = ?").bind(head.machine_id).execute(pool).await?;
            }
            Err(e) => tracing::error!(machine = head.machine_id, error = %e, "a waiting start could not be tried"),
        }
    }
    Ok(began)
}
