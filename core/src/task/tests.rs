use super::*;
use proptest::prelude::*;

#[test]
fn every_enum_round_trips_through_text() {
    for k in TaskKind::ALL {
        assert_eq!(k.as_str().parse::<TaskKind>(), Ok(*k));
        assert_eq!(k.to_string(), k.as_str());
    }
    for s in TaskState::ALL {
        assert_eq!(s.as_str().parse::<TaskState>(), Ok(*s));
    }
    for m in MachineState::ALL {
        assert_eq!(m.as_str().parse::<MachineState>(), Ok(*m));
    }
    assert_eq!(TaskKind::ALL.len(), 8);
    assert_eq!(TaskState::ALL.len(), 6);
    assert_eq!(MachineState::ALL.len(), 10);
}

#[test]
fn text_forms_are_lowercase_words() {
    let texts: Vec<&str> = TaskKind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(texts, ["create", "delete", "restart", "reinstall", "snapshot", "reclaim", "restore", "rebalance"]);
    let texts: Vec<&str> = TaskState::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(texts, ["pending", "scheduled", "running", "succeeded", "failed", "cancelled"]);
    let texts: Vec<&str> = MachineState::ALL.iter().map(|m| m.as_str()).collect();
    assert_eq!(
        texts,
        [
            "creating",
            "running",
            "stopped",
            "restarting",
            "reinstalling",
            "deleting",
            "deleted",
            "failed",
            "lost",
            "reclaimed"
        ]
    );
}

#[test]
fn unknown_text_is_refused_with_the_choices() {
    let err = "Running".parse::<TaskState>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown task state \"Running\" (expected one of: pending, scheduled, running, succeeded, failed, cancelled)"
    );
    let err = "format".parse::<TaskKind>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown task kind \"format\" (expected one of: create, delete, restart, reinstall, snapshot, reclaim, restore, rebalance)"
    );
    let err = "x".repeat(100).parse::<MachineState>().unwrap_err();
    assert_eq!(err.kind, "machine state");
    assert_eq!(err.value.len(), 32, "echoed input is bounded");
}

#[test]
fn transition_table_is_exactly_the_lifecycle() {
    use TaskState::*;
    let allowed = [
        (Pending, Scheduled),
        (Pending, Failed),
        (Pending, Cancelled),
        (Scheduled, Running),
        (Scheduled, Failed),
        (Scheduled, Cancelled),
        (Running, Succeeded),
        (Running, Failed),
        (Running, Scheduled),
    ];
    for from in TaskState::ALL {
        for to in TaskState::ALL {
            let expected = allowed.contains(&(*from, *to));
            assert_eq!(from.can_transition_to(*to), expected, "{from} -> {to}");
        }
    }
}

#[test]
fn terminal_states_go_nowhere() {
    for s in TaskState::ALL {
        let has_successor = TaskState::ALL.iter().any(|next| s.can_transition_to(*next));
        assert_eq!(s.is_terminal(), !has_successor, "{s}");
    }
    assert!(TaskState::Succeeded.is_terminal());
    assert!(TaskState::Failed.is_terminal());
    assert!(TaskState::Cancelled.is_terminal());
    assert!(!TaskState::Running.is_terminal());
}

#[test]
fn refused_transition_says_which() {
    let err = transition(TaskState::Running, TaskState::Pending).unwrap_err();
    assert_eq!(err.to_string(), "a running task cannot become pending");
    assert_eq!(err, TransitionError { from: TaskState::Running, to: TaskState::Pending });
    assert_eq!(
        transition(TaskState::Succeeded, TaskState::Running).unwrap_err().to_string(),
        "a succeeded task cannot become running"
    );
    assert_eq!(transition(TaskState::Pending, TaskState::Scheduled), Ok(TaskState::Scheduled));
}

#[test]
fn machine_shows_what_its_task_does() {
    assert_eq!(machine_state_for(TaskKind::Create), Some(MachineState::Creating));
    assert_eq!(machine_state_for(TaskKind::Delete), Some(MachineState::Deleting));
    assert_eq!(machine_state_for(TaskKind::Restart), Some(MachineState::Restarting));
    assert_eq!(machine_state_for(TaskKind::Reinstall), Some(MachineState::Reinstalling));
    assert_eq!(machine_state_for(TaskKind::Snapshot), None, "a snapshot leaves the machine as it is");
    assert_eq!(machine_state_for(TaskKind::Reclaim), None);
    assert_eq!(machine_state_for(TaskKind::Restore), Some(MachineState::Creating));
    assert_eq!(machine_state_for(TaskKind::Rebalance), Some(MachineState::Reinstalling));
}

