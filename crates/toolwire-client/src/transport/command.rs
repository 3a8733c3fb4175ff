//! What to start for a stdio server: program, arguments, working directory and the environment
//! it gets (a short list inherited by default, so credentials stay with the client).

/// The variables a server gets from this process's environment unless more are named: the
/// list the official MCP SDKs use (`DEFAULT_INHERITED_ENV_VARS` in the TypeScript SDK's
/// `src/client/stdio.ts` and the Python SDK's `mcp/client/stdio/__init__.py`, "inspired by the
/// default env inheritance of sudo"). Credentials such as `TOOLWIRE_BEARER_TOKEN` or a cloud
/// key stay with the client.
#[cfg(not(windows))]
pub const DEFAULT_INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// The variables a server gets from this process's environment unless more are named (the
/// official MCP SDKs' Windows list).
#[cfg(windows)]
pub const DEFAULT_INHERITED_ENV: &[&str] = &[
    "APPDATA",
    "HOMEDRIVE",
    "HOMEPATH",
    "LOCALAPPDATA",
    "PATH",
    "PROCESSOR_ARCHITECTURE",
    "SYSTEMDRIVE",
    "SYSTEMROOT",
    "TEMP",
    "USERNAME",
    "USERPROFILE",
    "PROGRAMFILES",
];

/// How to start a server: program, arguments, environment and working directory.
///
/// The server does not inherit this process's whole environment: it gets
/// [`DEFAULT_INHERITED_ENV`], the variables named with [`inherit_env`](Self::inherit_env), and
/// those set with [`env`](Self::env), in that order of precedence (last wins).
#[derive(Debug, Clone)]
pub struct StdioCommand {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables set for the server.
    pub env: Vec<(String, String)>,
    /// Variables passed on from this process's environment besides the default ones.
    pub inherit: Vec<String>,
    /// The working directory (default: the current one).
    pub cwd: Option<std::path::PathBuf>,
    /// How the server is named in this process's log (its stderr lines, its restarts):
    /// a host's name for it; default: the program.
    pub name: Option<String>,
    /// The sandbox it starts in; none: it runs with this process's rights.
    pub sandbox: Option<Sandbox>,
}

/// A stdio server's sandbox: its profile and the launcher that enforces it.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// What the server may do.
    pub profile: toolwire_sandbox::Profile,
    /// The program that confines itself and executes the server: one that calls
    /// [`toolwire_sandbox::run_if_launcher`] first in `main` (default: this program, as the
    /// `toolwire` binary does; elsewhere, the `toolwire-sandbox` binary).
    pub launcher: std::path::PathBuf,
    /// Told of each host the sandbox's proxy refuses the server.
    pub watch: Option<toolwire_sandbox::Watch>,
}

impl Sandbox {
    /// `profile`, enforced by [`toolwire_sandbox::default_launcher`]: this program when it
    /// calls [`toolwire_sandbox::run_if_launcher`], else the `toolwire-sandbox` binary beside it.
    pub fn new(profile: toolwire_sandbox::Profile) -> toolwire_sandbox::Result<Sandbox> {
        Ok(Sandbox {
            profile,
            launcher: toolwire_sandbox::default_launcher()?,
            watch: None,
        })
    }

    /// Enforced by `launcher` instead.
    pub fn launcher(mut self, launcher: impl Into<std::path::PathBuf>) -> Sandbox {
        self.launcher = launcher.into();
        self
    }

    /// Tells `watch` of each host the sandbox's proxy refuses the server.
    pub fn watch(mut self, watch: toolwire_sandbox::Watch) -> Sandbox {
        self.watch = Some(watch);
        self
    }
}

impl StdioCommand {
    /// Runs `program` (looked up on `PATH` when it has no slash).
    pub fn new(program: impl Into<String>) -> Self {
        StdioCommand {
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            inherit: Vec::new(),
            cwd: None,
            name: None,
            sandbox: None,
        }
    }

