//! The `gantry` binary's library half: commands, the HTTP router and the
//! middleware around the Leptos app. Tests start the real router on port 0.

pub mod assets;
pub mod bootstrap;
pub mod cli;
pub mod config;
pub mod disk_args;
pub mod http;
pub mod ldap_args;
pub mod notify_loop;
pub mod page_cache;
pub mod reclaim_loop;
pub mod router;
pub mod routes;
pub mod schedule_loop;
pub mod security;
pub mod services;
pub mod ssh;
pub mod vendor;
pub mod volume_pool_args;

use config::{Cli, Command, UserCommand};
use gantry_core::Role;
use gantry_platform::{accounts, db, PlatformError};
use std::io::BufRead;

pub async fn run(cli: Cli) -> Result<(), PlatformError> {
    let command = match cli.command {
        // The client talks to a server over HTTP: no database here.
        Command::Client(client) => return crate::cli::run(client).await.map_err(|e| PlatformError::Refused(e.0)),
        command => command,
    };
    let pool = db::connect(&ensure_data_dir(&cli.db)?).await?;
    db::migrate(&pool).await?;
    match command {
        Command::Migrate => {
            println!("migrations applied");
            Ok(())
        }
        Command::User { command: UserCommand::Add { username, admin, group, password } } => {
            let password = match password {
                Some(p) => p,
                None => {
                    eprintln!("password for {username}:");
                    let mut line = String::new();
                    std::io::stdin().lock().read_line(&mut line).map_err(|e| PlatformError::Internal(e.to_string()))?;
                    line.trim_end_matches(['\r', '\n']).to_string()
                }
            };
            let role = if admin { Role::Admin } else { Role::User };
            let new = accounts::NewUser { username: &username, password: &password, role, group: group.as_deref() };
            let user = accounts::create_user(&pool, None, new).await?;
            println!("created {} {} in group {}", user.role, user.username, user.group_name);
            Ok(())
        }
        Command::Client(_) => unreachable!("answered above"),
        Command::Serve(args) => {
            // Whatever can refuse the start comes first — the port, the
            // dataset stores, the local node's registration — so a start
            // that fails leaves nothing running or half done: no first
            // admin whose one-time password scrolled past above the error
            // (the next start would not show it again), no dispatcher that
            // claimed tasks and left them leased.
            let listener = tokio::net::TcpListener::bind(args.listen)
                .await
                .map_err(|e| PlatformError::Internal(format!("cannot listen on {}: {e}", args.listen)))?;
            let local_addr = listener.local_addr().map_err(|e| PlatformError::Internal(e.to_string()))?;
            let ssh_listener = match args.ssh.listen()? {
                Some(addr) => Some(ssh::Gateway::bind(addr).await?),
                None => None,
            };
            let stores = routes::datasets::prepare(&args.datasets, &pool, &cli.db.data_dir).await?;
            let node = services::prepare(&pool, &cli.db.data_dir, &args.node).await?;
            let oidc = routes::oidc_args::discover(&args).await?;
            let ldap = args.ldap.config()?;
            bootstrap::ensure_admin(&pool, &args.admin_user, args.admin_password.as_deref()).await?;
            args.ldap.apply_break_glass(&pool).await?;
            // The background services start here; what follows only builds
            // the router in memory.
            let services = node.start(&pool, &args.node);
            let (ssh_pool, ssh_fleet) = (pool.clone(), services.fleet.clone());
            let opts = router::Options::from_args(&args);
            let security = security::Security { oidc, ..security::Security::from_args(&args.security) };
            let app = router::build_secured(
                opts,
                security,
                args.workspace.limits(),
                pool,
                services.admissions,
                services.dispatch,
                services.fleet,
            )
            .await?;
            // The dataset routes find their stores in this extension.
            let app = app.layer(axum::Extension(stores));
            // The sign-in finds the LDAP directory (if any) in this extension.
            let app = ldap_args::layer(app, ldap);
            // The SSH gateway (issue #34); the pages find it in this extension.
            let (app, _ssh_gateway) = match ssh_listener {
                Some(l) => {
                    let stopping = router::shutdown_signal();
                    let gw = ssh::Gateway::start(
                        l,
                        &cli.db.data_dir,
                        ssh_pool,
                        ssh_fleet,
                        args.workspace.limits(),
                        stopping,
                    )
                    .await?;
                    (app.layer(axum::Extension(gw.info())), Some(gw))
                }
                None => (app, None),
            };
            let limits = http::serve::ConnLimits {
                header_read: std::time::Duration::from_secs(args.header_read_timeout_secs),
                request_body: std::time::Duration::from_secs(args.request_body_timeout_secs),
                // The cap must fit the descriptors the process may open:
                // raise the soft limit (often 1024) first.
                max_connections: http::limits::connection_cap(
                    usize::try_from(args.max_connections).unwrap_or(usize::MAX),
                    http::limits::raise_fd_limit(),
                ),
                max_per_client: if args.security.trusted_proxy {
                    0
                } else {
                    usize::try_from(args.max_connections_per_client).unwrap_or(usize::MAX)
                },
                ..http::serve::ConnLimits::DEFAULT
            };
            tracing::info!("Gantry listening on http://{local_addr}");
            serve_then_stop(listener, app, limits, services.shutdown).await
        }
    }
}

/// How long open connections may take to end once the services have
/// stopped: an idle keep-alive socket or a long download must not keep a
/// stopped server running.
const DRAIN_SECS: u64 = 5;

/// Serves until Ctrl-C or SIGTERM; then stops the services at once (the
/// dispatcher's grace period and hand-back run while connections drain:
/// a connection that never ends must not keep the work from being handed
/// back) and waits a little longer for the connections.
async fn serve_then_stop(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    limits: http::serve::ConnLimits,
    shutdown: services::Shutdown,
) -> Result<(), PlatformError> {
    let (signalled, stopping) = tokio::sync::watch::channel(false);
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };
    tokio::spawn(async move {
        router::shutdown_signal().await;
        let _ = signalled.send(true);
    });
    let mut server = tokio::spawn(http::serve::serve_connections(listener, app, stopped(stopping.clone()), limits));
    let ended_early = tokio::select! {
        served = &mut server => Some(served),
        () = stopped(stopping) => None,
    };
    shutdown.run().await;
    let served = match ended_early {
        Some(served) => served,
        None => match tokio::time::timeout(std::time::Duration::from_secs(DRAIN_SECS), &mut server).await {
            Ok(served) => served,
            Err(_) => {
                tracing::warn!("connections still open {DRAIN_SECS} s after the services stopped; closing them");
                server.abort();
                return Ok(());
            }
        },
    };
    match served {
        Ok(result) => result.map_err(|e| PlatformError::Internal(e.to_string())),
        Err(e) => Err(PlatformError::Internal(format!("the server task failed: {e}"))),
    }
}

/// The data directory holds the database (sessions, hashes), machines'
/// volume images and dataset stores: its owner's alone (0700), whatever
/// the umask — another local user must not read a session cookie's row.
fn ensure_data_dir(args: &config::DbArgs) -> Result<String, PlatformError> {
    if args.database_url.is_none() {
        use std::os::unix::fs::PermissionsExt;
        let dir = &args.data_dir;
        std::fs::create_dir_all(dir)
            .map_err(|e| PlatformError::Internal(format!("cannot create {}: {e}", dir.display())))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| PlatformError::Internal(format!("cannot make {} private: {e}", dir.display())))?;
        gantry_platform::db::private_file(&dir.join("gantry.db"))?;
    }
    Ok(args.url())
}
