//! Working inside a running machine through its node's engine: an
//! interactive shell on a TTY, the container's log stream, and files in
//! and out of the data volume. Only the Docker executor can; the simulated
//! executor answers that it does not support this.

use super::{ExecError, Executor};
use bytes::Bytes;
use futures_util::stream::BoxStream;
use std::pin::Pin;
use tokio::io::AsyncWrite;

/// Bytes from the engine, in order, ending at the end of the stream.
pub type ByteStream = BoxStream<'static, Result<Bytes, ExecError>>;

/// An interactive shell attached through the engine.
pub struct Shell {
    /// The engine's exec id (for resize and inspect).
    pub exec_id: String,
    /// The shell's PID inside the container, for hanging it up.
    pub pid: Option<u32>,
    /// What the TTY prints; ends when the shell exits or the container stops.
    pub output: ByteStream,
    /// Keystrokes for the TTY.
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
}

impl std::fmt::Debug for Shell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shell").field("exec_id", &self.exec_id).field("pid", &self.pid).finish()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TtySize {
    pub cols: u16,
    pub rows: u16,
}

impl TtySize {
    /// Clamped to what a terminal can sensibly be.
    pub fn new(cols: u16, rows: u16) -> TtySize {
        TtySize { cols: cols.clamp(2, 1000), rows: rows.clamp(2, 500) }
    }
}

impl Default for TtySize {
    fn default() -> Self {
        TtySize { cols: 80, rows: 24 }
    }
}

/// Whether an exec'd process still runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessState {
    Running,
    Exited(i64),
}

/// What a path in a container is (from the archive API's stat).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathStat {
    pub name: String,
    pub size: i64,
    pub is_dir: bool,
    /// Set when the path is a symbolic link: where it points (resolved in
    /// the container's filesystem).
    pub link_target: Option<String>,
}

/// A download: one file's bytes, or a directory as a tar archive.
pub enum Download {
    File { name: String, size: u64, body: ByteStream },
    Directory { name: String, tar: ByteStream },
}

/// An upload: one file of known size, created with the directories missing
/// above it (`missing_dirs`, relative to the volume, shortest first).
pub struct Upload {
    /// Extraction root in the container, e.g. `/data`.
    pub root: String,
    pub missing_dirs: Vec<String>,
    /// Relative to `root`.
    pub path: String,
    pub size: u64,
    pub body: ByteStream,
}

/// Collects a stream's bytes, stopping quietly after `max` bytes.
pub async fn read_up_to(mut stream: ByteStream, max: usize) -> Result<Vec<u8>, ExecError> {
    use futures_util::StreamExt;
    let mut out = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let room = max - out.len();
        out.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if out.len() >= max {
            break;
        }
    }
    Ok(out)
}

fn unsupported(what: &str) -> ExecError {
    ExecError::Failed(format!(
        "{what} need a Docker node: this machine runs on the simulated executor, which has no containers"
    ))
}

impl Executor {
    /// Starts the image's shell (`/bin/bash` if present, else `/bin/sh`) on
    /// a TTY of `size`, as the image's user, in the data volume.
    pub async fn open_shell(&self, container_id: &str, size: TtySize) -> Result<Shell, ExecError> {
        match self {
            Executor::Docker(d) => d.open_shell(container_id, size).await,
            Executor::Simulated(_) => Err(unsupported("terminals")),
        }
    }

    pub async fn resize_shell(&self, exec_id: &str, size: TtySize) -> Result<(), ExecError> {
        match self {
            Executor::Docker(d) => d.resize_shell(exec_id, size).await,
            Executor::Simulated(_) => Err(unsupported("terminals")),
        }
    }

    pub async fn shell_state(&self, exec_id: &str) -> Result<ProcessState, ExecError> {
        match self {
            Executor::Docker(d) => d.shell_state(exec_id).await,
            Executor::Simulated(_) => Err(unsupported("terminals")),
        }
    }

    /// Sends SIGHUP to the shell, as closing a terminal does: it exits, and
    /// the kernel hangs up its foreground job; `nohup` jobs keep running.
    pub async fn hangup_shell(&self, container_id: &str, pid: u32) -> Result<(), ExecError> {
        match self {
            Executor::Docker(d) => d.hangup_shell(container_id, pid).await,
            Executor::Simulated(_) => Err(unsupported("terminals")),
        }
    }

    /// The container's stdout and stderr: the last `tail` lines (all when
    /// `None`), then, with `follow`, new output until the container stops.
    pub async fn logs(&self, container_id: &str, tail: Option<u64>, follow: bool) -> Result<ByteStream, ExecError> {
        match self {
            Executor::Docker(d) => d.logs(container_id, tail, follow).await,
            Executor::Simulated(_) => Err(unsupported("logs")),
        }
    }

    /// Call before the file routes' archive calls: a stopped container's
    /// volumes are mounted by the engine for each call, so its loop
    /// volumes' recorded devices must hold their own images (re-attached
    /// when free, as after a host reboot; `Ok(Err(why))` when a device holds
    /// another file — mounting it would show another machine's data — or
    /// cannot be checked). `Err`: the engine's own error.
    /// The simulated executor has no volumes to check.
    pub async fn check_volumes(&self, container_id: &str) -> Result<Result<(), String>, ExecError> {
        match self {
            Executor::Docker(d) => d.check_container_volumes(container_id).await,
            Executor::Simulated(_) => Ok(Ok(())),
        }
    }

    /// `Ok(None)` when the path does not exist.
    pub async fn stat_path(&self, container_id: &str, path: &str) -> Result<Option<PathStat>, ExecError> {
        match self {
            Executor::Docker(d) => d.stat_path(container_id, path).await,
            Executor::Simulated(_) => Err(unsupported("files")),
        }
    }

    pub async fn upload(&self, container_id: &str, upload: Upload) -> Result<(), ExecError> {
        match self {
            Executor::Docker(d) => d.upload(container_id, upload).await,
            Executor::Simulated(_) => Err(unsupported("files")),
        }
    }

    /// A missing path is `ExecError::NotFound`.
    pub async fn download(&self, container_id: &str, path: &str) -> Result<Download, ExecError> {
        match self {
            Executor::Docker(d) => d.download(container_id, path).await,
            Executor::Simulated(_) => Err(unsupported("files")),
        }
    }
}
