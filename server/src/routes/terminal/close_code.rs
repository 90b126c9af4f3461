//! The WebSocket close codes the terminal page understands (4000–4999 are
//! for applications): what `workspace.js` reads to say why a terminal
//! closed and whether to reconnect.

use gantry_platform::workspace::CloseCause;

/// The shell exited, or the browser closed.
pub const NORMAL: u16 = 1000;
/// The server is shutting down.
pub const GOING_AWAY: u16 = 1001;
pub const ERROR: u16 = 1011;
/// The machine stopped or is restarting: reconnect when it runs again.
pub const MACHINE_STOPPED: u16 = 4001;
/// The machine is being deleted or is gone.
pub const MACHINE_DELETED: u16 = 4002;
/// An administrator closed the session.
pub const CLOSED_BY_ADMIN: u16 = 4003;
/// Nothing was typed or printed for the idle limit.
pub const IDLE: u16 = 4004;
/// The account was disabled, demoted or had its password reset.
pub const ACCOUNT_CHANGED: u16 = 4005;
/// The browser session that opened it ended.
pub const SESSION_ENDED: u16 = 4006;

/// The close code of a cause.
pub fn of(cause: CloseCause) -> u16 {
    match cause {
        CloseCause::Normal => NORMAL,
        CloseCause::ServerStopping => GOING_AWAY,
        CloseCause::Error => ERROR,
        CloseCause::MachineStopped => MACHINE_STOPPED,
        CloseCause::MachineDeleted => MACHINE_DELETED,
        CloseCause::ClosedByAdmin => CLOSED_BY_ADMIN,
        CloseCause::Idle => IDLE,
        CloseCause::AccountChanged => ACCOUNT_CHANGED,
        CloseCause::SessionEnded => SESSION_ENDED,
    }
}
