//! A session channel: once the client asks for a shell, a command or the
//! SFTP subsystem, an exec in the container bridged to the channel —
//! stdin, stdout and stderr (one stream on a PTY), window changes, EOF —
//! and, when the process ends, its exit status, as sshd sends it. A client
//! that goes first hangs the process up (SIGHUP, as a closed terminal).
//!
//! What the image needs: `/bin/sh` (bash is used when present); for SFTP
//! (and so for modern `scp`), OpenSSH's `sftp-server` at one of
//! [`SFTP_SERVERS`].

use super::session::Entered;
use futures_util::StreamExt;
use gantry_platform::executor::{
    docker::{Piece, Process},
    inside::{ProcessState, TtySize},
    Executor,
};
use russh::{server::Msg, Channel, ChannelMsg, ChannelReadHalf, ChannelWriteHalf};
use std::{sync::Arc, time::Duration};
use tokio::io::AsyncWriteExt;

/// Where images keep `sftp-server` (Debian/Ubuntu, Fedora/RHEL, Alpine, Arch).
pub const SFTP_SERVERS: &[&str] = &[
    "/usr/lib/openssh/sftp-server",
    "/usr/libexec/openssh/sftp-server",
    "/usr/lib/ssh/sftp-server",
    "/usr/libexec/sftp-server",
    "/usr/lib/sftp-server",
];

/// `$1` is the command, run by bash if the image has it (as sshd runs it
/// with the user's shell), else by sh.
const COMMAND: &str = r#"if [ -x /bin/bash ]; then exec /bin/bash -c "$1"; fi; exec /bin/sh -c "$1""#;
/// A shell without a PTY (`ssh -T`): commands read from stdin.
const PLAIN_SHELL: &str = r#"if [ -x /bin/bash ]; then exec /bin/bash; fi; exec /bin/sh"#;

fn sftp_script() -> String {
    let tries: String = SFTP_SERVERS.iter().map(|p| format!("[ -x {p} ] && exec {p}; ")).collect();
    format!("{tries}echo 'gantry: this machine has no sftp-server (install openssh-sftp-server in its image)' >&2; exit 127")
}

enum Wanted {
    Shell,
    Command(String),
    Sftp,
}

impl Wanted {
    fn audit_word(&self) -> &'static str {
        match self {
            Wanted::Shell => "shell",
            Wanted::Command(_) => "command",
            Wanted::Sftp => "sftp",
        }
    }
}

pub async fn run(mut channel: Channel<Msg>, entered: Arc<Entered>) {
    let mut pty: Option<TtySize> = None;
    let mut env: Vec<String> = Vec::new();
    let wanted = loop {
        match channel.wait().await {
            None | Some(ChannelMsg::Close) => return,
            Some(ChannelMsg::RequestPty { term, col_width, row_height, .. }) => {
                pty = Some(TtySize::new(col_width.min(u16::MAX as u32) as u16, row_height.min(u16::MAX as u32) as u16));
                if !term.is_empty() && term.len() < 64 && term.chars().all(|c| c.is_ascii_graphic()) {
                    env.push(format!("TERM={term}"));
                }
            }
            // Only the locale, as sshd's default AcceptEnv.
            Some(ChannelMsg::SetEnv { variable_name, variable_value, .. })
                if (variable_name == "LANG" || variable_name.starts_with("LC_")) && variable_value.len() < 128 =>
            {
                env.push(format!("{variable_name}={variable_value}"));
            }
            Some(ChannelMsg::AgentForward { .. }) => {
                notice(&channel, "gantry: agent forwarding is not offered by this gateway\r\n").await;
            }
            Some(ChannelMsg::RequestX11 { .. }) => {
                notice(&channel, "gantry: X11 forwarding is not offered by this gateway\r\n").await;
            }
            Some(ChannelMsg::RequestShell { .. }) => break Wanted::Shell,
            Some(ChannelMsg::Exec { command, .. }) => {
                break Wanted::Command(String::from_utf8_lossy(&command).into_owned())
            }
            Some(ChannelMsg::RequestSubsystem { name, .. }) if name == "sftp" => break Wanted::Sftp,
            Some(ChannelMsg::RequestSubsystem { .. }) => {
                let _ = channel.close().await;
                return;
            }
            Some(_) => {}
        }
    };
    let (container, exec) = match &entered.inside {
        Ok(inside) => inside.clone(),
        Err(why) => return fail(&channel, &format!("gantry: {why}\r\n")).await,
    };
    audit(&entered, wanted.audit_word()).await;
    let tty = if matches!(wanted, Wanted::Sftp) { None } else { pty };
    let started = match (&wanted, tty) {
        (Wanted::Shell, Some(size)) => exec.open_shell(&container, size).await.map(|s| Process {
            exec_id: s.exec_id,
            pid: s.pid,
            output: s.output.map(|r| r.map(Piece::Out)).boxed(),
            input: s.input,
        }),
        (Wanted::Shell, None) => exec.open_process(&container, PLAIN_SHELL, &[], None, &env).await,
        (Wanted::Command(cmd), tty) => {
            exec.open_process(&container, COMMAND, std::slice::from_ref(cmd), tty, &env).await
        }
        (Wanted::Sftp, _) => exec.open_process(&container, &sftp_script(), &[], None, &env).await,
    };
    let process = match started {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(machine = %entered.target.name, error = %e, "SSH: the exec did not start");
            return fail(&channel, "gantry: the machine could not start this; the error has been logged\r\n").await;
        }
    };
    let (read, write) = channel.split();
    bridge(read, write, process, &exec, &container, &entered, tty.is_some(), true).await;
}

