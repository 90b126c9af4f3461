//! SSH public keys for the SSH gateway (issue #34): list, add, remove the
//! signed-in user's own keys, and what the machine and account pages show
//! about the gateway (its port and host-key fingerprint).

use crate::error::AppError;
use gantry_platform::ssh_keys::SshKeyView;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// The SSH gateway as the pages describe it; the server puts it in each
/// request's extensions when `--ssh-listen` is on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshGatewayInfo {
    /// The port clients connect to.
    pub port: u16,
    /// The host key's fingerprint ("SHA256:…"), to check on first connect.
    pub host_fingerprint: String,
    /// The host name clients use: the portal's own (from the request).
    #[serde(default)]
    pub host: String,
}

#[server(prefix = "/api", endpoint = "my_ssh_keys")]
pub async fn my_ssh_keys() -> Result<Vec<SshKeyView>, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::ssh_keys::list(&crate::state::pool()?, &user).await?)
}

/// Adds a public key (one OpenSSH line) under `name` (empty: its comment).
/// A bad, short, huge or duplicate key is refused with the reason.
#[server(prefix = "/api", endpoint = "add_ssh_key")]
pub async fn add_ssh_key(name: String, public_key: String) -> Result<SshKeyView, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::ssh_keys::add(&crate::state::pool()?, &user, &name, &public_key).await?)
}

/// Removes one of the user's own keys; another's is "not found".
#[server(prefix = "/api", endpoint = "remove_ssh_key")]
pub async fn remove_ssh_key(key_id: i64) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    gantry_platform::ssh_keys::remove(&crate::state::pool()?, &user, key_id).await?;
    Ok(key_id)
}

/// The gateway, if this server runs one; its host is the name this page
/// was asked for under (the Host header, without its port).
#[server(prefix = "/api", endpoint = "ssh_gateway")]
pub async fn ssh_gateway() -> Result<Option<SshGatewayInfo>, AppError> {
    crate::state::auth()?;
    let Some(mut gw) = crate::api::auth::request_extension::<SshGatewayInfo>() else { return Ok(None) };
    let parts = use_context::<http::request::Parts>();
    let host = parts
        .as_ref()
        .and_then(|p| p.headers.get(http::header::HOST))
        .and_then(|h| h.to_str().ok())
        .map(host_only)
        .unwrap_or_default();
    gw.host = if host.is_empty() { "localhost".into() } else { host };
    Ok(Some(gw))
}

/// "example.org:3000" → "example.org"; "[::1]:3000" → "::1".
fn host_only(authority: &str) -> String {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default().to_string();
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h).to_string()
}

/// How the signed-in user reaches one machine over SSH: the SSH user name
/// (`NAME` for one's own machine, `OWNER/NAME` for an administrator
/// reaching someone else's) and the gateway. `None` when this server runs
/// no gateway; not found for machines the user may not enter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SshAccess {
    pub ssh_user: String,
    /// The machine's name, for the `Host gantry-NAME` alias.
    pub machine: String,
    pub gateway: SshGatewayInfo,
}

#[server(prefix = "/api", endpoint = "machine_ssh_access")]
pub async fn machine_ssh_access(machine_id: i64) -> Result<Option<SshAccess>, AppError> {
    use gantry_platform::workspace::{self, Refusal};
    let user = crate::state::auth()?;
    let Some(gateway) = ssh_gateway().await? else { return Ok(None) };
    let target = match workspace::target(&crate::state::pool()?, &user, machine_id).await? {
        Ok(t) => t,
        Err(Refusal::NotFound) => return Err(AppError::NotFound(format!("machine #{machine_id}"))),
        Err(_) => return Ok(None),
    };
    let ssh_user =
        if target.owner_id == user.id { target.name.clone() } else { format!("{}/{}", target.owner, target.name) };
    Ok(Some(SshAccess { ssh_user, machine: target.name, gateway }))
}
