//! One SSH connection: russh's handler. Authentication admits a key and a
//! machine (`auth`); from then on the connection holds a slot (the
//! terminal limits), a session row in the terminal's table (audited at
//! open and close) and a registration with this gateway's registry, whose
//! watcher signals when the account changed, the machine left `running`
//! or an administrator closed it. A watch task then disconnects the client
//! with the reason, as it does when the connection was idle too long or
//! the server stops. Channels are bridged by their own tasks.

use super::{auth, exec_bridge, forward};
use crate::routes::terminal::{Full, Slot, Slots};
use gantry_platform::{
    accounts::User,
    db::Pool,
    executor::Executor,
    fleet::Fleet,
    workspace::{sessions, sessions::Registry, Limits, Target},
};
use russh::{
    keys::HashAlg,
    server::{Auth, ChannelOpenHandle, Msg, PublicKeyOffer, Session, VerifiedPublicKey},
    Channel, ChannelId, ChannelOpenFailure, Disconnect,
};
use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

/// What every connection of this gateway shares.
pub struct Shared {
    pub pool: Pool,
    pub fleet: Fleet,
    pub limits: Limits,
    registry: Registry,
    slots: Slots,
    pub stopping: tokio::sync::watch::Receiver<bool>,
}

impl Shared {
    pub fn new(pool: Pool, fleet: Fleet, limits: Limits, stopping: tokio::sync::watch::Receiver<bool>) -> Arc<Shared> {
        let registry = Registry::start(pool.clone());
        Arc::new(Shared { pool, fleet, limits, registry, slots: Slots::default(), stopping })
    }
}

/// When a byte last went either way on any channel: the idle limit counts from it.
pub struct Activity {
    started: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Activity {
        Activity { started: Instant::now(), last_ms: AtomicU64::new(0) }
    }
    pub fn touch(&self) {
        self.last_ms.store(self.started.elapsed().as_millis() as u64, Ordering::Relaxed);
    }
    fn quiet(&self) -> Duration {
        Duration::from_millis(
            (self.started.elapsed().as_millis() as u64).saturating_sub(self.last_ms.load(Ordering::Relaxed)),
        )
    }
}

/// An admitted connection, shared with its channels' tasks.
pub struct Entered {
    pub pool: Pool,
    pub user: User,
    pub target: Target,
    /// The container and its node's engine; `Err`: why no channel can start
    /// (the machine is not running, the limits are reached…).
    pub inside: Result<(String, Executor), String>,
    pub activity: Activity,
    /// Where from, for the audit lines.
    pub client: String,
    _slot: Option<Slot>,
}

/// russh's handler for one connection.
pub struct Conn {
    shared: Arc<Shared>,
    peer: Option<SocketAddr>,
    entered: Option<Arc<Entered>>,
    session_id: Option<i64>,
    registration: Option<sessions::Registration>,
    /// Set by the watch task before it disconnects: the session row's reason.
    close_reason: Arc<Mutex<Option<String>>>,
    /// Dropped with the connection: ends the watch task.
    _gone: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Conn {
    pub fn new(shared: Arc<Shared>, peer: Option<SocketAddr>) -> Conn {
        Conn {
            shared,
            peer,
            entered: None,
            session_id: None,
            registration: None,
            close_reason: Arc::default(),
            _gone: None,
        }
    }

    async fn refuse(&self, why: &str) -> Auth {
        tracing::info!(peer = ?self.peer, why, "SSH key refused");
        auth::count_failure(&self.shared.pool, self.peer.map(|p| p.ip())).await;
        Auth::reject()
    }

    /// After admission: the container, the engine and a slot, or why not.
    async fn inside(&self, user: &User, target: &Target) -> (Result<(String, Executor), String>, Option<Slot>) {
        let (container, node) = match target.require_running() {
            Ok((c, n)) => (c.to_string(), n),
            Err(r) => return (Err(r.to_string()), None),
        };
        let exec = match self.shared.fleet.executor(&self.shared.pool, node).await {
            Ok(e) if e.is_simulated() => {
                return (Err("SSH needs a Docker node: this machine runs on the simulated executor".into()), None)
            }
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(error = %e, "SSH: the machine's engine");
                return (Err("the machine's node does not answer now; try again in a moment".into()), None);
            }
        };
        let limits = &self.shared.limits;
        match self.shared.slots.take(user.id, limits.max_terminals, limits.max_terminals_per_user) {
            Ok(slot) => (Ok((container, exec)), Some(slot)),
            Err(Full::Server(max)) => {
                (Err(format!("this server has {max} SSH sessions open, its limit; try again later")), None)
            }
            Err(Full::User(max)) => (
                Err(format!(
                    "you have {max} SSH sessions open on this server, the limit per user; close one to open another"
                )),
                None,
            ),
        }
    }
}

