//! What a create request must pass before GPUs are chosen for it: the
//! group's policy and image rule, per-machine limits, an account that has
//! not changed since it asked, and a kept volume that is the requester's.
//! Each check reads inside the admission transaction, so what it reads
//! cannot change before the machine is written.

use super::{CreateMachine, KeptVolume};
use crate::{accounts::User, executor::Limits, PlatformError};
use gantry_core::alloc::GroupPolicy;
use sqlx::SqliteConnection;

pub(crate) async fn load_policy(conn: &mut SqliteConnection, group_id: i64) -> Result<GroupPolicy, PlatformError> {
    let (name, quota, in_use, max): (String, i64, i64, i64) =
        sqlx::query_as("SELECT name, gpu_quota, gpus_in_use, max_gpus_per_machine FROM groups WHERE id = ?")
            .bind(group_id)
            .fetch_one(&mut *conn)
            .await?;
    let allowed_models: Vec<String> =
        sqlx::query_scalar("SELECT model FROM group_gpu_models WHERE group_id = ? ORDER BY model")
            .bind(group_id)
            .fetch_all(&mut *conn)
            .await?;
    Ok(GroupPolicy {
        group_name: name,
        gpu_quota: quota,
        gpus_in_use: in_use,
        max_gpus_per_machine: max,
        allowed_models,
    })
}

/// The image to use, or why the group may not use it.
pub(super) async fn resolve_image(
    conn: &mut SqliteConnection,
    req: &CreateMachine,
) -> Result<Result<i64, String>, PlatformError> {
    let row: Option<(i64, String)> = match req.image_id {
        Some(id) => {
            sqlx::query_as("SELECT id, name FROM images WHERE id = ? AND internal = 0")
                .bind(id)
                .fetch_optional(&mut *conn)
                .await?
        }
        None => sqlx::query_as("SELECT id, name FROM images WHERE is_default = 1").fetch_optional(&mut *conn).await?,
    };
    let Some((id, name)) = row else {
        return Ok(Err(match req.image_id {
            Some(_) => "the chosen image does not exist".to_string(),
            None => "no default image is configured; ask an administrator to add one".to_string(),
        }));
    };
    match image_refusal(conn, req.requester.group_id, &req.requester.group_name, Some((id, &name))).await? {
        Some(why) => Ok(Err(why)),
        None => Ok(Ok(id)),
    }
}

/// The group's image rule (set on the admin's Groups page), named: why it
/// may not use `image` (`None`: an image no longer known, allowed only when
/// the group may use every image). Also applied to the image a snapshot
/// comes from (`snapshots::create_machine`).
pub(crate) async fn image_refusal(
    conn: &mut SqliteConnection,
    group_id: i64,
    group_name: &str,
    image: Option<(i64, &str)>,
) -> Result<Option<String>, PlatformError> {
    let allowed: (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), COALESCE(SUM(image_id = ?), 0) FROM group_images WHERE group_id = ?")
            .bind(image.map(|i| i.0))
            .bind(group_id)
            .fetch_one(&mut *conn)
            .await?;
    if allowed.0 == 0 || allowed.1 > 0 {
        return Ok(None);
    }
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT i.name FROM group_images g JOIN images i ON i.id = g.image_id WHERE g.group_id = ? ORDER BY i.name",
    )
    .bind(group_id)
    .fetch_all(&mut *conn)
    .await?;
    let what =
        image.map_or_else(|| "an image that is no longer known".to_string(), |(_, name)| format!("image {name}"));
    Ok(Some(format!("group {group_name} may not use {what} (it may use only {})", names.join(", "))))
}

/// Why a request made by `who` can no longer be admitted: the account was
/// disabled, or moved to another group, after the request was made.
pub(crate) async fn requester_changed(
    conn: &mut SqliteConnection,
    who: &User,
) -> Result<Option<String>, PlatformError> {
    let now: Option<(i64, bool)> = sqlx::query_as("SELECT group_id, disabled FROM users WHERE id = ?")
        .bind(who.id)
        .fetch_optional(&mut *conn)
        .await?;
    Ok(match now {
        None => Some(format!("account {} no longer exists; nothing was created", who.username)),
        Some((_, true)) => {
            Some(format!("account {} was disabled after the request was made; nothing was created", who.username))
        }
        Some((group, false)) if group != who.group_id => Some(format!(
            "account {} was moved to another group after the request was made; nothing was created",
            who.username
        )),
        Some(_) => None,
    })
}

/// CPU and memory within the group's per-machine limits.
pub(crate) async fn check_limits(
    conn: &mut SqliteConnection,
    req: &CreateMachine,
    policy: &GroupPolicy,
) -> Result<Result<(), String>, PlatformError> {
    check_group_limits(conn, req.requester.group_id, &req.limits(), policy).await
}

/// `limits` within group `group_id`'s per-machine limits (`policy` is that
/// group's): also for a machine that comes back (restore).
pub(crate) async fn check_group_limits(
    conn: &mut SqliteConnection,
    group_id: i64,
    limits: &Limits,
    policy: &GroupPolicy,
) -> Result<Result<(), String>, PlatformError> {
    let (max_cpus, max_mem_gb): (i64, i64) =
        sqlx::query_as("SELECT max_cpus_per_machine, max_memory_gb_per_machine FROM groups WHERE id = ?")
            .bind(group_id)
            .fetch_one(&mut *conn)
            .await?;
    if limits.cpu_millis > max_cpus * 1000 {
        return Ok(Err(format!(
            "group {} may use at most {max_cpus} CPU(s) per machine; this machine asks for {}",
            policy.group_name,
            limits.cpu_millis as f64 / 1000.0
        )));
    }
    if limits.memory_mb > max_mem_gb * 1024 {
        return Ok(Err(format!(
            "group {} may use at most {max_mem_gb} GB of memory per machine; this machine asks for {} MB",
            policy.group_name, limits.memory_mb
        )));
    }
    Ok(Ok(()))
}

/// The kept volume, if it is the requester's (an admin may take any): it
/// holds its owner's data, which a group member may not enter. It stops
/// being "kept" only when the machine that mounts it is written.
pub(super) async fn take_kept_volume(
    conn: &mut SqliteConnection,
    req: &CreateMachine,
    id: i64,
) -> Result<Result<KeptVolume, String>, PlatformError> {
    let row: Option<(String, i64, i64, i64)> =
        sqlx::query_as("SELECT name, node_id, size_gb, owner_id FROM kept_volumes WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
    match row {
        Some((name, node_id, size_gb, owner)) if owner == req.requester.id || req.requester.role.is_admin() => {
            // A delete that gave up on an engine that did not answer lists
            // the volume at once, but the old container (fenced off with
            // its GPUs until the collector has seen it gone) may still run
            // on it: a new machine would share the volume with it.
            let old_container: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM gpus_left_to_collector x JOIN machines m ON m.id = x.machine_id WHERE m.volume_name = ?)",
            )
            .bind(&name)
            .fetch_one(&mut *conn)
            .await?;
            if old_container {
                return Ok(Err(format!(
                    "kept volume {name} may still be in use by the container of the machine it came from (its node's engine did not answer when that machine was deleted); \
                     it can be used once the node's engine has removed that container — try again in a minute"
                )));
            }
            Ok(Ok(KeptVolume { name, node_id, size_gb }))
        }
        _ => Ok(Err("the chosen kept volume does not exist".to_string())),
    }
}
