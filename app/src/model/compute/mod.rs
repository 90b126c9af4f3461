//! Compute tasks as the portal shows them, the submission form's parsing,
//! and the matcher's recorded decision put into words ("why here", "why
//! pending"). Pure, so the server and the browser render alike and the
//! rules are unit-tested.

mod explain;
mod parse;

pub use explain::*;
pub use parse::*;

use crate::model::QuotaView;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeRow {
    pub id: i64,
    pub name: String,
    pub requester: String,
    pub framework: String,
    pub framework_version: String,
    pub interpreter: String,
    pub interpreter_version: String,
    pub gpu_count: i64,
    pub gpu_model: Option<String>,
    pub cpu_millis: i64,
    pub memory_mb: i64,
    pub time_limit_secs: i64,
    pub state: String,
    pub message: String,
    pub region: Option<String>,
    pub image: Option<String>,
    pub machine_id: Option<i64>,
    pub node: Option<String>,
    pub exit_code: Option<i64>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

/// One task's page: the row, its command, the decision in words and its output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeDetail {
    pub task: ComputeRow,
    pub command: Vec<String>,
    pub why: Option<Explanation>,
    /// The container's latest lines while it runs, else the kept tail.
    pub output: String,
    /// Whether `output` was read from the running container just now.
    pub output_live: bool,
    /// The machine's whole log as text, while the job's container exists.
    pub log_url: Option<String>,
}

/// A framework + interpreter combination the form offers; the value sent
/// is a master image id, whose four fields the server submits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FrameworkChoice {
    pub master_image_id: i64,
    pub label: String,
    /// Whether any region image is linked (else the task would be refused).
    pub linked: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ComputeOptions {
    pub frameworks: Vec<FrameworkChoice>,
    pub gpu_models: Vec<String>,
    pub quota: QuotaView,
}

/// "PyTorch 2.4 · Python 3.11".
pub fn task_combo(t: &ComputeRow) -> String {
    format!("{} {} · {} {}", t.framework, t.framework_version, t.interpreter, t.interpreter_version)
}

/// "90 s", "10 min", "2 h", "1 h 30 min".
pub fn duration_label(secs: i64) -> String {
    match secs {
        s if s % 60 != 0 || s < 60 => format!("{s} s"),
        s if s < 3600 => format!("{} min", s / 60),
        s if s % 3600 == 0 => format!("{} h", s / 3600),
        s => format!("{} h {} min", s / 3600, (s % 3600) / 60),
    }
}

/// "1 × any GPU · 0.5 CPU · 256 MB · time limit 10 min".
pub fn resources_label(t: &ComputeRow) -> String {
    let model = t.gpu_model.as_deref().unwrap_or("any GPU");
    let cpus = t.cpu_millis as f64 / 1000.0;
    format!(
        "{} × {model} · {cpus} CPU · {} MB · time limit {}",
        t.gpu_count,
        t.memory_mb,
        duration_label(t.time_limit_secs)
    )
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
pub fn compute_cancellable(state: &str) -> bool {
    matches!(state, "pending" | "scheduled" | "running")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_resources_read_naturally() {
        assert_eq!(duration_label(45), "45 s");
        assert_eq!(duration_label(90), "90 s");
        assert_eq!(duration_label(600), "10 min");
        assert_eq!(duration_label(7200), "2 h");
        assert_eq!(duration_label(5400), "1 h 30 min");
        let t =
            ComputeRow { gpu_count: 1, cpu_millis: 500, memory_mb: 256, time_limit_secs: 600, ..Default::default() };
        assert_eq!(resources_label(&t), "1 × any GPU · 0.5 CPU · 256 MB · time limit 10 min");
        let t = ComputeRow {
            gpu_model: Some("A100".into()),
            gpu_count: 2,
            cpu_millis: 2000,
            memory_mb: 1024,
            time_limit_secs: 60,
            ..t
        };
        assert_eq!(resources_label(&t), "2 × A100 · 2 CPU · 1024 MB · time limit 1 min");
    }

    #[test]
    fn commands_show_as_typed() {
        let argv = vec!["echo".to_string(), "hi there".to_string()];
        assert_eq!(command_text(&argv), (false, "echo\nhi there".to_string()));
        let sh = vec!["/bin/sh".to_string(), "-c".to_string(), "echo a | wc -c".to_string()];
        assert_eq!(command_text(&sh), (true, "echo a | wc -c".to_string()));
        assert!(compute_cancellable("running") && compute_cancellable("pending"));
        assert!(!compute_cancellable("succeeded") && !compute_cancellable("cancelled"));
    }
}
