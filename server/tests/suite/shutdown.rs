//! A stopped server ends — and hands its work back — even while a client
//! holds a connection open that will never finish a request (an idle
//! keep-alive socket, a half-sent request line, a long download): open
//! connections may not keep the process, or its leased tasks, alive.

use crate::common;

use std::io::Write;

gantry_testkit::timed_test! {
    limit = 90;
    async fn sigterm_ends_the_server_despite_a_connection_that_never_finishes() {
        let dir = tempfile::tempdir().unwrap();
        let mut server = common::child::spawn(dir.path(), "log", "a-good-password-1", &[("GANTRY_EXECUTOR", "simulated")]).await;
        // Half a request line, then silence.
        let mut idle = std::net::TcpStream::connect(server.addr).unwrap();
        idle.write_all(b"GET / HTTP/1.1\r\n").unwrap();
        // The connection is being served (the server answers others meanwhile).
        let health = server.client.get(format!("http://{}/healthz", server.addr)).send().await.unwrap();
        assert_eq!(health.status(), reqwest::StatusCode::OK);

        let status = server.terminate().await;
        assert!(status.success(), "gantry serve ended with {status}");
        // (Before, it waited on that connection for ever.)
        drop(idle);
    }
}
