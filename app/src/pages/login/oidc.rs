//! The sign-in page's OpenID Connect part, shown when `--oidc-issuer` is
//! set: a plain link to `/auth/oidc/start` (it works with JavaScript off),
//! what became of the last attempt (`?sso=...`, a fixed word the server's
//! callback chose: the text is this page's own, never the URL's), and after
//! a sign-out the offer to end the provider's session too.

use crate::api::auth::request_extension;
use gantry_platform::sso::oidc::SignInOffer;
use leptos::prelude::*;
use leptos_router::hooks::use_query_map;

/// The sentence for a callback's outcome word; none for an unknown word.
fn outcome(code: &str, provider: &str) -> Option<String> {
    Some(match code {
        "unreachable" => format!(
            "{provider} cannot be reached just now. Try again in a while; administrators can sign in with their Gantry password."
        ),
        "no_group" => "Your account is in no group that may use Gantry — ask your administrator.".into(),
        "denied" => "Your account may not use Gantry — ask your administrator.".into(),
        "stale" => "That sign-in had expired or was already used. Please start again.".into(),
        "refused" | "error" => format!(
            "Signing in with {provider} did not succeed. Please try again; if it keeps failing, ask your administrator."
        ),
        _ => return None,
    })
}

#[component]
pub fn OidcSignIn() -> impl IntoView {
    let offer = request_extension::<Option<SignInOffer>>().flatten()?;
    let (code, signed_out, next) =
        use_query_map().with_untracked(|q| (q.get("sso"), q.get("signed_out"), q.get("next").unwrap_or_default()));
    let message = code.and_then(|c| outcome(&c, &offer.display_name));
    let start = if next.is_empty() {
        "/auth/oidc/start".to_string()
    } else {
        format!("/auth/oidc/start?next={}", gantry_core::url::encode_path(&next))
    };
    let end_session = (offer.end_session && signed_out.as_deref() == Some("oidc")).then(|| {
        let name = offer.display_name.clone();
        view! {
            <p class="muted" data-testid="oidc-signed-out">
                "You are signed out of Gantry. "
                <a href="/auth/oidc/end-session" rel="external" data-testid="oidc-end-session">{format!("Sign out of {name} too")}</a>
            </p>
        }
    });
    Some(view! {
        {message.map(|m| view! { <p class="form-error" role="alert" data-testid="oidc-error">{m}</p> })}
        <p class="muted">"or"</p>
        // rel="external": live.js loads the page itself instead of fetching
        // it (a fetch could not follow the redirect to the provider's site,
        // and would spend the one-shot sign-in state or end-session hint).
        <a class="button" href=start rel="external" data-testid="oidc-sign-in">{format!("Sign in with {}", offer.display_name)}</a>
        {end_session}
    })
}

#[cfg(test)]
mod tests {
    use super::outcome;

    #[test]
    fn each_outcome_has_its_own_words_and_unknown_ones_none() {
        assert!(outcome("no_group", "Corp").unwrap().contains("no group that may use Gantry — ask your administrator"));
        assert!(outcome("unreachable", "Corp").unwrap().contains("Corp cannot be reached"));
        assert!(outcome("refused", "Corp").unwrap().contains("Signing in with Corp did not succeed"));
        assert_eq!(outcome("<script>", "Corp"), None);
    }
}
