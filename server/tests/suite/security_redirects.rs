//! Where sign-in goes next, and what the form's error box may say (issue
//! 11): `next` is a path of plain characters on this site or `/`, and no
//! value panics the request; a form's error or message shows only as the
//! server kept it for the session that posted (never from a link's query).

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
    form_login_as(server, &server.client(), password, next, referer).await
}

/// [`form_login`] from the browser `c` (its session keeps the outcome).
async fn form_login_as(
    server: &security_support::Secured,
    c: &reqwest::Client,
    password: &str,
    next: &str,
    referer: &str,
) -> reqwest::Response {
    c.post(server.url("/api/login"))
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

        // A crafted link: the page never shows its error (keys plain or encoded).
        let forged = base64_url(br#"{"Invalid":"ATTACKER: call +1 555 0100 to unlock"}"#);
        for link in [
            format!("/login?next=%2F&__path=%2Fapi%2Flogin&__err={forged}"),
            format!("/login?next=%2F&%5F%5Fpath=%2Fapi%2Flogin&%5F%5Ferr={forged}"),
        ] {
            let res = c.get(server.url(&link)).send().await.unwrap();
            assert_eq!(res.status(), 200, "{link}");
            assert!(!res.text().await.unwrap().contains("ATTACKER"), "{link}");
        }

        // The server's own answer to a wrong password is kept for this
        // browser's session, not written into the URL, and shows once.
        let wrong = form_login_as(&server, &c, "wrong-password", "/", "/login?next=%2F").await;
        let location = wrong.headers()["location"].to_str().unwrap().to_string();
        assert!(!location.contains("__err"), "{location}");
        let path = location.split_once(&server.addr.to_string()).map_or(location.as_str(), |(_, p)| p).to_string();
        let other = server.client().get(server.url(&path)).send().await.unwrap().text().await.unwrap();
        assert!(!other.contains("wrong username or password"), "another browser was told");
        let shown = c.get(server.url(&path)).send().await.unwrap();
        assert_eq!(shown.status(), 200);
        assert!(shown.text().await.unwrap().contains("wrong username or password"));
        let again = c.get(server.url(&path)).send().await.unwrap().text().await.unwrap();
        assert!(!again.contains("wrong username or password"), "said twice");

        // Arguments that do not parse: the parser's message quotes what the
        // caller wrote (a key sent twice), so the quoted words are left out
        // of the refusal the page shows.
        let res = c
            .post(server.url("/api/login"))
            .header("accept", "text/html")
            .header("referer", server.url("/login?next=%2F"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body("username=a&password=b&x%22Sign+in+again+at+evil.example%22=1&x%22Sign+in+again+at+evil.example%22=2&ATTACKER+call+555+now=1&ATTACKER+call+555+now=2")
            .send()
            .await
            .unwrap();
        let location = res.headers()["location"].to_str().unwrap().to_string();
        let path = location.split_once(&server.addr.to_string()).map_or(location.as_str(), |(_, p)| p).to_string();
        let shown = c.get(server.url(&path)).send().await.unwrap().text().await.unwrap();
        assert!(shown.contains("bad request"), "the refusal shows");
        assert!(!shown.contains("ATTACKER") && !shown.contains("evil.example"), "the caller's words do not");
    }
}

gantry_testkit::timed_test! {
    async fn upload_messages_in_links_show_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security::default(), false).await;
        let c = server.client();
        let signed_in = form_login_as(&server, &c, ADMIN_PASSWORD, "/", "/login").await;
        assert!(signed_in.status().is_redirection());
        for link in [
            "/datasets/x/y?upload_error=ATTACKER%3A+call+%2B1+555+0100",
            "/datasets/x/y?%75pload_error=ATTACKER%3A+call+%2B1+555+0100",
            "/machines/1?uploaded=%2Fdata%2FATTACKER&__msig=00112233445566778899aabbccddeeff#files",
        ] {
            let page = c.get(server.url(link)).send().await.unwrap().text().await.unwrap();
            assert!(!page.contains("ATTACKER"), "{link}");
        }
    }
}

gantry_testkit::timed_test! {
    async fn a_sign_in_that_goes_on_to_a_page_link_brings_no_message_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let server = start(&dir, Security::default(), false).await;
        let c = server.client();
        // The phishing link: sign in, then land on a page "saying" the attacker's text.
        let next = "/datasets/coco/v1?upload_error=This%20dataset%20moved%3B%20re-upload%20at%20evil.example";
        let res = form_login_as(&server, &c, ADMIN_PASSWORD, next, "/login").await;
        assert!(res.status().is_redirection(), "{}", res.status());
        let location = res.headers()["location"].to_str().unwrap().to_string();
        let page = c.get(server.url(&location)).send().await.unwrap().text().await.unwrap();
        assert!(!page.contains("evil.example"), "{location}");
    }
}
