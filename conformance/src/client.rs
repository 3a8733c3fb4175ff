//! `conformance-client`: the fixture client for the official MCP conformance suite, built only on
//! `toolwire-client`'s public API, as any host author would.
//!
//! The suite runs `conformance-client <URL>` with `MCP_CONFORMANCE_SCENARIO` naming the scenario
//! (and `MCP_CONFORMANCE_CONTEXT` carrying its data for some); the program plays the scenario's
//! script against the mock server at URL and exits 0, or prints why it could not and exits 1.

use std::sync::{Arc, OnceLock};

use anyhow::{Context as _, bail};
use serde_json::{Value, json};
use toolwire_client::auth::{Authorizer, AuthorizerError, AuthorizerFuture, OAuth};
use toolwire_client::protocol::{ListRootsResult, Tool};
use toolwire_client::{Client, ClientBuilder};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    if let Err(error) = run().await {
        eprintln!("conformance-client: {error:#}");
        std::process::exit(1);
    }
}

async fn run() -> anyhow::Result<()> {
    let url = std::env::args()
        .next_back()
        .filter(|a| a.starts_with("http"))
        .context("usage: conformance-client URL (with MCP_CONFORMANCE_SCENARIO set)")?;
    let scenario =
        std::env::var("MCP_CONFORMANCE_SCENARIO").context("MCP_CONFORMANCE_SCENARIO is not set")?;
    let builder = ClientBuilder::new("toolwire-conformance-client", env!("CARGO_PKG_VERSION"));
    match scenario.as_str() {
        "tools_call" => tools_call(builder.http(url)?).await,
        "request-metadata" => request_metadata(declaring_everything(builder).http(url)?).await,
        "sep-2322-client-request-state" => request_state(builder, url).await,
        "http-standard-headers" => standard_headers(builder.http(url)?).await,
        "http-custom-headers" => custom_headers(builder.http(url)?).await,
        "http-invalid-tool-headers" => invalid_tool_headers(builder.http(url)?).await,
        "json-schema-ref-no-deref" => ref_no_deref(builder.http(url)?).await,
        "json-schema-2020-12-preservation" => schema_preservation(builder.http(url)?).await,
        auth if auth.starts_with("auth/") => authorized(builder, url, auth).await,
        other => bail!("unknown scenario {other:?}"),
    }
}

/// Fails unless the tool result is a success.
fn expect_ok(result: &toolwire_client::protocol::CallToolResult, what: &str) -> anyhow::Result<()> {
    if result.is_error() {
        bail!("{what} returned isError: {:?}", result.content);
    }
    Ok(())
}

/// 4.1: call `add_numbers` with 2 and 3.
async fn tools_call(client: Client) -> anyhow::Result<()> {
    let tools = client.list_tools().await?;
    if !tools.iter().any(|t| t.name == "add_numbers") {
        bail!("the server has no add_numbers tool");
    }
    let result = client
        .call_tool("add_numbers", json!({"a": 2, "b": 3}))
        .await?;
    expect_ok(&result, "add_numbers")?;
    eprintln!("{}", serde_json::to_string(&result.content)?);
    Ok(())
}

/// 4.2: the first request is refused with -32022; the client retries with a supported version.
async fn request_metadata(client: Client) -> anyhow::Result<()> {
    let discover = client.discover().await?;
    eprintln!("server speaks {:?}", discover.supported_versions);
    client.list_tools().await?;
    Ok(())
}

/// A client declaring every capability a client can have, so each declaration is checked.
fn declaring_everything(builder: ClientBuilder) -> ClientBuilder {
    builder
        .on_elicit(|_| async { Ok(toolwire_client::declined()) })
        .on_elicit_url(|_| async { Ok(toolwire_client::declined()) })
        .on_sample(|_| async {
            Err(toolwire_client::Error::Input(
                "this client has no model to sample".into(),
            ))
        })
        .on_roots(|| async { Ok(ListRootsResult::default()) })
}

/// 4.3: MRTR. While the echo-state round is open, an unrelated call must carry none of its state
/// (M-14), so the elicitation handler makes that call before it answers.
async fn request_state(builder: ClientBuilder, url: String) -> anyhow::Result<()> {
    let slot: Arc<OnceLock<Client>> = Arc::default();
    let handler_slot = slot.clone();
    let client = builder
        .on_elicit(move |_request| {
            let slot = handler_slot.clone();
            async move {
                if let Some(client) = slot.get() {
                    client.call_tool("test_mrtr_unrelated", json!({})).await?;
                }
                toolwire_client::accepted(&json!({"confirmed": true}))
            }
        })
        .http(url)?;
    slot.set(client.clone()).ok();
    for tool in [
        "test_mrtr_echo_state",
        "test_mrtr_no_state",
        "test_mrtr_no_result_type",
    ] {
        let result = client.call_tool(tool, json!({})).await?;
        expect_ok(&result, tool)?;
    }
    Ok(())
}

/// 4.4: every method that carries `Mcp-Name`, plus the lists.
async fn standard_headers(client: Client) -> anyhow::Result<()> {
    for tool in client.list_tools().await? {
        client.call_tool(&tool.name, json!({})).await?;
    }
    for resource in client.list_resources().await? {
        client.read_resource(&resource.uri).await?;
    }
    for prompt in client.list_prompts().await? {
        client.get_prompt(&prompt.name, json!({})).await?;
    }
    Ok(())
}

