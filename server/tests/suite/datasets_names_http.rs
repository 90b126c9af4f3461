//! File names are refused (400) before the server asks for a byte of the
//! body when they would not fit a store's key as the S3 store writes it
//! (percent-encoded: a CJK character takes 9 bytes) or hide characters
//! that display as nothing (a Unicode tag after a visible name).

use crate::datasets_support;

use datasets_support::*;
use gantry_testkit::raw_http::{open, First};

fn enc(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

gantry_testkit::timed_test! {
    async fn names_that_do_not_fit_a_stored_key_or_hide_characters_are_refused_before_the_body() {
        let s = start(limits()).await;
        let auth = [("Authorization", format!("Bearer {}", s.alice_token))];
        let cjk = "长".repeat(80);
        for (name, says) in [
            (format!("{cjk}/{cjk}/{cjk}/a.bin"), "bytes as stored"),
            (format!("{cjk}/a.bin"), "a path segment is longer than 255 bytes as stored"),
            ("report\u{E0041}.pdf".to_string(), "invisible and text-direction characters"),
            ("a\u{2028}b.txt".to_string(), "invisible and text-direction characters"),
        ] {
            let path = format!("/api/v1/datasets/coco/versions/v1/files/{}", enc(&name));
            match open(s.addr, "PUT", &path, &auth, 1024).await {
                First::Answered(reply) => {
                    assert_eq!(reply.status, 400, "{name:?}: {}", reply.body);
                    assert!(reply.body.contains(says), "{name:?}: {}", reply.body);
                }
                First::Continue(_) => panic!("{name:?}: the server asked for the body: the name was not refused first"),
            }
        }
        assert_eq!(s.count("SELECT COUNT(*) FROM dataset_uploads").await + s.count("SELECT COUNT(*) FROM dataset_files").await, 0);
    }
}
