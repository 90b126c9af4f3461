//! `gantry machines` against a real server (simulated engine): create,
//! list (`--json` parses, the table names it), stop and start by name,
//! each `--wait`ing for its task's end, `ssh --config-only` writing the
//! SSH config (twice: the same files; the user's own hosts kept), rm; an
//! unknown name and a create over the quota exit non-zero with the reason.

use crate::cli_support::start;

fn machine<'a>(list: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    list["machines"].as_array().unwrap().iter().find(|m| m["name"] == name && m["state"] != "deleted")
}

gantry_testkit::timed_test! {
    limit = 180;
    async fn machines_are_created_stopped_started_and_removed_by_name() {
        let (s, _) = start("simulated").await;
        s.login().await;

        let run = s.cli(&["machines", "create", "box1", "--gpus", "1", "--wait"], "").await;
        assert!(run.ok, "{run:?}");
        let list = s.cli(&["machines", "ls", "--json"], "").await;
        let box1 = machine(&list.json(), "box1").cloned().unwrap_or_else(|| panic!("{list:?}"));
        assert_eq!((box1["state"].as_str(), box1["gpus"].as_i64()), (Some("running"), Some(1)), "{box1}");
        let table = s.cli(&["machines", "ls"], "").await;
        assert!(table.ok && table.stdout.starts_with("ID") && table.stdout.contains("box1"), "{table:?}");

        let run = s.cli(&["machines", "stop", "box1", "--wait"], "").await;
        assert!(run.ok && run.stdout.contains("stop of box1: done"), "{run:?}");
        let list = s.cli(&["machines", "ls", "--json"], "").await.json();
        assert_eq!(machine(&list, "box1").unwrap()["shut_down"], true, "{list}");
        let run = s.cli(&["machines", "start", "box1", "--wait"], "").await;
        assert!(run.ok, "{run:?}");
        let list = s.cli(&["machines", "ls", "--json"], "").await.json();
        assert_eq!(machine(&list, "box1").unwrap()["state"], "running", "{list}");

        // The SSH config: Gantry's own file, included from the user's,
        // whose hosts stay; a second write changes nothing.
        let ssh = s.home.join(".ssh");
        std::fs::create_dir_all(&ssh).unwrap();
        std::fs::write(ssh.join("config"), "Host work\n    User me\n").unwrap();
        for _ in 0..2 {
            let run = s.cli(&["machines", "ssh", "box1", "--config-only", "--port", "2222"], "").await;
            assert!(run.ok, "{run:?}");
        }
        let user = std::fs::read_to_string(ssh.join("config")).unwrap();
        assert_eq!(user.matches("Include gantry/config").count(), 1, "{user}");
        assert!(user.ends_with("Host work\n    User me\n"), "{user}");
        let ours = std::fs::read_to_string(ssh.join("gantry/config")).unwrap();
        assert_eq!(ours, "Host gantry-box1\n    HostName 127.0.0.1\n    Port 2222\n    User box1\n");

        // Refusals: the reason, a non-zero exit.
        let unknown = s.cli(&["machines", "stop", "nope"], "").await;
        assert!(!unknown.ok && unknown.stderr.contains("no machine named \"nope\""), "{unknown:?}");
        let greedy = s.cli(&["machines", "create", "box2", "--gpus", "64"], "").await;
        assert!(!greedy.ok && greedy.stderr.contains("the server refused"), "{greedy:?}");

        let run = s.cli(&["machines", "rm", "box1", "--wait"], "").await;
        assert!(run.ok, "{run:?}");
        let list = s.cli(&["machines", "ls", "--json"], "").await.json();
        assert!(machine(&list, "box1").is_none(), "{list}");
    }
}
