//! The submission form's text fields to typed values, with messages that
//! say what to type. The platform checks everything again; these exist so
//! a mistake is named in the form's own words.

use crate::model::machines::parse_whole;

/// What runs: an argv (one argument per line in the form) or a script for
/// `/bin/sh -c` when "shell" is ticked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandInput {
    Argv(Vec<String>),
    Shell(String),
}

/// Defaults an empty field means.
pub const DEFAULT_TASK_NAME: &str = "task";
pub const DEFAULT_COMPUTE_CPU_MILLIS: i64 = 1000;
pub const DEFAULT_COMPUTE_MEMORY_MB: i64 = 1024;
pub const DEFAULT_TIME_LIMIT_MIN: i64 = 60;
/// The longest time limit, a week (the platform's `TIME_LIMIT_MAX`).
pub const TIME_LIMIT_MAX_SECS: i64 = 7 * 24 * 3600;
/// The most GPUs one task may ask for anywhere (a group's quota is lower).
pub const COMPUTE_GPUS_MAX: i64 = 64;

/// An empty name becomes [`DEFAULT_TASK_NAME`]; otherwise the usual name rule.
pub fn parse_task_name(value: &str) -> Result<String, String> {
    match value.trim() {
        "" => Ok(DEFAULT_TASK_NAME.to_string()),
        n => gantry_core::validate::name("task name", n).map(|()| n.to_string()).map_err(|e| e.to_string()),
    }
}

/// Each non-blank line is one argument (spaces at its ends dropped); with
/// `shell` the whole text is one script. A first line with spaces in argv
/// mode is refused: it would look for a program called "echo hello".
pub fn parse_command(text: &str, shell: bool) -> Result<CommandInput, String> {
    let text = text.replace("\r\n", "\n");
    if shell {
        let script = text.trim();
        if script.is_empty() {
            return Err("type the shell script to run".to_string());
        }
        return Ok(CommandInput::Shell(script.to_string()));
    }
    let argv: Vec<String> = text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string).collect();
    let Some(program) = argv.first() else {
        return Err("type the command: the program on the first line, then one argument per line".to_string());
    };
    if program.contains(char::is_whitespace) {
        return Err(format!(
            "\"{}\" would run a program of that whole name: put each argument on its own line, or tick \"shell\"",
            program.chars().take(40).collect::<String>()
        ));
    }
    Ok(CommandInput::Argv(argv))
}

/// A whole number of GPUs, 1 to [`COMPUTE_GPUS_MAX`].
pub fn parse_gpu_count(value: &str) -> Result<u32, String> {
    let n = parse_whole("GPU count", value)?;
    gantry_core::validate::in_range("GPU count", n, 1, COMPUTE_GPUS_MAX).map_err(|e| e.to_string())?;
    Ok(n as u32)
}

/// The time limit in seconds from a number and its unit ("s" or "min");
/// an empty number means [`DEFAULT_TIME_LIMIT_MIN`] minutes.
pub fn parse_time_limit(value: &str, unit: &str) -> Result<i64, String> {
    let per = match unit.trim() {
        "s" => 1,
        "" | "min" => 60,
        other => {
            return Err(format!(
                "unknown time unit \"{}\" (expected s or min)",
                other.chars().take(16).collect::<String>()
            ))
        }
    };
    let n = match value.trim() {
        "" => return Ok(DEFAULT_TIME_LIMIT_MIN * 60),
        v => parse_whole("time limit", v)?,
    };
    match n.checked_mul(per) {
        Some(secs) if (1..=TIME_LIMIT_MAX_SECS).contains(&secs) => Ok(secs),
        _ => Err("time limit must be between 1 second and 7 days".to_string()),
    }
}

/// An optional GPU model select: empty means any model.
pub fn parse_gpu_model(value: &str) -> Option<String> {
    Some(value.trim()).filter(|m| !m.is_empty()).map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_is_one_argument_per_line() {
        let got = parse_command("echo\r\nhello-from-gantry\n\n  two words  \n", false).unwrap();
        assert_eq!(got, CommandInput::Argv(vec!["echo".into(), "hello-from-gantry".into(), "two words".into()]));
        assert_eq!(
            parse_command("  \n", false).unwrap_err(),
            "type the command: the program on the first line, then one argument per line"
        );
        assert_eq!(
            parse_command("echo hello", false).unwrap_err(),
            "\"echo hello\" would run a program of that whole name: put each argument on its own line, or tick \"shell\""
        );
    }

    #[test]
    fn shell_keeps_the_script_whole() {
        assert_eq!(
            parse_command(" echo a | wc -c\r\necho b ", true),
            Ok(CommandInput::Shell("echo a | wc -c\necho b".into()))
        );
        assert_eq!(parse_command("echo hello", true), Ok(CommandInput::Shell("echo hello".into())));
        assert_eq!(parse_command("   ", true).unwrap_err(), "type the shell script to run");
    }

    #[test]
    fn time_limits_in_seconds_or_minutes() {
        assert_eq!(parse_time_limit("90", "s"), Ok(90));
        assert_eq!(parse_time_limit(" 10 ", "min"), Ok(600));
        assert_eq!(parse_time_limit("", "s"), Ok(3600));
        assert_eq!(parse_time_limit("5", ""), Ok(300));
        assert_eq!(parse_time_limit("ten", "min").unwrap_err(), "time limit must be a whole number");
        assert_eq!(parse_time_limit("1.5", "min").unwrap_err(), "time limit must be a whole number");
        assert_eq!(parse_time_limit("0", "s").unwrap_err(), "time limit must be between 1 second and 7 days");
        assert_eq!(parse_time_limit("-5", "min").unwrap_err(), "time limit must be between 1 second and 7 days");
        assert_eq!(parse_time_limit("10081", "min").unwrap_err(), "time limit must be between 1 second and 7 days");
        assert_eq!(parse_time_limit("10080", "min"), Ok(TIME_LIMIT_MAX_SECS));
        assert_eq!(
            parse_time_limit(&i64::MAX.to_string(), "min").unwrap_err(),
            "time limit must be between 1 second and 7 days"
        );
        assert_eq!(parse_time_limit("5", "h").unwrap_err(), "unknown time unit \"h\" (expected s or min)");
    }

    #[test]
    fn names_gpus_and_models() {
        assert_eq!(parse_task_name("  "), Ok("task".into()));
        assert_eq!(parse_task_name(" train-1 "), Ok("train-1".into()));
        assert!(parse_task_name("Bad Name").is_err());
        assert_eq!(parse_gpu_count("2"), Ok(2));
        assert_eq!(parse_gpu_count("two").unwrap_err(), "GPU count must be a whole number");
        assert_eq!(parse_gpu_count("0").unwrap_err(), "GPU count must be a whole number between 1 and 64");
        assert_eq!(parse_gpu_model(" "), None);
        assert_eq!(parse_gpu_model(" A100 "), Some("A100".into()));
    }
}
