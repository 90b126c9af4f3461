//! The life of a dev machine: which state may follow which, and the rule
//! that ties GPUs to containers. The platform's transition module applies
//! these as compare-and-set writes; nothing else writes a machine's state.
//!
//! The invariant: **a machine holds GPUs ⇔ it may have a container pinned
//! to them.** GPUs are given back only together with removing the container
//! (or marking it for the collector when the engine is unreachable), and no
//! container is ever started for a machine that holds fewer GPUs than it
//! asks for.

use crate::task::MachineState;
use thiserror::Error;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
#[error("a {from} machine cannot become {to}")]
pub struct MachineTransitionError {
    pub from: MachineState,
    pub to: MachineState,
}

/// Whether a machine in `from` may be written as `to`.
pub fn can_become(from: MachineState, to: MachineState) -> bool {
    use MachineState::*;
    if from == to {
        // Rewriting the same state (new message, exit code) is an update,
        // not a transition; only the final states stay final.
        return !matches!(from, Deleted);
    }
    match from {
        // A cancelled or refused create closes the record at once — or,
        // when its container already exists, is deleted through the engine.
        // A failed restore goes back to reclaimed (and may be tried again).
        Creating => matches!(to, Running | Stopped | Failed | Lost | Deleting | Deleted | Reclaimed),
        // Only a machine that ran can be idle long enough to be reclaimed.
        Running | Stopped => {
            matches!(to, Running | Stopped | Failed | Restarting | Reinstalling | Deleting | Lost | Reclaimed)
        }
        // A restore whose container did not stay up is seen `failed`
        // before it gives up; giving up must still put it back to
        // reclaimed (GPUs returned, snapshot kept), or it holds them for ever.
        Failed => matches!(to, Running | Stopped | Failed | Restarting | Reinstalling | Deleting | Lost | Reclaimed),
        // Restore starts it again (as a create would); delete closes it.
        Reclaimed => matches!(to, Creating | Deleting | Deleted | Lost),
        Restarting | Reinstalling => matches!(to, Running | Stopped | Failed | Lost),
        Deleting => matches!(to, Deleted | Failed | Lost),
        Lost => matches!(to, Deleting | Deleted),
        Deleted => false,
    }
}

pub fn transition(from: MachineState, to: MachineState) -> Result<MachineState, MachineTransitionError> {
    if can_become(from, to) {
        Ok(to)
    } else {
        Err(MachineTransitionError { from, to })
    }
}

/// Whether a container may be started (create, restart, reinstall) for a
/// machine that asks for `needed` GPUs and holds `held`. The refusal tells
/// the owner what is still possible.
pub fn may_start(name: &str, held: u32, needed: u32) -> Result<(), String> {
    if held >= needed && needed > 0 {
        return Ok(());
    }
    Err(format!(
        "machine {name} holds {held} of the {needed} GPU(s) it needs (they were given back when it failed or its node was lost); \
         it cannot be started again: delete it, or create a new machine"
    ))
}

/// States in which the machine's row must hold no GPUs.
pub fn holds_nothing(state: MachineState) -> bool {
    matches!(state, MachineState::Deleted | MachineState::Lost | MachineState::Reclaimed)
}

/// Whether a machine may have a container on its node, so that its CPU and
/// memory count there: by the invariant, exactly when it holds GPUs. A
/// failed create gave them back with its container; a failed restart or
/// reinstall keeps them, and its container with them.
pub fn may_have_container(state: MachineState, holds_gpus: bool) -> bool {
    holds_gpus && !holds_nothing(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use MachineState::*;

    #[test]
    fn deleted_is_final_and_lost_only_closes() {
        for to in MachineState::ALL {
            assert!(!can_become(Deleted, *to), "deleted -> {to}");
            assert_eq!(can_become(Lost, *to), matches!(to, Deleting | Deleted | Lost), "lost -> {to}");
        }
    }

    #[test]
    fn operations_start_only_from_settled_states() {
        for from in MachineState::ALL {
            for to in [Restarting, Reinstalling, Deleting] {
                let closes = matches!(from, Lost | Reclaimed | Creating) && to == Deleting;
                let settled = matches!(from, Running | Stopped | Failed) || closes || *from == to;
                assert_eq!(can_become(*from, to), settled, "{from} -> {to}");
            }
        }
    }

    #[test]
    fn every_state_except_deleted_can_be_lost_or_reach_deleted() {
        for from in MachineState::ALL {
            if *from == Deleted {
                continue;
            }
            let reaches = can_become(*from, Deleted) || can_become(*from, Deleting) || can_become(*from, Lost);
            assert!(reaches, "{from} has no way out");
        }
    }

    #[test]
    fn only_a_machine_that_ran_is_reclaimed_and_reclaimed_restores_as_a_create() {
        for from in MachineState::ALL {
            // Creating and failed: a restore that failed, on its way back.
            let ok = matches!(from, Running | Stopped | Reclaimed | Creating | Failed);
            assert_eq!(can_become(*from, Reclaimed), ok, "{from} -> reclaimed");
        }
        assert!(can_become(Reclaimed, Creating));
        assert!(!can_become(Reclaimed, Running), "a restore goes through creating");
        assert!(holds_nothing(Reclaimed));
    }

    #[test]
    fn refused_transition_names_both_states() {
        assert_eq!(transition(Deleted, Running).unwrap_err().to_string(), "a deleted machine cannot become running");
        assert_eq!(transition(Running, Restarting), Ok(Restarting));
    }

    #[test]
    fn only_a_machine_holding_gpus_may_have_a_container() {
        for state in MachineState::ALL {
            assert!(!may_have_container(*state, false), "{state} without GPUs");
            assert_eq!(may_have_container(*state, true), !holds_nothing(*state), "{state} with GPUs");
        }
        assert!(may_have_container(Failed, true), "a failed restart keeps its container");
    }

    #[test]
    fn start_needs_every_gpu() {
        assert!(may_start("m", 2, 2).is_ok());
        let refusal = may_start("m", 0, 2).unwrap_err();
        assert!(refusal.contains("holds 0 of the 2 GPU(s)") && refusal.contains("delete it"), "{refusal}");
        assert!(may_start("m", 1, 2).is_err());
        assert!(may_start("m", 0, 0).is_err(), "a machine always needs a GPU");
    }
}
