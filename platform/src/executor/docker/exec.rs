//! Interactive shells for [`DockerExecutor`]: an exec with a TTY, attached
//! by Gantry's own hijacked HTTP/1.1 connection to the engine.
//!
//! Why not bollard's `start_exec`: its output decoder treats any chunk that
//! starts with a byte 0, 1 or 2 as a multiplexed frame header, even on a
//! TTY (whose stream has no headers), and then buffers until a "length"
//! made of the next bytes arrives — a `cat` of a binary file can make the
//! server buffer gigabytes. The raw connection has no such decoder: output
//! is read into one fixed buffer and passed on as it comes. (For `tls://`
//! engines bollard's attach is still used, with that caveat.)

use super::super::inside::{ByteStream, ProcessState, Shell, TtySize};
use super::super::{ExecError, DATA_MOUNT};
use super::{DockerExecutor, Transport};
use bollard::exec::{CreateExecOptions, ResizeExecOptions, StartExecOptions, StartExecResults};
use bytes::Bytes;
use futures_util::{stream, StreamExt};
use std::{pin::Pin, time::Duration};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Prints the shell's PID as a private OSC sequence (stripped before the
/// browser sees it), then becomes bash if the image has it, else sh.
const SHELL_SCRIPT: &str = r#"printf '\033]gantry;pid=%s\007' "$$"; cd /data 2>/dev/null; if [ -x /bin/bash ]; then exec /bin/bash; fi; exec /bin/sh"#;
const PID_PREFIX: &[u8] = b"\x1b]gantry;pid=";
/// Largest piece of terminal output read at once (one WebSocket frame).
const OUTPUT_CHUNK: usize = 16 * 1024;
/// Connecting, the engine's answer, and the shell's first output.
const START_TIMEOUT: Duration = Duration::from_secs(20);
const HEAD_MAX: usize = 16 * 1024;

type Input = Pin<Box<dyn AsyncWrite + Send>>;

impl DockerExecutor {
    pub async fn open_shell(&self, container_id: &str, size: TtySize) -> Result<Shell, ExecError> {
        let docker = self.client().await?;
        let what = format!("terminal in container {container_id}");
        let opts = CreateExecOptions {
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(true),
            env: Some(vec!["TERM=xterm-256color", "COLORTERM=truecolor"]),
            cmd: Some(vec!["/bin/sh", "-c", SHELL_SCRIPT]),
            working_dir: Some(DATA_MOUNT),
            ..Default::default()
        };
        let created = docker.create_exec(container_id, opts).await.map_err(|e| self.err(e, &what))?;
        let started = async {
            let (output, input) = self.attach_exec(&created.id).await?;
            read_pid(output).await.map(|(pid, output)| (pid, output, input))
        };
        let (pid, output, input) = tokio::time::timeout(START_TIMEOUT, started).await.map_err(|_| {
            ExecError::Unavailable(format!("{what}: the engine did not start the shell within {START_TIMEOUT:?}"))
        })??;
        // The shell runs now (it printed its PID): size its TTY before it
        // draws much. A shell that already exited fails this; its output
        // stream says why.
        let _ = self.resize_shell(&created.id, size).await;
        Ok(Shell { exec_id: created.id, pid, output, input })
    }

    pub async fn resize_shell(&self, exec_id: &str, size: TtySize) -> Result<(), ExecError> {
        let docker = self.client().await?;
        docker
            .resize_exec(exec_id, ResizeExecOptions { height: size.rows, width: size.cols })
            .await
            .map_err(|e| self.err(e, "resize terminal"))
    }

    pub async fn shell_state(&self, exec_id: &str) -> Result<ProcessState, ExecError> {
        let info = self.client().await?.inspect_exec(exec_id).await.map_err(|e| self.err(e, "inspect terminal"))?;
        Ok(if info.running.unwrap_or(false) {
            ProcessState::Running
        } else {
            ProcessState::Exited(info.exit_code.unwrap_or(-1))
        })
    }

    pub async fn hangup_shell(&self, container_id: &str, pid: u32) -> Result<(), ExecError> {
        let cmd = format!("kill -HUP {pid}");
        self.exec(container_id, &["/bin/sh", "-c", &cmd]).await.map(|_| ())
    }

