//! The launcher: a server's command, made to pass through a program that confines itself and
//! then executes the server.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

use crate::enforce::{Coverage, check};
use crate::error::{Error, Result};
use crate::policy::profile::Profile;
use crate::watch::Watch;

/// The first argument that makes a program the launcher (see [`run_if_launcher`]).
pub const LAUNCHER_FLAG: &str = "--toolwire-sandbox";

/// A server's command made to start confined, and the server's private temporary directory,
/// removed when this is dropped.
#[derive(Debug)]
pub struct Launch {
    /// The program to start: the launcher.
    pub program: PathBuf,
    /// Its arguments: the profile, then the server's own command.
    pub args: Vec<OsString>,
    /// Variables to set for the server: `TMPDIR`, its private temporary directory, and with a
    /// lasting directory `XDG_DATA_HOME` and `XDG_STATE_HOME` in it (its configuration's own
    /// values go first).
    pub env: Vec<(OsString, OsString)>,
    /// How much of the profile the kernel enforces.
    pub coverage: Coverage,
    /// The filtering proxy of a network of named hosts, stopped with the server.
    _proxy: Option<crate::proxy::Proxy>,
    tmp: tempfile::TempDir,
}

impl Launch {
    /// `program` with `args`, run through `launcher` under `profile` plus a private temporary
    /// directory (writable, and the server's `TMPDIR`). Fails, naming what is missing, when the
    /// kernel cannot enforce the profile. `watch` is told of each host the proxy refuses
    ///
    pub fn prepare(
        launcher: &Path,
        profile: &Profile,
        program: &str,
        args: &[String],
        watch: Option<Watch>,
    ) -> Result<Launch> {
        let coverage = check(profile)?;
        let tmp = tempfile::Builder::new()
            .prefix("toolwire-server-")
            .tempdir()
            .map_err(|source| Error::Io {
                path: std::env::temp_dir(),
                source,
            })?;
        let mut profile = profile.clone();
        profile.write.push(tmp.path().to_owned());
        let proxy = match &profile.network {
            crate::Network::Hosts(hosts) => {
                let path = tmp.path().join("proxy.sock");
                let proxy =
                    crate::proxy::Proxy::start(&path, hosts.clone(), watch).map_err(|source| {
                        Error::Io {
                            path: path.clone(),
                            source,
                        }
                    })?;
                profile.proxy = Some(path);
                Some(proxy)
            }
            _ => None,
        };
        let mut env: Vec<(OsString, OsString)> =
            vec![("TMPDIR".into(), tmp.path().as_os_str().to_owned())];
        if let Some(data) = &profile.data {
            for (name, sub) in [("XDG_DATA_HOME", "data"), ("XDG_STATE_HOME", "state")] {
                let dir = data.join(sub);
                std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
                    path: dir.clone(),
                    source,
                })?;
                env.push((name.into(), dir.into_os_string()));
            }
            profile.write.push(data.clone());
        }
        let mut launch_args: Vec<OsString> = vec![
            LAUNCHER_FLAG.into(),
            serde_json::to_string(&profile)?.into(),
            "--".into(),
            program.into(),
        ];
        launch_args.extend(args.iter().map(OsString::from));
        Ok(Launch {
            program: launcher.to_owned(),
            args: launch_args,
            env,
            coverage,
            _proxy: proxy,
            tmp,
        })
    }

    /// The server's private temporary directory.
    pub fn temporary_directory(&self) -> &Path {
        self.tmp.path()
    }
}

/// When this process was started as the launcher (`PROGRAM --toolwire-sandbox PROFILE -- SERVER
/// ARGS…`), confines it and executes the server, never returning; otherwise returns at once.
/// Call it first thing in `main`, before any thread starts, in a program that is to serve as
/// the launcher. A launcher that cannot confine itself says why on stderr and exits with 126
/// without starting the server.
pub fn run_if_launcher() {
    let mut args = std::env::args_os().skip(1);
    let first = args.next();
    #[cfg(target_os = "linux")]
    if first.as_deref() == Some(OsStr::new(crate::enforce::netns::FORWARD_FLAG)) {
        let proxy = PathBuf::from(args.next().unwrap_or_default());
        let code = match crate::enforce::netns::run_forwarder(&proxy) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("toolwire sandbox forwarder: {e}");
                1
            }
        };
        std::process::exit(code);
    }
    if first.as_deref() != Some(OsStr::new(LAUNCHER_FLAG)) {
        SERVES_AS_LAUNCHER.store(true, std::sync::atomic::Ordering::Relaxed);
        return;
    }
    let Err(e) = launch(args);
    let off = match e {
        Error::Unsupported { .. } => {
            "; to run it with your full rights instead, give its entry \"sandbox\": {\"off\": \"the reason\"} (or pass --sandbox-off REASON)"
        }
        _ => "",
    };
    eprintln!("toolwire sandbox: {e}; the server was not started{off}");
    std::process::exit(126);
}

/// Set when this program called [`run_if_launcher`]: it can serve as its own launcher.
static SERVES_AS_LAUNCHER: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// The launcher to use when none is configured: this program, when it called
/// [`run_if_launcher`]; else a `toolwire-sandbox` binary beside it (or one folder up, where
/// Cargo puts binaries beside a test's `deps/`).
pub fn default_launcher() -> Result<PathBuf> {
    let this = std::env::current_exe().map_err(|source| Error::Io {
        path: "the running program".into(),
        source,
    })?;
    if SERVES_AS_LAUNCHER.load(std::sync::atomic::Ordering::Relaxed) {
        return Ok(this);
    }
    let name = format!("toolwire-sandbox{}", std::env::consts::EXE_SUFFIX);
    let beside = this.parent().map(|dir| dir.join(&name));
    let above = this
        .parent()
        .and_then(Path::parent)
        .map(|dir| dir.join(&name));
    [beside, above]
        .into_iter()
        .flatten()
        .find(|candidate| candidate.is_file())
        .ok_or(Error::NoLauncher)
}

fn launch(mut args: impl Iterator<Item = OsString>) -> Result<std::convert::Infallible> {
    const USAGE: &str = "--toolwire-sandbox PROFILE_JSON -- PROGRAM [ARGS…]";
    let profile = args.next().ok_or(Error::Usage(USAGE))?;
    let profile: Profile = serde_json::from_slice(profile.as_encoded_bytes())?;
    if args.next().as_deref() != Some(OsStr::new("--")) {
        return Err(Error::Usage(USAGE));
    }
    let program = args.next().ok_or(Error::Usage(USAGE))?;
    let env = confine(&profile)?;
    let mut command = std::process::Command::new(&program);
    command.args(args).envs(env);
    for name in ["NO_PROXY", "no_proxy"] {
        if profile.proxy.is_some() {
            command.env_remove(name);
        }
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        let source = command.exec();
        Err(Error::Io {
            path: program.into(),
            source,
        })
    }
    #[cfg(not(unix))]
    {
        let _ = command;
        Err(Error::Unsupported {
            missing: "a way to execute a program in place (Unix only)".into(),
        })
    }
}

#[cfg(target_os = "linux")]
fn confine(profile: &Profile) -> Result<Vec<(String, String)>> {
    crate::enforce::apply(profile)
}

#[cfg(not(target_os = "linux"))]
fn confine(profile: &Profile) -> Result<Vec<(String, String)>> {
    check(profile).map(|_| Vec::new())
}