impl russh::server::Handler for Conn {
    type Error = russh::Error;

    async fn auth_publickey_offered(&mut self, user: &str, offer: PublicKeyOffer<'_>) -> Result<Auth, Self::Error> {
        let pool = &self.shared.pool;
        let peer = self.peer.map(|p| p.ip());
        match auth::locked(pool, peer).await {
            Ok(None) => {}
            Ok(Some(why)) => return Ok(self.refuse(&why).await),
            Err(e) => {
                tracing::warn!(error = %e, "SSH: the throttle could not be read");
                return Ok(Auth::reject());
            }
        }
        let fingerprint = offer.public_key.fingerprint(HashAlg::Sha256).to_string();
        match auth::account(pool, &fingerprint).await {
            Ok(Ok(_)) => Ok(Auth::Accept),
            Ok(Err(why)) => Ok(self.refuse(&format!("{why} (user name {user:?})")).await),
            Err(e) => {
                tracing::warn!(error = %e, "SSH: a key could not be looked up");
                Ok(Auth::reject())
            }
        }
    }

    async fn auth_publickey(&mut self, user: &str, key: VerifiedPublicKey<'_>) -> Result<Auth, Self::Error> {
        let fingerprint = key.public_key.fingerprint(HashAlg::Sha256).to_string();
        let admitted = match auth::admit(&self.shared.pool, user, &fingerprint).await {
            Ok(Ok(a)) => a,
            Ok(Err(why)) => return Ok(self.refuse(&why).await),
            Err(e) => {
                tracing::warn!(error = %e, "SSH: admission failed");
                return Ok(Auth::reject());
            }
        };
        let auth::Admitted { key_id, user, target } = admitted;
        let (inside, slot) = self.inside(&user, &target).await;
        let pool = self.shared.pool.clone();
        let peer = self.peer.map(|p| p.to_string()).unwrap_or_default();
        let client = format!("ssh {peer} key {fingerprint}");
        if inside.is_ok() {
            match sessions::open(
                &pool,
                &user,
                target.machine_id,
                &target.name,
                self.shared.registry.server_id(),
                &client,
            )
            .await
            {
                Ok(id) => {
                    self.registration = Some(self.shared.registry.register(id));
                    self.session_id = Some(id);
                }
                Err(e) => {
                    tracing::error!(error = %e, "SSH: the session could not be recorded");
                    return Ok(Auth::reject());
                }
            }
        }
        if let Err(e) = gantry_platform::ssh_keys::note_used(&pool, key_id).await {
            tracing::warn!(error = %e, "SSH: could not note a key's use");
        }
        tracing::info!(user = %user.username, machine = %target.name, session = ?self.session_id, "SSH session opened");
        let entered = Entered { pool, user, target, inside, activity: Activity::new(), client, _slot: slot };
        self.entered = Some(Arc::new(entered));
        Ok(Auth::Accept)
    }

    async fn auth_succeeded(&mut self, session: &mut Session) -> Result<(), Self::Error> {
        let (Some(entered), Some(registration)) = (self.entered.clone(), self.registration.take()) else {
            return Ok(());
        };
        let (gone, gone_rx) = tokio::sync::oneshot::channel();
        self._gone = Some(gone);
        tokio::spawn(watch(
            session.handle(),
            entered,
            registration,
            Duration::from_secs(self.shared.limits.idle_secs),
            self.shared.stopping.clone(),
            self.close_reason.clone(),
            gone_rx,
        ));
        Ok(())
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        let Some(entered) = self.entered.clone() else {
            reply.reject(ChannelOpenFailure::AdministrativelyProhibited).await;
            return Ok(());
        };
        reply.accept().await;
        tokio::spawn(exec_bridge::run(channel, entered));
        Ok(())
    }

