//! Response headers from the one layer (issue 11): CSP with a fresh nonce
//! that the page's inline scripts carry, framing refused, nosniff,
//! same-origin referrers, `no-store` on pages and server functions, hashed
//! assets still immutable, HSTS only with secure cookies, a request id.

use crate::security_support;

use gantry_server::security::Security;
use security_support::start;

fn header<'a>(res: &'a reqwest::Response, name: &str) -> &'a str {
    res.headers().get(name).unwrap_or_else(|| panic!("{name} missing on {}", res.url())).to_str().unwrap()
}

fn assert_common(res: &reqwest::Response) {
    let csp = header(res, "content-security-policy");
    assert!(csp.contains("frame-ancestors 'none'") && csp.contains("object-src 'none'"), "{csp}");
    assert_eq!(header(res, "x-frame-options"), "DENY");
    assert_eq!(header(res, "x-content-type-options"), "nosniff");
    assert_eq!(header(res, "referrer-policy"), "same-origin");
    assert_eq!(header(res, "x-request-id").len(), 16);
}

fn nonce_of(csp: &str) -> String {
    let start = csp.find("'nonce-").expect("a nonce in the CSP") + 7;
    csp[start..].split('\'').next().unwrap().to_string()
}

gantry_testkit::timed_test! {
    async fn pages_server_functions_and_assets_carry_the_headers() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security::default(), false).await;
        std::fs::write(dir.path().join("site/pkg/gantry.0123456789abcdef.css"), "body{}").unwrap();
        let c = server.client();

        let page = c.get(server.url("/login")).send().await.unwrap();
        assert_eq!(page.status(), 200);
        assert_common(&page);
        assert_eq!(header(&page, "cache-control"), "no-store");
        assert!(page.headers().get("strict-transport-security").is_none(), "no HSTS over plain HTTP");
        let csp = header(&page, "content-security-policy").to_string();
        let nonce = nonce_of(&csp);
        let html = page.text().await.unwrap();
        assert!(security_support::assert_scripts_carry_the_nonce(&csp, &html) > 0, "the page has its hydration scripts");
        // A new nonce for every request.
        let again = c.get(server.url("/login")).send().await.unwrap();
        assert_ne!(nonce_of(header(&again, "content-security-policy")), nonce);

        let api = server.login(&c, "admin", "wrong-password").await;
        assert_eq!(api.status(), 401);
        assert_common(&api);
        assert_eq!(header(&api, "cache-control"), "no-store");

        let asset = c.get(server.url("/pkg/gantry.0123456789abcdef.css")).send().await.unwrap();
        assert_eq!(asset.status(), 200);
        assert_common(&asset);
        assert_eq!(header(&asset, "cache-control"), "public, max-age=31536000, immutable");

        // Outside the sessions and the page guard too: /metrics (its own
        // access rule) and an unknown path.
        for path in ["/metrics", "/no-such-page"] {
            let res = c.get(server.url(path)).send().await.unwrap();
            assert_common(&res);
        }

        let signed_in = server.client();
        assert_eq!(server.login(&signed_in, "admin", security_support::ADMIN_PASSWORD).await.status(), 200);
        let dashboard = signed_in.get(server.url("/")).send().await.unwrap();
        assert_eq!(dashboard.status(), 200);
        assert_eq!(header(&dashboard, "cache-control"), "no-store", "after sign-out, Back must not show this page");
    }
}

gantry_testkit::timed_test! {
    async fn secure_cookies_turn_on_hsts() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security::default(), true).await;
        let page = server.client().get(server.url("/login")).send().await.unwrap();
        assert_eq!(header(&page, "strict-transport-security"), "max-age=31536000");
        assert_common(&page);
    }
}
