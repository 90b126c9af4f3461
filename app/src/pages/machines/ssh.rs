//! The machine page's SSH card (issue #34): the command to connect and a
//! ready `~/.ssh/config` block (what VS Code Remote-SSH and JetBrains
//! Gateway read), for the signed-in user's view of this machine. Shown
//! only when the server runs its SSH gateway and the user may enter.

use crate::api::ssh_keys::{machine_ssh_access, SshAccess};
use leptos::prelude::*;

/// Mounted by the machine page with the machine's id (from the route).
#[component]
pub fn MachineSsh(#[prop(into)] id: Signal<Option<i64>>) -> impl IntoView {
    move || id.get().map(|id| view! { <SshCard id=id/> })
}

#[component]
fn SshCard(id: i64) -> impl IntoView {
    let access = Resource::new(move || id, machine_ssh_access);
    view! {
        <Suspense fallback=|| ()>
            {move || access.get().and_then(Result::ok).flatten().map(|a| view! { <SshDetails a=a/> })}
        </Suspense>
    }
}

#[component]
fn SshDetails(a: SshAccess) -> impl IntoView {
    let command = ssh_command(&a);
    let config = ssh_config(&a);
    view! {
        <section class="card stack" data-testid="machine-ssh">
            <h2>"SSH"</h2>
            <p class="small">"Connect with your own tools (ssh, scp, sftp, ssh -L, VS Code, JetBrains) using a key from "
                <a href="/account/password#ssh-keys">"your account"</a> ":"</p>
            <pre class="output small" data-testid="ssh-command">{command}</pre>
            <p class="small muted">"Or add this to ~/.ssh/config and use " <code>{format!("ssh gantry-{}", a.machine)}</code> ":"</p>
            <pre class="output small" data-testid="ssh-config">{config}</pre>
            <p class="small muted">"The server's host key: " <code>{a.gateway.host_fingerprint.clone()}</code></p>
        </section>
    }
}

/// `ssh -p PORT USER@HOST`.
pub fn ssh_command(a: &SshAccess) -> String {
    format!("ssh -p {} {}@{}", a.gateway.port, a.ssh_user, a.gateway.host)
}

/// The `~/.ssh/config` block for this machine.
pub fn ssh_config(a: &SshAccess) -> String {
    format!(
        "Host gantry-{}\n    HostName {}\n    Port {}\n    User {}\n",
        a.machine, a.gateway.host, a.gateway.port, a.ssh_user
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ssh_keys::SshGatewayInfo;

    #[test]
    fn the_command_and_config_name_the_gateway_and_the_machine() {
        let a = SshAccess {
            ssh_user: "alice/dev".into(),
            machine: "dev".into(),
            gateway: SshGatewayInfo { port: 2222, host_fingerprint: "SHA256:x".into(), host: "gpu.example.org".into() },
        };
        assert_eq!(ssh_command(&a), "ssh -p 2222 alice/dev@gpu.example.org");
        assert_eq!(
            ssh_config(&a),
            "Host gantry-dev\n    HostName gpu.example.org\n    Port 2222\n    User alice/dev\n"
        );
    }
}
