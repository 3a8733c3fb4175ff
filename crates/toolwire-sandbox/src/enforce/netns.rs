//! A network of named hosts only: the server gets a network namespace of its own, whose
//! loopback holds nothing but a forwarder to the filtering proxy outside (`crate::proxy`), so a
//! connection around the proxy has nowhere to go. The launcher enters the namespaces (a user
//! namespace makes it possible without root), brings up the loopback, binds the forwarder's
//! port and starts the forwarder, before it confines itself.

use std::net::TcpListener;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::sched::CloneFlags;

use crate::error::{Error, Result};

/// The first argument that makes a program the forwarder (see `run_forwarder`).
pub(crate) const FORWARD_FLAG: &str = "--toolwire-sandbox-forward";

fn io(path: &str) -> impl Fn(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.into(),
        source,
    }
}

/// Enters a new user and network namespace, brings its loopback up and starts the forwarder
/// from `127.0.0.1:PORT` in it to the proxy's socket at `proxy`: the port.
pub(crate) fn enter(proxy: &Path) -> Result<u16> {
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    nix::sched::unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).map_err(|e| {
        Error::Unsupported {
            missing: format!(
                "user and network namespaces, which hold a network limited to named hosts ({e})"
            ),
        }
    })?;
    // The same identity inside as outside, so that files and programs see the person.
    std::fs::write("/proc/self/setgroups", "deny").map_err(io("/proc/self/setgroups"))?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
        .map_err(io("/proc/self/uid_map"))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
        .map_err(io("/proc/self/gid_map"))?;
    loopback_up()?;
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io("127.0.0.1:0"))?;
    let port = listener.local_addr().map_err(io("127.0.0.1:0"))?.port();
    let this = std::env::current_exe().map_err(io("the launcher"))?;
    Command::new(this)
        .arg(FORWARD_FLAG)
        .arg(proxy)
        .stdin(Stdio::from(OwnedFd::from(listener)))
        .stdout(Stdio::null())
        .spawn()
        .map_err(io("the forwarder"))?;
    Ok(port)
}

/// `ip link set lo up`, by netlink, in a runtime of this one thread.
fn loopback_up() -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .build()
        .map_err(io("the netlink runtime"))?;
    runtime
        .block_on(async {
            let (connection, handle, _) = rtnetlink::new_connection()?;
            tokio::spawn(connection);
            handle
                .link()
                .set(rtnetlink::LinkUnspec::new_with_index(1).up().build())
                .execute()
                .await
                .map_err(std::io::Error::other)
        })
        .map_err(io("the loopback (netlink)"))
}

/// The forwarder: each connection to the listener on its stdin, carried to the Unix socket at
/// `proxy`, until the listener fails (the server's process group is stopped).
pub(crate) fn run_forwarder(proxy: &Path) -> Result<()> {
    use std::os::fd::AsFd;
    let fd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(io("the forwarder's listener"))?;
    let listener = TcpListener::from(fd);
    for stream in listener.incoming() {
        let Ok(inside) = stream else { break };
        let proxy = proxy.to_owned();
        std::thread::spawn(move || {
            if let Ok(outside) = std::os::unix::net::UnixStream::connect(&proxy) {
                crate::proxy::relay(inside, outside);
            }
        });
    }
    Ok(())
}