#[test]
fn accepted_operations_table() {
    use MachineState as M;
    use TaskKind as K;
    let allowed = [
        (M::Running, K::Delete),
        (M::Running, K::Restart),
        (M::Running, K::Reinstall),
        (M::Running, K::Snapshot),
        (M::Stopped, K::Delete),
        (M::Stopped, K::Restart),
        (M::Stopped, K::Reinstall),
        (M::Stopped, K::Snapshot),
        (M::Failed, K::Delete),
        (M::Failed, K::Restart),
        (M::Failed, K::Reinstall),
        (M::Lost, K::Delete),
        (M::Creating, K::Delete),
        (M::Restarting, K::Delete),
        (M::Reinstalling, K::Delete),
        (M::Deleting, K::Delete),
        (M::Running, K::Reclaim),
        (M::Stopped, K::Reclaim),
        (M::Running, K::Rebalance),
        (M::Reclaimed, K::Restore),
        (M::Reclaimed, K::Delete),
    ];
    for state in MachineState::ALL {
        for kind in TaskKind::ALL {
            let expected = allowed.contains(&(*state, *kind));
            assert_eq!(accepts("box", *state, *kind).is_ok(), expected, "{state} accepts {kind}?");
        }
    }
}

#[test]
fn refused_operation_names_machine_state_and_operation() {
    assert_eq!(
        accepts("gpu-box", MachineState::Deleting, TaskKind::Restart),
        Err("machine gpu-box is deleting; restart is not possible".to_string())
    );
    assert_eq!(
        accepts("gpu-box", MachineState::Deleted, TaskKind::Delete),
        Err("machine gpu-box is deleted; delete is not possible".to_string())
    );
    assert_eq!(
        accepts("gpu-box", MachineState::Running, TaskKind::Create),
        Err("machine gpu-box is running; create is not possible".to_string())
    );
}

#[test]
fn no_operation_overlaps_a_running_one() {
    // The states a machine shows during an operation accept nothing new but
    // a delete (queued behind it), except snapshot's, which is the ordinary
    // running state.
    for kind in TaskKind::ALL {
        let Some(during) = machine_state_for(*kind) else { continue };
        for next in TaskKind::ALL {
            let ok = accepts("m", during, *next).is_ok();
            assert_eq!(ok, *next == TaskKind::Delete, "{during} accepts {next}?");
        }
    }
}

#[test]
fn a_delete_queues_behind_anything_and_stops_what_it_can() {
    for in_flight in TaskKind::ALL {
        assert!(may_queue_behind(TaskKind::Delete, *in_flight), "delete behind {in_flight}");
        for kind in [TaskKind::Restart, TaskKind::Reinstall] {
            assert_eq!(
                may_queue_behind(kind, *in_flight),
                *in_flight == TaskKind::Snapshot,
                "{kind} behind {in_flight}"
            );
        }
        for kind in [TaskKind::Snapshot, TaskKind::Reclaim, TaskKind::Rebalance, TaskKind::Restore, TaskKind::Create] {
            assert!(!may_queue_behind(kind, *in_flight), "{kind} behind {in_flight}");
        }
    }
    // What a delete stops: whatever leaves nothing half-made when it fails.
    let stopped: Vec<_> = TaskKind::ALL.iter().copied().filter(|k| stopped_by_delete(*k)).collect();
    assert_eq!(
        stopped,
        [TaskKind::Create, TaskKind::Restart, TaskKind::Reinstall, TaskKind::Snapshot, TaskKind::Restore]
    );
}

#[test]
fn only_tasks_that_have_not_started_can_be_cancelled() {
    for s in TaskState::ALL {
        let ok = s.cancellable().is_ok();
        assert_eq!(ok, s.can_transition_to(TaskState::Cancelled), "{s}");
    }
    assert!(TaskState::Running.cancellable().unwrap_err().contains("cannot be cancelled"));
    assert_eq!(TaskState::Succeeded.cancellable().unwrap_err(), "the task has already succeeded");
}

#[test]
fn backoff_doubles_then_caps() {
    let delays: Vec<i64> = (1..=11).map(backoff_secs).collect();
    assert_eq!(delays, [2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
    assert_eq!(backoff_secs(0), 2);
    assert_eq!(backoff_secs(u32::MAX), 300);
}

proptest! {
    #[test]
    fn backoff_is_positive_monotonic_and_bounded(a in any::<u32>()) {
        let d = backoff_secs(a);
        prop_assert!((2..=300).contains(&d));
        prop_assert!(backoff_secs(a.saturating_add(1)) >= d);
    }

    #[test]
    fn transition_agrees_with_the_table(from in 0usize..6, to in 0usize..6) {
        let (from, to) = (TaskState::ALL[from], TaskState::ALL[to]);
        match transition(from, to) {
            Ok(next) => {
                prop_assert!(from.can_transition_to(to));
                prop_assert_eq!(next, to);
            }
            Err(e) => {
                prop_assert!(!from.can_transition_to(to));
                prop_assert_eq!(e, TransitionError { from, to });
            }
        }
    }

    /// Any walk along allowed edges that reaches a terminal state stays
    /// there, and never passes back through pending.
    #[test]
    fn walks_never_leave_terminal_or_return_to_pending(choices in prop::collection::vec(0usize..6, 0..40)) {
        let mut state = TaskState::Pending;
        for c in choices {
            let next = TaskState::ALL[c];
            match transition(state, next) {
                Ok(s) => {
                    prop_assert!(!state.is_terminal());
                    prop_assert_ne!(s, TaskState::Pending);
                    state = s;
                }
                Err(_) => prop_assert!(!state.can_transition_to(next)),
            }
        }
    }
}
