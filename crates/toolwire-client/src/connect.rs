//! A builder made a client: over Streamable HTTP, or with a server started as a child process
//! whose own requests and notifications are then served (`incoming.rs`).

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::builder::ClientBuilder;
use crate::client::Client;
use crate::error::{Error, Result};
use crate::transport::Transport;
use crate::transport::command::StdioCommand;
use crate::transport::http::HttpTransport;
use crate::transport::stdio::StdioTransport;

impl ClientBuilder {
    /// A client for the Streamable HTTP endpoint at `url`.
    pub fn http(self, url: impl Into<String>) -> Result<Client> {
        let mut headers = HeaderMap::new();
        for (name, value) in &self.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| Error::Transport(format!("bad header name {name:?}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| Error::Transport(format!("bad value for header {name}")))?;
            headers.append(name, value);
        }
        let transport = HttpTransport::new(
            url.into(),
            headers,
            self.bearer.as_deref(),
            &self.ca_files,
            self.timeout,
            self.oauth.clone(),
        )?;
        Ok(Client::new(self, Transport::Http(Box::new(transport))))
    }

    /// A client for a server run as a child process speaking stdio: `program` with `args`.
    pub async fn spawn(
        self,
        program: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Result<Client> {
        self.spawn_command(StdioCommand::new(program).args(args))
            .await
    }

    /// A client for a server run as a child process, with environment and working directory.
    pub async fn spawn_command(self, command: StdioCommand) -> Result<Client> {
        let (transport, incoming) = StdioTransport::spawn(command)?;
        let client = Client::new(self, Transport::Stdio(Box::new(transport)));
        crate::client::incoming::serve_stdio(&client, incoming);
        Ok(client)
    }
}
