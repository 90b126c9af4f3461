//! Container logs for [`DockerExecutor`]: stdout and stderr as the engine
//! keeps them, the last lines and then (optionally) followed live.

use super::super::inside::ByteStream;
use super::super::ExecError;
use super::DockerExecutor;
use bollard::query_parameters::LogsOptions;
use futures_util::StreamExt;

impl DockerExecutor {
    pub async fn logs(&self, container_id: &str, tail: Option<u64>, follow: bool) -> Result<ByteStream, ExecError> {
        let docker = self.client().await?;
        let opts = LogsOptions {
            follow,
            stdout: true,
            stderr: true,
            tail: tail.map(|n| n.to_string()).unwrap_or_else(|| "all".to_string()),
            ..Default::default()
        };
        let me = self.clone();
        let what = format!("logs of container {container_id}");
        let stream =
            docker.logs(container_id, Some(opts)).map(move |r| r.map(|o| o.into_bytes()).map_err(|e| me.err(e, &what)));
        Ok(stream.boxed())
    }
}
