//! Sign-in through the OpenID Connect provider (`--oidc-issuer`):
//! `GET /auth/oidc/start` sends the browser to the provider with a fresh
//! `state`, `nonce` and PKCE challenge, kept in the session for one
//! callback; `GET /auth/oidc/callback` takes them back out (once), has the
//! platform check the provider's answer, signs the person in through the
//! directory mapping (`sso::sign_in_external`) and makes the Gantry session
//! exactly as the password sign-in does (a new session id, the account's
//! session generation, audited); `GET /auth/oidc/end-session` sends a
//! signed-out browser on to the provider's end-session URL.
//!
//! Every failure goes back to the sign-in page with a fixed word
//! (`/login?sso=...`): the page says it in plain words, the password form
//! stays there (local admins can still sign in), and nothing tells whether
//! an account exists. The reason goes to the log and the audit trail.

use app::{
    api::auth::{safe_next, ClientAddress, CHANGE_PASSWORD_PAGE, SESSION_GEN_KEY},
    state::{AppState, SESSION_USER_KEY},
};
use axum::{
    extract::{Extension, Query, State},
    response::{IntoResponse, Redirect, Response},
    routing::get,
    Router,
};
use gantry_platform::{
    audit,
    sso::{
        self,
        oidc::{Oidc, Pending, SESSION_ID_TOKEN_KEY, SESSION_LOGOUT_HINT_KEY, SESSION_PENDING_KEY},
    },
    PlatformError,
};
use serde::Deserialize;
use std::sync::Arc;
use tower_sessions::Session;

/// No routes at all when OpenID Connect is not configured.
pub fn routes(oidc: Option<Arc<Oidc>>) -> Router<AppState> {
    let Some(oidc) = oidc else { return Router::new() };
    Router::new()
        .route("/auth/oidc/start", get(start))
        .route("/auth/oidc/callback", get(callback))
        .route("/auth/oidc/end-session", get(end_session))
        .layer(Extension(oidc))
}

fn back_to_sign_in(code: &str) -> Response {
    Redirect::to(&format!("/login?sso={code}")).into_response()
}

#[derive(Deserialize)]
struct StartQuery {
    next: Option<String>,
}

async fn start(Extension(oidc): Extension<Arc<Oidc>>, session: Session, Query(q): Query<StartQuery>) -> Response {
    // A provider that does not answer now gets Gantry's page saying so,
    // not the browser's connection error at the provider's address.
    if let Err(why) = oidc.reachable().await {
        tracing::warn!(%why, "OpenID Connect sign-in: the provider cannot be reached");
        return back_to_sign_in("unreachable");
    }
    let (url, pending) = oidc.begin(safe_next(q.next.as_deref()), gantry_platform::now());
    if let Err(e) = session.insert(SESSION_PENDING_KEY, &pending).await {
        tracing::error!(error = %e, "OpenID Connect sign-in: the session could not keep the sign-in");
        return back_to_sign_in("error");
    }
    Redirect::to(&url).into_response()
}

#[derive(Deserialize)]
struct CallbackQuery {
    state: Option<String>,
    code: Option<String>,
    error: Option<String>,
}

async fn callback(
    State(state): State<AppState>,
    Extension(oidc): Extension<Arc<Oidc>>,
    address: Option<Extension<ClientAddress>>,
    session: Session,
    Query(q): Query<CallbackQuery>,
) -> Response {
    let address = address.and_then(|Extension(ClientAddress(a))| a);
    let pool = &state.pool;
    let refused = |why: String| {
        let pool = pool.clone();
        let address = address.clone();
        async move {
            tracing::warn!(%why, "OpenID Connect sign-in refused");
            let what = format!("sign-in through OpenID Connect refused: {}", audit::untrusted_name(&why));
            audit::access(&pool, None, "auth.sign_in_failed", &what, address.as_deref(), None).await;
        }
    };
    // One callback per started sign-in: taken out of the session before
    // anything else, so the same answer (or a replay of it) meets nothing.
    let pending: Option<Pending> = session.remove(SESSION_PENDING_KEY).await.ok().flatten();
    if let Some(error) = q.error {
        refused(format!("the provider answered {error}")).await;
        return back_to_sign_in("refused");
    }
    let (Some(pending), Some(st), Some(code)) = (pending, q.state, q.code) else {
        refused("no sign-in of this session awaits this answer".into()).await;
        return back_to_sign_in("stale");
    };
    let next = pending.next.clone();
    let verified = match oidc.finish(pending, &st, &code, gantry_platform::now()).await {
        Ok(v) => v,
        Err(failure) => {
            refused(failure.to_string()).await;
            return back_to_sign_in(failure.code());
        }
    };
    let user = match sso::sign_in_external(pool, &verified.identity).await {
        Ok(user) => user,
        Err(PlatformError::Refused(why)) => {
            refused(format!("{} ({}): {why}", verified.identity.username, verified.identity.subject)).await;
            let code = if why == sso::NO_GROUP_MESSAGE { "no_group" } else { "denied" };
            return back_to_sign_in(code);
        }
        Err(e) => {
            tracing::error!(error = %e, "OpenID Connect sign-in: the account could not be signed in");
            return back_to_sign_in("error");
        }
    };
    // As the password sign-in (`app::api::auth::login`): a new id, so a
    // planted session id is worth nothing; the account's generation, so
    // ending its sessions ends this one.
    let made = async {
        session.cycle_id().await?;
        session.insert(SESSION_USER_KEY, user.id).await?;
        session.insert(SESSION_GEN_KEY, user.session_gen).await?;
        session.insert(SESSION_ID_TOKEN_KEY, &verified.id_token).await
    };
    if let Err(e) = made.await {
        tracing::error!(error = %e, "OpenID Connect sign-in: the session could not be made");
        return back_to_sign_in("error");
    }
    tracing::info!(user = %user.username, "signed in through OpenID Connect");
    let what = format!("{} signed in through OpenID Connect", user.username);
    audit::access(pool, Some(user.id), "auth.sign_in", &what, address.as_deref(), None).await;
    let to = if user.must_change_password { CHANGE_PASSWORD_PAGE.to_string() } else { next };
    Redirect::to(&to).into_response()
}

/// After sign-out: on to the provider's end-session URL with the ID token
/// the ended session kept (taken once), or back to the sign-in page.
async fn end_session(Extension(oidc): Extension<Arc<Oidc>>, session: Session) -> Response {
    let hint: Option<String> = session.remove(SESSION_LOGOUT_HINT_KEY).await.ok().flatten();
    match oidc.end_session_url(hint.as_deref()) {
        Some(url) => Redirect::to(&url).into_response(),
        None => Redirect::to("/login").into_response(),
    }
}
