//! `gantry machines ls|create|stop|start|restart|rm|ssh NAME`: the API's
//! `/api/v1/machines`. A machine is named as on the portal; the name is
//! looked up in the list (a number that names no machine is taken as an
//! id). Operations are queued tasks (202 `{"task_id": N}`); `--wait`
//! follows the task (`/api/v1/tasks/{id}`) until it ends.

use super::{client::Api, output, ssh_config, CliError, Conn};
use clap::{Args, Subcommand};
use http_client::Method;
use serde_json::{json, Value};
use std::time::Duration;

#[derive(Debug, Subcommand)]
pub enum MachinesCommand {
    /// List the machines you may see.
    #[command(alias = "list")]
    Ls,
    /// Create a dev machine.
    Create {
        name: String,
        /// GPUs to allocate.
        #[arg(long, default_value_t = 1)]
        gpus: u32,
        /// Only GPUs of this model (as the portal names it).
        #[arg(long)]
        gpu_model: Option<String>,
        /// Image id (default: the portal's default image).
        #[arg(long)]
        image: Option<i64>,
        /// Size of the /data volume in GB.
        #[arg(long)]
        volume_gb: Option<u32>,
        #[command(flatten)]
        wait: Wait,
    },
    /// Stop: keep its files, give its GPUs back.
    Stop(Op),
    /// Start a stopped machine again.
    Start(Op),
    /// Restart its container.
    Restart(Op),
    /// Delete the machine and its volume.
    #[command(alias = "delete")]
    Rm(Op),
    /// Write `Host gantry-NAME` into ~/.ssh (via ~/.ssh/gantry/config) and run `ssh gantry-NAME`.
    Ssh {
        name: String,
        /// The SSH gateway's port on the server's host (`gantry serve --ssh-listen`).
        #[arg(long, env = "GANTRY_SSH_PORT", default_value_t = 2222)]
        port: u16,
        /// The gateway's host, when it is not the server URL's.
        #[arg(long, env = "GANTRY_SSH_HOST")]
        host: Option<String>,
        /// Only write the SSH config; do not run ssh.
        #[arg(long)]
        config_only: bool,
        /// Passed on to ssh (after --).
        #[arg(last = true)]
        ssh_args: Vec<String>,
    },
}

#[derive(Debug, Args)]
pub struct Op {
    pub name: String,
    #[command(flatten)]
    pub wait: Wait,
}

#[derive(Debug, Clone, Copy, Args)]
pub struct Wait {
    /// Wait until the operation has ended; fail if it failed.
    #[arg(long)]
    pub wait: bool,
}

pub async fn run(conn: &Conn, command: MachinesCommand) -> Result<(), CliError> {
    let api = Api::from_conn(conn)?;
    match command {
        MachinesCommand::Ls => {
            let list = list(&api).await?;
            if conn.json {
                return output::json(&json!({ "machines": list }));
            }
            let columns = [
                ("ID", "id"),
                ("NAME", "name"),
                ("STATE", "state"),
                ("GPUS", "gpus"),
                ("NODE", "node"),
                ("OWNER", "owner"),
            ];
            output::table(&list, &columns);
            Ok(())
        }
        MachinesCommand::Create { name, gpus, gpu_model, image, volume_gb, wait } => {
            let mut body = json!({ "name": name, "gpus": gpus });
            for (key, value) in [
                ("gpu_model", gpu_model.map(Value::from)),
                ("image_id", image.map(Value::from)),
                ("volume_size_gb", volume_gb.map(Value::from)),
            ] {
                if let Some(v) = value {
                    body[key] = v;
                }
            }
            let req = api.request(Method::POST, &["api", "v1", "machines"]).json(&body);
            let answer: Value = api.json(req).await?;
            finish(&api, conn, &format!("create of {name}"), answer, wait).await
        }
        MachinesCommand::Stop(op) => operate(&api, conn, op, "stop").await,
        MachinesCommand::Start(op) => operate(&api, conn, op, "start").await,
        MachinesCommand::Restart(op) => operate(&api, conn, op, "restart").await,
        MachinesCommand::Rm(op) => {
            let id = resolve(&api, &op.name).await?.to_string();
            let answer: Value = api.json(api.request(Method::DELETE, &["api", "v1", "machines", &id])).await?;
            finish(&api, conn, &format!("delete of {}", op.name), answer, op.wait).await
        }
        MachinesCommand::Ssh { name, port, host, config_only, ssh_args } => {
            resolve(&api, &name).await?;
            let host = host.or_else(|| api.base.host_str().map(str::to_string)).unwrap_or_default();
            let host = host.trim_start_matches('[').trim_end_matches(']').to_string();
            let (alias, file) = ssh_config::write(&ssh_config::HostEntry { machine: &name, host: &host, port })?;
            eprintln!("{alias} written to {}", file.display());
            if config_only {
                return Ok(());
            }
            exec_ssh(&alias, &ssh_args)
        }
    }
}

