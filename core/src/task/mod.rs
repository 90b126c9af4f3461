//! The life of an operation task (create, delete, restart, reinstall,
//! snapshot) and which operations a dev machine accepts in each state. The
//! server and the dispatcher both go through these rules, so a task row can
//! never jump states whichever process writes it.

use thiserror::Error;

/// A text form of a state that was not one of the known names, e.g. from an
/// old database row or a hand-written URL.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("unknown {kind} \"{value}\" (expected one of: {expected})")]
pub struct UnknownVariant {
    pub kind: &'static str,
    pub value: String,
    pub expected: String,
}

impl UnknownVariant {
    pub fn new<'a>(kind: &'static str, value: &str, expected: impl IntoIterator<Item = &'a str>) -> Self {
        // The value is echoed back to a person; keep an abusive input short.
        let value = value.chars().take(32).collect();
        let expected = expected.into_iter().collect::<Vec<_>>().join(", ");
        UnknownVariant { kind, value, expected }
    }
}

/// An enum stored and shown as one lowercase word: the database, the JSON API
/// and the portal must all spell it the same, so `as_str`, `Display`,
/// `FromStr` and serde are generated from one table.
macro_rules! string_enum {
    ($(#[$meta:meta])* $name:ident, $what:literal {
        $($(#[$vmeta:meta])* $variant:ident => $text:literal),+ $(,)?
    }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $name {
            $($(#[$vmeta])* #[serde(rename = $text)] $variant),+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::task::UnknownVariant;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err($crate::task::UnknownVariant::new(
                        $what,
                        other,
                        Self::ALL.iter().map(|v| v.as_str()),
                    )),
                }
            }
        }

        /// For `#[sqlx(try_from = "String")]`: a view reads the stored word
        /// as this enum, and a word it does not know fails the read.
        impl TryFrom<String> for $name {
            type Error = $crate::task::UnknownVariant;

            fn try_from(s: String) -> Result<Self, Self::Error> {
                s.parse()
            }
        }
    };
}
pub(crate) use string_enum;

string_enum! {
    /// What a task does to its dev machine.
    TaskKind, "task kind" {
        Create => "create",
        Delete => "delete",
        Restart => "restart",
        Reinstall => "reinstall",
        Snapshot => "snapshot",
        /// Idle for too long, or its owner's Stop: snapshot, remove the
        /// container, give the GPUs back.
        Reclaim => "reclaim",
        /// A reclaimed (or shut-down) machine back on GPUs, from its
        /// reclaim snapshot: Restore, or Start.
        Restore => "restore",
        /// Re-placed on cooler GPUs of its node (new container, same volume).
        Rebalance => "rebalance",
    }
}

string_enum! {
    TaskState, "task state" {
        /// Accepted, waiting for an allocation and a dispatcher.
        Pending => "pending",
        /// Handed to a node; waiting for (or backing off from) its engine.
        Scheduled => "scheduled",
        Running => "running",
        Succeeded => "succeeded",
        Failed => "failed",
        Cancelled => "cancelled",
    }
}

impl TaskState {
    /// Finished tasks are history: nothing may reopen them, so the audit trail
    /// and the quota refunds made on finishing happen exactly once.
    pub fn is_terminal(self) -> bool {
        matches!(self, TaskState::Succeeded | TaskState::Failed | TaskState::Cancelled)
    }

    pub fn can_transition_to(self, next: TaskState) -> bool {
        use TaskState::*;
        matches!(
            (self, next),
            (Pending, Scheduled | Failed | Cancelled)
                | (Scheduled, Running | Failed | Cancelled)
                // Back to scheduled: the node's engine was unavailable and the
                // task waits out a backoff before the next attempt. A running
                // task is not cancellable: the engine may be half-way through.
                | (Running, Succeeded | Failed | Scheduled)
        )
    }

