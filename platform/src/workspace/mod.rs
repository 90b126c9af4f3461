//! Working inside a dev machine: who may open its terminal, read its logs
//! and move files in and out of its volume, the paths that are allowed,
//! the tar framing of the Docker archive API, and the terminal sessions
//! (audit, admin close, idle close).
//!
//! **Who may connect.** The machine's owner, or an administrator. Members of
//! the owner's group may see the machine (state, tasks) but not get inside
//! it: a terminal acts as the owner inside their container and the volume
//! holds the owner's data. The same rule holds for the terminal, the logs
//! and the files, on the server (the WebSocket upgrade and every route) and
//! in the UI (which asks the server). Another group's machine is "not found".

pub mod paths;
pub mod sessions;
pub mod tar;

use crate::{accounts::User, db::Pool, machines::machine_detail, PlatformError};
use gantry_core::task::MachineState;

/// Limits of the workspace routes, set by the server's configuration and
/// read by the pages (e.g. to show the upload limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest upload, in bytes.
    pub upload_max_bytes: u64,
    /// A terminal with no input and no output for this long is closed.
    pub idle_secs: u64,
    /// Open terminals one server process accepts.
    pub max_terminals: usize,
    /// Of those, open terminals one user may hold.
    pub max_terminals_per_user: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { upload_max_bytes: 1024 * 1024 * 1024, idle_secs: 1800, max_terminals: 256, max_terminals_per_user: 8 }
    }
}

/// Lines of log the machine page shows without JavaScript (and the first
/// lines of a followed log).
pub const LOG_TAIL_LINES: u64 = 200;

/// A machine's state as a terminal sees it: the machine's own, or
/// `Reclaiming` while an idle reclaim of it is queued or running. The machine
/// row stays `running` then (nothing changes for the dashboard until the GPUs
/// are returned), but its container is about to be committed and removed, so
/// whatever is typed meanwhile outside `/data` is lost. A terminal does not
/// open then, and an open one closes saying why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TerminalState {
    Machine(MachineState),
    Reclaiming,
}

/// The word SQL writes for [`TerminalState::Reclaiming`].
const RECLAIMING: &str = "reclaiming";

impl TerminalState {
    pub const RUNNING: TerminalState = TerminalState::Machine(MachineState::Running);
}

impl std::str::FromStr for TerminalState {
    type Err = gantry_core::task::UnknownVariant;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == RECLAIMING {
            Ok(TerminalState::Reclaiming)
        } else {
            s.parse().map(TerminalState::Machine)
        }
    }
}

impl std::fmt::Display for TerminalState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TerminalState::Machine(state) => state.fmt(f),
            TerminalState::Reclaiming => f.write_str(RECLAIMING),
        }
    }
}

/// Whether machine `m` (the alias) has a reclaim queued or running, in SQL.
pub(crate) const RECLAIMING_SQL: &str =
    "EXISTS (SELECT 1 FROM tasks t WHERE t.machine_id = m.id AND t.kind = 'reclaim' AND t.state IN ('scheduled', 'running'))";

/// The SQL of a machine `m`'s [`TerminalState`] (a word it parses from).
pub(crate) fn terminal_state_sql() -> String {
    format!("CASE WHEN {RECLAIMING_SQL} THEN '{RECLAIMING}' ELSE m.state END")
}

/// The machine's state as a terminal sees it; `None` when there is no
/// such machine.
pub async fn terminal_state(pool: &Pool, machine_id: i64) -> Result<Option<TerminalState>, PlatformError> {
    let word: Option<String> =
        sqlx::query_scalar(&format!("SELECT {} FROM machines m WHERE m.id = ?", terminal_state_sql()))
            .bind(machine_id)
            .fetch_optional(pool)
            .await?;
    word.map(|w| w.parse().map_err(|e: gantry_core::task::UnknownVariant| PlatformError::Internal(e.to_string())))
        .transpose()
}

/// The machine a workspace request is about, as far as the rules need it.
#[derive(Debug, Clone)]
pub struct Target {
    pub machine_id: i64,
    pub name: String,
    pub owner_id: i64,
    pub owner: String,
    pub state: TerminalState,
    pub container_id: Option<String>,
    pub node_id: Option<i64>,
}

/// Why a workspace request is refused; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    /// 404: no such machine, or another group's.
    #[error("machine not found")]
    NotFound,
    /// 403: a group member who is not the owner.
    #[error("only the owner of machine {0} or an administrator may open its terminal, logs and files")]
    NotOwner(String),
    /// 409: the machine is not in a state that allows this.
    #[error("{0}")]
    State(String),
}

