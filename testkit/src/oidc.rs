//! A real OpenID Connect provider for tests: testkit/oidc/provider.mjs
//! (the certified `oidc-provider` package from npm, installed by
//! scripts/setup.sh) on 127.0.0.1, port 0, with one confidential client and
//! the given users and groups. Its test controls rotate its signing key or
//! make its ID tokens bad (signed by an unpublished key, or expired).
//! Killed by PID when dropped.

use std::{
    io::{BufRead, BufReader},
    path::PathBuf,
    process::{Child, Command, Stdio},
};

pub const CLIENT_ID: &str = "gantry-test";
pub const CLIENT_SECRET: &str = "gantry-test-secret";

/// A test user: name, email, groups.
pub struct User<'a> {
    pub name: &'a str,
    pub groups: &'a [&'a str],
}

pub struct OidcProvider {
    pub port: u16,
    child: Child,
}

/// What its ID tokens look like (`mode` in the script).
#[derive(Clone, Copy, Debug)]
pub enum Tokens {
    Normal,
    /// Signed by a key the provider never publishes, under a published key id.
    Rogue,
    /// Signed by its real key, expired an hour ago.
    Expired,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("oidc/provider.mjs")
}

impl OidcProvider {
    /// Starts the provider for a client that comes back to `gantry_origin`
    /// (`http://127.0.0.1:PORT`); panics saying what is missing.
    pub fn start(gantry_origin: &str, users: &[User]) -> OidcProvider {
        let modules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../node_modules/oidc-provider");
        assert!(modules.exists(), "{} is missing: run scripts/setup.sh (npm ci)", modules.display());
        let users: Vec<String> = users
            .iter()
            .map(|u| {
                let groups: Vec<String> = u.groups.iter().map(|g| format!("{g:?}")).collect();
                format!("{:?}: {{\"email\": \"{}@example.org\", \"groups\": [{}]}}", u.name, u.name, groups.join(","))
            })
            .collect();
        let config = format!(
            "{{\"client_id\": {CLIENT_ID:?}, \"client_secret\": {CLIENT_SECRET:?}, \
             \"redirect_uris\": [\"{gantry_origin}/auth/oidc/callback\"], \
             \"post_logout_redirect_uris\": [\"{gantry_origin}/login\"], \"users\": {{{}}}}}",
            users.join(",")
        );
        // stdin stays open while this process lives: the script ends when it closes.
        let mut child = Command::new("node")
            .arg(script())
            .arg(config)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start node testkit/oidc/provider.mjs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).expect("read the port");
        let port = match line.trim().strip_prefix("PORT ").and_then(|p| p.parse().ok()) {
            Some(p) => p,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "the OpenID Connect provider did not start (printed {line:?}); try `node {}`",
                    script().display()
                );
            }
        };
        OidcProvider { port, child }
    }

    pub fn issuer(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    async fn control(&self, path: &str) -> String {
        let url = format!("{}/__test/{path}", self.issuer());
        let res = reqwest::Client::new().post(&url).send().await.expect("provider control");
        assert!(res.status().is_success(), "{url}: {}", res.status());
        res.text().await.unwrap()
    }

    /// A new signing key with a new key id; the old one is no longer
    /// published. Returns the new key id.
    pub async fn rotate_keys(&self) -> String {
        self.control("rotate").await
    }

    pub async fn set_tokens(&self, tokens: Tokens) {
        let mode = match tokens {
            Tokens::Normal => "normal",
            Tokens::Rogue => "rogue",
            Tokens::Expired => "expired",
        };
        self.control(&format!("mode/{mode}")).await;
    }
}

impl OidcProvider {
    /// Ends the provider now (a test of an unreachable provider); its port
    /// then refuses connections.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OidcProvider {
    fn drop(&mut self) {
        self.stop();
    }
}
