//! Reading a Redis store URL, `redis://[:PASSWORD@]HOST[:PORT][/DB]` or `rediss://…`, with
//! errors that never repeat the password. Without the `redis` feature only the error is here.

/// A store setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreUrlError {
    /// Not a `redis://` or `rediss://` URL.
    #[error(
        "the store {shown:?} is not a Redis URL: use redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB]"
    )]
    Scheme {
        /// The setting, up to its first `:`.
        shown: String,
    },
    /// A Redis URL with a missing host, a port or database that is not a number, or another
    /// flaw.
    #[error("the store URL {shown} is not usable: {problem}; use redis://HOST:PORT[/DB]")]
    Invalid {
        /// The URL without its password.
        shown: String,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// `rediss://` in a build without the `redis-tls` feature.
    #[error("the store URL {shown} asks for TLS, which this build lacks (the redis-tls feature)")]
    NoTls {
        /// The URL without its password.
        shown: String,
    },
}

/// The URL as it may be shown: its password replaced.
#[cfg(feature = "redis")]
fn shown(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.split(':').next().unwrap_or_default().to_owned();
    };
    match rest.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://…@{host}"),
        None => url.to_owned(),
    }
}

/// Checks `url` and makes a client for it (nothing connects yet).
#[cfg(feature = "redis")]
pub(crate) fn client(url: &str) -> Result<redis::Client, StoreUrlError> {
    let invalid = |problem| StoreUrlError::Invalid {
        shown: shown(url),
        problem,
    };
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| StoreUrlError::Scheme { shown: shown(url) })?;
    match scheme {
        "redis" => {}
        "rediss" if cfg!(feature = "redis-tls") => {}
        "rediss" => return Err(StoreUrlError::NoTls { shown: shown(url) }),
        _ => {
            return Err(StoreUrlError::Scheme {
                shown: scheme.chars().take(16).collect(),
            });
        }
    }
    let rest = rest.split(['?', '#']).next().unwrap_or_default();
    let authority_and_path = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    let (authority, db) = match authority_and_path.split_once('/') {
        Some((authority, db)) => (authority, Some(db)),
        None => (authority_and_path, None),
    };
    let (host, port) = match authority.strip_prefix('[') {
        // An IPv6 address: `[::1]:6379`.
        Some(v6) => {
            let (host, rest) = v6
                .split_once(']')
                .ok_or_else(|| invalid("an IPv6 address lacks its closing bracket"))?;
            (host, rest.strip_prefix(':'))
        }
        None => match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        },
    };
    if host.is_empty() {
        return Err(invalid("it names no host"));
    }
    if port.is_some_and(|p| p.parse::<u16>().map_or(true, |p| p == 0)) {
        return Err(invalid("the port is not a number from 1 to 65535"));
    }
    if db.is_some_and(|d| !d.is_empty() && d.parse::<u32>().is_err()) {
        return Err(invalid("the database is not a number"));
    }
    redis::Client::open(url).map_err(|_| invalid("the Redis client cannot read it"))
}

#[cfg(all(test, feature = "redis"))]
mod tests {
    use super::*;

    #[test]
    fn redis_urls_are_read_and_bad_ones_refused_without_showing_the_password() {
        for good in [
            "redis://127.0.0.1:6379",
            "redis://localhost",
            "redis://localhost:6380/2",
            "redis://:secret@cache.internal:6379/0",
            "redis://[::1]:6379",
            "redis://[::1]",
        ] {
            assert!(client(good).is_ok(), "{good}");
        }
        let refusals = [
            ("http://localhost:6379", "not a Redis URL"),
            ("localhost:6379", "not a Redis URL"),
            ("redis://", "names no host"),
            ("redis://:hunter2@:6379", "names no host"),
            ("redis://localhost:port", "port is not a number"),
            ("redis://localhost:0", "port is not a number"),
            ("redis://:hunter2@localhost:70000", "port is not a number"),
            ("redis://localhost:6379/db", "database is not a number"),
        ];
        for (bad, why) in refusals {
            let error = client(bad).expect_err(bad).to_string();
            assert!(error.contains(why), "{bad}: {error}");
            assert!(!error.contains("hunter2"), "{bad}: {error}");
        }
        let tls = client("rediss://localhost:6379");
        if cfg!(feature = "redis-tls") {
            assert!(tls.is_ok());
        } else {
            assert!(matches!(tls, Err(StoreUrlError::NoTls { .. })));
        }
    }
}
