//! The SSH gateway (issue #34): `ssh -p 2222 MACHINE@HOST` reaches a
//! machine with OpenSSH's own tools — a shell on a PTY, `ssh … cmd` with
//! its exit status, `scp`/`sftp` (the image's `sftp-server`), and
//! `ssh -L` forwards to ports inside the machine — with the keys people
//! add on their account page (never passwords).
//!
//! Everything goes through the node's Docker Engine API (an exec with its
//! stdio streamed), so it works with remote `tls://` nodes as with the
//! local engine, and with machines that have no network at all.
//!
//! The rules are the browser terminal's: the key names the account; the
//! user name names the machine (`NAME` for one's own, `OWNER/NAME` for an
//! administrator); owner or admin only, another group's machine does not
//! exist; one session row (the terminal's table: the admin console lists
//! and closes it) and audit lines per connection; the same limits (per
//! server, per user; counted apart from browser terminals, as followed
//! logs are) and idle close; the connection ends when the account is
//! disabled, demoted or reset, or the machine stops (the terminal
//! registry's watcher). Failed key attempts are throttled per client
//! address.
//!
//! | file | what |
//! |---|---|
//! | `host_key.rs` | the ed25519 host key, made once, kept in the data directory |
//! | `listener.rs` | the accept loop and russh's settings |
//! | `auth.rs` | key → account → machine, and the throttle |
//! | `session.rs` | one connection: russh's handler, its session row and watch |
//! | `exec_bridge.rs` | a session channel: shell, command or SFTP, bridged to an exec |
//! | `forward.rs` | `direct-tcpip` (ssh -L): a relay exec to a port inside |

mod auth;
mod exec_bridge;
mod forward;
mod host_key;
mod listener;
mod session;

use app::api::ssh_keys::SshGatewayInfo;
use clap::Args;
use gantry_platform::{db::Pool, fleet::Fleet, workspace::Limits, PlatformError};
use std::{net::SocketAddr, path::Path};

/// Settings of the SSH gateway.
#[derive(Debug, Clone, Args)]
pub struct SshArgs {
    /// Address the SSH gateway listens on (`ssh -p PORT MACHINE@HOST`); empty: no gateway.
    #[arg(long, env = "GANTRY_SSH_LISTEN", default_value = "127.0.0.1:2222")]
    pub ssh_listen: String,
}

impl SshArgs {
    /// The address to listen on, `None` when the gateway is off.
    pub fn listen(&self) -> Result<Option<SocketAddr>, PlatformError> {
        let text = self.ssh_listen.trim();
        if text.is_empty() {
            return Ok(None);
        }
        text.parse().map(Some).map_err(|_| {
            PlatformError::BadRequest(format!("--ssh-listen {text:?} is not an address like 127.0.0.1:2222"))
        })
    }
}

/// A running gateway; it stops (and ends its connections) when dropped.
pub struct Gateway {
    pub addr: SocketAddr,
    /// The host key's fingerprint ("SHA256:…").
    pub host_fingerprint: String,
    stop: tokio::sync::watch::Sender<bool>,
}

impl Gateway {
    /// Binds `listen` (port 0: any free port): done before anything else
    /// starts, so a taken port refuses the start cleanly.
    pub async fn bind(listen: SocketAddr) -> Result<tokio::net::TcpListener, PlatformError> {
        tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|e| PlatformError::Internal(format!("cannot listen for SSH on {listen}: {e}")))
    }

    /// Loads or makes the host key in `data_dir` and serves `listener`
    /// until dropped or `stopping` fires.
    pub async fn start(
        listener: tokio::net::TcpListener,
        data_dir: &Path,
        pool: Pool,
        fleet: Fleet,
        limits: Limits,
        stopping: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<Gateway, PlatformError> {
        let key = host_key::load_or_make(data_dir)?;
        let host_fingerprint = key.fingerprint(russh::keys::HashAlg::Sha256).to_string();
        let addr = listener.local_addr().map_err(|e| PlatformError::Internal(e.to_string()))?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let stop_on_signal = stop.clone();
        tokio::spawn(async move {
            stopping.await;
            let _ = stop_on_signal.send(true);
        });
        let shared = session::Shared::new(pool, fleet, limits, stopped);
        tokio::spawn(listener::serve(listener, key, shared));
        tracing::info!(%addr, fingerprint = %host_fingerprint, "SSH gateway listening");
        Ok(Gateway { addr, host_fingerprint, stop })
    }

    /// What the pages show about it (the host is filled in per request).
    pub fn info(&self) -> SshGatewayInfo {
        SshGatewayInfo { port: self.addr.port(), host_fingerprint: self.host_fingerprint.clone(), host: String::new() }
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}
