//! The end of a container's output, kept when a compute task's container
//! is removed.

use super::super::*;
use super::DockerExecutor;
use bollard::query_parameters::LogsOptions;
use futures_util::StreamExt;

/// Most bytes of output kept, whatever the line count.
const TAIL_BYTES: usize = 64 * 1024;

impl DockerExecutor {
    pub async fn output_tail(&self, id: &str, lines: usize) -> Result<String, ExecError> {
        let opts =
            LogsOptions { stdout: true, stderr: true, follow: false, tail: lines.to_string(), ..Default::default() };
        let docker = self.client().await?;
        let mut stream = docker.logs(id, Some(opts));
        let mut out: Vec<u8> = Vec::new();
        while let Some(chunk) = stream.next().await {
            match chunk {
                Ok(c) => out.extend_from_slice(&c.into_bytes()),
                Err(e) => match self.err(e, &format!("logs of container {id}")) {
                    ExecError::NotFound(_) => break,
                    other => return Err(other),
                },
            }
            if out.len() > TAIL_BYTES {
                out.drain(..out.len() - TAIL_BYTES);
            }
        }
        Ok(String::from_utf8_lossy(&out).into_owned())
    }
}
