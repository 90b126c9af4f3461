//! Command line and configuration: every setting is a flag, an environment
//! variable, or a default, in that order of precedence.

use clap::{Args, Parser, Subcommand};
use std::{net::SocketAddr, path::PathBuf};

#[derive(Debug, Parser)]
#[command(name = "gantry", version, about = "Gantry: a self-hosted GPU cloud portal")]
pub struct Cli {
    #[command(flatten)]
    pub db: DbArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args)]
pub struct DbArgs {
    /// Directory for Gantry's state (the SQLite file lives here).
    #[arg(long, env = "GANTRY_DATA_DIR", default_value = "data", global = true)]
    pub data_dir: PathBuf,
    /// Database URL; defaults to `sqlite:<data-dir>/gantry.db`.
    #[arg(long, env = "GANTRY_DATABASE_URL", global = true)]
    pub database_url: Option<String>,
}

impl DbArgs {
    pub fn url(&self) -> String {
        self.database_url.clone().unwrap_or_else(|| format!("sqlite:{}", self.data_dir.join("gantry.db").display()))
    }
}

// Parsed once at start: the size of `Serve`'s flags costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply migrations, make sure an admin exists, and serve the web UI.
    Serve(ServeArgs),
    /// Apply database migrations and exit.
    Migrate,
    /// Manage user accounts.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// The command-line client: login, machines, compute, datasets (`cli`).
    #[command(flatten)]
    Client(crate::cli::ClientCommand),
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user. The password is read from GANTRY_NEW_USER_PASSWORD or, if unset, from standard input.
    Add {
        username: String,
        /// Make the user an administrator.
        #[arg(long)]
        admin: bool,
        /// Group to join (default: the "default" group).
        #[arg(long)]
        group: Option<String>,
        #[arg(long, env = "GANTRY_NEW_USER_PASSWORD", hide_env_values = true)]
        password: Option<String>,
    },
}

#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, env = "GANTRY_LISTEN", default_value = "127.0.0.1:3000")]
    pub listen: SocketAddr,
    /// Directory of the built site (the wasm bundle, CSS, public assets).
    #[arg(long, env = "GANTRY_SITE_ROOT", default_value = "target/site")]
    pub site_root: PathBuf,
    /// Mark session cookies Secure: set this when Gantry is served over HTTPS.
    #[arg(long, env = "GANTRY_SECURE_COOKIES")]
    pub secure_cookies: bool,
    /// Extra origin allowed to call server functions (e.g. https://gantry.example.org behind a proxy):
    /// scheme://host[:port], kept as browsers write an origin (lower case, no default port, no slash).
    #[arg(long, env = "GANTRY_PUBLIC_ORIGIN", value_parser = crate::http::guard::normalize_origin)]
    pub public_origin: Option<String>,
    /// How long (ms) a rendered page may be served again to the same session
    /// while no commit has been made since; 0 renders every request.
    #[arg(long, env = "GANTRY_PAGE_CACHE_MS", default_value_t = crate::router::PAGE_CACHE_MS, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub page_cache_ms: u64,
    /// Seconds a connection may take to send a whole request head, from
    /// when it opens or its previous response ended; slower (or idle)
    /// connections are closed, so a silent client cannot hold a socket.
    #[arg(long, env = "GANTRY_HEADER_READ_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub header_read_timeout_secs: u64,
    /// Seconds a request body may take to arrive, from when the server
    /// starts reading it; a slower one is answered 408 and its connection
    /// closed. Streamed uploads (datasets, machine files) are exempt: they
    /// are cut when no byte arrives for 60 s instead.
    #[arg(long, env = "GANTRY_REQUEST_BODY_TIMEOUT_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub request_body_timeout_secs: u64,
    /// Client connections open at once; beyond it a new connection is
    /// closed at once. Lowered at start-up if the open-file limit cannot
    /// hold it.
    #[arg(long, env = "GANTRY_MAX_CONNECTIONS", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections: u64,
    /// Client connections open at once from one address (0: no such cap);
    /// beyond it that address's new connection is closed at once. Off
    /// with `--trusted-proxy` (every connection then comes from the proxy).
    #[arg(long, env = "GANTRY_MAX_CONNECTIONS_PER_CLIENT", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub max_connections_per_client: u64,
    /// Username of the first administrator, created when no admin exists.
    #[arg(long, env = "GANTRY_ADMIN_USER", default_value = "admin")]
    pub admin_user: String,
    /// Password of the first administrator; when unset a random one is printed once.
    #[arg(long, env = "GANTRY_ADMIN_PASSWORD", hide_env_values = true)]
    pub admin_password: Option<String>,
    #[command(flatten)]
    pub ldap: crate::ldap_args::LdapArgs,
    #[command(flatten)]
    pub oidc: crate::routes::oidc_args::OidcArgs,
    #[command(flatten)]
    pub node: NodeArgs,
    #[command(flatten)]
    pub workspace: crate::routes::workspace::WorkspaceArgs,
    #[command(flatten)]
    pub datasets: crate::routes::datasets::DatasetArgs,
    #[command(flatten)]
    pub security: crate::security::SecurityArgs,
    #[command(flatten)]
    pub ssh: crate::ssh::SshArgs,
}

