//! `gantry compute` against a real server on real Docker (the demo
//! image): `submit --follow` prints the task's output as it comes and
//! ends, with status 0, once the task has succeeded; a failing task's
//! `logs --follow` exits non-zero with its exit code; `ls --json` lists
//! both; `logs` prints the kept output; cancelling an ended task is
//! refused with the server's words. Nothing is left on the engine.

use crate::cli_support::start;
use gantry_platform::{catalogue, executor::DockerExecutor, machines};
use gantry_testkit::engine::IMAGE;

const ENV: &str = "PyTorch:2.4/Python:3.11";

gantry_testkit::timed_test! {
    limit = 240;
    async fn submit_follow_and_logs_show_a_tasks_output_to_its_end() {
        let (s, alice) = start("docker").await;
        let image = catalogue::create_region_image(&s.pool, alice.id, "local", IMAGE, "amd64", "training").await.unwrap();
        let master = catalogue::NewMasterImage {
            name: "torch",
            interpreter: "Python",
            interpreter_version: "3.11",
            framework: "PyTorch",
            framework_version: "2.4",
        };
        let master = catalogue::create_master_image(&s.pool, alice.id, &master).await.unwrap();
        catalogue::set_link(&s.pool, alice.id, master, image.id, true).await.unwrap();
        s.login().await;

        let script = "echo line-one; sleep 1; echo line-two";
        let run = s.cli(&["compute", "submit", "--image", ENV, "--gpus", "1", "--name", "hello", "--shell", script, "--follow"], "").await;
        assert!(run.ok, "{run:?}");
        assert_eq!(run.stdout, "line-one\nline-two\n", "each line once, in order: {run:?}");
        assert!(run.stderr.contains("submitted"), "{run:?}");

        // A failing one, followed by `logs --follow`: non-zero, the exit code said.
        let run = s.cli(&["compute", "submit", "--image", ENV, "--json", "--", "sh", "-c", "echo oops; exit 3"], "").await;
        assert!(run.ok, "{run:?}");
        let id = run.json()["id"].as_i64().unwrap().to_string();
        let follow = s.cli(&["compute", "logs", &id, "--follow"], "").await;
        assert!(!follow.ok, "{follow:?}");
        assert_eq!(follow.stdout, "oops\n");
        assert!(follow.stderr.contains(&format!("task {id} failed, exit code 3")), "{follow:?}");

        let list = s.cli(&["compute", "ls", "--json"], "").await;
        let tasks = list.json();
        let states: Vec<(&str, &str)> = tasks.as_array().unwrap().iter().map(|t| (t["name"].as_str().unwrap(), t["state"].as_str().unwrap())).collect();
        assert_eq!(states, [("sh", "failed"), ("hello", "succeeded")], "{list:?}");
        let logs = s.cli(&["compute", "logs", &id], "").await;
        assert!(logs.ok && logs.stdout == "oops\n", "{logs:?}");
        let cancel = s.cli(&["compute", "cancel", &id], "").await;
        assert!(!cancel.ok && cancel.stderr.contains("the server refused (409"), "{cancel:?}");
        // Bad input is refused before anything is sent.
        let bad = s.cli(&["compute", "submit", "--image", "pytorch", "--", "true"], "").await;
        assert!(!bad.ok && bad.stderr.contains("FRAMEWORK:VERSION/INTERPRETER:VERSION"), "{bad:?}");

        let instance = machines::instance_id(&s.pool).await.unwrap();
        let engine = DockerExecutor::connect("unix:///var/run/docker.sock").unwrap();
        assert_eq!(engine.list_managed(&instance).await.unwrap().len(), 0, "the jobs' containers are gone");
        assert_eq!(engine.list_managed_volumes(&instance).await.unwrap(), Vec::<String>::new(), "and their volumes");
    }
}
