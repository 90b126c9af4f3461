//! The CLI's HTTP client: the server's URL and token (flags, environment,
//! or what `login` stored), requests with `Authorization: Bearer`, and
//! refusals turned into the server's own words.

use super::{config_store, Conn};
use http_client::{Method, RequestBuilder, Response, StatusCode, Url};
use serde::de::DeserializeOwned;
use std::time::Duration;

/// What the user reads after `gantry: `; the exit status is then 1.
#[derive(Debug)]
pub struct CliError(pub String);

impl CliError {
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError(message.into())
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CliError {}

/// One server, one token.
pub struct Api {
    pub base: Url,
    token: String,
    http: http_client::Client,
}

/// A server URL as typed (`gantry.example.org`, `http://127.0.0.1:3000/`):
/// a scheme is required to be http or https; no path, query or user.
pub fn parse_base(url: &str) -> Result<Url, CliError> {
    let bad =
        |why: &str| CliError::usage(format!("{url:?} is not a server URL ({why}); e.g. https://gantry.example.org"));
    let text = url.trim();
    let text = if text.contains("://") { text.to_string() } else { format!("https://{text}") };
    let mut parsed = Url::parse(&text).map_err(|_| bad("not a URL"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(bad("the scheme must be http or https"));
    }
    if parsed.host_str().is_none_or(str::is_empty) || !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(bad("it needs a host and no user name"));
    }
    if parsed.query().is_some() || !matches!(parsed.path(), "" | "/") {
        return Err(bad("no path or query"));
    }
    parsed.set_fragment(None);
    Ok(parsed)
}

pub fn http() -> Result<http_client::Client, CliError> {
    // rustls' crypto provider, once per process (ring: see Cargo.toml).
    let _ = rustls::crypto::ring::default_provider().install_default();
    http_client::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .user_agent(concat!("gantry-cli/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| CliError::usage(format!("cannot set up HTTP: {e}")))
}

impl Api {
    /// `--url`/`GANTRY_URL` and `--token`/`GANTRY_TOKEN` first, each
    /// falling back to what `gantry login` stored.
    pub fn from_conn(conn: &Conn) -> Result<Api, CliError> {
        let stored = config_store::load()?;
        let url = conn.url.clone().or_else(|| stored.as_ref().map(|c| c.url.clone()));
        let token = conn.token.clone().or_else(|| stored.map(|c| c.token));
        let (Some(url), Some(token)) = (url, token) else {
            return Err(CliError::usage("not signed in: run gantry login URL (or set GANTRY_URL and GANTRY_TOKEN)"));
        };
        Api::new(parse_base(&url)?, token)
    }

    pub fn new(base: Url, token: String) -> Result<Api, CliError> {
        Ok(Api { base, token, http: http()? })
    }

    /// The URL of `segments` under the server, each percent-encoded.
    pub fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        url
    }

    pub fn request(&self, method: Method, segments: &[&str]) -> RequestBuilder {
        self.http.request(method, self.url(segments)).bearer_auth(&self.token)
    }

    /// Sends; a refusal becomes the server's message with its status.
    pub async fn send(&self, req: RequestBuilder) -> Result<Response, CliError> {
        let res = req.send().await.map_err(|e| unreachable_server(&self.base, &e))?;
        if res.status().is_success() {
            Ok(res)
        } else {
            Err(refusal(res).await)
        }
    }

    pub async fn json<T: DeserializeOwned>(&self, req: RequestBuilder) -> Result<T, CliError> {
        let res = self.send(req).await?;
        read_json(res).await
    }

    pub async fn get<T: DeserializeOwned>(&self, segments: &[&str]) -> Result<T, CliError> {
        self.json(self.request(Method::GET, segments)).await
    }
}

pub async fn read_json<T: DeserializeOwned>(res: Response) -> Result<T, CliError> {
    let url = res.url().path().to_string();
    let bytes = res.bytes().await.map_err(|e| CliError(format!("the answer to {url} was cut off: {e}")))?;
    serde_json::from_slice(&bytes).map_err(|e| CliError(format!("the answer to {url} is not the JSON expected: {e}")))
}

pub fn unreachable_server(base: &Url, e: &http_client::Error) -> CliError {
    let mut why = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        why = format!("{why}: {s}");
        source = s.source();
    }
    CliError(format!("cannot reach {base}: {why}"))
}

/// "server answered 409 Conflict: the name is taken" — the API's
/// `{"error": "…"}` (or `{"error": {"message": …, "code": …}}`), else
/// the body's first line.
pub async fn refusal(res: Response) -> CliError {
    let status = res.status();
    let retry = res.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
    let body = res.text().await.unwrap_or_default();
    let mut message = error_text(&body);
    if status == StatusCode::UNAUTHORIZED {
        message.push_str(" (run gantry login again, or check GANTRY_TOKEN)");
    }
    if let Some(secs) = retry.filter(|_| status == StatusCode::TOO_MANY_REQUESTS) {
        message.push_str(&format!(" (try again in {secs} s)"));
    }
    CliError(format!("the server refused ({status}): {message}"))
}

pub fn error_text(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        let error = v.get("error").unwrap_or(v);
        let text = error.as_str().or_else(|| error.get("message").and_then(|m| m.as_str()))?;
        let code = error.get("code").or_else(|| v.get("code")).and_then(|c| c.as_str());
        Some(match code {
            Some(code) => format!("{text} [{code}]"),
            None => text.to_string(),
        })
    });
    from_json.unwrap_or_else(|| {
        let line = body.lines().next().unwrap_or("").trim();
        if line.is_empty() {
            "no reason given".to_string()
        } else {
            line.chars().take(300).collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::{error_text, parse_base};

    #[test]
    fn server_urls_are_checked_and_default_to_https() {
        assert_eq!(parse_base("gantry.example.org").unwrap().as_str(), "https://gantry.example.org/");
        assert_eq!(parse_base("http://127.0.0.1:3000/").unwrap().as_str(), "http://127.0.0.1:3000/");
        for bad in ["ftp://x", "http://a/b", "http://u:p@host", "http://h/?q=1", "http://"] {
            assert!(parse_base(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn refusals_read_the_apis_error_shapes() {
        assert_eq!(error_text(r#"{"error":"no such task"}"#), "no such task");
        assert_eq!(error_text(r#"{"error":"no such task","code":"not_found"}"#), "no such task [not_found]");
        assert_eq!(
            error_text(r#"{"error":{"code":"not_found","message":"no such task"}}"#),
            "no such task [not_found]"
        );
        assert_eq!(error_text("plain words\nmore"), "plain words");
        assert_eq!(error_text(""), "no reason given");
    }
}
