//! What schedules tell a machine's owner, through the portal's
//! notifications (and the email or webhook they chose). The one list of
//! call sites: a schedule's stop, the group's max-run warning, a queued
//! start that began.

use crate::{
    db::Pool,
    notifications::{notify_machine_owner, Kind},
    PlatformError,
};
use sqlx::SqliteConnection;

/// In the warning's own transaction: the owner is told with it, or the
/// warning is not given (so a machine is never stopped unannounced).
pub(super) async fn max_run_warned(
    conn: &mut SqliteConnection,
    machine_id: i64,
    why: &str,
) -> Result<(), PlatformError> {
    notify_machine_owner(conn, machine_id, Kind::MaxRunWarning, |name| format!("Machine {name} will be stopped"), why)
        .await?;
    Ok(())
}

/// After a schedule's stop was queued. Best effort: the stop stands.
pub(super) async fn schedule_stopped(pool: &Pool, machine_id: i64, why: &str) {
    let body = format!("Stopped by {why}: its filesystem is saved and its GPUs returned; Start brings it back.");
    let told = async {
        let mut tx = crate::transitions::begin(pool).await?;
        notify_machine_owner(&mut tx, machine_id, Kind::ScheduleStop, |name| format!("Machine {name} stopped"), &body)
            .await?;
        tx.commit().await?;
        Ok::<(), PlatformError>(())
    };
    if let Err(e) = told.await {
        tracing::error!(machine = machine_id, error = %e, "could not tell the owner of a scheduled stop");
    }
}

/// After a waiting start was admitted. Best effort: the start stands.
pub(super) async fn queued_start_began(pool: &Pool, machine_id: i64, task_id: i64) {
    let body = format!("GPUs became free and its waiting start began (task #{task_id}).");
    let told = async {
        let mut tx = crate::transitions::begin(pool).await?;
        notify_machine_owner(
            &mut tx,
            machine_id,
            Kind::QueuedStartBegan,
            |name| format!("Machine {name} is starting"),
            &body,
        )
        .await?;
        tx.commit().await?;
        Ok::<(), PlatformError>(())
    };
    if let Err(e) = told.await {
        tracing::error!(machine = machine_id, error = %e, "could not tell the owner of a queued start");
    }
}
