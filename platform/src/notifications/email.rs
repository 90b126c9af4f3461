//! Email by SMTP, STARTTLS required (a server that does not offer it, or
//! whose certificate does not verify, gets nothing: no mail goes out in
//! clear). Configured by the server's `--smtp-*` flags; an extra CA file
//! is trusted besides the system's (a private CA, or the tests' own).

use lettre::{
    message::{header::ContentType, Mailbox},
    transport::smtp::{
        authentication::Credentials,
        client::{Certificate, Tls, TlsParameters},
    },
    AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
};
use std::time::Duration;

/// The `--smtp-*` flags.
#[derive(Debug, Clone, Default)]
pub struct SmtpConfig {
    /// `smtp://host:port` (port 587 when left out).
    pub url: String,
    /// The From address.
    pub from: String,
    pub username: Option<String>,
    pub password: Option<String>,
    /// PEM of extra CA certificates to trust.
    pub ca_pem: Option<Vec<u8>>,
}

/// Whether `pem` holds CA certificates the mailer can trust (the
/// `--smtp-ca-file` check, made when the flag is read).
pub fn check_ca_pem(pem: &[u8]) -> Result<(), String> {
    Certificate::from_pem(pem).map(|_| ()).map_err(|e| format!("not a PEM certificate: {e}"))
}

/// Sends mail, or says why it cannot (no `--smtp-url` given).
#[derive(Clone)]
pub struct Mailer {
    inner: Option<(AsyncSmtpTransport<Tokio1Executor>, Mailbox)>,
}

impl Mailer {
    /// A mailer that sends nothing: email deliveries fail, saying so.
    pub fn disabled() -> Mailer {
        Mailer { inner: None }
    }

    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// From the flags; a bad URL, address or CA file is an error at start.
    pub fn new(config: &SmtpConfig) -> Result<Mailer, String> {
        let url = url::Url::parse(&config.url).map_err(|e| format!("--smtp-url {}: {e}", config.url))?;
        if url.scheme() != "smtp" {
            return Err(format!(
                "--smtp-url must be smtp://host:port (STARTTLS is required and always used), not {}",
                config.url
            ));
        }
        let host = url.host_str().ok_or("--smtp-url needs a host")?.trim_matches(['[', ']']).to_string();
        let port = url.port().unwrap_or(587);
        let from: Mailbox = config.from.parse().map_err(|e| format!("--smtp-from {}: {e}", config.from))?;
        let mut tls = TlsParameters::builder(host.clone());
        if let Some(pem) = &config.ca_pem {
            let cert = Certificate::from_pem(pem).map_err(|e| format!("--smtp-ca-file: {e}"))?;
            tls = tls.add_root_certificate(cert);
        }
        let tls = tls.build_rustls().map_err(|e| format!("SMTP TLS settings: {e}"))?;
        let mut builder = AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host)
            .port(port)
            .tls(Tls::Required(tls))
            .timeout(Some(Duration::from_secs(20)));
        if let (Some(user), Some(password)) = (&config.username, &config.password) {
            builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
        }
        Ok(Mailer { inner: Some((builder.build(), from)) })
    }

    /// Sends one plain-text mail; the error says what went wrong.
    pub async fn send(&self, to: &str, subject: &str, body: &str) -> Result<(), String> {
        let Some((transport, from)) = &self.inner else {
            return Err("email is not configured on this server (no --smtp-url)".into());
        };
        let to: Mailbox = to.parse().map_err(|e| format!("the address {to}: {e}"))?;
        let message = Message::builder()
            .from(from.clone())
            .to(to)
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(body.to_string())
            .map_err(|e| format!("composing the mail: {e}"))?;
        transport.send(message).await.map(|_| ()).map_err(|e| describe(&e))
    }
}

/// lettre's error with its causes (a TLS failure is only in the source).
fn describe(e: &lettre::transport::smtp::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}