    /// Starts the exec and returns its raw TTY stream.
    async fn attach_exec(&self, exec_id: &str) -> Result<(ByteStream, Input), ExecError> {
        let version = self.client().await?.client_version();
        let path = format!("/v{}.{}/exec/{exec_id}/start", version.major_version, version.minor_version);
        let unreachable = |e: std::io::Error| self.unreachable(&e);
        match &self.inner.transport {
            Transport::Unix(socket) => {
                let s = tokio::net::UnixStream::connect(socket).await.map_err(unreachable)?;
                raw_start(s, "docker", &path, true).await
            }
            Transport::Http(addr) => {
                let hostport =
                    addr.trim_start_matches("tcp://").trim_start_matches("http://").trim_end_matches('/').to_string();
                let s = tokio::net::TcpStream::connect(&hostport).await.map_err(unreachable)?;
                let _ = s.set_nodelay(true);
                raw_start(s, &hostport, &path, true).await
            }
            Transport::Tls { .. } => {
                let opts = StartExecOptions { detach: false, tty: true, output_capacity: Some(OUTPUT_CHUNK) };
                let docker = self.client().await?;
                match docker.start_exec(exec_id, Some(opts)).await.map_err(|e| self.err(e, "start terminal"))? {
                    StartExecResults::Attached { output, input } => {
                        let me = self.clone();
                        let output =
                            output.map(move |r| r.map(|o| o.into_bytes()).map_err(|e| me.err(e, "terminal output")));
                        Ok((output.boxed(), input))
                    }
                    StartExecResults::Detached => {
                        Err(ExecError::Failed("the engine started the terminal detached".into()))
                    }
                }
            }
        }
    }
}

/// Sends the exec-start request on a fresh connection and takes the
/// connection over once the engine switches protocols. Without `tty` the
/// stream is the engine's multiplexed one (the SSH gateway's exec decodes it).
pub(super) async fn raw_start<S>(mut s: S, host: &str, path: &str, tty: bool) -> Result<(ByteStream, Input), ExecError>
where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let io = |e: std::io::Error| ExecError::Unavailable(format!("terminal connection to the engine: {e}"));
    let body = if tty { r#"{"Detach":false,"Tty":true}"# } else { r#"{"Detach":false,"Tty":false}"# };
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: gantry\r\nContent-Type: application/json\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(request.as_bytes()).await.map_err(io)?;
    let mut head = Vec::with_capacity(1024);
    let mut tmp = [0u8; 1024];
    let end = loop {
        let n = s.read(&mut tmp).await.map_err(io)?;
        if n == 0 {
            return Err(ExecError::Unavailable("the engine closed the terminal connection before answering".into()));
        }
        head.extend_from_slice(&tmp[..n]);
        if let Some(pos) = find(&head, b"\r\n\r\n") {
            break pos + 4;
        }
        if head.len() > HEAD_MAX {
            return Err(ExecError::Failed("the engine's answer to the terminal request is too long".into()));
        }
    };
    let head_text = String::from_utf8_lossy(&head[..end]).into_owned();
    let status: u16 = head_text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    if status != 101 && status != 200 {
        // The error body is short JSON: {"message": "..."}.
        let mut body = head[end..].to_vec();
        let _ = tokio::time::timeout(Duration::from_secs(2), async {
            while body.len() < 4096 && !body.ends_with(b"}\n") && !body.ends_with(b"}") {
                match s.read(&mut tmp).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => body.extend_from_slice(&tmp[..n]),
                }
            }
        })
        .await;
        let text = String::from_utf8_lossy(&body);
        let message = serde_json::from_str::<serde_json::Value>(text.trim())
            .ok()
            .and_then(|v| v.get("message").and_then(|m| m.as_str()).map(str::to_string))
            .unwrap_or_else(|| text.trim().to_string());
        return Err(match status {
            404 => ExecError::NotFound(format!("start terminal: {message}")),
            _ => ExecError::Failed(format!("start terminal failed (HTTP {status}): {message}")),
        });
    }
    let leftover = Bytes::copy_from_slice(&head[end..]);
    let (reader, writer) = tokio::io::split(s);
    Ok((read_stream(reader, leftover), Box::pin(writer)))
}

