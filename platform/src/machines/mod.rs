//! Dev machines: admission (allocation + quota in one transaction),
//! operations on existing machines, releasing GPUs, and what the portal lists.

pub(crate) mod admission;
pub(crate) mod listing;
mod make_way;
mod ops;
mod room;
mod views;
mod volumes;

pub(crate) use admission::{check_group_limits, check_limits, load_policy, record_admission};
pub use admission::{Admissions, Admitted, CreateMachine, Job};
pub use listing::{machine_ids_sql, machines_window, task_ids_sql, tasks_window, ListFilter, Window};
pub(crate) use ops::refuse_if_gpus_gone;
pub use ops::{request_operation, OperationRequest};
pub(crate) use room::check_node;
pub use views::{list_machines, list_tasks, machine_detail, recent_tasks_sql, GpuIndexes, MachineView, TaskView};
pub use volumes::{delete_kept_volume, list_kept_volumes, KeptVolumeView};

use crate::accounts::User;

/// Bounds on a machine's data volume.
pub const VOLUME_GB_MIN: i64 = 1;
pub const VOLUME_GB_MAX: i64 = 4096;

/// Who may see or touch what: admins everything, others their own group's.
/// Applied as a SQL condition so isolation is enforced in one place.
pub fn visibility(viewer: &User, group_column: &str) -> (String, i64) {
    if viewer.role.is_admin() {
        ("1 = 1 OR ? IS NULL".to_string(), 0)
    } else {
        (format!("{group_column} = ?"), viewer.group_id)
    }
}

/// The Docker volume a new machine `id` of installation `instance` gets
/// (stored in `machines.volume_name`; a machine made on a kept volume
/// records that one instead). `VOLUME_NAME_SQL` is the same rule in SQL.
pub fn volume_name(instance: &str, machine_id: i64) -> String {
    format!("gantry-{instance}-m{machine_id}-data")
}

pub(crate) const VOLUME_NAME_SQL: &str =
    "('gantry-' || (SELECT value FROM settings WHERE key = 'instance_id') || '-m' || id || '-data')";

/// This installation's id (see `executor::LABEL_INSTANCE`).
pub async fn instance_id<'e>(db: impl sqlx::SqliteExecutor<'e>) -> Result<String, crate::PlatformError> {
    Ok(sqlx::query_scalar("SELECT value FROM settings WHERE key = 'instance_id'").fetch_one(db).await?)
}
