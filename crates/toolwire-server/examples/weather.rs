//! The guides' server example: one typed tool with structured output and progress, served on
//! Streamable HTTP at 127.0.0.1:8080/mcp, or on stdio with `--stdio`.
//!
//! `cargo run -p toolwire-server --example weather [-- --stdio]`

use toolwire_server::{RequestContext, Server, Structured, Tool, ToolError, http, stdio};

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Forecast {
    /// City name.
    city: String,
    /// Days ahead, 1 to 7.
    #[schemars(range(min = 1, max = 7))]
    days: u8,
}

#[derive(serde::Serialize, schemars::JsonSchema)]
struct Weather {
    city: String,
    days: u8,
    celsius: f64,
}

/// Where the example listens on HTTP.
const ADDR: &str = "127.0.0.1:8080";

/// Runs the example. A failure is printed as its message, as a person reads it (`main`
/// returning the error would print its `Debug` form: `Os { code: 98, kind: AddrInUse, … }`).
#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("weather: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let server = Server::builder("weather", "1.0.0")
        .instructions("Forecasts for European cities.")
        .tool(
            Tool::new(
                "forecast",
                |args: Forecast, ctx: RequestContext| async move {
                    ctx.progress(0.0, Some(1.0), Some("looking up")).await;
                    if args.city.is_empty() {
                        return Err(ToolError::failed("city must not be empty"));
                    }
                    Ok(Structured(Weather {
                        city: args.city,
                        days: args.days,
                        celsius: 21.5,
                    }))
                },
            )
            .description("Forecast for a city"),
        )
        .build()?;

    if std::env::args().any(|a| a == "--stdio") {
        stdio::serve(server).await?;
    } else {
        let listener = tokio::net::TcpListener::bind(ADDR).await.map_err(|e| {
            format!("cannot listen on {ADDR}: {e}; is another server running there? Stop it, or serve on stdio with --stdio")
        })?;
        eprintln!("weather: serving at http://{ADDR}/mcp");
        http::serve(server, listener, http::HttpConfig::default()).await?;
    }
    Ok(())
}