/// Loads the machine for `user`: visibility (group isolation) first, then
/// the owner-or-admin rule.
pub async fn target(pool: &Pool, user: &User, machine_id: i64) -> Result<Result<Target, Refusal>, PlatformError> {
    let view = match machine_detail(pool, user, machine_id).await {
        Ok(v) => v,
        Err(PlatformError::NotFound(_)) => return Ok(Err(Refusal::NotFound)),
        Err(e) => return Err(e),
    };
    let (owner_id, node_id, reclaiming): (i64, Option<i64>, bool) =
        sqlx::query_as(&format!("SELECT owner_id, node_id, {RECLAIMING_SQL} FROM machines m WHERE id = ?"))
            .bind(machine_id)
            .fetch_one(pool)
            .await?;
    let target = Target {
        machine_id,
        name: view.name,
        owner_id,
        owner: view.owner,
        state: if reclaiming { TerminalState::Reclaiming } else { TerminalState::Machine(view.state) },
        container_id: view.container_id,
        node_id,
    };
    if !may_enter(user, &target) {
        return Ok(Err(Refusal::NotOwner(target.name)));
    }
    Ok(Ok(target))
}

/// The rule itself: owner or admin.
pub fn may_enter(user: &User, target: &Target) -> bool {
    user.acts_for(target.owner_id)
}

impl Target {
    /// A terminal needs a running container.
    pub fn require_running(&self) -> Result<(&str, i64), Refusal> {
        match (self.state, self.container_id.as_deref(), self.node_id) {
            (TerminalState::RUNNING, Some(c), Some(n)) => Ok((c, n)),
            (TerminalState::RUNNING, _, _) => Err(Refusal::State(format!(
                "machine {} has no container yet",
                self.name
            ))),
            (TerminalState::Reclaiming, _, _) => Err(Refusal::State(format!(
                "machine {} is being reclaimed (idle): its container is saved and removed, so a terminal would lose what it does; \
                 restore the machine from its page once that is done",
                self.name
            ))),
            (state, _, _) => Err(Refusal::State(format!(
                "machine {} is {state}; the terminal opens when it is running",
                self.name
            ))),
        }
    }

    /// Logs and files need a container, running or stopped (the archive
    /// and log APIs work on a stopped container too).
    pub fn require_container(&self) -> Result<(&str, i64), Refusal> {
        use MachineState as M;
        let live = matches!(self.state, TerminalState::Machine(M::Running | M::Stopped | M::Failed | M::Restarting));
        match (live, self.container_id.as_deref(), self.node_id) {
            (true, Some(c), Some(n)) => Ok((c, n)),
            _ => Err(Refusal::State(format!(
                "machine {} is {} and has no container to read from",
                self.name, self.state
            ))),
        }
    }
}

/// Why a terminal closed, for the browser (the server turns the cause into
/// a WebSocket close code), the sessions table and the audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloseReason {
    pub cause: CloseCause,
    pub text: String,
}

/// What ended a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseCause {
    /// The shell exited, or the browser closed the connection.
    Normal,
    /// The server is shutting down.
    ServerStopping,
    /// Something failed on the way.
    Error,
    /// The machine stopped or is restarting: reconnect when it runs again.
    MachineStopped,
    /// The machine is being deleted or is gone.
    MachineDeleted,
    /// An administrator closed the session.
    ClosedByAdmin,
    /// Nothing was typed or printed for the idle limit.
    Idle,
    /// The account was disabled, demoted or had its password reset: its
    /// sessions ended, its terminals with them.
    AccountChanged,
    /// The browser session that opened it ended: signed out (in any tab),
    /// or unused for longer than the sign-in limit.
    SessionEnded,
}

impl CloseReason {
    pub fn new(cause: CloseCause, text: impl Into<String>) -> Self {
        CloseReason { cause, text: text.into() }
    }

    /// The reason for a machine that left `running`.
    pub fn for_state(name: &str, state: TerminalState) -> CloseReason {
        use MachineState as M;
        match state {
            TerminalState::Machine(M::Deleting | M::Deleted) => {
                CloseReason::new(CloseCause::MachineDeleted, format!("machine {name} was deleted"))
            }
            TerminalState::Machine(M::Restarting) => {
                CloseReason::new(CloseCause::MachineStopped, format!("machine {name} is restarting"))
            }
            TerminalState::Machine(M::Reinstalling) => {
                CloseReason::new(CloseCause::MachineStopped, format!("machine {name} is being reinstalled"))
            }
            TerminalState::Reclaiming => CloseReason::new(
                CloseCause::MachineStopped,
                format!("machine {name} is being reclaimed (idle); restore it from its page"),
            ),
            TerminalState::Machine(M::Lost) => {
                CloseReason::new(CloseCause::MachineDeleted, format!("machine {name}'s node was lost"))
            }
            other => CloseReason::new(CloseCause::MachineStopped, format!("machine {name} is {other}")),
        }
    }
}
