//! The same-origin check compares the scheme as well as the host and port:
//! an `Origin: https://host:port` sent to a plain-HTTP server is another
//! site, and so is `http://` against one behind TLS (`--secure-cookies`, or
//! a trusted proxy whose `X-Forwarded-Proto` says https).

use crate::security_support::{self, gate};
use gantry_server::security::Security;

/// POSTs sign-out (a state-changing request any visitor may make) with
/// `origin` and `headers`; the status.
async fn post(server: &security_support::Secured, origin: &str, headers: &[(&str, &str)]) -> u16 {
    let mut req = reqwest::Client::new().post(server.url("/api/logout")).header("Origin", origin);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap().status().as_u16()
}

gantry_testkit::timed_test! {
    async fn an_origin_of_the_other_scheme_is_refused() {
        // Plain HTTP: only http://host:port.
        let dir = tempfile::tempdir().unwrap();
        let plain = security_support::start(&dir, Security { gate: gate(1), ..Security::default() }, false).await;
        let (http, https) = (format!("http://{}", plain.addr), format!("https://{}", plain.addr));
        assert_eq!(post(&plain, &http, &[]).await, 200);
        assert_eq!(post(&plain, &https, &[]).await, 403, "https origin, plain-HTTP server");
        // A client's own X-Forwarded-Proto counts for nothing without --trusted-proxy.
        assert_eq!(post(&plain, &https, &[("X-Forwarded-Proto", "https")]).await, 403);
        // Under /api/v1 the refusal is the API's JSON.
        let res = reqwest::Client::new().post(plain.url("/api/v1/compute-tasks")).header("Origin", &https).send().await.unwrap();
        assert_eq!(res.status(), 403);
        let body: serde_json::Value = res.json().await.unwrap();
        assert_eq!(body["error"], "cross-origin request refused");

        // --secure-cookies (a TLS terminator in front): only https://host:port.
        let dir = tempfile::tempdir().unwrap();
        let tls = security_support::start(&dir, Security { gate: gate(1), ..Security::default() }, true).await;
        let (http, https) = (format!("http://{}", tls.addr), format!("https://{}", tls.addr));
        assert_eq!(post(&tls, &https, &[]).await, 200);
        assert_eq!(post(&tls, &http, &[]).await, 403, "http origin, --secure-cookies");

        // Behind a trusted proxy: its X-Forwarded-Proto says which.
        let dir = tempfile::tempdir().unwrap();
        let proxied =
            security_support::start(&dir, Security { trusted_proxy: true, gate: gate(1), ..Security::default() }, false).await;
        let (http, https) = (format!("http://{}", proxied.addr), format!("https://{}", proxied.addr));
        assert_eq!(post(&proxied, &https, &[("X-Forwarded-Proto", "https")]).await, 200);
        assert_eq!(post(&proxied, &http, &[("X-Forwarded-Proto", "https")]).await, 403, "the proxy says https");
        assert_eq!(post(&proxied, &http, &[("X-Forwarded-Proto", "http")]).await, 200);
        assert_eq!(post(&proxied, &https, &[]).await, 403, "no X-Forwarded-Proto: plain HTTP");
    }
}
