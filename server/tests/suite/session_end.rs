//! What a browser session let into a machine ends with that session
//! (review finding 5): signing out — in another tab of the same browser —
//! or leaving the session unused past the idle limit ends its open
//! terminal (closed, saying why), its followed log (an `end` event saying
//! why) and a file on its way in or out; another browser's session goes on.
//!
//! The first test needs no engine (the watcher itself); the others need
//! `bash scripts/dockerd.sh && bash scripts/demo-image.sh`, like `terminal`.

use crate::{
    security_support::{self, gate},
    terminal::{
        close_frame, connect, env, env_secured, http, next_event, read_until, sign_in, type_line, Env, PASSWORD,
    },
};
use gantry_core::{task::TaskKind, Role};
use gantry_platform::{accounts, workspace::Limits};
use gantry_server::{
    routes::{
        terminal::close_code,
        workspace::{Ended, SessionWatch},
    },
    security::{Clock, Security},
};
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The session id a `gantry_session=…` cookie carries.
fn session_id(cookie: &str) -> tower_sessions::session::Id {
    cookie.strip_prefix("gantry_session=").expect("a session cookie").parse().expect("a session id")
}

/// A server function call with `cookie`, from this site's pages.
async fn call(server: &security_support::Secured, cookie: &str, endpoint: &str) -> reqwest::Response {
    let origin = format!("http://{}", server.addr);
    http()
        .post(server.url(&format!("/api/{endpoint}")))
        .header("Cookie", cookie)
        .header("Origin", origin)
        .send()
        .await
        .unwrap()
}

async fn sign_in_to(server: &security_support::Secured, user: &str, password: &str) -> String {
    let res = server.login(&http(), user, password).await;
    assert_eq!(res.status(), StatusCode::OK, "{user} signs in");
    let cookie =
        gantry_testkit::session_cookie(res.headers().get_all("set-cookie").iter().filter_map(|v| v.to_str().ok()))
            .expect("a session cookie");
    // The first use stamps the session's last use, as the pages' first request does.
    assert_eq!(call(server, &cookie, "my_quota").await.status(), StatusCode::OK);
    cookie
}

gantry_testkit::timed_test! {
    async fn the_session_watcher_sees_sign_out_expiry_and_account_changes() {
        let dir = tempfile::tempdir().unwrap();
        let clock = Clock::manual(1_800_000_000);
        let security = Security { session_idle_secs: 3600, clock: clock.clone(), gate: gate(2), ..Security::default() };
        let server = security_support::start(&dir, security.clone(), false).await;
        let dana_id = server.add_user("dana", "dana-password-1", Role::User).await;
        let dana = accounts::user_by_id(&server.pool, dana_id).await.unwrap().unwrap();
        let tab = sign_in_to(&server, "dana", "dana-password-1").await;
        let other_browser = sign_in_to(&server, "dana", "dana-password-1").await;
        let watch = SessionWatch::start(server.pool.clone(), &security);
        let in_tab = watch.watch(&dana, Some(session_id(&tab)));
        let in_other = watch.watch(&dana, Some(session_id(&other_browser)));
        watch.check_once().await;
        assert_eq!((in_tab.ended(), in_other.ended()), (None, None), "signed in: nothing ends");

        assert_eq!(call(&server, &tab, "logout").await.status(), StatusCode::OK);
        watch.check_once().await;
        assert_eq!(in_tab.ended(), Some(Ended::SignedOut), "what the signed-out session let in ends");
        assert_eq!(in_other.ended(), None, "another browser's session goes on");

        // Used within the idle limit it goes on; unused past it, it ends —
        // by the same clock and rule as the page guard's.
        clock.advance(3000);
        assert_eq!(call(&server, &other_browser, "my_quota").await.status(), StatusCode::OK);
        clock.advance(3000);
        watch.check_once().await;
        assert_eq!(in_other.ended(), None, "used 3000 s ago: still on");
        clock.advance(601);
        watch.check_once().await;
        assert_eq!(in_other.ended(), Some(Ended::Expired), "unused for longer than the limit");
        assert_eq!(call(&server, &other_browser, "my_quota").await.status(), StatusCode::UNAUTHORIZED, "the page guard agrees");

        // The account's own changes end every session of it.
        let third = sign_in_to(&server, "dana", "dana-password-1").await;
        let in_third = watch.watch(&dana, Some(session_id(&third)));
        let admin = accounts::list_users(&server.pool).await.unwrap().into_iter().find(|u| u.username == "admin").unwrap();
        accounts::set_disabled(&server.pool, admin.id, dana.id, true).await.unwrap();
        watch.check_once().await;
        assert_eq!(in_third.ended(), Some(Ended::AccountChanged));
    }
}

/// Starts a `PUT` of `size` bytes into the machine's volume and sends its
/// first `first` bytes: returns once the server reads the body (it
/// answered `100 Continue`), so the upload is under way.
async fn start_upload(env: &Env, cookie: &str, machine_id: i64, size: usize, first: usize) -> tokio::net::TcpStream {
    let path = format!("/machines/{machine_id}/files?path=up.bin");
    let headers = [("Cookie", cookie.to_string())];
    let mut sock = gantry_testkit::raw_http::body_wanted(env.addr, "PUT", &path, &headers, size as u64).await;
    sock.write_all(&vec![7u8; first]).await.unwrap();
    sock
}

