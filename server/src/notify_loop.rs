//! The notification delivery loop and its flags: every few seconds it runs
//! `gantry_platform::notifications::deliver::deliver_due`, which claims the
//! due email and webhook deliveries under a lease (so servers sharing the
//! database never send one twice), sends them and schedules retries.
//! Email goes by SMTP with STARTTLS required; the flags are checked when
//! read, so a bad URL, address or CA file stops the start, saying why.

use clap::Args;
use gantry_platform::{
    db::Pool,
    notifications::{
        deliver::deliver_due,
        email::{Mailer, SmtpConfig},
        webhook::WebhookClient,
    },
};
use std::{path::PathBuf, time::Duration};

#[derive(Debug, Clone, Args)]
pub struct NotifyArgs {
    /// SMTP server for notification email, `smtp://host:port` (port 587 when
    /// left out). STARTTLS is required: a server that does not offer it, or
    /// whose certificate does not verify, is sent nothing. Unset: no email.
    #[arg(long, env = "GANTRY_SMTP_URL", value_parser = smtp_url)]
    pub smtp_url: Option<String>,
    /// The From address of notification email.
    #[arg(long, env = "GANTRY_SMTP_FROM", default_value = "Gantry <gantry@localhost>", value_parser = smtp_from)]
    pub smtp_from: String,
    /// SMTP user name (with --smtp-password); best given in the environment.
    #[arg(long, env = "GANTRY_SMTP_USERNAME")]
    pub smtp_username: Option<String>,
    /// SMTP password; best given as GANTRY_SMTP_PASSWORD.
    #[arg(long, env = "GANTRY_SMTP_PASSWORD", hide_env_values = true)]
    pub smtp_password: Option<String>,
    /// A PEM file of CA certificates to trust for the SMTP server besides the
    /// system's (a private CA).
    #[arg(long, env = "GANTRY_SMTP_CA_FILE", value_parser = ca_file)]
    pub smtp_ca_file: Option<PathBuf>,
    /// Seconds between passes of the delivery loop.
    #[arg(long, env = "GANTRY_NOTIFY_INTERVAL_SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub notify_interval_secs: u64,
}

impl NotifyArgs {
    /// The mailer these flags describe (disabled without --smtp-url).
    pub fn mailer(&self) -> Result<Mailer, String> {
        let Some(url) = &self.smtp_url else { return Ok(Mailer::disabled()) };
        let ca_pem = match &self.smtp_ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|e| format!("--smtp-ca-file {}: {e}", path.display()))?),
            None => None,
        };
        Mailer::new(&SmtpConfig {
            url: url.clone(),
            from: self.smtp_from.clone(),
            username: self.smtp_username.clone(),
            password: self.smtp_password.clone(),
            ca_pem,
        })
    }
}

fn smtp_url(value: &str) -> Result<String, String> {
    let url = url_parse(value)?;
    if url.0 != "smtp" || url.1.is_empty() {
        return Err("expected smtp://host:port (STARTTLS is required and always used)".into());
    }
    Ok(value.to_string())
}

/// (scheme, host) of a URL, without pulling the url crate into the server.
fn url_parse(value: &str) -> Result<(String, String), String> {
    let (scheme, rest) = value.split_once("://").ok_or("expected smtp://host:port")?;
    let host = rest.split(['/', '?']).next().unwrap_or_default();
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    Ok((scheme.to_ascii_lowercase(), host.to_string()))
}

fn smtp_from(value: &str) -> Result<String, String> {
    let address = value.rsplit_once('<').map_or(value, |(_, a)| a.trim_end_matches('>'));
    gantry_core::notify::check_email(address.trim()).or_else(|e| {
        // A local relay's own name (gantry@localhost) is fine as a sender.
        if address.trim().ends_with("@localhost") {
            Ok(())
        } else {
            Err(e)
        }
    })?;
    Ok(value.to_string())
}

fn ca_file(value: &str) -> Result<PathBuf, String> {
    let pem = std::fs::read(value).map_err(|e| format!("cannot read {value}: {e}"))?;
    if !String::from_utf8_lossy(&pem).contains("-----BEGIN CERTIFICATE-----") {
        return Err(format!("{value} holds no PEM certificate"));
    }
    gantry_platform::notifications::email::check_ca_pem(&pem).map_err(|e| format!("{value}: {e}"))?;
    Ok(PathBuf::from(value))
}

/// Runs the delivery loop until the process ends.
pub async fn run(pool: Pool, mailer: Mailer, interval: Duration) {
    let http = WebhookClient::default();
    loop {
        tokio::time::sleep(interval).await;
        let (p, m, h) = (pool.clone(), mailer.clone(), http.clone());
        let pass = async move { deliver_due(&p, gantry_platform::now(), &m, &h).await };
        if let Some(Err(e)) = gantry_platform::contained::pass("notify", pass).await {
            tracing::error!(error = %e, "notification delivery pass failed");
        }
    }
}

/// Starts the loop; a mailer that cannot be made is logged and email
/// deliveries fail with that reason (the flags were checked when read).
pub fn start(pool: &Pool, args: &NotifyArgs) {
    let mailer = args.mailer().unwrap_or_else(|e| {
        tracing::error!(error = %e, "notification email is off");
        Mailer::disabled()
    });
    tokio::spawn(run(pool.clone(), mailer, Duration::from_secs(args.notify_interval_secs)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_checked_when_read() {
        assert!(smtp_url("smtp://mail.example.org:587").is_ok());
        assert!(smtp_url("smtps://mail.example.org").is_err());
        assert!(smtp_url("mail.example.org").is_err());
        assert!(smtp_from("Gantry <gantry@localhost>").is_ok());
        assert!(smtp_from("ops@example.org").is_ok());
        assert!(smtp_from("not an address").is_err());
        assert!(ca_file("/nonexistent/ca.pem").unwrap_err().contains("cannot read"));
    }
}
