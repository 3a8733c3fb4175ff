//! The guides' access-control example: an `add` tool that needs the `math` scope, served on
//! Streamable HTTP at 127.0.0.1:8080/mcp as an OAuth 2.1 resource server. Its issuer is the
//! repository's test authorization server (`scripts/oidc start 9400`); give yours instead.
//!
//! `cargo run -p toolwire-server --example oauth` (with INTROSPECTION_SECRET set, opaque tokens
//! are accepted too, asked about at the issuer)

use toolwire_server::http::{self, HttpConfig, OAuth};
use toolwire_server::{RequestContext, Server, Tool};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Add {
    a: f64,
    b: f64,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The issuer, exactly as its tokens' `iss`; this endpoint, as their `aud`.
    let mut oauth = OAuth::new("http://127.0.0.1:9400", "http://127.0.0.1:8080/mcp")
        .scopes_supported(["math", "tools:read"])
        .scope_implies("admin", ["math", "tools:read"]); // a scope hierarchy
    if let Ok(secret) = std::env::var("INTROSPECTION_SECRET") {
        oauth = oauth.introspection("rs-introspect", secret); // this server's client at the issuer
    }
    let add = Tool::new("add", |n: Add, _: RequestContext| async move {
        (n.a + n.b).to_string()
    })
    .description("Adds two numbers")
    .scopes(["math"]); // so can a prompt, a resource or a template

    let server = Server::builder("calculator", "1.0.0").tool(add).build()?;
    let addr = "127.0.0.1:8080";
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    eprintln!("calculator: serving at http://{addr}/mcp");
    http::serve(server, listener, HttpConfig::default().oauth(oauth)).await?;
    Ok(())
}
