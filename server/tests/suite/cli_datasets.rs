//! `gantry datasets upload CODE VERSION FILE…` against a real server:
//! several files, one of them sent in several pieces, one empty, and one
//! whose upload was interrupted — begun through the API and left half-way,
//! as a dropped connection leaves it — which the CLI continues from the
//! offset the server holds (it says so) instead of starting over. Every
//! listed file then holds exactly the bytes of its local file.

use crate::cli_support::start;
use gantry_platform::datasets::{self, NewDataset};
use reqwest::StatusCode;
use sha2::{Digest, Sha256};

fn sha(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 9) as u8).collect()
}

gantry_testkit::timed_test! {
    limit = 180;
    async fn an_upload_of_several_files_continues_an_interrupted_one_from_the_servers_offset() {
        let (s, alice) = start("simulated").await;
        let new = NewDataset {
            code: "coco",
            name: "COCO",
            region: "local",
            category: "images",
            description: "",
            visibility: "group",
        };
        datasets::create_dataset(&s.pool, &alice, &new).await.unwrap();
        datasets::create_version(&s.pool, &alice, "coco", "v1").await.unwrap();
        s.login().await;
        let stored: serde_json::Value = serde_json::from_slice(&std::fs::read(s.credentials()).unwrap()).unwrap();
        let token = stored["token"].as_str().unwrap().to_string();

        let dir = s.home.join("files");
        std::fs::create_dir_all(&dir).unwrap();
        let files = [("small.txt", b"hello dataset\n".to_vec()), ("big.bin", bytes(2_500_000, 1)), ("half.bin", bytes(1_800_000, 7)), ("empty.txt", Vec::new())];
        for (name, data) in &files {
            std::fs::write(dir.join(name), data).unwrap();
        }

        // half.bin: begun through the API with the CLI's own name for the
        // file, 700,000 bytes sent, then nothing more (a dropped connection).
        let half = dir.join("half.bin");
        let fp = gantry_server::cli::datasets::fingerprint(&half).unwrap();
        let url = format!("{}/api/v1/datasets/coco/versions/v1/uploads/half.bin", s.url);
        let http = reqwest::Client::new();
        let res = http.post(&url).bearer_auth(&token).header("upload-length", "1800000").header("x-gantry-fingerprint", &fp).send().await.unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        let first = files[2].1[..700_000].to_vec();
        let res = http
            .patch(&url)
            .bearer_auth(&token)
            .header("upload-offset", "0")
            .header("x-gantry-fingerprint", &fp)
            .header("content-type", "application/offset+octet-stream")
            .body(first)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::NO_CONTENT);
        assert_eq!(res.headers()["upload-offset"], "700000");

        let paths: Vec<String> = files.iter().map(|(n, _)| dir.join(n).to_string_lossy().into_owned()).collect();
        let mut args = vec!["datasets", "upload", "coco", "v1", "--chunk-mib", "1"];
        args.extend(paths.iter().map(String::as_str));
        let run = s.cli(&args, "").await;
        assert!(run.ok, "{run:?}");
        assert!(run.stdout.contains("half.bin: 1.7 MiB uploaded, resumed at 683.6 KiB"), "{}", run.stdout);
        assert!(run.stdout.contains("big.bin: 2.4 MiB uploaded, sha256"), "{}", run.stdout);

        // Listed, each with its local file's bytes.
        let res = http.get(format!("{}/api/v1/datasets/coco/versions/v1/files", s.url)).bearer_auth(&token).send().await.unwrap();
        let listed: serde_json::Value = res.json().await.unwrap();
        for (name, data) in &files {
            let file = listed["files"].as_array().unwrap().iter().find(|f| f["name"] == *name).unwrap_or_else(|| panic!("{name} not listed: {listed}"));
            assert_eq!(file["size"].as_u64(), Some(data.len() as u64), "{name}");
            assert_eq!(file["sha256"].as_str(), Some(sha(data).as_str()), "{name}");
        }

        // The same file again is refused (no --replace) with the server's words, non-zero.
        let again = s.cli(&["datasets", "upload", "coco", "v1", &paths[0]], "").await;
        assert!(!again.ok && again.stderr.contains("409"), "{again:?}");
        // With --replace and --json: the file's JSON.
        let replaced = s.cli(&["datasets", "upload", "coco", "v1", "--replace", "--json", &paths[0]], "").await;
        assert!(replaced.ok, "{replaced:?}");
        assert_eq!(replaced.json()[0]["name"], "small.txt");
        let listing = s.cli(&["datasets", "ls", "--json"], "").await;
        assert_eq!(listing.json()[0]["code"], "coco", "{listing:?}");
    }
}
