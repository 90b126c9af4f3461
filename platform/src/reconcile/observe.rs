//! What the database and the node's engine each hold, and the first repair:
//! machines follow their containers.

use super::{db, Known, Node, Report, LIST_TIMEOUT};
use crate::{
    audit,
    executor::{ContainerStatus, ManagedContainer},
    transitions,
};
use gantry_core::task::MachineState;
use std::collections::{HashMap, HashSet};

/// A machine as a container's status says it is: next state, exit code, why.
type Observation = (MachineState, Option<i64>, String);

impl Node<'_> {
    /// Read before the engine is asked, so a change made after this read
    /// shows up as a newer `rev` and its observation is dropped.
    pub(super) async fn known_machines(&self) -> Result<Vec<Known>, String> {
        type Row = (i64, String, String, i64, Option<String>, bool, String, Option<i64>);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT m.id, m.name, m.state, m.rev, m.container_id, EXISTS (SELECT 1 FROM machine_gpus mg WHERE mg.machine_id = m.id), m.volume_name,
                CASE WHEN EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.state IN ('pending', 'scheduled', 'running')) THEN NULL
                     ELSE COALESCE((SELECT MAX(t.id) FROM tasks t WHERE t.machine_id = m.id), 0) END
         FROM machines m WHERE m.node_id = ? AND m.state NOT IN ('deleted', 'lost')",
        )
        .bind(self.id)
        .fetch_all(self.pool)
        .await
        .map_err(db)?;
        Ok(rows
            .into_iter()
            .filter_map(|(id, name, state, rev, container_id, holds_gpus, volume, settled_after_task)| {
                Some(Known {
                    id,
                    name,
                    state: state.parse().ok()?,
                    rev,
                    container_id,
                    holds_gpus,
                    volume,
                    settled_after_task,
                })
            })
            .collect())
    }

    /// GPUs left to the collector after this read may belong to a container
    /// the engine's list does not show yet: only these are freed this pass.
    pub(super) async fn gpus_left_before(&self) -> Result<HashSet<(i64, i64)>, String> {
        Ok(sqlx::query_as(
            "SELECT x.machine_id, x.gpu_id FROM gpus_left_to_collector x JOIN gpus g ON g.id = x.gpu_id WHERE g.node_id = ?",
        )
        .bind(self.id)
        .fetch_all(self.pool)
        .await
        .map_err(db)?
        .into_iter()
        .collect())
    }

    /// Bounded: a black-holed engine must not hold up the other nodes' pass.
    pub(super) async fn containers(&self) -> Result<Vec<ManagedContainer>, String> {
        tokio::time::timeout(LIST_TIMEOUT, self.exec.list_managed(self.instance))
            .await
            .map_err(bounded("the container list"))?
            .map_err(|e| e.to_string())
    }

    /// Bounded: a black-holed engine must not hold up the other nodes' pass.
    pub(super) async fn volumes(&self) -> Result<Vec<String>, String> {
        tokio::time::timeout(LIST_TIMEOUT, self.exec.list_managed_volumes(self.instance))
            .await
            .map_err(bounded("the volume list"))?
            .map_err(|e| e.to_string())
    }

    /// The engine, not the database, knows whether a container still runs;
    /// it also tells which machines outlived their tasks (`report.seen`).
    pub(super) async fn follow_containers(
        &self,
        known: &[Known],
        containers: &[ManagedContainer],
        report: &mut Report,
    ) -> Result<(), String> {
        let by_id: HashMap<&str, ContainerStatus> = containers.iter().map(|c| (c.id.as_str(), c.status)).collect();
        for m in known.iter().filter(|m| m.holds_gpus) {
            let Some(container_id) = &m.container_id else {
                continue;
            };
            let status = by_id.get(container_id.as_str());
            if let (Some(last_task), Some(ContainerStatus::Running | ContainerStatus::Exited { .. })) =
                (m.settled_after_task, status)
            {
                report.seen.insert(m.id, last_task);
            }
            let Some((next, exit_code, message)) = self.observation(status) else {
                continue;
            };
            if next == m.state {
                continue;
            }
            if let Some(change) = self.record_drift(m, next, exit_code, &message).await? {
                report.changes.push(change);
            }
        }
        Ok(())
    }

    /// `None` for a paused container: Gantry pauses one only while
    /// committing it (a snapshot, a reclaim), and the commit that ended
    /// since the list does not move the machine's `rev`.
    fn observation(&self, status: Option<&ContainerStatus>) -> Option<Observation> {
        Some(match status {
            Some(ContainerStatus::Paused) => return None,
            Some(ContainerStatus::Running) => (MachineState::Running, None, String::new()),
            Some(ContainerStatus::Exited { code }) => {
                (MachineState::Stopped, Some(*code), format!("container exited with code {code}"))
            }
            Some(other) => (MachineState::Failed, None, format!("container is {other:?}")),
            None => (MachineState::Failed, None, format!("container vanished from node {}", self.name)),
        })
    }

    /// Written only if the row is unchanged since it was read and no task
    /// works on it, so a delete or restart that finished meanwhile wins;
    /// the change it made, if any.
    async fn record_drift(
        &self,
        m: &Known,
        next: MachineState,
        exit_code: Option<i64>,
        message: &str,
    ) -> Result<Option<String>, String> {
        let mut tx = transitions::begin(self.pool).await.map_err(db)?;
        if !transitions::machine::observe_if_unchanged(&mut tx, m.id, m.rev, next, exit_code, message)
            .await
            .map_err(db)?
        {
            return Ok(None);
        }
        let change = format!(
            "machine {}: {} → {next}{}",
            m.name,
            m.state,
            if message.is_empty() { String::new() } else { format!(" ({message})") }
        );
        audit::record(&mut *tx, None, "reconcile.drift", &change).await.map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Some(change))
    }
}

/// An engine that does not answer in time is named as the node's failure.
fn bounded(what: &'static str) -> impl Fn(tokio::time::error::Elapsed) -> String {
    move |_| format!("engine did not answer {what} within {} s", LIST_TIMEOUT.as_secs())
}
