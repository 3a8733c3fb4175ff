//! What the tests share: servers on free loopback ports, a client, a result's text.

use std::time::Duration;

use toolwire_client::protocol::CallToolResult;
use toolwire_client::{Client, ClientBuilder};
use toolwire_server::Server;

/// How long anything a test waits for may take before it fails.
pub(crate) const DEADLINE: Duration = Duration::from_secs(20);

/// A server served over HTTP on a free loopback port.
pub(crate) struct Served {
    pub(crate) url: String,
    pub(crate) server: Server,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Served {
    /// Serves `server` on a free port, or on `port` when given (to start a server again
    /// where it was).
    pub(crate) async fn start(server: Server, port: Option<u16>) -> Served {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port.unwrap_or(0)))
            .await
            .expect("a loopback port");
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let task = tokio::spawn(toolwire_server::http::serve(
            server.clone(),
            listener,
            Default::default(),
        ));
        Served { url, server, task }
    }

    /// Its port.
    pub(crate) fn port(&self) -> u16 {
        self.url
            .trim_start_matches("http://127.0.0.1:")
            .trim_end_matches("/mcp")
            .parse()
            .expect("a port")
    }

    /// Stops it and waits until it no longer listens.
    pub(crate) async fn stop(self) {
        self.server.shutdown();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("the server stops")
            .expect("its task")
            .expect("it served");
    }
}

/// A client of `url`.
pub(crate) fn client(url: &str) -> Client {
    ClientBuilder::new("gateway-test", "1")
        .http(url)
        .expect("a client")
}

/// The first content block's text ("" when it has none).
pub(crate) fn text(result: &CallToolResult) -> String {
    serde_json::to_value(result).unwrap()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
