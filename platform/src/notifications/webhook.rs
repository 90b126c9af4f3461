//! Webhooks: which URLs are accepted, the per-user secret, and one signed
//! POST. The body is JSON; `X-Gantry-Signature: sha256=<hex>` is
//! HMAC-SHA256 over the exact bytes sent, with the user's secret; the
//! body carries its own `sent_at` (so the signature covers the time, and a
//! receiver can refuse replays) and `X-Gantry-Delivery` names the delivery
//! (the same on every retry, so a receiver can drop duplicates).
//!
//! Hostile URLs: only http(s), no credentials in the URL, and never a
//! link-local, unspecified, multicast or broadcast address (a cloud's
//! metadata service lives at 169.254.169.254). The name is resolved at
//! send time and the connection pinned to the checked address, so a name
//! that later resolves elsewhere cannot bypass the check; redirects are not
//! followed.

use hmac::{Hmac, Mac};
use reqwest_s3 as reqwest;
use sha2::Sha256;
use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

/// Checks a webhook URL a user gives; the reason when it is refused.
pub fn check_url(value: &str) -> Result<url::Url, String> {
    gantry_core::notify::check_webhook_text(value)?;
    let url = url::Url::parse(value).map_err(|e| format!("\"{value}\" is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("a webhook URL must start with http:// or https://".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("a webhook URL cannot carry a user name or password; the signature authenticates Gantry".into());
    }
    match url.host() {
        None => return Err("a webhook URL needs a host".into()),
        Some(url::Host::Ipv4(ip)) => refused_ip(IpAddr::V4(ip))?,
        Some(url::Host::Ipv6(ip)) => refused_ip(IpAddr::V6(ip))?,
        Some(url::Host::Domain(_)) => {}
    }
    Ok(url)
}

/// Addresses no webhook may reach.
fn refused_ip(ip: IpAddr) -> Result<(), String> {
    let bad = match ip {
        IpAddr::V4(v4) => v4.is_unspecified() || v4.is_link_local() || v4.is_multicast() || v4.is_broadcast(),
        IpAddr::V6(v6) => {
            v6.is_unspecified()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6.to_ipv4_mapped().is_some_and(|v4| refused_ip(IpAddr::V4(v4)).is_err())
        }
    };
    if bad {
        return Err(format!(
            "a webhook cannot be sent to {ip}: link-local, unspecified, multicast and broadcast addresses are refused"
        ));
    }
    Ok(())
}

/// A new signing secret: 32 random bytes, hex.
pub fn new_secret() -> String {
    let bytes: [u8; 32] = rand::random();
    format!("whsec_{}", hex::encode(bytes))
}

/// `sha256=<hex>` of HMAC-SHA256 over `body` with `secret`.
pub fn signature(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// How one POST went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub ok: bool,
    pub status: Option<u16>,
    pub error: Option<String>,
}

/// Sends webhooks; each send resolves and checks its host first.
#[derive(Debug, Clone)]
pub struct WebhookClient {
    pub timeout: Duration,
}

impl Default for WebhookClient {
    fn default() -> Self {
        WebhookClient { timeout: Duration::from_secs(15) }
    }
}

impl WebhookClient {
    /// POSTs `body` to `url`, signed with `secret`; a 2xx answer is success.
    pub async fn post(&self, url: &str, secret: &str, delivery_id: i64, body: &[u8]) -> Outcome {
        match self.try_post(url, secret, delivery_id, body).await {
            Ok(status) if (200..300).contains(&status) => Outcome { ok: true, status: Some(status), error: None },
            Ok(status) => {
                Outcome { ok: false, status: Some(status), error: Some(format!("the receiver answered HTTP {status}")) }
            }
            Err(error) => Outcome { ok: false, status: None, error: Some(error) },
        }
    }

    async fn try_post(&self, url: &str, secret: &str, delivery_id: i64, body: &[u8]) -> Result<u16, String> {
        let parsed = check_url(url)?;
        let host = parsed.host_str().unwrap_or_default().trim_matches(['[', ']']).to_string();
        let port = parsed.port_or_known_default().unwrap_or(80);
        let addrs: Vec<SocketAddr> = tokio::time::timeout(self.timeout, tokio::net::lookup_host((host.as_str(), port)))
            .await
            .map_err(|_| format!("resolving {host} timed out"))?
            .map_err(|e| format!("resolving {host}: {e}"))?
            .collect();
        let addr = *addrs.first().ok_or_else(|| format!("{host} has no address"))?;
        for a in &addrs {
            refused_ip(a.ip())?;
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .timeout(self.timeout)
            .resolve(&host, addr)
            .build()
            .map_err(|e| format!("making the HTTP client: {e}"))?;
        let answer = client
            .post(parsed)
            .header("content-type", "application/json")
            .header("user-agent", "Gantry-Webhook/1")
            .header("x-gantry-signature", signature(secret, body))
            .header("x-gantry-delivery", delivery_id.to_string())
            .header("x-gantry-timestamp", crate::now().to_string())
            .body(body.to_vec())
            .send()
            .await
            .map_err(|e| describe(&e))?;
        Ok(answer.status().as_u16())
    }
}

/// reqwest's error with its causes (its own text alone says "error sending request").
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert!(check_url("http://127.0.0.1:9000/hook").is_ok());
        assert!(check_url("https://hooks.example.org/x").is_ok());
        assert!(check_url("http://169.254.169.254/latest/meta-data").unwrap_err().contains("link-local"));
        assert!(check_url("http://[fe80::1]/").is_err());
        assert!(check_url("http://0.0.0.0:80/").is_err());
        assert!(check_url("http://[::ffff:169.254.1.1]/").is_err());
        assert!(check_url("http://user:pw@example.org/").unwrap_err().contains("password"));
        assert!(check_url("gopher://example.org/").is_err());
    }

    #[test]
    fn signature_is_hmac_sha256_hex() {
        // RFC 4231 test case 2.
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
