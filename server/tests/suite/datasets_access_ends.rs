//! A transfer must not outlive the right to it. An upload in one request
//! (API `PUT`, the page's `PUT`, the no-JS form), a resumable `PATCH` and
//! a download stop when, meanwhile, the account is disabled, its sessions
//! end (a password reset), the browser session it came with signs out (in
//! another tab), the API token it came with is revoked, or the account is
//! moved to another group or demoted (with a token as with a session): the
//! upload answers why and keeps nothing of that request; the download is
//! cut short.

use crate::datasets_support;

use datasets_support::*;
use gantry_platform::{accounts, tokens};
use gantry_testkit::raw_http::{body_wanted, reply};
use tokio::io::AsyncWriteExt;

const MIB: u64 = 1 << 20;
const FILES: &str = "/api/v1/datasets/coco/versions/v1/files";
const ENDED: &str = "access ended while it was uploading";

async fn disable_alice(s: &Server) {
    accounts::set_disabled(&s.pool, s.carol.id, s.alice.id, true).await.unwrap();
}

/// Signs in as alice: the headers a raw browser request carries.
async fn browser_headers(s: &Server) -> Vec<(&'static str, String)> {
    let res = reqwest::Client::new()
        .post(s.url("/api/login"))
        .header("Origin", format!("http://{}", s.addr))
        .form(&[("username", "alice"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    let cookie =
        gantry_testkit::session_cookie(res.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()))
            .expect("a session cookie");
    vec![("Cookie", cookie), ("Origin", format!("http://{}", s.addr))]
}

/// Signs the session of `headers` out, as another tab of the browser would.
async fn sign_out(s: &Server, headers: &[(&'static str, String)]) {
    let mut req = reqwest::Client::new().post(s.url("/api/logout"));
    for (name, value) in headers {
        req = req.header(*name, value);
    }
    assert!(req.send().await.unwrap().status().is_success());
}

async fn assert_nothing_stored(s: &Server) {
    assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files").await, 0);
    assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 0);
    assert!(files_under(&s.central).is_empty(), "{:?}", files_under(&s.central));
    assert!(files_under(&s.region).is_empty(), "{:?}", files_under(&s.region));
}

gantry_testkit::timed_test! {
    async fn a_token_upload_stops_when_its_account_is_disabled_midway() {
        let s = start(limits()).await;
        let auth = [("Authorization", format!("Bearer {}", s.alice_token))];
        let mut sock = body_wanted(s.addr, "PUT", &format!("{FILES}/big.bin"), &auth, 4 * MIB).await;
        disable_alice(&s).await;
        sock.write_all(&vec![1u8; MIB as usize]).await.unwrap();
        // The rest of the body never comes: the upload ends by itself.
        let answer = reply(sock).await;
        assert_eq!(answer.status, 403, "{}", answer.body);
        assert!(answer.body.contains(ENDED) && answer.body.contains("nothing was kept"), "{}", answer.body);
        assert_nothing_stored(&s).await;
    }
}

gantry_testkit::timed_test! {
    async fn the_page_upload_stops_when_the_password_is_reset_midway() {
        let s = start(limits()).await;
        let headers = browser_headers(&s).await;
        let mut sock = body_wanted(s.addr, "PUT", "/datasets/coco/v1/upload?name=big.bin", &headers, 4 * MIB).await;
        accounts::reset_password(&s.pool, s.carol.id, s.alice.id, "a-temporary-password").await.unwrap();
        sock.write_all(&vec![1u8; MIB as usize]).await.unwrap();
        let answer = reply(sock).await;
        assert_eq!(answer.status, 403, "{}", answer.body);
        assert!(answer.body.contains(ENDED), "{}", answer.body);
        assert_nothing_stored(&s).await;
    }
}

gantry_testkit::timed_test! {
    async fn the_form_upload_without_javascript_stops_when_the_account_is_disabled_midway() {
        let s = start(limits()).await;
        let mut headers = browser_headers(&s).await;
        let boundary = "gantryboundary";
        headers.push(("Content-Type", format!("multipart/form-data; boundary={boundary}")));
        headers.push(("Accept", "text/html".to_string()));
        let part = format!("--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"big.bin\"\r\nContent-Type: application/octet-stream\r\n\r\n");
        let mut sock = body_wanted(s.addr, "POST", "/datasets/coco/v1/upload", &headers, part.len() as u64 + 4 * MIB).await;
        disable_alice(&s).await;
        sock.write_all(part.as_bytes()).await.unwrap();
        sock.write_all(&vec![1u8; MIB as usize]).await.unwrap();
        let answer = reply(sock).await;
        assert!((300..400).contains(&answer.status), "{} {}", answer.status, answer.body);
        // Its session ended: the refusal goes to the version page, with no
        // message in the URL (the session that would keep it is gone).
        let location = answer.header("location").unwrap_or_default();
        assert_eq!(location, "/datasets/coco/v1", "{}", answer.body);
        assert_nothing_stored(&s).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_resumable_patch_stops_when_its_token_is_revoked_midway() {
        let s = start(limits()).await;
        let url = "/api/v1/datasets/coco/versions/v1/uploads/big.bin";
        let begun = reqwest::Client::new().post(s.url(url)).bearer_auth(&s.alice_token).header("Upload-Length", 4 * MIB).send().await.unwrap();
        assert_eq!(begun.status(), reqwest::StatusCode::CREATED);
        let auth = [("Authorization", format!("Bearer {}", s.alice_token)), ("Upload-Offset", "0".to_string())];
        let mut sock = body_wanted(s.addr, "PATCH", url, &auth, 4 * MIB).await;
        let token = tokens::list(&s.pool, &s.alice).await.unwrap()[0].id;
        tokens::revoke(&s.pool, &s.alice, token).await.unwrap();
        sock.write_all(&vec![1u8; MIB as usize]).await.unwrap();
        let answer = reply(sock).await;
        assert_eq!(answer.status, 403, "{}", answer.body);
        assert!(answer.body.contains(ENDED) && answer.body.contains("keeps the 0 bytes held before this request"), "{}", answer.body);
        // The upload itself stays, for its owner to continue, without this request's bytes.
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await, 1);
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_files").await, 0);
        assert!(files_under(&s.central).iter().all(|f| std::fs::metadata(s.central.join(f)).unwrap().len() == 0), "{:?}", files_under(&s.central));
    }
}

/// Reads a download's first chunk, runs `revoke`, then reads on: the bytes
/// that came before it ended.
async fn downloaded_around(mut res: reqwest::Response, revoke: impl std::future::Future<Output = ()>) -> u64 {
    assert_eq!(res.status(), reqwest::StatusCode::OK);
    let mut got = res.chunk().await.unwrap().map_or(0, |c| c.len() as u64);
    revoke.await;
    while let Ok(Some(chunk)) = res.chunk().await {
        got += chunk.len() as u64;
    }
    got
}

gantry_testkit::timed_test! {
    async fn downloads_are_cut_when_the_token_is_revoked_or_the_password_reset_midway() {
        let s = start(limits()).await;
        // Large enough that the server is still sending when the right ends
        // (the socket buffers between it and the reader hold a few MiB).
        let size = 64 * MIB;
        let auth = [("Authorization", format!("Bearer {}", s.alice_token))];
        let stored = raw(s.addr, "PUT", &format!("{FILES}/big.bin"), &auth, size, None, pattern).await.unwrap();
        assert_eq!(stored.status, 201, "{}", stored.body);

        let res = reqwest::Client::new().get(s.url(&format!("{FILES}/big.bin"))).bearer_auth(&s.alice_token).send().await.unwrap();
        let token = tokens::list(&s.pool, &s.alice).await.unwrap()[0].id;
        let got = downloaded_around(res, async { tokens::revoke(&s.pool, &s.alice, token).await.unwrap() }).await;
        assert!(got < size, "the whole file came after the token was revoked");

        let page = s.browser("alice").await;
        let res = page.get(s.url("/datasets/coco/v1/download?name=big.bin")).send().await.unwrap();
        let got = downloaded_around(res, async { accounts::reset_password(&s.pool, s.carol.id, s.alice.id, "a-temporary-password").await.unwrap(); }).await;
        assert!(got < size, "the whole file came after the password was reset");
    }
}

gantry_testkit::timed_test! {
    async fn the_page_upload_stops_when_its_session_signs_out_in_another_tab() {
        let s = start(limits()).await;
        let headers = browser_headers(&s).await;
        let mut sock = body_wanted(s.addr, "PUT", "/datasets/coco/v1/upload?name=big.bin", &headers, 4 * MIB).await;
        sign_out(&s, &headers).await;
        sock.write_all(&vec![1u8; MIB as usize]).await.unwrap();
        let answer = reply(sock).await;
        assert_eq!(answer.status, 403, "{}", answer.body);
        assert!(answer.body.contains(ENDED) && answer.body.contains("signed out"), "{}", answer.body);
        assert_nothing_stored(&s).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_download_is_cut_when_its_session_signs_out() {
        let s = start(limits()).await;
        let size = 64 * MIB;
        let auth = [("Authorization", format!("Bearer {}", s.alice_token))];
        let stored = raw(s.addr, "PUT", &format!("{FILES}/big.bin"), &auth, size, None, pattern).await.unwrap();
        assert_eq!(stored.status, 201, "{}", stored.body);
        let headers = browser_headers(&s).await;
        let mut req = reqwest::Client::new().get(s.url("/datasets/coco/v1/download?name=big.bin"));
        for (name, value) in &headers {
            req = req.header(*name, value);
        }
        let got = downloaded_around(req.send().await.unwrap(), sign_out(&s, &headers)).await;
        assert!(got < size, "the whole file came after the session signed out");
    }
}

gantry_testkit::timed_test! {
    async fn a_token_transfer_stops_when_its_account_moves_to_another_group_midway() {
        // coco is group ml's private dataset; alice, its member, is moved
        // to group other while her script is still sending or receiving.
        let s = start(limits()).await;
        let auth = [("Authorization", format!("Bearer {}", s.alice_token))];
        let mut sock = body_wanted(s.addr, "PUT", &format!("{FILES}/big.bin"), &auth, 4 * MIB).await;
        accounts::set_group(&s.pool, s.carol.id, s.alice.id, "other").await.unwrap();
        sock.write_all(&vec![1u8; MIB as usize]).await.unwrap();
        let answer = reply(sock).await;
        assert_eq!(answer.status, 403, "{}", answer.body);
        assert!(answer.body.contains(ENDED), "{}", answer.body);
        assert_nothing_stored(&s).await;

        // Back in ml: the move revoked her token (issue 33); a new one.
        accounts::set_group(&s.pool, s.carol.id, s.alice.id, "ml").await.unwrap();
        let old = reqwest::Client::new().get(s.url("/api/v1/datasets")).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(old.status(), 401, "a group change revokes the account's tokens");
        let alice = accounts::user_by_id(&s.pool, s.alice.id).await.unwrap().unwrap();
        let (_, token) = tokens::create(&s.pool, &alice, "back in ml").await.unwrap();
        let auth = [("Authorization", format!("Bearer {token}"))];
        let size = 64 * MIB;
        let stored = raw(s.addr, "PUT", &format!("{FILES}/big.bin"), &auth, size, None, pattern).await.unwrap();
        assert_eq!(stored.status, 201, "{}", stored.body);
        let res = reqwest::Client::new().get(s.url(&format!("{FILES}/big.bin"))).bearer_auth(&token).send().await.unwrap();
        let got = downloaded_around(res, async { accounts::set_group(&s.pool, s.carol.id, s.alice.id, "other").await.unwrap(); }).await;
        assert!(got < size, "the whole file came after alice left the dataset's group");
    }
}

gantry_testkit::timed_test! {
    async fn an_admins_token_download_of_another_groups_dataset_stops_when_demoted_midway() {
        // carol, of another group, is made an admin: she reads coco as one.
        let s = start(limits()).await;
        let size = 64 * MIB;
        let auth = [("Authorization", format!("Bearer {}", s.alice_token))];
        let stored = raw(s.addr, "PUT", &format!("{FILES}/big.bin"), &auth, size, None, pattern).await.unwrap();
        assert_eq!(stored.status, 201, "{}", stored.body);
        let dora = accounts::create_user(&s.pool, None, accounts::NewUser { username: "dora", password: PASSWORD, role: gantry_core::Role::Admin, group: Some("ml") }).await.unwrap();
        accounts::set_role(&s.pool, dora.id, s.carol.id, gantry_core::Role::Admin).await.unwrap();
        // The promotion revoked her tokens (issue 33): one made as an admin.
        let carol = accounts::user_by_id(&s.pool, s.carol.id).await.unwrap().unwrap();
        let (_, token) = tokens::create(&s.pool, &carol, "as admin").await.unwrap();
        let res = reqwest::Client::new().get(s.url(&format!("{FILES}/big.bin"))).bearer_auth(&token).send().await.unwrap();
        let got = downloaded_around(res, async { accounts::set_role(&s.pool, dora.id, s.carol.id, gantry_core::Role::User).await.unwrap(); }).await;
        assert!(got < size, "the whole file came after carol was demoted");
    }
}

gantry_testkit::timed_test! {
    async fn a_public_datasets_download_goes_on_when_its_reader_changes_group() {
        // Reading a public dataset rests on the account alone: a browser
        // session's download goes on (a group change ends no session; it
        // revokes the account's API tokens, so a token's download would
        // stop — `a_token_transfer_stops_when_…` has that).
        let s = start(limits()).await;
        sqlx::query("UPDATE datasets SET visibility = 'public' WHERE code = 'coco'").execute(&s.pool).await.unwrap();
        let size = 64 * MIB;
        let auth = [("Authorization", format!("Bearer {}", s.alice_token))];
        let stored = raw(s.addr, "PUT", &format!("{FILES}/big.bin"), &auth, size, None, pattern).await.unwrap();
        assert_eq!(stored.status, 201, "{}", stored.body);
        let page = s.browser("carol").await;
        let res = page.get(s.url("/datasets/coco/v1/download?name=big.bin")).send().await.unwrap();
        let got = downloaded_around(res, async { accounts::set_group(&s.pool, s.alice.id, s.carol.id, "ml").await.unwrap(); }).await;
        assert_eq!(got, size, "the whole public file came");
    }
}
