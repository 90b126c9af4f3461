//! Editing a group's policy: its GPU quota, the most GPUs one machine may
//! take, and the GPU models it may use (its images and regions:
//! `policy_access`, saved in the same transaction). Admission reads the same rows
//! (`groups`, `group_gpu_models`), so an edit applies to the next request.

use crate::{accounts::Group, audit, db::Pool, policy_access::AccessChange, policy_disk::DiskLimits, PlatformError};
use gantry_core::validate;
use std::collections::{BTreeSet, HashMap};

pub const QUOTA_MAX: i64 = 100_000;
pub const MAX_PER_MACHINE_MAX: i64 = 64;
/// Longest GPU model name accepted (NVML names are far shorter).
pub const MODEL_NAME_MAX: usize = 64;
/// Most models one group's allow-list may name.
pub const MODELS_MAX: usize = 64;
/// Most snapshots a group may be allowed to keep (each is an image on a
/// node's disk).
pub const SNAPSHOT_QUOTA_MAX: i64 = 1_000;

/// Checks an allow-list of GPU models and returns it sorted, without
/// duplicates. Names are trimmed; an empty list means "any model".
pub fn normalize_models(models: &[String]) -> Result<Vec<String>, PlatformError> {
    let mut out = BTreeSet::new();
    for m in models {
        let m = m.trim();
        if m.is_empty() {
            continue;
        }
        if m.chars().count() > MODEL_NAME_MAX {
            return Err(PlatformError::BadRequest(format!(
                "a GPU model name must be at most {MODEL_NAME_MAX} characters"
            )));
        }
        if m.chars().any(|c| c.is_control() || c == ',') {
            return Err(PlatformError::BadRequest(
                "a GPU model name may not contain commas or control characters".into(),
            ));
        }
        out.insert(m.to_string());
    }
    if out.len() > MODELS_MAX {
        return Err(PlatformError::BadRequest(format!("a group may list at most {MODELS_MAX} GPU models")));
    }
    Ok(out.into_iter().collect())
}

/// Sets a group's quota, per-machine maximum and allowed models in one
/// transaction, with an audit row naming old and new values. A quota below
/// what the group holds now is allowed: nothing is taken away, new requests
/// are refused until enough is released.
pub async fn update_group_policy(
    pool: &Pool,
    actor: Option<i64>,
    group_id: i64,
    gpu_quota: i64,
    max_gpus_per_machine: i64,
    models: &[String],
) -> Result<Group, PlatformError> {
    update_group_policy_and_access(
        pool,
        actor,
        group_id,
        gpu_quota,
        max_gpus_per_machine,
        models,
        &AccessChange::default(),
        None,
        None,
    )
    .await
}

/// [`update_group_policy`] and the group's allowed images and regions
/// (`policy_access`) in the same transaction and audit row — and, when
/// given, its per-machine (CPUs, memory GB) limits in the same transaction:
/// an unknown image or region id, or a limit out of range, refuses the
/// whole edit, nothing changes. So does its snapshot quota, when given (a
/// quota below the snapshots kept takes none away: new ones are refused).
/// Whoever saved last wins: [`update_group_policy_at_rev`] refuses instead.
#[allow(clippy::too_many_arguments)]
pub async fn update_group_policy_and_access(
    pool: &Pool,
    actor: Option<i64>,
    group_id: i64,
    gpu_quota: i64,
    max_gpus_per_machine: i64,
    models: &[String],
    access: &AccessChange,
    limits: Option<(i64, i64)>,
    snapshot_quota: Option<i64>,
) -> Result<Group, PlatformError> {
    update_group_policy_at_rev(
        pool,
        actor,
        group_id,
        gpu_quota,
        max_gpus_per_machine,
        models,
        access,
        limits,
        snapshot_quota,
        None,
    )
    .await
}

/// [`update_group_policy_and_access`], when the group is still at
/// `expected_rev`: the group's `policy_rev` the caller's values were based
/// on (the Groups page posts the one it showed). A different revision means
/// someone else edited the group since: `Conflict`, nothing changes — the
/// edit would otherwise write back every field as the caller last saw it
/// and undo theirs. `None` skips the check (scripts, internal callers).
#[allow(clippy::too_many_arguments)]
pub async fn update_group_policy_at_rev(
    pool: &Pool,
    actor: Option<i64>,
    group_id: i64,
    gpu_quota: i64,
    max_gpus_per_machine: i64,
    models: &[String],
    access: &AccessChange,
    limits: Option<(i64, i64)>,
    snapshot_quota: Option<i64>,
    expected_rev: Option<i64>,
) -> Result<Group, PlatformError> {
    update_group_policy_with_disk(
        pool,
        actor,
        group_id,
        gpu_quota,
        max_gpus_per_machine,
        models,
        access,
        limits,
        snapshot_quota,
        &DiskLimits::default(),
        expected_rev,
    )
    .await
}