gantry_testkit::timed_test! {
    async fn signing_out_in_another_tab_ends_the_terminal_the_followed_log_and_file_transfers() {
        let env = env(Limits::default()).await;
        let (id, container) = env.machine(&env.alice.clone(), "term-out").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        let other_browser = sign_in(&env, "alice", PASSWORD).await;
        let big: usize = 50 * 1024 * 1024;
        let (code, out) = env.engine().await.exec(&container, &["/bin/sh", "-c", &format!("head -c {big} /dev/urandom > /data/big.bin")]).await.unwrap();
        assert_eq!(code, 0, "{out}");

        let mut ws = connect(&env, Some(&alice), None, id).await.expect("the owner connects");
        read_until(&mut ws, "# ").await;
        let mut kept = connect(&env, Some(&other_browser), None, id).await.expect("another browser connects");
        read_until(&mut kept, "# ").await;
        let mut logs = http().get(env.url(&format!("/machines/{id}/logs?follow=1&tail=0"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(logs.status(), StatusCode::OK);
        let mut download = http().get(env.url(&format!("/machines/{id}/files?path=big.bin"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(download.status(), StatusCode::OK);
        let mut downloaded = download.chunk().await.unwrap().expect("the download starts").len();

        let origin = format!("http://{}", env.addr);
        let out = http().post(env.url("/api/logout")).header("Cookie", &alice).header("Origin", &origin).send().await.unwrap();
        assert_eq!(out.status(), StatusCode::OK, "signed out in another tab");

        let (code, reason) = close_frame(&mut ws).await;
        assert_eq!(code, close_code::SESSION_ENDED, "{reason}");
        assert!(reason.contains("signed out"), "{reason}");
        let recorded: String = sqlx::query_scalar("SELECT close_reason FROM terminal_sessions WHERE closed_at IS NOT NULL").fetch_one(&env.pool).await.unwrap();
        assert!(recorded.contains("signed out"), "{recorded}");
        let mut buf = String::new();
        let end = loop {
            let event = next_event(&mut logs, &mut buf).await.expect("the log stream ends with an end event");
            if event.starts_with("the log stream ended") {
                break event;
            }
        };
        assert!(end.contains("signed out"), "{end}");
        // Told in the same watcher pass as the terminal: the download stops
        // short (what was already in the sockets' buffers still arrives).
        while let Ok(Some(chunk)) = download.chunk().await {
            downloaded += chunk.len();
        }
        assert!(downloaded < big, "the download was cut after {downloaded} of {big} bytes");
        // The old cookie opens nothing.
        assert!(connect(&env, Some(&alice), None, id).await.is_err());

        // An upload under way when its session signs out is refused. (Apart
        // from the download: the engine holds a container's archive calls
        // while one streams.)
        let again = sign_in(&env, "alice", PASSWORD).await;
        let mut upload = start_upload(&env, &again, id, 8 * 1024 * 1024, 64 * 1024).await;
        let out = http().post(env.url("/api/logout")).header("Cookie", &again).header("Origin", origin).send().await.unwrap();
        assert_eq!(out.status(), StatusCode::OK);
        let mut answer = Vec::new();
        let _ = upload.read_to_end(&mut answer).await;
        let answer = String::from_utf8_lossy(&answer);
        let last = answer.rfind("HTTP/1.1 ").map_or("", |at| &answer[at..]);
        assert!(last.starts_with("HTTP/1.1 401") && last.contains("signed out"), "{answer}");

        // The other browser's terminal goes on.
        type_line(&mut kept, "echo still-$((2+3))").await;
        read_until(&mut kept, "still-5").await;
        kept.close(None).await.unwrap();
        close_frame(&mut kept).await;
        env.operate(id, TaskKind::Delete).await;
    }
}

gantry_testkit::timed_test! {
    async fn a_session_unused_past_the_idle_limit_ends_the_terminal_and_the_followed_log() {
        let clock = Clock::manual(1_800_000_000);
        let env = env_secured(Limits::default(), Security { session_idle_secs: 3600, clock: clock.clone(), ..Security::default() }).await;
        let (id, _container) = env.machine(&env.alice.clone(), "term-idle").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        let mut ws = connect(&env, Some(&alice), None, id).await.expect("the owner connects");
        read_until(&mut ws, "# ").await;
        let mut logs = http().get(env.url(&format!("/machines/{id}/logs?follow=1&tail=0"))).header("Cookie", &alice).send().await.unwrap();
        assert_eq!(logs.status(), StatusCode::OK);
        // Typing into the shell is no use of the session: only requests are.
        type_line(&mut ws, "echo busy-$((1+1))").await;
        read_until(&mut ws, "busy-2").await;

        clock.advance(3601);
        let (code, reason) = close_frame(&mut ws).await;
        assert_eq!(code, close_code::SESSION_ENDED, "{reason}");
        assert!(reason.contains("session ended"), "{reason}");
        let mut buf = String::new();
        let end = loop {
            let event = next_event(&mut logs, &mut buf).await.expect("the log stream ends with an end event");
            if event.starts_with("the log stream ended") {
                break event;
            }
        };
        assert!(end.contains("session ended"), "{end}");
        env.operate(id, TaskKind::Delete).await;
    }
}
