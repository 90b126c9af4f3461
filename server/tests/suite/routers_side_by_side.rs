//! Several servers in one process — every HTTP test binary, and a process
//! that builds a second router while the first serves. Leptos' route-list
//! generation sets a process-wide "suppress resource loads" flag while it
//! runs the app once; a page whose data first loads inside that window
//! waits forever (leptos-rs/leptos#4773). With `SsrMode::Async` pages that
//! is a request that never answers: CI saw one here (a sign-in test hung
//! for 240 s while its neighbours started servers). Gantry generates the
//! route list once per process, before any router can serve.

use crate::common;

use common::{login, TestServer, ADMIN_PASSWORD};
use reqwest::StatusCode;
use std::time::Duration;

gantry_testkit::timed_test! {
    async fn pages_keep_answering_while_other_routers_are_built() {
        let dir = tempfile::tempdir().unwrap();
        let server = TestServer::start(&dir).await;
        let client = server.client();
        assert_eq!(login(&server, &client, "admin", ADMIN_PASSWORD).await.status(), StatusCode::OK);

        // Other tests' servers start on their own threads and runtimes.
        let builders = std::thread::spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                for _ in 0..150 {
                    let dir = tempfile::tempdir().unwrap();
                    TestServer::start(&dir).await.stop();
                }
            });
        });
        // Each dashboard render loads its data through resources; every one
        // must answer, whatever the builders do meanwhile. The bound only
        // tells a hang from a slow machine (a render takes milliseconds).
        // Without the fix this failed 3 runs of 3, at render 12 to 102.
        let mut round = 0;
        while !builders.is_finished() {
            round += 1;
            let page = tokio::time::timeout(Duration::from_secs(60), async {
                let res = client.get(server.url("/")).send().await.unwrap();
                (res.status(), res.text().await.unwrap())
            })
            .await
            .unwrap_or_else(|_| panic!("dashboard render {round} never answered while routers were being built"));
            assert_eq!(page.0, StatusCode::OK);
            assert!(page.1.contains("GPU quota"), "render {round} is the dashboard with its data");
        }
        builders.join().unwrap();
    }
}
