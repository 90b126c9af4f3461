//! Compute tasks: the submission form's parsing and the small pure
//! helpers their pages render with (pages render the platform's
//! `ComputeTaskView` directly).

mod parse;

pub use parse::*;

use gantry_core::task::TaskState;

/// "90 s", "10 min", "2 h", "1 h 30 min".
pub fn duration_label(secs: i64) -> String {
    match secs {
        s if s % 60 != 0 || s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s if s % 3600 == 0 => format!("{} h", s / 3600),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// How to show a stored argv: a `/bin/sh -c` script as the script, else
/// one argument per line (as it was typed).
pub fn command_text(argv: &[String]) -> (bool, String) {
    match argv {
        [sh, c, script] if sh == "/bin/sh" && c == "-c" => (true, script.clone()),
        _ => (false, argv.join("\n")),
    }
}

/// Whether the requester (or an admin) may still cancel: it has not ended.
pub fn compute_cancellable(state: TaskState) -> bool {
    !state.is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration_label(45), "45 s");
        assert_eq!(duration_label(90), "90 s");
        assert_eq!(duration_label(600), "10 min");
        assert_eq!(duration_label(7200), "2 h");
        assert_eq!(duration_label(5400), "1 h 30 min");
    }

    #[test]
    fn commands_show_as_typed() {
        let argv = vec!["echo".to_string(), "hi there".to_string()];
        assert_eq!(command_text(&argv), (false, "echo\nhi there".to_string()));
        let sh = vec!["/bin/sh".to_string(), "-c".to_string(), "echo a | wc -c".to_string()];
        assert_eq!(command_text(&sh), (true, "echo a | wc -c".to_string()));
        assert!(compute_cancellable(TaskState::Running) && compute_cancellable(TaskState::Pending));
        assert!(!compute_cancellable(TaskState::Succeeded) && !compute_cancellable(TaskState::Cancelled));
    }
}