/// The worker node this server process runs on.
#[derive(Debug, Clone, Args)]
pub struct NodeArgs {
    /// Name of the local worker node.
    #[arg(long, env = "GANTRY_NODE_NAME", default_value = "local")]
    pub node_name: String,
    /// How dev machines run: docker, simulated, or auto (docker when the engine answers).
    #[arg(long, env = "GANTRY_EXECUTOR", default_value = "auto", value_parser = ["auto", "docker", "simulated"])]
    pub executor: String,
    /// Docker Engine endpoint of the local node: unix:///path, tcp://host:port or tls://host:port.
    #[arg(long, env = "GANTRY_DOCKER_ENDPOINT", default_value = "unix:///var/run/docker.sock")]
    pub docker_endpoint: String,
    /// Simulated GPUs on this node when no NVIDIA driver is present (0 to 64, as for a node an admin adds).
    #[arg(long, env = "GANTRY_SIM_GPUS", default_value_t = 4, value_parser = clap::value_parser!(u32).range(0..=64))]
    pub sim_gpus: u32,
    /// Model name of the simulated GPUs.
    #[arg(long, env = "GANTRY_SIM_GPU_MODEL", default_value = "SIM-A100-80GB")]
    pub sim_gpu_model: String,
    /// Image registered as the default dev-machine image on first start.
    #[arg(long, env = "GANTRY_DEFAULT_IMAGE", default_value = "gantry/devbox:latest")]
    pub default_image: String,
    /// Operations the dispatcher runs at once (1 to 1024).
    #[arg(long, env = "GANTRY_DISPATCH_PARALLEL", default_value_t = 32, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1024))]
    pub dispatch_parallel: usize,
    /// Seconds a claimed task's lease holds without renewal: how soon
    /// another server resumes the tasks of one that died (3 to 3600).
    #[arg(long, env = "GANTRY_LEASE_SECS", default_value_t = 30, value_parser = clap::value_parser!(i64).range(3..=3600))]
    pub lease_secs: i64,
    /// Seconds a stopping server (Ctrl-C, SIGTERM) lets the operations it
    /// runs finish before it stops them and hands them back to the queue (0 to 3600).
    #[arg(long, env = "GANTRY_SHUTDOWN_GRACE_SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub shutdown_grace_secs: u64,
    #[command(flatten)]
    pub telemetry: crate::routes::metrics::TelemetryArgs,
    #[command(flatten)]
    pub reclaim: crate::reclaim_loop::ReclaimArgs,
    #[command(flatten)]
    pub schedule: crate::schedule_loop::ScheduleArgs,
    #[command(flatten)]
    pub disk: crate::disk_args::DiskArgs,
    #[command(flatten)]
    pub notify: crate::notify_loop::NotifyArgs,
    #[command(flatten)]
    pub volume_pool: crate::volume_pool_args::VolumePoolArgs,
}

#[cfg(test)]
mod tests {
    use super::{Cli, Command, ServeArgs};
    use clap::Parser;

    fn serve(extra: &[&str]) -> Result<ServeArgs, clap::Error> {
        let argv = ["gantry", "serve"].iter().chain(extra).copied();
        Cli::try_parse_from(argv).map(|cli| match cli.command {
            Command::Serve(args) => args,
            _ => unreachable!("parsed `serve`"),
        })
    }

    #[test]
    fn numeric_settings_outside_their_range_are_refused_when_read() {
        let defaults = serve(&[]).unwrap();
        assert_eq!(
            (
                defaults.node.dispatch_parallel,
                defaults.node.sim_gpus,
                defaults.node.lease_secs,
                defaults.security.session_idle_hours,
                defaults.security.token_lifetime_days
            ),
            (32, 4, 30, 168, 90)
        );
        // Each bound is accepted...
        for (flag, value) in [
            ("--dispatch-parallel", "1"),
            ("--dispatch-parallel", "1024"),
            ("--sim-gpus", "0"),
            ("--sim-gpus", "64"),
            ("--lease-secs", "3"),
            ("--lease-secs", "3600"),
            ("--shutdown-grace-secs", "0"),
            ("--shutdown-grace-secs", "3600"),
            ("--session-idle-hours", "1"),
            ("--session-idle-hours", "8760"),
            ("--token-lifetime-days", "1"),
            ("--token-lifetime-days", "3650"),
        ] {
            assert!(serve(&[flag, value]).is_ok(), "{flag} {value} is refused");
        }
        // ...and a step beyond it refused, naming the setting, before
        // anything starts (a dispatcher with 2^62 permits panicked in its
        // task; hours beyond i64 seconds overflowed).
        for (flag, value) in [
            ("--dispatch-parallel", "0"),
            ("--dispatch-parallel", "1025"),
            ("--dispatch-parallel", "4611686018427387904"),
            ("--sim-gpus", "65"),
            ("--sim-gpus", "4000000000"),
            ("--lease-secs", "2"),
            ("--lease-secs", "3601"),
            ("--shutdown-grace-secs", "3601"),
            ("--session-idle-hours", "0"),
            ("--session-idle-hours", "8761"),
            ("--session-idle-hours", "9223372036854775807"),
            ("--token-lifetime-days", "0"),
            ("--token-lifetime-days", "3651"),
        ] {
            let err = serve(&[flag, value]).err().unwrap_or_else(|| panic!("{flag} {value} is accepted"));
            assert!(err.to_string().contains(flag), "{flag} {value}: {err}");
        }
    }
}