/// The reader as a stream of chunks, read into one reused buffer; each
/// chunk is a copy of exactly the bytes read.
fn read_stream<R: AsyncRead + Send + Unpin + 'static>(reader: R, first: Bytes) -> ByteStream {
    struct St<R> {
        reader: R,
        buf: Box<[u8]>,
        first: Option<Bytes>,
        done: bool,
    }
    let st = St {
        reader,
        buf: vec![0u8; OUTPUT_CHUNK].into_boxed_slice(),
        first: Some(first).filter(|b| !b.is_empty()),
        done: false,
    };
    stream::unfold(st, |mut st| async move {
        if st.done {
            return None;
        }
        if let Some(first) = st.first.take() {
            return Some((Ok(first), st));
        }
        match st.reader.read(&mut st.buf).await {
            Ok(0) => None,
            Ok(n) => {
                let chunk = Bytes::copy_from_slice(&st.buf[..n]);
                Some((Ok(chunk), st))
            }
            Err(e) => {
                st.done = true;
                Some((Err(ExecError::Unavailable(format!("terminal output: {e}"))), st))
            }
        }
    })
    .boxed()
}

/// Reads the PID marker the start script prints first and strips it; the
/// rest of what was read goes back in front of the stream. Output before
/// the marker (an engine error such as a missing /bin/sh) makes the shell
/// fail to start with that text.
async fn read_pid(mut output: ByteStream) -> Result<(Option<u32>, ByteStream), ExecError> {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        if let Some(start) = find(&buf, PID_PREFIX) {
            if let Some(len) = buf[start..].iter().position(|b| *b == 0x07) {
                let digits = &buf[start + PID_PREFIX.len()..start + len];
                let pid = std::str::from_utf8(digits).ok().and_then(|d| d.parse().ok());
                let mut rest = buf[..start].to_vec();
                rest.extend_from_slice(&buf[start + len + 1..]);
                return Ok((pid, prepend(rest, output)));
            }
        }
        if buf.len() > 4096 {
            return Ok((None, prepend(buf, output)));
        }
        match output.next().await {
            Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
            Some(Err(e)) => return Err(e),
            None => {
                let said = String::from_utf8_lossy(&buf).trim().to_string();
                return Err(ExecError::Failed(if said.is_empty() {
                    "the shell exited at once".to_string()
                } else {
                    format!("the shell did not start (does the image have /bin/sh?): {said}")
                }));
            }
        }
    }
}

fn prepend(first: Vec<u8>, rest: ByteStream) -> ByteStream {
    if first.is_empty() {
        rest
    } else {
        stream::once(async move { Ok(Bytes::from(first)) }).chain(rest).boxed()
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(parts: &[&[u8]]) -> ByteStream {
        let v: Vec<Result<Bytes, ExecError>> = parts.iter().map(|p| Ok(Bytes::copy_from_slice(p))).collect();
        stream::iter(v).boxed()
    }

    async fn collect(s: ByteStream) -> Vec<u8> {
        s.fold(Vec::new(), |mut acc, c| async move {
            acc.extend_from_slice(&c.unwrap());
            acc
        })
        .await
    }

    gantry_testkit::timed_test! {
        async fn the_pid_marker_is_read_across_chunks_and_stripped() {
            let (pid, rest) = read_pid(chunks(&[b"\x1b]gan", b"try;pid=4", b"2\x07\r\n/data # ", b"more"])).await.unwrap();
            assert_eq!(pid, Some(42));
            assert_eq!(collect(rest).await, b"\r\n/data # more");
        }
    }

    gantry_testkit::timed_test! {
        async fn an_engine_error_before_the_marker_fails_the_start() {
            let Err(err) = read_pid(chunks(&[b"OCI runtime exec failed: stat /bin/sh: no such file\r\n"])).await else {
                panic!("an engine error must fail the start");
            };
            assert!(err.to_string().contains("/bin/sh"), "{err}");
        }
    }
}
