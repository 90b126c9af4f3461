//! The accept loop: one russh session per TCP connection, with settings
//! that suit the gateway — public keys only, no inactivity cut by russh
//! (the session's own idle limit counts channel bytes), keepalives to find
//! dead clients, Nagle off for keystrokes.

use super::session::{Conn, Shared};
use russh::{keys::PrivateKey, server::Config, MethodKind, MethodSet};
use std::{sync::Arc, time::Duration};

pub async fn serve(listener: tokio::net::TcpListener, key: PrivateKey, shared: Arc<Shared>) {
    let config = Arc::new(Config {
        server_id: russh::SshId::Standard("SSH-2.0-Gantry".into()),
        methods: MethodSet::from(&[MethodKind::PublicKey][..]),
        keys: vec![key],
        auth_rejection_time: Duration::from_secs(1),
        auth_rejection_time_initial: Some(Duration::ZERO),
        max_auth_attempts: 6,
        inactivity_timeout: None,
        keepalive_interval: Some(Duration::from_secs(30)),
        keepalive_max: 4,
        nodelay: true,
        ..Default::default()
    });
    let mut stopping = shared.stopping.clone();
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = stopping.wait_for(|s| *s) => return,
        };
        let (socket, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of descriptors, mostly: wait a little instead of spinning.
                tracing::warn!(error = %e, "SSH gateway: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = socket.set_nodelay(true);
        let handler = Conn::new(shared.clone(), Some(peer));
        let config = config.clone();
        tokio::spawn(async move {
            match russh::server::run_stream(config, socket, handler).await {
                Ok(session) => {
                    if let Err(e) = session.await {
                        tracing::debug!(%peer, error = %e, "SSH connection ended with an error");
                    }
                }
                Err(e) => tracing::debug!(%peer, error = %e, "SSH connection setup failed"),
            }
        });
    }
}