    /// Starts the server in `sandbox`.
    pub fn sandboxed(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = Some(sandbox);
        self
    }

    /// Names the server in this process's log (default: the program).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// How the server is named in this process's log.
    pub fn shown_name(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.program)
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Sets an environment variable for the server (credentials travel this way on stdio, S-13).
    pub fn env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((name.into(), value.into()));
        self
    }

    /// Passes this process's value of `name` on to the server, if it is set.
    pub fn inherit_env(mut self, name: impl Into<String>) -> Self {
        self.inherit.push(name.into());
        self
    }

    /// The server's environment: the default inherited variables (skipping exported shell
    /// functions, whose values start with `()`), the named ones, then the set ones.
    pub(super) fn environment(&self) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
        let defaults = DEFAULT_INHERITED_ENV.iter().filter_map(|name| {
            let value = std::env::var_os(name)?;
            (!value.as_encoded_bytes().starts_with(b"()")).then(|| (name.into(), value))
        });
        let named = self
            .inherit
            .iter()
            .filter_map(|name| Some((name.into(), std::env::var_os(name)?)));
        let set = self.env.iter().map(|(k, v)| (k.into(), v.into()));
        defaults.chain(named).chain(set).collect()
    }

    /// Where the program is, as the system would find it when starting it directly (on the
    /// server's `PATH`, relative to its directory), or the error starting it would give.
    pub(super) fn find_program(&self) -> std::io::Result<std::path::PathBuf> {
        let cwd = match &self.cwd {
            Some(dir) => std::env::current_dir()?.join(dir),
            None => std::env::current_dir()?,
        };
        let path = self
            .environment()
            .into_iter()
            .rev()
            .find(|(name, _)| name == "PATH")
            .map(|(_, value)| value);
        which::which_in(&self.program, path, cwd).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "No such file or directory (os error 2)",
            )
        })
    }

    /// What to start: the server's command, or in its sandbox the launcher that confines itself
    /// and then executes it, with the sandbox's private temporary directory, which lives
    /// as long as the returned [`Launch`](toolwire_sandbox::Launch). A missing program is the
    /// error starting it directly gives; a sandbox the kernel cannot hold says what it lacks and
    /// the way out.
    pub(super) fn process(
        &self,
    ) -> crate::Result<(tokio::process::Command, Option<toolwire_sandbox::Launch>)> {
        let Some(sandbox) = &self.sandbox else {
            let mut command = tokio::process::Command::new(&self.program);
            command.args(&self.args);
            return Ok((command, None));
        };
        self.find_program()
            .map_err(|e| crate::Error::Transport(format!("cannot start {}: {e}", self.program)))?;
        // Each refusal is logged here, then told to the caller's watch.
        let server = self.shown_name().to_owned();
        let theirs = sandbox.watch.clone();
        let watch = toolwire_sandbox::Watch::new(move |refusal| {
            tracing::warn!(server = %server, "sandbox: {refusal}");
            if let Some(theirs) = &theirs {
                theirs.tell(refusal);
            }
        });
        let launch = toolwire_sandbox::Launch::prepare(
            &sandbox.launcher,
            &sandbox.profile,
            &self.program,
            &self.args,
            Some(watch),
        )
        .map_err(|e| {
            let off = match e {
                toolwire_sandbox::Error::Unsupported { .. } => {
                    "; to run it with your full rights instead, give its entry \"sandbox\": {\"off\": \"the reason\"} (or pass --sandbox-off REASON)"
                }
                _ => "",
            };
            crate::Error::Transport(format!(
                "cannot start {} in its sandbox: {e}{off}",
                self.shown_name()
            ))
        })?;
        let mut command = tokio::process::Command::new(&launch.program);
        command.args(&launch.args);
        Ok((command, Some(launch)))
    }

    /// Runs the server in `dir`.
    pub fn current_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.cwd = Some(dir.into());
        self
    }
}
