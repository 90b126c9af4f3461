//! Sign-in, sign-out, changing one's password, and where to go after.

use crate::error::AppError;
use gantry_platform::accounts::User;
use leptos::prelude::*;

/// Session keys besides the user id: the account's session generation when
/// the session was made, and when it was last used (unix seconds).
pub const SESSION_GEN_KEY: &str = "gen";
pub const SESSION_SEEN_KEY: &str = "seen";

/// The client address the request counts against for the sign-in throttle,
/// set by the server's guard (`--trusted-proxy` decides what it is).
#[derive(Clone, Debug)]
pub struct ClientAddress(pub Option<String>);

pub const CHANGE_PASSWORD_PAGE: &str = "/account/password";

/// Where to go after signing in: a path on this site made only of plain
/// URL characters, never `//host` or `/\host`. Anything else — control
/// characters (a tab or newline that a browser strips or a header refuses),
/// spaces, backslashes, another scheme, a very long value — goes to `/`.
pub fn safe_next(next: Option<&str>) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-._~/?=&%+,:;@!*".contains(c);
    match next {
        Some(n) if n.starts_with('/') && !n.starts_with("//") && n.len() <= 512 && n.chars().all(plain) => {
            n.to_string()
        }
        _ => "/".to_string(),
    }
}

pub use crate::model::login_url;

pub(crate) fn request_extension<T: Clone + Send + Sync + 'static>() -> Option<T> {
    use_context::<http::request::Parts>()?.extensions.get::<T>().cloned()
}

pub(crate) fn client_address() -> Option<String> {
    request_extension::<ClientAddress>().and_then(|a| a.0)
}

pub(crate) fn gate() -> std::sync::Arc<gantry_platform::password::Gate> {
    request_extension().unwrap_or_else(gantry_platform::password::Gate::shared)
}

async fn session() -> Result<tower_sessions::Session, AppError> {
    leptos_axum::extract::<tower_sessions::Session>()
        .await
        .map_err(|e| AppError::internal(format!("session unavailable: {e}")))
}

#[server(prefix = "/api", endpoint = "login")]
pub async fn login(username: String, password: String, next: Option<String>) -> Result<User, AppError> {
    use crate::state::{pool, SESSION_USER_KEY};
    use gantry_platform::{audit, PlatformError};
    let pool = pool()?;
    let address = client_address();
    // A local account first, else the directory when one is configured;
    // `sso::password_sign_in` documents the order.
    let ldap = crate::api::sso_admin::ldap();
    let signed_in = gantry_platform::sso::password_sign_in(
        &pool,
        &gate(),
        ldap.as_deref(),
        &username,
        &password,
        address.as_deref(),
    )
    .await;
    // Wrong name or password, or a disabled account: noted with the name
    // tried (the client's text, cut and escaped). Throttled attempts are
    // not (the throttle counts them, and they would let one client write
    // a row per request); malformed ones never reached an account.
    let refused = match &signed_in {
        Err(PlatformError::BadCredentials) => Some("wrong username or password"),
        // A disabled account, or the directory's refusal (no mapped
        // group, the directory down): its own words.
        Err(PlatformError::Refused(why)) => Some(why.as_str()),
        _ => None,
    };
    if let Some(why) = refused {
        let what = format!("sign-in as {} refused: {why}", audit::untrusted_name(username.trim()));
        audit::access(&pool, None, "auth.sign_in_failed", &what, address.as_deref(), None).await;
    }
    let user = signed_in?;
    let session = session().await?;
    // A new id on sign-in, so a planted session id is worth nothing.
    session.cycle_id().await.map_err(AppError::internal)?;
    session.insert(SESSION_USER_KEY, user.id).await.map_err(AppError::internal)?;
    session.insert(SESSION_GEN_KEY, user.session_gen).await.map_err(AppError::internal)?;
    tracing::info!(user = %user.username, "signed in");
    audit::access(
        &pool,
        Some(user.id),
        "auth.sign_in",
        &format!("{} signed in", user.username),
        address.as_deref(),
        None,
    )
    .await;
    let to = if user.must_change_password { CHANGE_PASSWORD_PAGE.to_string() } else { safe_next(next.as_deref()) };
    redirect_form_post(&to);
    Ok(user)
}