/// [`update_group_policy_at_rev`] and the group's disk limits
/// ([`DiskLimits`]: root filesystem per machine, snapshot storage), in the
/// same transaction and audit row; one out of range refuses the whole edit.
#[allow(clippy::too_many_arguments)]
pub async fn update_group_policy_with_disk(
    pool: &Pool,
    actor: Option<i64>,
    group_id: i64,
    gpu_quota: i64,
    max_gpus_per_machine: i64,
    models: &[String],
    access: &AccessChange,
    limits: Option<(i64, i64)>,
    snapshot_quota: Option<i64>,
    disk: &DiskLimits,
    expected_rev: Option<i64>,
) -> Result<Group, PlatformError> {
    validate::in_range("GPU quota", gpu_quota, 0, QUOTA_MAX)?;
    disk.check()?;
    if let Some(q) = snapshot_quota {
        validate::in_range("snapshot quota", q, 0, SNAPSHOT_QUOTA_MAX)?;
    }
    validate::in_range("GPUs per machine", max_gpus_per_machine, 1, MAX_PER_MACHINE_MAX)?;
    let models = normalize_models(models)?;

    // IMMEDIATE: take the write lock before reading, like admission does, so
    // the old values in the audit row are the ones this edit replaced, and
    // no other edit can land between the revision check and the writes.
    let mut tx = crate::db::begin_immediate(pool).await?;
    let old: Option<(String, i64, i64, i64, i64, i64)> =
        sqlx::query_as("SELECT name, gpu_quota, gpus_in_use, max_gpus_per_machine, snapshot_quota, policy_rev FROM groups WHERE id = ?")
            .bind(group_id)
            .fetch_optional(&mut *tx)
            .await?;
    let (name, old_quota, in_use, old_max, old_snapshots, rev) =
        old.ok_or_else(|| PlatformError::NotFound("group".into()))?;
    if let Some(expected) = expected_rev.filter(|e| *e != rev) {
        // Dropping `tx` rolls back: nothing was written yet anyway.
        return Err(PlatformError::Conflict(format!(
            "group {name} was changed by someone else since this page was loaded (the page showed revision {expected}, \
             it is now at revision {rev}): reload to see it; nothing was saved"
        )));
    }
    let old_models: Vec<String> =
        sqlx::query_scalar("SELECT model FROM group_gpu_models WHERE group_id = ? ORDER BY model")
            .bind(group_id)
            .fetch_all(&mut *tx)
            .await?;

    let snapshots = snapshot_quota.unwrap_or(old_snapshots);
    // One bump for the whole edit (access lists and limits included).
    sqlx::query("UPDATE groups SET gpu_quota = ?, max_gpus_per_machine = ?, snapshot_quota = ?, policy_rev = policy_rev + 1 WHERE id = ?")
        .bind(gpu_quota)
        .bind(max_gpus_per_machine)
        .bind(snapshots)
        .bind(group_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query("DELETE FROM group_gpu_models WHERE group_id = ?").bind(group_id).execute(&mut *tx).await?;
    for m in &models {
        sqlx::query("INSERT INTO group_gpu_models (group_id, model) VALUES (?, ?)")
            .bind(group_id)
            .bind(m)
            .execute(&mut *tx)
            .await?;
    }

    let mut access_words = crate::policy_access::apply(&mut tx, group_id, access).await?;
    access_words.extend(crate::policy_disk::apply(&mut tx, group_id, disk).await?);

    let list = |l: &[String]| if l.is_empty() { "any".to_string() } else { l.join(", ") };
    let mut detail = format!(
        "group {name}: GPU quota {old_quota} → {gpu_quota}, max per machine {old_max} → {max_gpus_per_machine}, models {} → {}",
        list(&old_models),
        list(&models)
    );
    if snapshots != old_snapshots {
        detail.push_str(&format!(", snapshot quota {old_snapshots} → {snapshots}"));
    }
    for words in &access_words {
        detail.push_str(&format!(", {words}"));
    }
    if gpu_quota < in_use {
        detail.push_str(&format!(" (holds {in_use}; nothing is taken away, new requests are refused)"));
    }
    audit::record(&mut *tx, actor, "group.update", &detail).await?;
    // Every member is told, in the change's commit.
    let subject = format!("The quota of your group {name} changed");
    crate::notifications::notify_group(&mut tx, group_id, crate::notifications::Kind::QuotaChanged, &subject, &detail)
        .await?;
    if let Some((cpus, memory_gb)) = limits {
        set_machine_limits(&mut tx, actor, group_id, cpus, memory_gb).await?;
    }
    tx.commit().await?;
    // A raised quota is room: a start waiting in the group's line begins now.
    crate::schedules::serve_after(pool, "a group's policy change").await;
    crate::accounts::group_by_id(pool, group_id).await
}

/// The GPU models a group may use; empty means any.
pub async fn allowed_models(pool: &Pool, group_id: i64) -> Result<Vec<String>, PlatformError> {
    Ok(sqlx::query_scalar("SELECT model FROM group_gpu_models WHERE group_id = ? ORDER BY model")
        .bind(group_id)
        .fetch_all(pool)
        .await?)
}

/// Every group's allow-list, keyed by group id (groups without one absent).
pub async fn all_allowed_models(pool: &Pool) -> Result<HashMap<i64, Vec<String>>, PlatformError> {
    let rows: Vec<(i64, String)> =
        sqlx::query_as("SELECT group_id, model FROM group_gpu_models ORDER BY group_id, model").fetch_all(pool).await?;
    let mut map: HashMap<i64, Vec<String>> = HashMap::new();
    for (g, m) in rows {
        map.entry(g).or_default().push(m);
    }
    Ok(map)
}

/// Per-machine container limits a group may ask for: CPUs and memory (GB).
/// Machines already running keep the limits they were created with.
pub async fn update_machine_limits(
    pool: &Pool,
    actor: Option<i64>,
    group_id: i64,
    max_cpus: i64,
    max_memory_gb: i64,
) -> Result<(), PlatformError> {
    let mut tx = crate::transitions::begin(pool).await?;
    set_machine_limits(&mut tx, actor, group_id, max_cpus, max_memory_gb).await?;
    bump_rev(&mut tx, group_id).await?;
    tx.commit().await?;
    Ok(())
}

async fn set_machine_limits(
    tx: &mut sqlx::SqliteConnection,
    actor: Option<i64>,
    group_id: i64,
    max_cpus: i64,
    max_memory_gb: i64,
) -> Result<(), PlatformError> {
    validate::in_range("CPUs per machine", max_cpus, 1, 256)?;
    validate::in_range("memory per machine (GB)", max_memory_gb, 1, 4096)?;
    let old: Option<(String, i64, i64)> =
        sqlx::query_as("SELECT name, max_cpus_per_machine, max_memory_gb_per_machine FROM groups WHERE id = ?")
            .bind(group_id)
            .fetch_optional(&mut *tx)
            .await?;
    let (name, old_cpus, old_mem) = old.ok_or_else(|| PlatformError::NotFound("group".into()))?;
    sqlx::query("UPDATE groups SET max_cpus_per_machine = ?, max_memory_gb_per_machine = ? WHERE id = ?")
        .bind(max_cpus)
        .bind(max_memory_gb)
        .bind(group_id)
        .execute(&mut *tx)
        .await?;
    let detail = format!(
        "group {name}: CPUs per machine {old_cpus} → {max_cpus}, memory per machine {old_mem} → {max_memory_gb} GB"
    );
    crate::audit::record(&mut *tx, actor, "group.limits", &detail).await?;
    Ok(())
}

/// Marks group `group_id`'s policy as edited, inside the caller's
/// transaction: every writer of its policy columns or access lists calls
/// this (or bumps `policy_rev` in its own UPDATE), so a form loaded before
/// the edit is refused by [`update_group_policy_at_rev`].
pub(crate) async fn bump_rev(conn: &mut sqlx::SqliteConnection, group_id: i64) -> Result<(), PlatformError> {
    sqlx::query("UPDATE groups SET policy_rev = policy_rev + 1 WHERE id = ?")
        .bind(group_id)
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// (max CPUs, max memory GB) per machine for a group.
pub async fn machine_limits(pool: &Pool, group_id: i64) -> Result<(i64, i64), PlatformError> {
    Ok(sqlx::query_as("SELECT max_cpus_per_machine, max_memory_gb_per_machine FROM groups WHERE id = ?")
        .bind(group_id)
        .fetch_one(pool)
        .await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_trimmed_sorted_and_deduplicated() {
        let got = normalize_models(&[" H100 ".into(), "A100".into(), "".into(), "A100".into()]).unwrap();
        assert_eq!(got, vec!["A100".to_string(), "H100".to_string()]);
        assert!(normalize_models(&[]).unwrap().is_empty());
    }

    #[test]
    fn bad_model_names_are_refused() {
        assert!(normalize_models(&["x".repeat(65)]).is_err());
        assert!(normalize_models(&["a\nb".into()]).is_err());
        let many: Vec<String> = (0..65).map(|i| format!("m{i}")).collect();
        assert!(normalize_models(&many).is_err());
    }
}
