//! `gantry login URL`: asks for the username and password (or takes a
//! token made on the portal's Tokens page), gets a personal API token from
//! the server (`POST /api/v1/login`, checked and throttled as a sign-in)
//! and keeps it with the URL (`config_store`). `gantry logout` forgets it.

use super::{
    client::{self, parse_base, read_json, refusal, unreachable_server, Api},
    config_store::{self, Credentials},
    CliError,
};
use clap::Args;
use http_client::{Method, StatusCode};
use std::io::{BufRead, IsTerminal, Write};

#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The server, e.g. https://gantry.example.org (https:// is assumed when no scheme is given).
    pub url: String,
    /// Your username (asked for when not given).
    #[arg(long)]
    pub username: Option<String>,
    /// Read the password from the first line of standard input instead of
    /// asking (also what happens when standard input is not a terminal).
    #[arg(long)]
    pub password_stdin: bool,
    /// Store this token (made on the portal's Tokens page) instead of asking for the password.
    #[arg(long, env = "GANTRY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The name the new token is listed under on the Tokens page.
    #[arg(long)]
    pub token_name: Option<String>,
    /// The new token's scope: read, write (the server's default) or admin (administrators only).
    #[arg(long, value_parser = ["read", "write", "admin"])]
    pub scope: Option<String>,
}

pub async fn login(args: LoginArgs) -> Result<(), CliError> {
    let base = parse_base(&args.url)?;
    let token = match args.token.clone().filter(|t| !t.trim().is_empty()) {
        Some(token) => {
            let token = token.trim().to_string();
            // Checked before it is kept: a typo is said now, not at the next command.
            let api = Api::new(base.clone(), token.clone())?;
            let req = api.request(Method::GET, &["api", "v1", "compute-tasks"]).query(&[("limit", "1")]);
            api.send(req).await?;
            eprintln!("The token works on {base}.");
            token
        }
        None => token_from_password(&base, &args).await?,
    };
    let path = config_store::save(&Credentials { url: base.to_string(), token })?;
    eprintln!("Credentials stored in {} (readable by you alone).", path.display());
    Ok(())
}

/// Asks for what is missing, then `POST /api/v1/login`.
async fn token_from_password(base: &http_client::Url, args: &LoginArgs) -> Result<String, CliError> {
    let stdin = std::io::stdin();
    let interactive = stdin.is_terminal() && !args.password_stdin;
    let mut lines = stdin.lock();
    let username = match args.username.clone() {
        Some(u) => u,
        None => {
            eprint!("Username: ");
            let _ = std::io::stderr().flush();
            read_line(&mut lines, "the username")?
        }
    };
    let password = if interactive {
        drop(lines);
        rpassword::prompt_password(format!("Password for {username}: "))
            .map_err(|e| CliError(format!("cannot read the password: {e}")))?
    } else {
        read_line(&mut lines, "the password")?
    };
    let token_name = args.token_name.clone().unwrap_or_else(default_token_name);
    let http = client::http()?;
    let mut url = base.clone();
    url.set_path("/api/v1/login");
    let mut body = serde_json::json!({ "username": username, "password": password, "token_name": token_name });
    if let Some(scope) = &args.scope {
        body["scope"] = serde_json::json!(scope);
    }
    let res = http.request(Method::POST, url).json(&body).send().await.map_err(|e| unreachable_server(base, &e))?;
    if res.status() != StatusCode::CREATED {
        return Err(refusal(res).await);
    }
    let answer: serde_json::Value = read_json(res).await?;
    let token = answer["token"].as_str().ok_or_else(|| CliError("the server's answer holds no token".into()))?;
    let days = answer["expires_at"].as_i64().map(|at| (at - gantry_platform::now()) / 86_400);
    eprintln!(
        "Signed in to {base} as {username}; API token \"{token_name}\" made{}.",
        days.map(|d| format!(", valid for {d} days")).unwrap_or_default()
    );
    Ok(token.to_string())
}

fn read_line(input: &mut impl BufRead, what: &str) -> Result<String, CliError> {
    let mut line = String::new();
    let n = input.read_line(&mut line).map_err(|e| CliError(format!("cannot read {what}: {e}")))?;
    let value = line.trim_end_matches(['\r', '\n']).to_string();
    if n == 0 || value.is_empty() {
        return Err(CliError(format!("no {what} given on standard input")));
    }
    Ok(value)
}

/// "gantry CLI on laptop": how the token is listed on the Tokens page.
fn default_token_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().chars().take(40).collect::<String>())
        .unwrap_or_default();
    if host.is_empty() {
        "gantry CLI".into()
    } else {
        format!("gantry CLI on {host}")
    }
}

pub fn logout() -> Result<(), CliError> {
    let path = config_store::path()?;
    if config_store::remove()? {
        eprintln!(
            "Removed {}. The token itself still works until it expires: revoke it on the portal's Tokens page.",
            path.display()
        );
    } else {
        eprintln!("Not signed in (no {}).", path.display());
    }
    Ok(())
}
