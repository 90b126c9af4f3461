//! Processes started in a container for the SSH gateway (issue #34): a
//! command, the SFTP server or a port relay, with or without a TTY, its
//! stdin, stdout and stderr streamed through the engine's API (so it works
//! with remote `tls://` engines as with the local one, and with a machine
//! that has no network).
//!
//! Like the terminal's shell, each prints its PID first (stripped here),
//! so the gateway can hang it up when the client goes; and, as for the
//! terminal, a local engine's stream is read from Gantry's own hijacked
//! connection: without a TTY it is the engine's multiplexed stream (an
//! 8-byte header per frame: stream, 0, 0, 0, length), decoded below.

use super::super::inside::{ByteStream, TtySize};
use super::super::{ExecError, Executor, DATA_MOUNT};
use super::exec::raw_start;
use super::{DockerExecutor, Transport};
use bollard::container::LogOutput;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bytes::{Buf, Bytes, BytesMut};
use futures_util::{stream::BoxStream, StreamExt};
use std::{pin::Pin, time::Duration};
use tokio::io::AsyncWrite;

/// A piece of a process's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Out(Bytes),
    Err(Bytes),
}

/// A process started by [`Executor::open_process`].
pub struct Process {
    pub exec_id: String,
    /// Its PID inside the container, for hanging it up.
    pub pid: Option<u32>,
    /// stdout and stderr (on a TTY: all of it as `Out`), ending when it exits.
    pub output: BoxStream<'static, Result<Piece, ExecError>>,
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
}

/// Runs before the caller's script: the PID marker, then the data volume
/// as the working directory (as the terminal does).
const PREAMBLE: &str = r#"printf '\033]gantry;pid=%s\007' "$$"; cd /data 2>/dev/null; "#;
const START_TIMEOUT: Duration = Duration::from_secs(20);
const CHUNK: usize = 32 * 1024;

impl Executor {
    /// Starts `/bin/sh -c SCRIPT gantry ARGS…` in the container (`$1`… are
    /// `args`), on a TTY of `tty`'s size if given, with `env` added.
    pub async fn open_process(
        &self,
        container_id: &str,
        script: &str,
        args: &[String],
        tty: Option<TtySize>,
        env: &[String],
    ) -> Result<Process, ExecError> {
        match self {
            Executor::Docker(d) => d.open_process(container_id, script, args, tty, env).await,
            Executor::Simulated(_) => Err(ExecError::Failed(
                "SSH needs a Docker node: this machine runs on the simulated executor, which has no containers".into(),
            )),
        }
    }
}

impl DockerExecutor {
    async fn open_process(
        &self,
        container_id: &str,
        script: &str,
        args: &[String],
        tty: Option<TtySize>,
        env: &[String],
    ) -> Result<Process, ExecError> {
        let docker = self.client().await?;
        let what = format!("SSH session in container {container_id}");
        let full = format!("{PREAMBLE}{script}");
        let mut cmd: Vec<String> = vec!["/bin/sh".into(), "-c".into(), full, "gantry".into()];
        cmd.extend(args.iter().cloned());
        let opts = CreateExecOptions {
            attach_stdin: Some(true),
            attach_stdout: Some(true),
            attach_stderr: Some(true),
            tty: Some(tty.is_some()),
            env: Some(env.to_vec()),
            cmd: Some(cmd),
            working_dir: Some(DATA_MOUNT.to_string()),
            ..Default::default()
        };
        let created = docker.create_exec(container_id, opts).await.map_err(|e| self.err(e, &what))?;
        let started = async {
            let (output, input) = self.attach_process(&created.id, tty.is_some()).await?;
            let (pid, output) = pid_of(output).await?;
            Ok::<_, ExecError>((pid, output, input))
        };
        let (pid, output, input) = tokio::time::timeout(START_TIMEOUT, started).await.map_err(|_| {
            ExecError::Unavailable(format!("{what}: the engine did not start it within {START_TIMEOUT:?}"))
        })??;
        if let Some(size) = tty {
            let _ = self.resize_shell(&created.id, size).await;
        }
        Ok(Process { exec_id: created.id, pid, output, input })
    }

    /// The started exec's output as pieces (stdout first, so the PID
    /// marker can be found in it) and its stdin.
    async fn attach_process(
        &self,
        exec_id: &str,
        tty: bool,
    ) -> Result<(BoxStream<'static, Result<Piece, ExecError>>, Pin<Box<dyn AsyncWrite + Send>>), ExecError> {
        let version = self.client().await?.client_version();
        let path = format!("/v{}.{}/exec/{exec_id}/start", version.major_version, version.minor_version);
        let unreachable = |e: std::io::Error| self.unreachable(&e);
        let (raw, input) = match &self.inner.transport {
            Transport::Unix(socket) => {
                let s = tokio::net::UnixStream::connect(socket).await.map_err(unreachable)?;
                raw_start(s, "docker", &path, tty).await?
            }
            Transport::Http(addr) => {
                let hostport =
                    addr.trim_start_matches("tcp://").trim_start_matches("http://").trim_end_matches('/').to_string();
                let s = tokio::net::TcpStream::connect(&hostport).await.map_err(unreachable)?;
                let _ = s.set_nodelay(true);
                raw_start(s, &hostport, &path, tty).await?
            }
            Transport::Tls { .. } => {
                let opts = StartExecOptions { detach: false, tty, output_capacity: Some(CHUNK) };
                let docker = self.client().await?;
                return match docker
                    .start_exec(exec_id, Some(opts))
                    .await
                    .map_err(|e| self.err(e, "start SSH session"))?
                {
                    StartExecResults::Attached { output, input } => {
                        let me = self.clone();
                        let output = output.map(move |r| match r {
                            Ok(LogOutput::StdErr { message }) => Ok(Piece::Err(message)),
                            Ok(o) => Ok(Piece::Out(o.into_bytes())),
                            Err(e) => Err(me.err(e, "SSH session output")),
                        });
                        Ok((output.boxed(), input))
                    }
                    StartExecResults::Detached => {
                        Err(ExecError::Failed("the engine started the session detached".into()))
                    }
                };
            }
        };
        let output = if tty { raw.map(|r| r.map(Piece::Out)).boxed() } else { demux(raw) };
        Ok((output, input))
    }
}

