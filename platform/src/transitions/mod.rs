//! The one place that changes the state of dev machines and their tasks.
//!
//! Every write here is a compare-and-set decided by the core's rules
//! (`gantry_core::task` for tasks, `gantry_core::machine` for machines),
//! made in one `BEGIN IMMEDIATE` transaction together with its
//! consequences: the GPUs a machine holds (`machine_gpus`), the group's
//! `gpus_in_use`, kept volumes and the audit log. No other module writes a
//! `state` column of `machines` or `tasks`.
//!
//! **Invariant: a machine holds GPUs ⇔ it may have a container pinned to
//! them.** GPUs are given back only by [`machine::release`], which also
//! forgets the container; the dispatcher removes the container in the same
//! flow, and when the engine cannot be reached the collector
//! ([`crate::reconcile`]) removes it later, because a container whose
//! machine holds nothing is by definition garbage. No container is started
//! for a machine that holds fewer GPUs than it needs
//! (`gantry_core::machine::may_start`, checked in [`run::begin`]).
//!
//! **Leases.** A task being executed is `running` with a `lease_owner` (the
//! process's id, new at every start), the attempt number of that claim, and a
//! `lease_expires` time the runner keeps renewing. Every write a runner makes
//! is fenced by its lease ([`lease::fenced`]): once another process — or this
//! one, claiming the task again after its lease expired — has taken the task
//! over, or an admin has ended it, the old runner's writes fail with
//! `LeaseLost` and it stops.

pub mod compute;
pub mod lease;
pub mod machine;
pub mod node;
pub mod rebalance;
pub mod reclaim;
pub mod run;
pub mod snapshot;
pub mod task;

pub use lease::{ClaimedTask, Lease};

use crate::PlatformError;

pub use crate::db::Tx;

/// A write transaction that takes SQLite's write lock up front, so a
/// read-then-write never fails half-way with `SQLITE_BUSY_SNAPSHOT` (see
/// `db::begin_immediate`: safe to cancel).
pub async fn begin(pool: &crate::db::Pool) -> Result<Tx, PlatformError> {
    crate::db::begin_immediate(pool).await
}
