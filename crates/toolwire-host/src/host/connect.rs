//! A configured server's client: started (stdio) or made ready to reach (HTTP), with the
//! host's identity, time limits, question handlers and OAuth.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use toolwire_client::{Client, ClientBuilder, Sandbox, StdioCommand};

use super::HostOptions;
use crate::config::{OAuthSettings, ServerConfig, Transport};

/// A connected server.
pub(super) struct Connection {
    pub(super) config: ServerConfig,
    pub(super) client: Client,
    /// How many times its stdio process was started, when last looked at.
    starts: AtomicU64,
}

impl Connection {
    /// `client`, made for `config`.
    pub(super) fn new(config: ServerConfig, client: Client) -> Connection {
        Connection {
            config,
            starts: client.server_starts().unwrap_or(0).into(),
            client,
        }
    }

    /// How many times its process has been started, when that grew since last looked at: a
    /// stdio server that died and was started again (the client restarts it on the next
    /// request, S-11).
    pub(super) fn restarted(&self) -> Option<u64> {
        let starts = self.client.server_starts()?;
        let seen = self.starts.swap(starts, Ordering::AcqRel);
        (starts > seen).then_some(starts)
    }
}

/// A client for `server` (a stdio server is started; an HTTP one is first reached when its
/// tools are listed).
pub(super) async fn open(
    server: &ServerConfig,
    options: &HostOptions,
    watch: Option<toolwire_sandbox::Watch>,
) -> toolwire_client::Result<Client> {
    let builder = builder(server, options);
    match &server.transport {
        Transport::Http {
            url,
            headers,
            oauth,
        } => {
            let mut builder = builder;
            for (name, value) in headers {
                builder = builder.header(name, value);
            }
            if !oauth.disabled {
                builder = builder.oauth(oauth_for(&server.name, oauth, options));
            }
            builder.http(url)
        }
        Transport::Stdio {
            command,
            args,
            env,
            cwd,
        } => {
            let mut stdio = StdioCommand::new(command).args(args).named(&server.name);
            for (name, value) in env {
                stdio = stdio.env(name, value);
            }
            if let Some(cwd) = cwd {
                stdio = stdio.current_dir(cwd);
            }
            // The directories its command names: in its arguments and its variables' values.
            let named: Vec<String> = args.iter().chain(env.values()).cloned().collect();
            if let Some(mut sandbox) = sandbox_of(server, &named, cwd.as_deref(), options)? {
                sandbox.watch = watch;
                stdio = stdio.sandboxed(sandbox);
            }
            builder.spawn_command(stdio).await
        }
    }
}

/// The sandbox a stdio server starts in: none when its entry turns it off or says
/// nothing.
fn sandbox_of(
    server: &ServerConfig,
    args: &[String],
    cwd: Option<&std::path::Path>,
    options: &HostOptions,
) -> toolwire_client::Result<Option<Sandbox>> {
    let Some(profile) = server.sandbox.profile(&server.name, args, cwd) else {
        return Ok(None);
    };
    // A first `npx` or `uvx` must find its cache to write in (a grant needs a directory).
    let _ = toolwire_sandbox::Defaults::from_env().make_caches();
    let sandbox = match &options.sandbox_launcher {
        Some(launcher) => Ok(Sandbox {
            profile,
            launcher: launcher.clone(),
            watch: None,
        }),
        None => Sandbox::new(profile),
    };
    sandbox.map(Some).map_err(|e| {
        toolwire_client::Error::Transport(format!("cannot start {}: {e}", server.name))
    })
}

/// What every server's client shares: the host's identity and limits, and its handlers of
/// servers' questions, each told which server asks.
fn builder(server: &ServerConfig, options: &HostOptions) -> ClientBuilder {
    let timeout = server.timeout.unwrap_or(options.call_timeout);
    // The hard cap must leave room for the longest limit of a single tool.
    let longest = server
        .tool_timeouts
        .values()
        .copied()
        .fold(timeout, Duration::max);
    let mut builder = ClientBuilder::new(&options.client_name, &options.client_version)
        .timeout(timeout)
        .max_timeout(longest);
    if let Some(probe) = options.probe_timeout {
        builder = builder.probe_timeout(probe);
    }
    if let Some(level) = options.log_level {
        builder = builder.log_level(level);
    }
    for path in &options.ca_files {
        builder = builder.ca_file(path);
    }
    if let Some(handler) = options.input.elicit.clone() {
        let name = server.name.clone();
        builder = builder.on_elicit(move |params| handler(name.clone(), params));
    }
    if let Some(handler) = options.input.elicit_url.clone() {
        let name = server.name.clone();
        builder = builder.on_elicit_url(move |params| handler(name.clone(), params));
    }
    if let Some(handler) = options.input.sample.clone() {
        let name = server.name.clone();
        builder = builder.on_sample(move |params| handler(name.clone(), params));
    }
    if let Some(handler) = options.input.roots.clone() {
        let name = server.name.clone();
        builder = builder.on_roots(move || handler(name.clone(), ()));
    }
    builder
}

/// The OAuth flow of an HTTP server: the host's store and authorizer, the entry's settings.
fn oauth_for(
    name: &str,
    settings: &OAuthSettings,
    options: &HostOptions,
) -> toolwire_client::auth::OAuth {
    let mut oauth = toolwire_client::auth::OAuth::new()
        .store(options.credentials.clone())
        .client_name(options.client_name.clone());
    if let Some(authorizer) = &options.authorizer {
        oauth = oauth.authorizer(authorizer(name));
    }
    if let Some(client_id) = &settings.client_id {
        oauth = oauth.client(
            settings.issuer.clone(),
            client_id,
            settings.client_secret.clone(),
        );
    }
    if let Some(scope) = &settings.scope {
        oauth = oauth.scope(scope);
    }
    if settings.client_credentials {
        oauth = oauth.client_credentials();
    }
    if options.oauth_insecure_http {
        oauth = oauth.allow_insecure_http();
    }
    oauth
}
