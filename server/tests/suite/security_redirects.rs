//! Where sign-in goes next, and what the form's error box may say (issue
//! 11): `next` is a path of plain characters on this site or `/`, and no
//! value panics the request; an error carried in the URL shows only if the
//! server wrote (signed) it.

use crate::security_support;

use gantry_server::security::Security;
use security_support::{base64_url, start, ADMIN_PASSWORD};

/// The no-JavaScript form post: the answer is a redirect.
async fn form_login(
    server: &security_support::Secured,
    password: &str,
    next: &str,
    referer: &str,
) -> reqwest::Response {
    server
        .client()
        .post(server.url("/api/login"))
        .header("accept", "text/html")
        .header("referer", server.url(referer))
        .form(&[("username", "admin"), ("password", password), ("next", next)])
        .send()
        .await
        .unwrap()
}

gantry_testkit::timed_test! {
    async fn next_goes_only_to_plain_paths_on_this_site() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security::default(), false).await;
        for bad in ["/\t/evil.example", "/\n", "/\r", "/\r\nSet-Cookie: x=1", "//evil.example", "/\\evil.example", "https://evil.example", "https:evil"] {
            let res = form_login(&server, ADMIN_PASSWORD, bad, "/login").await;
            assert!(res.status().is_redirection(), "{bad:?}: {}", res.status());
            assert_eq!(res.headers()["location"], "/", "{bad:?}");
        }
        let good = form_login(&server, ADMIN_PASSWORD, "/machines?x=1", "/login").await;
        assert_eq!(good.headers()["location"], "/machines?x=1");
    }
}

gantry_testkit::timed_test! {
    async fn only_the_servers_own_errors_show_in_the_form() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security::default(), false).await;
        let c = server.client();

        // A crafted link: the error is stripped, the page never shows it.
        let forged = base64_url(br#"{"Invalid":"ATTACKER: call +1 555 0100 to unlock"}"#);
        let link = format!("/login?next=%2F&__path=%2Fapi%2Flogin&__err={forged}");
        let res = c.get(server.url(&link)).send().await.unwrap();
        assert_eq!(res.status(), 303);
        assert_eq!(res.headers()["location"], "/login?next=%2F");
        let page = c.get(server.url("/login?next=%2F")).send().await.unwrap().text().await.unwrap();
        assert!(!page.contains("ATTACKER"));
        // The same with the keys percent-encoded (the page decodes them).
        let encoded = format!("/login?next=%2F&%5F%5Fpath=%2Fapi%2Flogin&%5F%5Ferr={forged}");
        let res = c.get(server.url(&encoded)).send().await.unwrap();
        assert_eq!(res.status(), 303, "an encoded __err is stripped too");
        assert_eq!(res.headers()["location"], "/login?next=%2F");

        // The server's own answer to a wrong password comes back signed and shows.
        let wrong = form_login(&server, "wrong-password", "/", "/login?next=%2F").await;
        let location = wrong.headers()["location"].to_str().unwrap().to_string();
        assert!(location.contains("__err=") && location.contains("__sig="), "{location}");
        let path = location.split_once(&server.addr.to_string()).map_or(location.as_str(), |(_, p)| p).to_string();
        let shown = c.get(server.url(&path)).send().await.unwrap();
        assert_eq!(shown.status(), 200);
        assert!(shown.text().await.unwrap().contains("wrong username or password"));

        // Arguments that do not parse: the parser's message quotes what the
        // caller wrote (a key sent twice), and it comes back signed, so the
        // quoted words are left out — anyone could make the server sign them.
        let res = server
            .client()
            .post(server.url("/api/login"))
            .header("accept", "text/html")
            .header("referer", server.url("/login?next=%2F"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("username=a&password=b&x%22Sign+in+again+at+evil.example%22=1&x%22Sign+in+again+at+evil.example%22=2&ATTACKER+call+555+now=1&ATTACKER+call+555+now=2")
            .send()
            .await
            .unwrap();
        let location = res.headers()["location"].to_str().unwrap().to_string();
        assert!(location.contains("__sig="), "{location}");
        let path = location.split_once(&server.addr.to_string()).map_or(location.as_str(), |(_, p)| p).to_string();
        let shown = c.get(server.url(&path)).send().await.unwrap().text().await.unwrap();
        assert!(shown.contains("bad request"), "the refusal shows");
        assert!(!shown.contains("ATTACKER") && !shown.contains("evil.example"), "the caller's words do not");

        // The same signature on another text is refused.
        let swapped = path.replace(path.split("__err=").nth(1).unwrap().split('&').next().unwrap(), &forged);
        let res = c.get(server.url(&swapped)).send().await.unwrap();
        assert_eq!(res.status(), 303);
    }
}

gantry_testkit::timed_test! {
    async fn upload_messages_in_links_show_only_when_the_server_wrote_them() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security::default(), false).await;
        let c = server.client();
        // Crafted links: the message is stripped before any page sees it.
        for (link, clean) in [
            ("/datasets/x/y?upload_error=ATTACKER%3A+call+%2B1+555+0100", "/datasets/x/y"),
            ("/datasets/x/y?%75pload_error=ATTACKER%3A+call+%2B1+555+0100", "/datasets/x/y"),
            ("/machines/1?uploaded=%2Fdata%2Fx&__msig=00112233445566778899aabbccddeeff#files", "/machines/1"),
            ("/machines/1?tab=files&__msig=00", "/machines/1?tab=files"),
        ] {
            let res = c.get(server.url(link)).send().await.unwrap();
            assert_eq!(res.status(), 303, "{link}");
            assert_eq!(res.headers()["location"], clean, "{link}");
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_sign_in_redirect_never_carries_a_signed_upload_message() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security::default(), false).await;
        // The phishing link: sign in, then land on a page "saying" the attacker's text.
        let next = "/datasets/coco/v1?upload_error=This%20dataset%20moved%3B%20re-upload%20at%20evil.example";
        let res = form_login(&server, ADMIN_PASSWORD, next, "/login").await;
        assert!(res.status().is_redirection(), "{}", res.status());
        let location = res.headers()["location"].to_str().unwrap().to_string();
        assert!(!location.contains("__msig"), "the sign-in's redirect was signed: {location}");
        // Followed, the unsigned text is stripped before any page sees it.
        let res = server.client().get(server.url(&location)).send().await.unwrap();
        assert_eq!(res.status(), 303);
        assert_eq!(res.headers()["location"], "/datasets/coco/v1");
    }
}