    /// Whether a requester (or an admin) may cancel a task in this state;
    /// the refusal says why in words a person understands.
    pub fn cancellable(self) -> Result<(), String> {
        match self {
            TaskState::Pending | TaskState::Scheduled => Ok(()),
            TaskState::Running => {
                Err("the task is running: its node may be half-way through it, so it cannot be cancelled; \
                 wait for it to finish (a machine can be deleted afterwards)"
                    .into())
            }
            done => Err(format!(
                "the task has already {}",
                match done {
                    TaskState::Succeeded => "succeeded",
                    TaskState::Failed => "failed",
                    _ => "been cancelled",
                }
            )),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("a {from} task cannot become {to}")]
pub struct TransitionError {
    pub from: TaskState,
    pub to: TaskState,
}

pub fn transition(from: TaskState, to: TaskState) -> Result<TaskState, TransitionError> {
    if from.can_transition_to(to) {
        Ok(to)
    } else {
        Err(TransitionError { from, to })
    }
}

string_enum! {
    /// What the portal shows for a dev machine.
    MachineState, "machine state" {
        Creating => "creating",
        Running => "running",
        Stopped => "stopped",
        Restarting => "restarting",
        Reinstalling => "reinstalling",
        Deleting => "deleting",
        Deleted => "deleted",
        /// The last operation failed or the container died; delete, restart
        /// or reinstall are the ways out (restart and reinstall only while
        /// the machine still holds its GPUs).
        Failed => "failed",
        /// Its node was marked lost: GPUs released and quota refunded; the
        /// container and volume are collected if the node's engine returns.
        /// Only delete (which just closes the record) is possible.
        Lost => "lost",
        /// Idle for too long, or stopped by its owner (then shown as "shut
        /// down"): snapshotted, container removed, GPUs given back. Its
        /// name and volume stay; restore (Start) brings it back.
        Reclaimed => "reclaimed",
    }
}

string_enum! {
    /// What a machine is for.
    Workload, "workload" {
        /// A person's dev machine, kept until they delete it.
        Dev => "dev",
        /// A compute task's machine: it ends with its task.
        Job => "job",
    }
}

impl MachineState {
    /// Between states: an operation is in flight, so pages keep polling.
    pub fn is_busy(self) -> bool {
        matches!(
            self,
            MachineState::Creating | MachineState::Restarting | MachineState::Reinstalling | MachineState::Deleting
        )
    }
}

/// The state a machine shows while a task of `kind` runs on it; `None`:
/// it keeps the state it has. A snapshot (also the one a reclaim takes)
/// commits the container without stopping it, so the machine stays usable.
pub fn machine_state_for(kind: TaskKind) -> Option<MachineState> {
    match kind {
        TaskKind::Create | TaskKind::Restore => Some(MachineState::Creating),
        TaskKind::Delete => Some(MachineState::Deleting),
        TaskKind::Restart => Some(MachineState::Restarting),
        TaskKind::Reinstall | TaskKind::Rebalance => Some(MachineState::Reinstalling),
        TaskKind::Snapshot | TaskKind::Reclaim => None,
    }
}

/// Whether machine `name`, now in `state`, accepts a new task of `kind`.
/// Transitional states accept nothing but a delete, so two operations never
/// race on one container: a delete asked for during another operation is
/// queued behind it, and that operation stops at its next step boundary
/// ([`stopped_by_delete`]). Create is never accepted because it is only a
/// new machine's first task, made together with the machine row.
pub fn accepts(name: &str, state: MachineState, kind: TaskKind) -> Result<(), String> {
    use MachineState as M;
    let ok = match kind {
        TaskKind::Create => false,
        // A user who notices a mistake right after Create, or a script that
        // creates and deletes at once, must not have to wait and come back.
        // A lost machine has no node to act on; deleting closes its record.
        TaskKind::Delete => state != M::Deleted,
        TaskKind::Restart | TaskKind::Reinstall => matches!(state, M::Running | M::Stopped | M::Failed),
        // A failed machine's container may be gone; there is nothing to commit.
        TaskKind::Snapshot | TaskKind::Reclaim => matches!(state, M::Running | M::Stopped),
        TaskKind::Restore => state == M::Reclaimed,
        // A new container on other GPUs: only for a machine that runs.
        TaskKind::Rebalance => state == M::Running,
    };
    if ok {
        Ok(())
    } else {
        Err(format!("machine {name} is {state}; {kind} is not possible"))
    }
}

/// Whether a task of `kind` in flight gives way to a delete queued behind
/// it, at its next step boundary: it fails saying so, which removes what a
/// create or restore made and gives their GPUs back, then the delete runs.
/// A reclaim or a move runs to its end: each leaves the machine whole
/// whatever the step (reclaimed, or on its new GPUs), and the delete then
/// takes that.
pub fn stopped_by_delete(kind: TaskKind) -> bool {
    matches!(kind, TaskKind::Create | TaskKind::Restore | TaskKind::Restart | TaskKind::Reinstall | TaskKind::Snapshot)
}

/// Whether a task of `kind` may be queued behind one of `in_flight` on the
/// same machine (otherwise the machine is busy). A delete queues behind
/// anything; a restart or reinstall behind a snapshot, which leaves the
/// machine running as it was.
pub fn may_queue_behind(kind: TaskKind, in_flight: TaskKind) -> bool {
    match kind {
        TaskKind::Delete => true,
        TaskKind::Restart | TaskKind::Reinstall => in_flight == TaskKind::Snapshot,
        _ => false,
    }
}

/// Seconds to wait before retry `attempt` (1 for the first retry): doubling
/// from 2 s, so a briefly restarting engine is retried quickly, capped at five
/// minutes so a long outage is still noticed soon after it ends.
pub fn backoff_secs(attempt: u32) -> i64 {
    const CAP: i64 = 300;
    let exponent = attempt.max(1);
    if exponent >= 9 {
        return CAP; // 2^9 = 512 is already past the cap; avoids overflow too.
    }
    (1i64 << exponent).min(CAP)
}

#[cfg(test)]
mod tests;
