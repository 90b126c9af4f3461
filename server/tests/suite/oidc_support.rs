//! A Gantry router on 127.0.0.1:0 signing in through a real OpenID Connect
//! provider (`gantry_testkit::oidc`: oidc-provider from npm on port 0), and
//! a browser-like driver of the provider's sign-in pages: it follows the
//! redirects, submits the provider's forms as a person would, and stops at
//! the redirect back to Gantry's callback (tests look at it, tamper with it
//! or replay it).

use crate::common::ADMIN_PASSWORD;
use gantry_core::Role;
use gantry_platform::{
    db::Pool,
    sso::oidc::{Oidc, OidcSettings},
};
use gantry_server::{bootstrap, router, security::Security};
use gantry_testkit::{
    install,
    oidc::{OidcProvider, User, CLIENT_ID, CLIENT_SECRET},
};
use reqwest::{header, StatusCode};
use std::{net::SocketAddr, sync::Arc};

pub const DISPLAY_NAME: &str = "Test IdP";

pub struct OidcServer {
    pub addr: SocketAddr,
    pub pool: Pool,
    pub provider: OidcProvider,
    task: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Drop for OidcServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The provider's users: alice and carol in directory groups mapped to
/// Gantry's default group, bob only in an unmapped one.
pub const USERS: &[User<'static>] = &[
    User { name: "alice", groups: &["gpu-users"] },
    User { name: "carol", groups: &["gpu-users", "other"] },
    User { name: "bob", groups: &["other"] },
];

pub async fn start() -> OidcServer {
    let dir = tempfile::tempdir().unwrap();
    let pool = install::database(dir.path()).await;
    bootstrap::ensure_admin(&pool, "admin", Some(ADMIN_PASSWORD)).await.unwrap();
    let (admin,): (i64,) =
        sqlx::query_as("SELECT id FROM users WHERE username = 'admin'").fetch_one(&pool).await.unwrap();
    gantry_platform::sso::mapping::add_mapping(&pool, admin, "gpu-users", "default", Role::User, 100).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let origin = format!("http://{addr}");
    let provider = OidcProvider::start(&origin, USERS);
    let oidc = Oidc::discover(settings(&provider.issuer(), &origin)).await.unwrap();
    let security = Security { oidc: Some(Arc::new(oidc)), ..Security::default() };
    let opts = router::Options {
        site_root: dir.path().join("site"),
        site_addr: addr,
        secure_cookies: false,
        public_origin: None,
        page_cache_ms: router::PAGE_CACHE_MS,
    };
    let dispatch = Arc::new(tokio::sync::Notify::new());
    let admissions = gantry_platform::machines::Admissions::start(pool.clone(), dispatch.clone());
    let fleet = gantry_platform::fleet::Fleet::new();
    let limits = gantry_platform::workspace::Limits::default();
    let app = router::build_secured(opts, security, limits, pool.clone(), admissions, dispatch, fleet).await.unwrap();
    let task = tokio::spawn(async move { router::serve(listener, app).await.unwrap() });
    OidcServer { addr, pool, provider, task, _dir: dir }
}

pub fn settings(issuer: &str, origin: &str) -> OidcSettings {
    OidcSettings {
        issuer: issuer.to_string(),
        client_id: CLIENT_ID.into(),
        client_secret: Some(CLIENT_SECRET.into()),
        scopes: ["openid", "profile", "email", "groups"].map(String::from).to_vec(),
        username_claim: "preferred_username".into(),
        groups_claim: "groups".into(),
        redirect_url: format!("{origin}/auth/oidc/callback"),
        post_logout_url: format!("{origin}/login"),
        ca_pem: None,
        display_name: DISPLAY_NAME.into(),
    }
}

impl OidcServer {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn browser(&self) -> reqwest::Client {
        gantry_testkit::serve::browser(self.addr, None)
    }

    /// Starts a sign-in and goes through the provider's pages as `user`;
    /// returns the URL the provider sends the browser back to (not followed).
    pub async fn through_provider(&self, client: &reqwest::Client, user: &str) -> reqwest::Url {
        let mut res = client.get(self.url("/auth/oidc/start?next=/machines")).send().await.unwrap();
        let callback = self.url("/auth/oidc/callback");
        for _ in 0..12 {
            let here = res.url().clone();
            if res.status().is_redirection() {
                let to = here.join(res.headers()[header::LOCATION].to_str().unwrap()).unwrap();
                if to.as_str().starts_with(&callback) {
                    return to;
                }
                assert!(to.port() == Some(self.provider.port), "sent to {to} instead of the provider");
                res = client.get(to).send().await.unwrap();
                continue;
            }
            assert_eq!(res.status(), StatusCode::OK, "at {here}");
            let html = res.text().await.unwrap();
            let (action, mut fields) = form(&html).unwrap_or_else(|| panic!("no form at {here}: {html}"));
            if fields.iter().any(|(k, _)| k == "login") {
                fields.retain(|(k, _)| k != "login" && k != "password");
                fields.push(("login".into(), user.into()));
                fields.push(("password".into(), "any-password".into()));
            }
            res = client.post(here.join(&action).unwrap()).form(&fields).send().await.unwrap();
        }
        panic!("the provider did not send the browser back to Gantry");
    }

    /// A whole sign-in as `user`: Gantry's answer to the callback.
    pub async fn sign_in(&self, client: &reqwest::Client, user: &str) -> reqwest::Response {
        let back = self.through_provider(client, user).await;
        client.get(back).send().await.unwrap()
    }
}

/// The first form of a page: its action and its named inputs' values.
fn form(html: &str) -> Option<(String, Vec<(String, String)>)> {
    let start = html.find("<form")?;
    let html = &html[start..html[start..].find("</form>").map_or(html.len(), |e| start + e)];
    let attr = |tag: &str, name: &str| {
        let key = format!("{name}=\"");
        tag.find(&key).map(|at| tag[at + key.len()..].split('"').next().unwrap_or("").replace("&amp;", "&"))
    };
    let action = attr(&html[..html.find('>')?], "action")?;
    let fields = html
        .split("<input")
        .skip(1)
        .filter_map(|tag| {
            let tag = &tag[..tag.find('>').unwrap_or(tag.len())];
            Some((attr(tag, "name")?, attr(tag, "value").unwrap_or_default()))
        })
        .collect();
    Some((action, fields))
}

/// Where Gantry sent the browser.
pub fn location(res: &reqwest::Response) -> String {
    assert!(res.status().is_redirection(), "not a redirect: {}", res.status());
    res.headers()[header::LOCATION].to_str().unwrap().to_string()
}

/// The signed-in user's name on the dashboard, if any.
pub async fn signed_in_as(server: &OidcServer, client: &reqwest::Client) -> Option<String> {
    let res = client.get(server.url("/")).send().await.unwrap();
    if res.status() != StatusCode::OK {
        return None;
    }
    let html = res.text().await.unwrap();
    let at = html.find(r#"data-testid="dash-user">"#)? + r#"data-testid="dash-user">"#.len();
    Some(html[at..].split('<').next().unwrap().to_string())
}
