//! `direct-tcpip` channels (`ssh -L 8888:localhost:8888 …`): each
//! connection is relayed to a port inside the machine by an exec of a tiny
//! relay that bridges its stdio to `127.0.0.1:PORT` — `nc` (busybox and
//! most images have one), else bash's `/dev/tcp`. Going through the
//! engine's exec stream, it needs no network between the gateway and the
//! machine (the approach VS Code Dev Containers uses for its forwards).
//! Only ports inside the machine: the host must be the machine itself.

use super::{exec_bridge::bridge, session::Entered};
use russh::{server::Msg, Channel};
use std::sync::Arc;

const RELAY: &str = r#"if command -v nc >/dev/null 2>&1; then exec nc 127.0.0.1 "$1"; fi
if [ -x /bin/bash ]; then exec /bin/bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1; cat <&3 & cat >&3; wait' gantry "$1"; fi
echo "gantry: this machine's image has neither nc nor bash to relay port $1" >&2; exit 127"#;

/// The port to reach, if `host:port` names a port inside this machine.
pub fn target_port(host: &str, port: u32, entered: &Entered) -> Result<u16, String> {
    let inside = ["localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"].contains(&host) || host == entered.target.name;
    if !inside {
        return Err(format!(
            "only ports inside machine {} can be forwarded (use localhost:PORT), not {host}",
            entered.target.name
        ));
    }
    match u16::try_from(port) {
        Ok(p) if p > 0 => Ok(p),
        _ => Err(format!("port {port} is outside 1-65535")),
    }
}

pub async fn run(channel: Channel<Msg>, entered: Arc<Entered>, port: u16) {
    let (container, exec) = match &entered.inside {
        Ok(inside) => inside.clone(),
        Err(why) => {
            tracing::info!(machine = %entered.target.name, why, "SSH forward on a machine that cannot take it");
            let _ = channel.close().await;
            return;
        }
    };
    let process = match exec.open_process(&container, RELAY, &[port.to_string()], None, &[]).await {
        Ok(p) => p,
        Err(e) => {
            tracing::warn!(machine = %entered.target.name, port, error = %e, "SSH forward: the relay did not start");
            let _ = channel.close().await;
            return;
        }
    };
    let (read, write) = channel.split();
    bridge(read, write, process, &exec, &container, &entered, false, false).await;
}
