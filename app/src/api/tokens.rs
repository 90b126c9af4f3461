//! Personal API tokens (for `/api/v1/...` scripts): create, list, revoke.
//! A token's secret exists in clear only in the answer to its create.

use crate::error::AppError;
use gantry_platform::tokens::TokenView;
use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// A token just made, with its secret: the answer to its create, and what
/// waits in the session for the Tokens page of a no-JavaScript post.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreatedToken {
    pub token: TokenView,
    pub secret: String,
}

/// Session key holding a just-made token for a no-JavaScript form post,
/// until the page it is redirected to shows it (and removes it).
const FLASH_KEY: &str = "new_api_token";

#[server(prefix = "/api", endpoint = "my_tokens")]
pub async fn my_tokens() -> Result<Vec<TokenView>, AppError> {
    let user = crate::state::auth()?;
    Ok(gantry_platform::tokens::list(&crate::state::pool()?, &user).await?)
}

/// Makes a token and answers with its secret, once. The account's password
/// is asked for (checked and throttled as a sign-in is): a session alone —
/// a stolen cookie — does not make one; a wrong password makes nothing.
/// A plain HTML form post
/// gets a redirect back to the page, which cannot carry the answer; the
/// secret then waits in the (server-side) session for that page's one
/// read, so it is shown with JavaScript off too and never put in a URL.
#[server(prefix = "/api", endpoint = "create_token")]
pub async fn create_token(name: String, password: String, scope: Option<String>) -> Result<CreatedToken, AppError> {
    use crate::api::auth::{client_address, gate, request_extension};
    use gantry_platform::tokens::{TokenLifetime, TokenScope};
    let user = crate::state::auth()?;
    let lifetime = request_extension::<TokenLifetime>().unwrap_or_default();
    // No scope (an older form): write, what every token was before scopes.
    let scope = match scope.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
        None => TokenScope::Write,
        Some(s) => TokenScope::parse(s)
            .ok_or_else(|| AppError::Invalid("scope must be read, write or admin".into()).respond())?,
    };
    let (token, secret) = gantry_platform::tokens::create_confirmed_scoped(
        &crate::state::pool()?,
        &gate(),
        &user,
        &password,
        &name,
        client_address().as_deref(),
        lifetime,
        scope,
    )
    .await?;
    let created = CreatedToken { token, secret };
    if crate::api::compute::form_post() {
        let session = session().await?;
        session.insert(FLASH_KEY, &created).await.map_err(|e| AppError::Internal(e.to_string()))?;
        leptos_axum::redirect("/tokens");
    }
    Ok(created)
}

/// The token a no-JavaScript create left for this page, removed as it is read.
#[server(prefix = "/api", endpoint = "take_new_token")]
pub async fn take_new_token() -> Result<Option<CreatedToken>, AppError> {
    crate::state::auth()?;
    let session = session().await?;
    let failed = |e: tower_sessions::session::Error| AppError::internal(e);
    // Looked at first: a removal marks the session changed even when there
    // was nothing to remove, and saving it on every view would make the
    // page new on every view (`page_cache`).
    if session.get::<CreatedToken>(FLASH_KEY).await.map_err(failed)?.is_none() {
        return Ok(None);
    }
    session.remove::<CreatedToken>(FLASH_KEY).await.map_err(failed)
}

/// Revokes one of the user's own tokens; another's is "not found".
#[server(prefix = "/api", endpoint = "revoke_token")]
pub async fn revoke_token(token_id: i64) -> Result<i64, AppError> {
    let user = crate::state::auth()?;
    gantry_platform::tokens::revoke(&crate::state::pool()?, &user, token_id).await?;
    Ok(token_id)
}

async fn session() -> Result<tower_sessions::Session, AppError> {
    leptos_axum::extract::<tower_sessions::Session>()
        .await
        .map_err(|e| AppError::Internal(format!("session unavailable: {e}")))
}
