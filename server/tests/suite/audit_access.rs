//! What reads or moves data leaves a row in the audit log: sign-ins (and
//! failed ones, with the name tried), sign-outs, dataset downloads, and —
//! with a real Docker Engine — a machine's files in and out and its logs.
//! Each row says who, what, from which client address (behind a trusted
//! proxy, the one it forwarded) and the bytes where there are some.
//!
//! The machine part needs `bash scripts/dockerd.sh && bash scripts/demo-image.sh`, like `terminal`.

use crate::{datasets_support, security_support, terminal};
use gantry_core::task::TaskKind;
use gantry_platform::{db, workspace::Limits};
use gantry_server::security::Security;
use reqwest::StatusCode;

/// The rows of `action`, oldest first: (actor's name, detail).
async fn rows(pool: &db::Pool, action: &str) -> Vec<(Option<String>, String)> {
    sqlx::query_as(
        "SELECT u.username, a.detail FROM audit_log a LEFT JOIN users u ON u.id = a.actor_id
         WHERE a.action = ? ORDER BY a.id",
    )
    .bind(action)
    .fetch_all(pool)
    .await
    .unwrap()
}

gantry_testkit::timed_test! {
    async fn sign_ins_failed_sign_ins_and_sign_outs_are_audited_with_the_address() {
        let dir = tempfile::tempdir().unwrap();
        let security = Security { trusted_proxy: true, gate: security_support::gate(2), ..Security::default() };
        let server = security_support::start(&dir, security, false).await;
        let client = server.client_from("203.0.113.7");

        // A wrong password, and a name that is no account, with characters a
        // log line must not carry as they are: no actor, the name escaped.
        let res = server.login(&client, "admin", "not-the-password").await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        let res = server.login(&client, "ghost\"\nx", "whatever-it-is").await;
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
        let failed = rows(&server.pool, "auth.sign_in_failed").await;
        assert_eq!(failed.len(), 2, "{failed:?}");
        assert_eq!(failed[0], (None, "sign-in as \"admin\" refused: wrong username or password from 203.0.113.7".to_string()));
        assert_eq!(failed[1].0, None);
        assert!(failed[1].1.starts_with(r#"sign-in as "ghost\"\nx" refused"#) && !failed[1].1.contains('\n'), "{failed:?}");

        // A disabled account's right password is refused, and noted.
        server.add_user("dora", "doras-password-1", gantry_core::Role::User).await;
        sqlx::query("UPDATE users SET disabled = 1 WHERE username = 'dora'").execute(&server.pool).await.unwrap();
        let res = server.login(&client, "dora", "doras-password-1").await;
        assert!(res.status().is_client_error(), "{}", res.status());
        let failed = rows(&server.pool, "auth.sign_in_failed").await;
        assert_eq!(failed.last().unwrap().1, "sign-in as \"dora\" refused: this account is disabled; ask an administrator from 203.0.113.7");

        // Signed in, then out: the account, from the proxy's client.
        let res = server.login(&client, "admin", security_support::ADMIN_PASSWORD).await;
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(rows(&server.pool, "auth.sign_in").await, vec![(Some("admin".to_string()), "admin signed in from 203.0.113.7".to_string())]);
        let res = client.post(server.url("/api/logout")).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert_eq!(rows(&server.pool, "auth.sign_out").await, vec![(Some("admin".to_string()), "admin signed out from 203.0.113.7".to_string())]);
        // Signing out with no session is no sign-out.
        client.post(server.url("/api/logout")).send().await.unwrap();
        assert_eq!(rows(&server.pool, "auth.sign_out").await.len(), 1);
    }
}

gantry_testkit::timed_test! {
    async fn dataset_downloads_are_audited_with_the_file_the_range_and_the_bytes() {
        let s = datasets_support::start(datasets_support::limits()).await;
        let http = reqwest::Client::new();
        let res = http.put(s.file_url("dir/a.txt")).bearer_auth(&s.alice_token).body("hello world").send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        assert!(rows(&s.pool, "dataset.download").await.is_empty(), "an upload is no download");

        let got = http.get(s.file_url("dir/a.txt")).bearer_auth(&s.alice_token).send().await.unwrap();
        assert_eq!(got.text().await.unwrap(), "hello world");
        let part = http.get(s.file_url("dir/a.txt")).bearer_auth(&s.alice_token).header("Range", "bytes=6-").send().await.unwrap();
        assert_eq!(part.status(), StatusCode::PARTIAL_CONTENT);
        assert_eq!(part.text().await.unwrap(), "world");
        // The version page's link (the session) is audited the same way.
        let browser = s.browser("alice").await;
        let page = browser.get(s.url("/datasets/coco/v1/download?name=dir/a.txt")).send().await.unwrap();
        assert_eq!(page.text().await.unwrap(), "hello world");
        // Refused: nothing read, nothing noted.
        let refused = http.get(s.file_url("dir/a.txt")).bearer_auth(&s.carol_token).send().await.unwrap();
        assert_eq!(refused.status(), StatusCode::NOT_FOUND);

        let alice = Some("alice".to_string());
        assert_eq!(
            rows(&s.pool, "dataset.download").await,
            vec![
                (alice.clone(), "dataset coco version v1: dir/a.txt from 127.0.0.1, 11 bytes".to_string()),
                (alice.clone(), "dataset coco version v1: dir/a.txt (bytes 6-10 of 11) from 127.0.0.1, 5 bytes".to_string()),
                (alice, "dataset coco version v1: dir/a.txt from 127.0.0.1, 11 bytes".to_string()),
            ]
        );
    }
}

gantry_testkit::timed_test! {
    async fn a_machines_files_and_logs_are_audited_with_who_what_where_from_and_bytes() {
        let env = terminal::env_secured(Limits::default(), Security { trusted_proxy: true, ..Security::default() }).await;
        let (id, _container) = env.machine(&env.alice.clone(), "audited").await;
        let alice = terminal::sign_in(&env, "alice", terminal::PASSWORD).await;
        let http = terminal::http();
        let from = "198.51.100.23";
        let machine = format!("machine audited (#{id}) of alice");

        // Uploaded with a PUT (the body streamed) and with the page's form.
        let res = http
            .put(env.url(&format!("/machines/{id}/files?path=notes/a.txt")))
            .header("Cookie", &alice)
            .header("X-Forwarded-For", from)
            .body("twelve bytes")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());
        let b = "audit-boundary";
        let form = format!(
            "--{b}\r\nContent-Disposition: form-data; name=\"dir\"\r\n\r\nnotes\r\n\
             --{b}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"b.txt\"\r\n\r\nform!\r\n--{b}--\r\n"
        );
        let res = http
            .post(env.url(&format!("/machines/{id}/files")))
            .header("Cookie", &alice)
            .header("Origin", format!("http://{}", env.addr))
            .header("Accept", "application/json")
            .header("Content-Type", format!("multipart/form-data; boundary={b}"))
            .header("X-Forwarded-For", from)
            .body(form)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{}", res.text().await.unwrap());

        // Downloaded: a file (its size), a folder (an archive, no size known first).
        let res = http.get(env.url(&format!("/machines/{id}/files?path=notes/a.txt"))).header("Cookie", &alice).header("X-Forwarded-For", from).send().await.unwrap();
        assert_eq!(res.text().await.unwrap(), "twelve bytes");
        let res = http.get(env.url(&format!("/machines/{id}/files?path=notes"))).header("Cookie", &alice).header("X-Forwarded-For", from).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        res.bytes().await.unwrap();
        // A missing file is read from nowhere: not noted.
        let res = http.get(env.url(&format!("/machines/{id}/files?path=nope"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::NOT_FOUND);

        // The logs' last lines (read whole here: their size).
        let res = http.get(env.url(&format!("/machines/{id}/logs?tail=5"))).header("Cookie", &alice).header("X-Forwarded-For", from).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        let logs = res.bytes().await.unwrap();

        let a = Some("alice".to_string());
        assert_eq!(
            rows(&env.pool, "files.upload").await,
            vec![
                (a.clone(), format!("{machine}: /data/notes/a.txt from {from}, 12 bytes")),
                (a.clone(), format!("{machine}: /data/notes/b.txt from {from}, 5 bytes")),
            ]
        );
        assert_eq!(
            rows(&env.pool, "files.download").await,
            vec![
                (a.clone(), format!("{machine}: /data/notes/a.txt from {from}, 12 bytes")),
                (a.clone(), format!("{machine}: /data/notes from {from}")),
            ]
        );
        assert_eq!(
            rows(&env.pool, "logs.read").await,
            vec![(a, format!("{machine}: logs, last 5 lines from {from}, {} bytes", logs.len()))]
        );
        env.operate(id, TaskKind::Delete).await;
    }
}
