//! `gantry compute submit|ls|logs|cancel`: the API's compute tasks
//! (`/api/v1/compute-tasks`). The API answers a task's output whole
//! (live from its container while it runs, what was kept once it ended),
//! so `logs --follow` asks again every second and prints what is new,
//! until the task has ended; it then exits 0 only if the task succeeded.

use super::{client::Api, output, CliError, Conn};
use clap::{Args, Subcommand};
use http_client::Method;
use serde_json::{json, Value};
use std::{io::Write, time::Duration};

#[derive(Debug, Subcommand)]
pub enum ComputeCommand {
    /// Submit a task: gantry compute submit --image PyTorch:2.4/Python:3.11 --gpus 1 -- python train.py
    Submit(Box<Submit>),
    /// List your group's tasks, newest first.
    #[command(alias = "list")]
    Ls {
        /// At most this many (1 to 500).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Print a task's output; --follow until it ends.
    Logs {
        id: i64,
        #[arg(long, short)]
        follow: bool,
    },
    /// Cancel a task that has not started running.
    Cancel { id: i64 },
}

#[derive(Debug, Args)]
pub struct Submit {
    /// The environment as FRAMEWORK:VERSION/INTERPRETER:VERSION, as the
    /// portal's catalogue lists it (e.g. PyTorch:2.4/Python:3.11).
    #[arg(long)]
    pub image: String,
    #[arg(long, default_value_t = 1)]
    pub gpus: u32,
    #[arg(long)]
    pub gpu_model: Option<String>,
    #[arg(long, default_value_t = 1.0)]
    pub cpus: f64,
    #[arg(long, default_value_t = 1024)]
    pub memory_mb: i64,
    /// Seconds the task may run.
    #[arg(long, default_value_t = 3600)]
    pub time_limit: i64,
    /// A sealed dataset version to mount read-only (CODE/VERSION); repeatable.
    #[arg(long = "dataset")]
    pub datasets: Vec<String>,
    /// The task's name (default: the command's first word).
    #[arg(long)]
    pub name: Option<String>,
    /// A script for /bin/sh -c instead of a command.
    #[arg(long, conflicts_with = "command")]
    pub shell: Option<String>,
    /// Follow its output until it ends (exit status: whether it succeeded).
    #[arg(long, short)]
    pub follow: bool,
    /// The command and its arguments, after --.
    #[arg(last = true, required_unless_present = "shell")]
    pub command: Vec<String>,
}

pub async fn run(conn: &Conn, command: ComputeCommand) -> Result<(), CliError> {
    let api = Api::from_conn(conn)?;
    match command {
        ComputeCommand::Submit(s) => {
            let body = submission(&s)?;
            let req = api.request(Method::POST, &["api", "v1", "compute-tasks"]).json(&body);
            let task: Value = api.json(req).await?;
            let id = task["id"].as_i64().ok_or_else(|| CliError("the server's answer holds no task id".into()))?;
            if conn.json && !s.follow {
                return output::json(&task);
            }
            eprintln!("task {id} submitted: {}", task["state"].as_str().unwrap_or("?"));
            if s.follow {
                follow(&api, id).await
            } else {
                Ok(())
            }
        }
        ComputeCommand::Ls { limit } => {
            let req = api.request(Method::GET, &["api", "v1", "compute-tasks"]).query(&[("limit", limit)]);
            let tasks: Vec<Value> = api.json(req).await?;
            if conn.json {
                return output::json(&tasks);
            }
            let columns = [
                ("ID", "id"),
                ("NAME", "name"),
                ("STATE", "state"),
                ("GPUS", "gpu_count"),
                ("NODE", "node"),
                ("EXIT", "exit_code"),
                ("BY", "requester"),
            ];
            output::table(&tasks, &columns);
            Ok(())
        }
        ComputeCommand::Logs { id, follow: true } => follow(&api, id).await,
        ComputeCommand::Logs { id, follow: false } => {
            print!("{}", logs(&api, id).await?);
            Ok(())
        }
        ComputeCommand::Cancel { id } => {
            let path = ["api", "v1", "compute-tasks", &id.to_string(), "cancel"];
            let task: Value = api.json(api.request(Method::POST, &path)).await?;
            if conn.json {
                return output::json(&task);
            }
            println!("task {id}: {}", task["state"].as_str().unwrap_or("?"));
            Ok(())
        }
    }
}

/// The API's JSON for a submission.
pub fn submission(s: &Submit) -> Result<Value, CliError> {
    let (framework, interpreter) = s.image.split_once('/').ok_or_else(|| bad_image(&s.image))?;
    let (framework, framework_version) = framework.split_once(':').ok_or_else(|| bad_image(&s.image))?;
    let (interpreter, interpreter_version) = interpreter.split_once(':').ok_or_else(|| bad_image(&s.image))?;
    let name = s.name.clone().or_else(|| s.command.first().cloned()).unwrap_or_else(|| "shell".into());
    let mut body = json!({
        "name": name,
        "framework": framework, "framework_version": framework_version,
        "interpreter": interpreter, "interpreter_version": interpreter_version,
        "gpus": s.gpus, "cpus": s.cpus, "memory_mb": s.memory_mb, "time_limit_secs": s.time_limit,
        "datasets": s.datasets,
    });
    match &s.shell {
        Some(script) => body["shell"] = json!(script),
        None => body["command"] = json!(s.command),
    }
    if let Some(model) = &s.gpu_model {
        body["gpu_model"] = json!(model);
    }
    Ok(body)
}

fn bad_image(image: &str) -> CliError {
    CliError(format!("--image {image:?} is not FRAMEWORK:VERSION/INTERPRETER:VERSION (e.g. PyTorch:2.4/Python:3.11)"))
}

async fn logs(api: &Api, id: i64) -> Result<String, CliError> {
    let res = api.send(api.request(Method::GET, &["api", "v1", "compute-tasks", &id.to_string(), "logs"])).await?;
    res.text().await.map_err(|e| CliError(format!("the output was cut off: {e}")))
}

/// Prints the output as it grows until the task ends; Ok only if it succeeded.
async fn follow(api: &Api, id: i64) -> Result<(), CliError> {
    let mut printed = String::new();
    loop {
        let task: Value = api.get(&["api", "v1", "compute-tasks", &id.to_string()]).await?;
        let state = task["state"].as_str().unwrap_or("").to_string();
        // Read after the state: once it says ended, this is the whole output.
        let text = logs(api, id).await?;
        let new = new_part(&printed, &text);
        if !new.is_empty() {
            print!("{new}");
            let _ = std::io::stdout().flush();
            printed = text.clone();
        }
        match state.as_str() {
            "succeeded" => return Ok(()),
            "failed" | "cancelled" => {
                let exit = task["exit_code"].as_i64().map(|c| format!(", exit code {c}")).unwrap_or_default();
                let why = task["message"].as_str().filter(|m| !m.is_empty()).map(|m| format!(": {m}"));
                return Err(CliError(format!("task {id} {state}{exit}{}", why.unwrap_or_default())));
            }
            _ => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}

/// What `now` holds beyond what was printed from `before`: the rest when
/// it continues it, else what follows the longest run of whole lines at
/// its start that `before` ended with (a tail window that moved on).
pub fn new_part<'a>(before: &str, now: &'a str) -> &'a str {
    if let Some(rest) = now.strip_prefix(before) {
        return rest;
    }
    let overlap =
        now.match_indices('\n').map(|(i, _)| i + 1).filter(|&k| before.ends_with(&now[..k])).max().unwrap_or(0);
    &now[overlap..]
}

#[cfg(test)]
mod tests {
    use super::new_part;

    #[test]
    fn following_prints_each_line_once() {
        assert_eq!(new_part("", "a\n"), "a\n");
        assert_eq!(new_part("a\n", "a\nb\n"), "b\n");
        assert_eq!(new_part("a\nb\n", "a\nb\n"), "");
        // A tail window that dropped its first line.
        assert_eq!(new_part("a\nb\nc\n", "b\nc\nd\n"), "d\n");
        // Nothing in common: everything is new.
        assert_eq!(new_part("x\n", "y\n"), "y\n");
    }
}