    async fn channel_open_direct_tcpip(
        &mut self,
        channel: Channel<Msg>,
        host: &str,
        port: u32,
        _originator_address: &str,
        _originator_port: u32,
        reply: ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        let Some(entered) = self.entered.clone() else {
            reply.reject(ChannelOpenFailure::AdministrativelyProhibited).await;
            return Ok(());
        };
        match forward::target_port(host, port, &entered) {
            Ok(port) => {
                reply.accept().await;
                tokio::spawn(forward::run(channel, entered, port));
            }
            Err(why) => {
                tracing::info!(machine = %entered.target.name, host, port, why, "SSH forward refused");
                reply.reject(ChannelOpenFailure::Other { code: 1, reason: why }).await;
            }
        }
        Ok(())
    }

    // Requests on a session channel: the channel's task acts on them (it
    // sees the same messages); here they are answered.
    async fn pty_request(
        &mut self,
        channel: ChannelId,
        _term: &str,
        _col_width: u32,
        _row_height: u32,
        _pix_width: u32,
        _pix_height: u32,
        _modes: &[(russh::Pty, u32)],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn shell_request(&mut self, channel: ChannelId, session: &mut Session) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn exec_request(
        &mut self,
        channel: ChannelId,
        _data: &[u8],
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_success(channel)
    }

    async fn subsystem_request(
        &mut self,
        channel: ChannelId,
        name: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        if name == "sftp" {
            session.channel_success(channel)
        } else {
            session.channel_failure(channel)
        }
    }

    async fn x11_request(
        &mut self,
        channel: ChannelId,
        _single_connection: bool,
        _x11_auth_protocol: &str,
        _x11_auth_cookie: &str,
        _x11_screen_number: u32,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.channel_failure(channel)
    }

    // Agent forwarding and remote forwards (`ssh -A`, `ssh -R`) are refused:
    // the defaults answer "no"; OpenSSH says so to its user.
}

/// Ends the connection, with its reason, when the registry signals, the
/// connection was idle too long, or the server stops; returns quietly
/// when the connection ended first.
async fn watch(
    handle: russh::server::Handle,
    entered: Arc<Entered>,
    mut registration: sessions::Registration,
    idle: Duration,
    mut stopping: tokio::sync::watch::Receiver<bool>,
    close_reason: Arc<Mutex<Option<String>>>,
    gone: tokio::sync::oneshot::Receiver<()>,
) {
    let signalled = async {
        loop {
            if let Some(reason) = registration.closed.borrow_and_update().clone() {
                return reason.text;
            }
            if registration.closed.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let idle_out = async {
        loop {
            let quiet = entered.activity.quiet();
            if quiet >= idle {
                return format!(
                    "closed after {} with nothing typed or printed",
                    sessions::duration_text(idle.as_secs() as i64)
                );
            }
            tokio::time::sleep(idle - quiet).await;
        }
    };
    let reason = tokio::select! {
        r = signalled => r,
        r = idle_out => r,
        _ = stopping.wait_for(|s| *s) => "the server is shutting down".to_string(),
        _ = gone => return,
    };
    tracing::info!(machine = %entered.target.name, user = %entered.user.username, reason, "SSH session ended by the server");
    *close_reason.lock().unwrap_or_else(|e| e.into_inner()) = Some(reason.clone());
    let _ = handle.disconnect(Disconnect::ByApplication, reason, "en".into()).await;
    drop(registration);
}

impl Drop for Conn {
    /// The connection ended (either side): its session row is closed with
    /// the reason the watch gave, or as the client's.
    fn drop(&mut self) {
        let Some(id) = self.session_id else { return };
        let reason = self
            .close_reason
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .unwrap_or_else(|| "the SSH client disconnected".to_string());
        let pool = self.shared.pool.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if let Err(e) = sessions::close(&pool, id, &reason).await {
                    tracing::warn!(error = %e, session = id, "could not record an SSH session's close");
                }
            });
        }
    }
}