/// Every machine the token's owner sees: `{"machines": […]}` (a bare
/// array is read too).
pub async fn list(api: &Api) -> Result<Vec<Value>, CliError> {
    let answer: Value = api.get(&["api", "v1", "machines"]).await?;
    let items = answer.get("machines").unwrap_or(&answer);
    items.as_array().cloned().ok_or_else(|| CliError("the machine list is not the JSON expected".into()))
}

/// A machine's id from its name (or its id, typed as a number).
pub async fn resolve(api: &Api, name: &str) -> Result<i64, CliError> {
    let list = list(api).await?;
    let named: Vec<i64> =
        list.iter().filter(|m| m["name"].as_str() == Some(name)).filter_map(|m| m["id"].as_i64()).collect();
    match named.as_slice() {
        [id] => Ok(*id),
        [] => name
            .parse::<i64>()
            .ok()
            .filter(|id| list.iter().any(|m| m["id"].as_i64() == Some(*id)))
            .ok_or_else(|| CliError(format!("no machine named {name:?} (gantry machines ls lists yours)"))),
        many => Err(CliError(format!(
            "{} machines are named {name:?} (ids {}); give the id instead",
            many.len(),
            many.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
        ))),
    }
}

async fn operate(api: &Api, conn: &Conn, op: Op, what: &str) -> Result<(), CliError> {
    let id = resolve(api, &op.name).await?.to_string();
    let answer: Value = api.json(api.request(Method::POST, &["api", "v1", "machines", &id, what])).await?;
    finish(api, conn, &format!("{what} of {}", op.name), answer, op.wait).await
}

/// Says what was queued; with `--wait`, follows it to its end.
async fn finish(api: &Api, conn: &Conn, what: &str, answer: Value, wait: Wait) -> Result<(), CliError> {
    let task = answer["task_id"].as_i64();
    let (Some(task), true) = (task, wait.wait) else {
        if conn.json {
            return output::json(&answer);
        }
        match task {
            Some(t) => println!("{what} queued as task {t}"),
            None => println!("{what} accepted"),
        }
        return Ok(());
    };
    let ended = wait_for_task(api, task).await?;
    if conn.json {
        output::json(&ended)?;
    }
    let state = ended["state"].as_str().unwrap_or("unknown");
    if state == "succeeded" {
        if !conn.json {
            println!("{what}: done (task {task})");
        }
        Ok(())
    } else {
        let why = ended["message"].as_str().or_else(|| ended["error"].as_str()).unwrap_or("");
        Err(CliError(format!(
            "{what} ended {state} (task {task}){}",
            if why.is_empty() { String::new() } else { format!(": {why}") }
        )))
    }
}

/// Polls the task until it has ended: 200 ms, doubling to 2 s.
pub async fn wait_for_task(api: &Api, task: i64) -> Result<Value, CliError> {
    let id = task.to_string();
    let mut pause = Duration::from_millis(200);
    loop {
        let t: Value = api.get(&["api", "v1", "tasks", &id]).await?;
        if matches!(t["state"].as_str(), Some("succeeded" | "failed" | "cancelled")) {
            return Ok(t);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// Replaces this process with `ssh ALIAS …`: the terminal is ssh's.
fn exec_ssh(alias: &str, args: &[String]) -> Result<(), CliError> {
    use std::os::unix::process::CommandExt;
    let err = std::process::Command::new("ssh").arg(alias).args(args).exec();
    Err(CliError(format!("cannot run ssh: {err}")))
}
