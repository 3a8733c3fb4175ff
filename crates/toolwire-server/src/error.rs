//! Errors of toolwire-server: what registration and serving can fail with.

use std::fmt;

/// Which schema of a tool a problem is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaRole {
    /// `inputSchema`.
    Input,
    /// `outputSchema`.
    Output,
}

impl fmt::Display for SchemaRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SchemaRole::Input => "inputSchema",
            SchemaRole::Output => "outputSchema",
        })
    }
}

/// The rule a tool definition breaks; each names the requirement it enforces (docs/requirements.md).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolRule {
    /// T-08.
    #[error("the name must be 1 to 128 characters from [A-Za-z0-9_.-]")]
    InvalidName,
    /// T-08.
    #[error("a tool with this name is already registered")]
    DuplicateName,
    /// T-06.
    #[error("inputSchema must be an object schema with \"type\": \"object\" at its root")]
    InputSchemaNotObject,
    /// J-03.
    #[error(
        "{role} declares the unsupported dialect {dialect:?}; supported: draft 2020-12 (default), 2019-09, 7, 6 and 4"
    )]
    UnsupportedDialect {
        /// Which schema.
        role: SchemaRole,
        /// The `$schema` value.
        dialect: String,
    },
    /// J-05, J-07.
    #[error(
        "{role} has the external reference {reference:?}; references outside the schema document are never fetched"
    )]
    ExternalReference {
        /// Which schema.
        role: SchemaRole,
        /// The `$ref` value.
        reference: String,
    },
    /// J-04.
    #[error("{role} is not a valid JSON Schema: {message}")]
    InvalidSchema {
        /// Which schema.
        role: SchemaRole,
        /// What the meta-schema check reported.
        message: String,
    },
    /// J-08.
    #[error("{role} is too complex: {message}")]
    SchemaTooComplex {
        /// Which schema.
        role: SchemaRole,
        /// Which bound it exceeds.
        message: String,
    },
    /// T-20.
    #[error("{0}")]
    InvalidHeaderDeclaration(String),
    /// The tool's own output guard does not compile.
    #[error("its output guard: {0}")]
    InvalidOutputGuard(String),
    /// The tool's rate limit or cost cannot work.
    #[error("its rate limit: {0}")]
    InvalidRateLimit(String),
}

/// The error type of toolwire-server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tool definition was rejected at registration.
    #[error("tool {tool:?} rejected: {rule}")]
    InvalidTool {
        /// The tool's name as given.
        tool: String,
        /// The rule it breaks.
        rule: ToolRule,
    },
    /// No tool has this name.
    #[error("no tool named {0:?}")]
    UnknownTool(String),
    /// No prompt, resource or template has this key.
    #[error("no {kind} {key:?}")]
    Unknown {
        /// `prompt`, `resource` or `resource template`.
        kind: &'static str,
        /// The name or URI.
        key: String,
    },
    /// A prompt, resource or template with this key is already registered.
    #[error("a {kind} {key:?} is already registered")]
    Duplicate {
        /// `prompt`, `resource` or `resource template`.
        kind: &'static str,
        /// The name or URI.
        key: String,
    },
    /// The server was built without this capability, so it cannot be added at runtime.
    #[error("the server does not offer {0}; enable it on the builder")]
    NotOffered(&'static str),
    /// An output guard's secret pattern does not compile.
    #[error("output guard: {0}")]
    InvalidOutputGuard(String),
    /// A rate limit cannot work (no calls, no burst, or a period too short).
    #[error("rate limit: {0}")]
    InvalidRateLimit(String),
    /// A resource template is not a supported RFC 6570 template.
    #[error("resource template {template:?}: {reason}")]
    InvalidTemplate {
        /// The template.
        template: String,
        /// What is wrong.
        reason: String,
    },
    /// A schema could not be generated for a typed tool.
    #[error("tool {tool:?}: cannot use the generated schema: {message}")]
    Schema {
        /// The tool.
        tool: String,
        /// Why.
        message: String,
    },
    /// A transport failed.
    #[error("transport I/O: {0}")]
    Io(#[from] std::io::Error),
    /// An environment variable the server reads is set to something it cannot use.
    #[error("{variable} is {problem}")]
    Environment {
        /// The variable.
        variable: &'static str,
        /// What is wrong with its value: `set but empty`, `not valid Unicode`.
        problem: &'static str,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