/// 4.5: the calls the context names, with exactly its arguments.
async fn custom_headers(client: Client) -> anyhow::Result<()> {
    let context: Value = serde_json::from_str(
        &std::env::var("MCP_CONFORMANCE_CONTEXT").context("MCP_CONFORMANCE_CONTEXT is not set")?,
    )
    .context("MCP_CONFORMANCE_CONTEXT is not JSON")?;
    client.list_tools().await?;
    let calls = context["toolCalls"]
        .as_array()
        .context("the context has no toolCalls")?;
    for call in calls {
        let name = call["name"]
            .as_str()
            .context("a tool call without a name")?;
        let result = client.call_tool(name, call["arguments"].clone()).await?;
        expect_ok(&result, name)?;
    }
    Ok(())
}

/// 4.7: tools with invalid header declarations are not exposed (C-08); the valid one is called.
async fn invalid_tool_headers(client: Client) -> anyhow::Result<()> {
    let tools = client.list_tools().await?;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    eprintln!("exposed tools: {names:?}");
    for tool in &tools {
        let arguments = sample_arguments(tool);
        let result = client.call_tool(&tool.name, arguments).await?;
        expect_ok(&result, &tool.name)?;
    }
    Ok(())
}

/// Arguments for a tool whose string properties all get a plain value.
fn sample_arguments(tool: &Tool) -> Value {
    let mut arguments = serde_json::Map::new();
    if let Some(properties) = tool
        .input_schema
        .get("properties")
        .and_then(Value::as_object)
    {
        for (name, schema) in properties {
            if schema["type"] == "string" {
                arguments.insert(name.clone(), json!("us-west1"));
            }
        }
    }
    Value::Object(arguments)
}

/// 4.6: listing a tool whose schema `$ref`s the network must not fetch it (J-05).
async fn ref_no_deref(client: Client) -> anyhow::Result<()> {
    let tools = client.list_tools().await?;
    eprintln!("listed {} tools", tools.len());
    Ok(())
}

/// 4.8: the 2020-12 schema comes back exactly as listed.
async fn schema_preservation(client: Client) -> anyhow::Result<()> {
    let tools = client.list_tools().await?;
    let tool = tools
        .iter()
        .find(|t| t.name == "json_schema_2020_12_tool")
        .context("no json_schema_2020_12_tool")?;
    let schema = serde_json::to_value(&tool.input_schema)?;
    let result = client
        .call_tool("json_schema_echo", json!({"schema": schema}))
        .await?;
    expect_ok(&result, "json_schema_echo")
}

/// The Client ID Metadata Document URL the suite expects where the server accepts one.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// 4.9: every `auth/*` scenario. The client authorizes when challenged (the suite's mock
/// authorization server approves at once), then lists the tools and calls `test-tool`. Client
/// credentials from the context, if any: pre-registered, or for a machine client.
async fn authorized(builder: ClientBuilder, url: String, scenario: &str) -> anyhow::Result<()> {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    // The suite's authorization server is on plain http on localhost, at another origin than
    // the server it guards: allowed here only, for development and tests.
    let mut oauth = OAuth::new()
        .allow_insecure_http()
        .client_name("toolwire-conformance-client")
        .client_metadata_document(CLIENT_METADATA_URL)
        .authorizer(Arc::new(Headless));
    if let Some(client_id) = context["client_id"].as_str() {
        oauth = oauth.client(
            context["issuer"].as_str().map(str::to_owned),
            client_id,
            context["client_secret"].as_str().map(str::to_owned),
        );
    }
    if let Some(pem) = context["private_key_pem"].as_str() {
        let algorithm = context["signing_algorithm"].as_str().unwrap_or("ES256");
        oauth = oauth.private_key(pem, algorithm);
    }
    if scenario.starts_with("auth/client-credentials") {
        oauth = oauth.client_credentials();
    }
    let client = builder.oauth(oauth).http(url)?;
    let tools = client.list_tools().await?;
    eprintln!("listed {} tools", tools.len());
    let result = client.call_tool("test-tool", json!({})).await?;
    expect_ok(&result, "test-tool")
}

/// The person's step, done by a program: the mock authorization server redirects at once, so
/// the authorization URL is fetched without following redirects and its `Location` is the
/// redirect. Nothing listens at the redirect URI.
struct Headless;

impl Authorizer for Headless {
    fn redirect_uri(&self) -> AuthorizerFuture<'_> {
        Box::pin(async { Ok("http://localhost:3000/callback".to_owned()) })
    }

    fn authorize<'a>(&'a self, url: &'a str) -> AuthorizerFuture<'a> {
        Box::pin(async move {
            let failed = |why: String| AuthorizerError(why);
            let response = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(std::time::Duration::from_secs(10))
                .build()
                .map_err(|e| failed(e.to_string()))?
                .get(url)
                .send()
                .await
                .map_err(|e| failed(format!("{url}: {e}")))?;
            response
                .headers()
                .get("location")
                .and_then(|l| l.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| {
                    failed(format!(
                        "{url} answered {} without a redirect",
                        response.status()
                    ))
                })
        })
    }
}
