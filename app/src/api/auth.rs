//! Sign-in and sign-out.

use crate::{error::AppError, model::Me};
use leptos::prelude::*;

/// Where to go after signing in: only paths on this site, never `//host`.
pub fn safe_next(next: Option<&str>) -> String {
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && !n.starts_with("/\\") && n.len() <= 512 => n.to_string(),
        _ => "/".to_string(),
    }
}

#[server(prefix = "/api", endpoint = "login")]
pub async fn login(username: String, password: String, next: Option<String>) -> Result<Me, AppError> {
    use crate::state::{pool, SESSION_USER_KEY};
    use axum::extract::ConnectInfo;
    use std::net::SocketAddr;
    use tower_sessions::Session;

    let pool = pool()?;
    let address = leptos_axum::extract::<ConnectInfo<SocketAddr>>().await.ok().map(|ci| ci.0.ip().to_string());
    let user = gantry_platform::accounts::authenticate(&pool, &username, &password, address.as_deref()).await?;
    let session = leptos_axum::extract::<Session>()
        .await
        .map_err(|e| AppError::Internal(format!("session unavailable: {e}")))?;
    // A new id on sign-in, so a planted session id is worth nothing.
    session.cycle_id().await.map_err(|e| AppError::Internal(e.to_string()))?;
    session.insert(SESSION_USER_KEY, user.id).await.map_err(|e| AppError::Internal(e.to_string()))?;
    tracing::info!(user = %user.username, "signed in");
    redirect_form_post(&safe_next(next.as_deref()));
    Ok(user.into())
}

#[server(prefix = "/api", endpoint = "logout")]
pub async fn logout() -> Result<(), AppError> {
    use tower_sessions::Session;
    if let Ok(session) = leptos_axum::extract::<Session>().await {
        session.flush().await.map_err(|e| AppError::Internal(e.to_string()))?;
    }
    redirect_form_post("/login");
    Ok(())
}

/// A plain HTML form post (JavaScript off) gets a real redirect; with
/// JavaScript the page updates the session signal and navigates itself.
#[cfg(feature = "ssr")]
fn redirect_form_post(path: &str) {
    let form_post = use_context::<http::request::Parts>().is_some_and(|p| {
        p.headers.get(http::header::ACCEPT).and_then(|a| a.to_str().ok()).is_some_and(|a| a.contains("text/html"))
    });
    if form_post {
        leptos_axum::redirect(path);
    }
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next(Some("/admin")), "/admin");
        assert_eq!(safe_next(Some("//evil.example")), "/");
        assert_eq!(safe_next(Some("/\\evil.example")), "/");
        assert_eq!(safe_next(Some("https://evil.example")), "/");
        assert_eq!(safe_next(Some("")), "/");
        assert_eq!(safe_next(None), "/");
    }
}
