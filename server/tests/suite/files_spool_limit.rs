//! The machine page's upload form is spooled to a temporary file before
//! the engine takes it (a tar header needs the size first). A user may
//! have two on their way in at once: a third is refused before a byte of
//! it is read, and a slot comes back as soon as an upload is stored.
//! Before, any number of parallel posts, each up to the upload limit,
//! could fill the server's temporary directory.
//!
//! Needs `bash scripts/dockerd.sh && bash scripts/demo-image.sh`, like `terminal`.

use crate::terminal::{env, sign_in, PASSWORD};
use gantry_core::task::TaskKind;
use gantry_platform::workspace::Limits;
use gantry_testkit::raw_http::{open, First};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

const BOUNDARY: &str = "spool-test-boundary";
const FILE_BYTES: usize = 256 * 1024;

fn part_head(name: &str) -> String {
    format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{name}\"\r\nContent-Type: application/octet-stream\r\n\r\n")
}

fn form_len(name: &str) -> u64 {
    (part_head(name).len() + FILE_BYTES + format!("\r\n--{BOUNDARY}--\r\n").len()) as u64
}

gantry_testkit::timed_test! {
    async fn a_user_spools_two_form_uploads_at_once_and_a_third_waits_its_turn() {
        let env = env(Limits::default()).await;
        let (id, _container) = env.machine(&env.alice.clone(), "spooler").await;
        let alice = sign_in(&env, "alice", PASSWORD).await;
        let headers = |cookie: &str| {
            vec![
                ("Cookie", cookie.to_string()),
                ("Origin", format!("http://{}", env.addr)),
                ("Accept", "application/json".to_string()),
                ("Content-Type", format!("multipart/form-data; boundary={BOUNDARY}")),
            ]
        };
        let path = format!("/machines/{id}/files");
        // Two uploads under way: the server is reading their bodies.
        let mut under_way: Vec<(String, TcpStream)> = Vec::new();
        for name in ["one.bin", "two.bin"] {
            let First::Continue(mut sock) = open(env.addr, "POST", &path, &headers(&alice), form_len(name)).await else {
                panic!("{name} was answered before its body");
            };
            sock.write_all(part_head(name).as_bytes()).await.unwrap();
            sock.write_all(&vec![1u8; FILE_BYTES / 2]).await.unwrap();
            under_way.push((name.to_string(), sock));
        }

        // The third is refused without its body being read.
        match open(env.addr, "POST", &path, &headers(&alice), form_len("three.bin")).await {
            First::Answered(reply) => {
                assert_eq!(reply.status, 429, "{reply:?}");
                assert!(reply.body.contains("you have 2 form uploads on their way in"), "{reply:?}");
            }
            First::Continue(_) => panic!("a third form upload was let in"),
        }
        // One finishes: it is stored, and its slot is free again.
        let (name, mut sock) = under_way.remove(0);
        sock.write_all(&vec![1u8; FILE_BYTES - FILE_BYTES / 2]).await.unwrap();
        sock.write_all(format!("\r\n--{BOUNDARY}--\r\n").as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        sock.read_to_end(&mut answer).await.unwrap();
        let answer = String::from_utf8_lossy(&answer);
        let last = answer.rfind("HTTP/1.1 ").map_or("", |at| &answer[at..]);
        assert!(last.starts_with("HTTP/1.1 200") && last.contains(&format!("/data/{name}")), "{answer}");
        let First::Continue(third) = open(env.addr, "POST", &path, &headers(&alice), form_len("three.bin")).await else {
            panic!("the slot of a stored upload did not come back");
        };
        drop((third, under_way));
        env.operate(id, TaskKind::Delete).await;
    }
}