#[server(prefix = "/api", endpoint = "logout")]
pub async fn logout() -> Result<(), AppError> {
    if let Ok(session) = leptos_axum::extract::<tower_sessions::Session>().await {
        // Noted first: a request of this session still running would save
        // it again when it ends (see `accounts::note_signed_out`). Until it
        // would have expired anyway, with a day to spare.
        if let Some(id) = session.id() {
            let until = session.expiry_date().unix_timestamp() + 24 * 3600;
            gantry_platform::accounts::note_signed_out(&crate::state::pool()?, &id.to_string(), until).await?;
        }
        // Signed in through OpenID Connect: its ID token, the hint for the
        // provider's end-session that the sign-in page offers afterwards.
        use gantry_platform::sso::oidc::{SignInOffer, SESSION_ID_TOKEN_KEY, SESSION_LOGOUT_HINT_KEY};
        let oidc_hint =
            session.get::<String>(SESSION_ID_TOKEN_KEY).await.ok().flatten().filter(|_| {
                request_extension::<Option<SignInOffer>>().flatten().is_some_and(|offer| offer.end_session)
            });
        session.flush().await.map_err(AppError::internal)?;
        if let Some(hint) = &oidc_hint {
            // A new, anonymous session holds only the hint.
            session.insert(SESSION_LOGOUT_HINT_KEY, hint).await.map_err(AppError::internal)?;
        }
        if let Some(user) = crate::state::request_user() {
            let what = format!("{} signed out", user.username);
            gantry_platform::audit::access(
                &crate::state::pool()?,
                Some(user.id),
                "auth.sign_out",
                &what,
                client_address().as_deref(),
                None,
            )
            .await;
        }
        if oidc_hint.is_some() {
            redirect_form_post("/login?signed_out=oidc");
            return Ok(());
        }
    }
    redirect_form_post("/login");
    Ok(())
}

/// The signed-in user's own change (also the way out of a temporary
/// password). Other sessions of the account end; this one continues.
#[server(prefix = "/api", endpoint = "change_password")]
pub async fn change_password(current: String, new: String, repeat: String) -> Result<User, AppError> {
    let me = crate::state::auth()?;
    if new != repeat {
        return Err(AppError::Invalid("the two new passwords differ".into()).respond());
    }
    let pool = crate::state::pool()?;
    let user =
        gantry_platform::accounts::change_password(&pool, &gate(), &me, &current, &new, client_address().as_deref())
            .await?;
    let session = session().await?;
    session.cycle_id().await.map_err(AppError::internal)?;
    session.insert(SESSION_GEN_KEY, user.session_gen).await.map_err(AppError::internal)?;
    // Without JavaScript the page says so through the signed `done` marker
    // (an unsigned `?changed=1` let a bare link claim the password changed).
    redirect_form_post("/account/password");
    Ok(user)
}

/// A plain HTML form post (JavaScript off) gets a real redirect; with
/// JavaScript the page updates the session signal and navigates itself.
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
    use super::{login_url, safe_next};

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next(Some("/admin")), "/admin");
        assert_eq!(safe_next(Some("/machines/3?tab=logs&x=1")), "/machines/3?tab=logs&x=1");
        for bad in [
            "//evil.example",
            "/\\evil.example",
            "https://evil.example",
            "https:/x",
            "",
            "/\t/evil.example",
            "/\n",
            "/\r",
            "/ x",
            "/é",
        ] {
            assert_eq!(safe_next(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(safe_next(Some(&format!("/{}", "a".repeat(600)))), "/");
        assert_eq!(safe_next(None), "/");
    }

    #[test]
    fn login_url_encodes_the_way_back() {
        assert_eq!(login_url("/machines?x=1"), "/login?next=/machines%3Fx%3D1");
    }
}