/// Writes `text` to the channel's stderr.
async fn notice(channel: &Channel<Msg>, text: &str) {
    let _ = channel.extended_data(1, text.as_bytes()).await;
}

/// Says why on stderr and ends the channel with status 1.
async fn fail(channel: &Channel<Msg>, text: &str) {
    notice(channel, text).await;
    let _ = channel.exit_status(1).await;
    let _ = channel.eof().await;
    let _ = channel.close().await;
}

async fn audit(entered: &Entered, what: &str) {
    let detail = format!("SSH {what} on machine {} from {}", entered.target.name, entered.client);
    if let Err(e) = gantry_platform::audit::record(&entered.pool, Some(entered.user.id), "ssh.channel", &detail).await {
        tracing::warn!(error = %e, "could not audit an SSH channel");
    }
}

/// Bytes both ways until the process ends (then its exit status, if
/// `status`) or the client closes the channel (then the process is hung up).
#[allow(clippy::too_many_arguments)]
pub async fn bridge(
    read: ChannelReadHalf,
    write: ChannelWriteHalf<Msg>,
    process: Process,
    exec: &Executor,
    container: &str,
    entered: &Entered,
    tty: bool,
    status: bool,
) {
    let Process { exec_id, pid, mut output, mut input } = process;
    let activity = &entered.activity;
    let write = &write;
    let pump_out = async {
        while let Some(piece) = output.next().await {
            activity.touch();
            let sent = match piece {
                Ok(Piece::Out(b)) => write.data_bytes(b).await,
                Ok(Piece::Err(b)) if status => write.extended_data_bytes(1, b).await,
                Ok(Piece::Err(b)) => {
                    tracing::debug!(said = %String::from_utf8_lossy(&b), "SSH forward relay");
                    Ok(())
                }
                Err(e) => {
                    tracing::warn!(error = %e, "SSH: the exec's output failed");
                    break;
                }
            };
            if sent.is_err() {
                return false;
            }
        }
        true
    };
    let pump_in = async {
        let mut read = read;
        while let Some(msg) = read.wait().await {
            match msg {
                ChannelMsg::Data { data } => {
                    activity.touch();
                    if input.write_all(&data).await.is_err() || input.flush().await.is_err() {
                        // The process closed its stdin: its output says why.
                        std::future::pending::<()>().await;
                    }
                }
                ChannelMsg::Eof => {
                    let _ = input.shutdown().await;
                }
                ChannelMsg::WindowChange { col_width, row_height, .. } if tty => {
                    let size =
                        TtySize::new(col_width.min(u16::MAX as u32) as u16, row_height.min(u16::MAX as u32) as u16);
                    let _ = exec.resize_shell(&exec_id, size).await;
                }
                ChannelMsg::Close => break,
                _ => {}
            }
        }
    };
    let ended = tokio::select! {
        delivered = pump_out => delivered,
        _ = pump_in => false,
    };
    if ended {
        if status {
            let code = exit_code(exec, &exec_id).await;
            let _ = write.exit_status(code).await;
        }
        let _ = write.eof().await;
        let _ = write.close().await;
    } else if let Some(pid) = pid {
        if let Ok(ProcessState::Running) = exec.shell_state(&exec_id).await {
            if let Err(e) = exec.hangup_shell(container, pid).await {
                tracing::warn!(error = %e, "SSH: could not hang up a process");
            }
        }
    }
}

/// The exec's exit code once the engine has noted its end (its output can
/// end a moment before).
async fn exit_code(exec: &Executor, exec_id: &str) -> u32 {
    for _ in 0..40 {
        match exec.shell_state(exec_id).await {
            Ok(ProcessState::Exited(code)) => return code.clamp(0, 255) as u32,
            Ok(ProcessState::Running) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(_) => break,
        }
    }
    255
}