/// Finds and strips the PID marker at the start of stdout; stderr that
/// came before it (an engine's complaint) stays in front, in order.
async fn pid_of(
    mut output: BoxStream<'static, Result<Piece, ExecError>>,
) -> Result<(Option<u32>, BoxStream<'static, Result<Piece, ExecError>>), ExecError> {
    let mut early: Vec<Piece> = Vec::new();
    let mut out: Vec<u8> = Vec::new();
    loop {
        if let Some(start) = find(&out, MARKER) {
            if let Some(len) = out[start..].iter().position(|b| *b == 0x07) {
                let pid =
                    std::str::from_utf8(&out[start + MARKER.len()..start + len]).ok().and_then(|d| d.parse().ok());
                let mut rest = out[..start].to_vec();
                rest.extend_from_slice(&out[start + len + 1..]);
                if !rest.is_empty() {
                    early.push(Piece::Out(Bytes::from(rest)));
                }
                let front = futures_util::stream::iter(early.into_iter().map(Ok));
                return Ok((pid, front.chain(output).boxed()));
            }
        }
        if out.len() > 4096 {
            early.push(Piece::Out(Bytes::from(out)));
            return Ok((None, futures_util::stream::iter(early.into_iter().map(Ok)).chain(output).boxed()));
        }
        match output.next().await {
            Some(Ok(Piece::Out(b))) => out.extend_from_slice(&b),
            Some(Ok(other)) => early.push(other),
            Some(Err(e)) => return Err(e),
            None => {
                let said: Vec<u8> = early
                    .iter()
                    .flat_map(|p| match p {
                        Piece::Out(b) | Piece::Err(b) => b.to_vec(),
                    })
                    .chain(out)
                    .collect();
                let said = String::from_utf8_lossy(&said).trim().to_string();
                return Err(ExecError::Failed(format!(
                    "the command did not start (does the image have /bin/sh?): {said}"
                )));
            }
        }
    }
}

const MARKER: &[u8] = b"\x1b]gantry;pid=";

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The engine's multiplexed stream as pieces: each frame's 8-byte header
/// names its stream (1 stdout, 2 stderr) and length.
fn demux(raw: ByteStream) -> BoxStream<'static, Result<Piece, ExecError>> {
    futures_util::stream::unfold((raw, BytesMut::new(), false), |(mut raw, mut buf, mut ended)| async move {
        loop {
            if buf.len() >= 8 {
                let len = u32::from_be_bytes([buf[4], buf[5], buf[6], buf[7]]) as usize;
                let kind = buf[0];
                if len == 0 {
                    buf.advance(8);
                    continue;
                }
                // Passed on as it comes, frame by frame, in pieces of at
                // most what arrived: a large frame never waits whole.
                if buf.len() > 8 {
                    let take = len.min(buf.len() - 8);
                    let body = Bytes::copy_from_slice(&buf[8..8 + take]);
                    if take == len {
                        buf.advance(8 + len);
                    } else {
                        buf.advance(8 + take);
                        let rest = ((len - take) as u32).to_be_bytes();
                        let mut head = BytesMut::from(&[kind, 0, 0, 0, rest[0], rest[1], rest[2], rest[3]][..]);
                        head.extend_from_slice(&buf);
                        buf = head;
                    }
                    let piece = if kind == 2 { Piece::Err(body) } else { Piece::Out(body) };
                    return Some((Ok(piece), (raw, buf, ended)));
                }
            }
            if ended {
                return None;
            }
            match raw.next().await {
                Some(Ok(chunk)) => buf.extend_from_slice(&chunk),
                Some(Err(e)) => return Some((Err(e), (raw, buf, true))),
                None => ended = true,
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    gantry_testkit::timed_test! {
        async fn frames_are_split_into_their_streams_across_chunks() {
            let mut wire = vec![1u8, 0, 0, 0, 0, 0, 0, 5];
            wire.extend_from_slice(b"hello");
            wire.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 3]);
            wire.extend_from_slice(b"err");
            let chunks: Vec<Result<Bytes, ExecError>> =
                wire.chunks(3).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
            let pieces: Vec<Piece> = demux(futures_util::stream::iter(chunks).boxed()).map(|p| p.unwrap()).collect().await;
            let out: Vec<u8> = pieces.iter().filter_map(|p| if let Piece::Out(b) = p { Some(b.to_vec()) } else { None }).flatten().collect();
            let err: Vec<u8> = pieces.iter().filter_map(|p| if let Piece::Err(b) = p { Some(b.to_vec()) } else { None }).flatten().collect();
            assert_eq!((out.as_slice(), err.as_slice()), (b"hello".as_slice(), b"err".as_slice()));
        }
    }
}
