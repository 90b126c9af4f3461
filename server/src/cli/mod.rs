//! The command-line client in the `gantry` binary: `gantry login URL`,
//! `gantry machines …`, `gantry compute …`, `gantry datasets …`. It talks
//! to a Gantry server's JSON API (`/api/v1`) with a personal API token,
//! kept by `login` in the user's config directory (`config_store`). None
//! of it opens the database: it runs on a laptop, not on the server.

pub mod client;
pub mod compute;
pub mod config_store;
pub mod datasets;
pub mod login;
pub mod machines;
pub mod output;
pub mod ssh_config;

use clap::{Args, Subcommand};
pub use client::CliError;

/// The client's subcommands, flattened into `gantry`'s own.
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// Sign in to a Gantry server and keep a personal API token for the other commands.
    Login(login::LoginArgs),
    /// Forget the stored token (revoke it on the portal's Tokens page).
    Logout,
    /// Dev machines: list, create, stop, start, restart, delete, ssh.
    Machines {
        #[command(flatten)]
        conn: Conn,
        #[command(subcommand)]
        command: machines::MachinesCommand,
    },
    /// Compute tasks: submit, list, follow the output, cancel.
    Compute {
        #[command(flatten)]
        conn: Conn,
        #[command(subcommand)]
        command: compute::ComputeCommand,
    },
    /// Datasets: list them, upload files into a version (resumable).
    Datasets {
        #[command(flatten)]
        conn: Conn,
        #[command(subcommand)]
        command: datasets::DatasetsCommand,
    },
}

/// Which server and token, overriding what `gantry login` stored; and the
/// output form.
#[derive(Debug, Clone, Args)]
pub struct Conn {
    /// The server's URL (default: the one `gantry login` stored).
    #[arg(long, env = "GANTRY_URL", global = true)]
    pub url: Option<String>,
    /// An API token (default: the one `gantry login` stored).
    #[arg(long, env = "GANTRY_TOKEN", global = true, hide_env_values = true)]
    pub token: Option<String>,
    /// Machine-readable JSON instead of tables and sentences.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Runs one client command; the error is what the user reads after
/// `gantry: `, and makes the exit status non-zero.
pub async fn run(command: ClientCommand) -> Result<(), CliError> {
    match command {
        ClientCommand::Login(args) => login::login(args).await,
        ClientCommand::Logout => login::logout(),
        ClientCommand::Machines { conn, command } => machines::run(&conn, command).await,
        ClientCommand::Compute { conn, command } => compute::run(&conn, command).await,
        ClientCommand::Datasets { conn, command } => datasets::run(&conn, command).await,
    }
}
