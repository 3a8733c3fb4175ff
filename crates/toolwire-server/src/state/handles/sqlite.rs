//! Handles in a SQLite file (`rusqlite`, SQLite compiled in): they survive a restart, and
//! expired rows are purged.

use std::path::Path;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use rusqlite::{Connection, OptionalExtension as _, params};

use super::{BackendError, HandleBackend, HandleError, HandleRecord};

/// A [`HandleBackend`] in a SQLite database file. Writes are synchronous to disk
/// (`synchronous=FULL` in WAL mode): a handle that was handed out is there after a crash.
/// Several stores (kinds) and several processes may share one file.
#[derive(Clone)]
pub struct SqliteHandles {
    connection: Arc<Mutex<Connection>>,
}

impl std::fmt::Debug for SqliteHandles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SqliteHandles")
    }
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS toolwire_handles (
    id TEXT PRIMARY KEY NOT NULL,
    owner TEXT NOT NULL,
    value TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    expires_ms INTEGER NOT NULL,
    idle_until_ms INTEGER NOT NULL,
    version INTEGER NOT NULL
) STRICT;
CREATE INDEX IF NOT EXISTS toolwire_handles_expiry ON toolwire_handles (min(expires_ms, idle_until_ms));
";

impl SqliteHandles {
    /// Opens (or creates) the database at `path`, and its table. The database and the files
    /// SQLite keeps beside it (`-wal`, `-shm`, `-journal`) hold every handle's value: they are
    /// readable by their owner only (0600 on Unix), and existing ones others could read are
    /// made private, with a warning. (`:memory:` is a database in memory; a `file:` URI is
    /// opened as SQLite reads it, its mode left to SQLite.)
    ///
    /// Fails with [`HandleError::Backend`]: a `HandleError` is a `std::error::Error`, so `?`
    /// takes it into a `main`'s `Box<dyn Error>` (a bare [`BackendError`], a boxed trait
    /// object, does not go there).
    pub fn open(path: impl AsRef<Path>) -> Result<Self, HandleError> {
        Self::open_path(path.as_ref()).map_err(HandleError::Backend)
    }

    fn open_path(path: &Path) -> Result<Self, BackendError> {
        if is_a_file(path) {
            prepare_private(path)?;
        }
        let connection = Connection::open(path)?;
        connection.busy_timeout(std::time::Duration::from_secs(5))?;
        connection.pragma_update(None, "journal_mode", "WAL")?;
        connection.pragma_update(None, "synchronous", "FULL")?;
        connection.execute_batch(SCHEMA)?;
        Ok(SqliteHandles {
            connection: Arc::new(Mutex::new(connection)),
        })
    }

    /// Runs `work` on the connection off the async threads.
    fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce(&Connection) -> rusqlite::Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T, BackendError>> {
        let connection = self.connection.clone();
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let connection = connection
                    .lock()
                    .map_err(|_| "the SQLite connection was poisoned by a panic")?;
                work(&connection).map_err(BackendError::from)
            })
            .await
            .map_err(BackendError::from)?
        })
    }
}

/// Whether `path` names a database file (not `:memory:`, a temporary database or a URI).
fn is_a_file(path: &Path) -> bool {
    let text = path.to_string_lossy();
    !(text.is_empty() || text == ":memory:" || text.starts_with("file:"))
}

/// Creates the database file private before SQLite opens it, and makes an existing one and its
/// side files private. SQLite creates its `-wal`, `-shm` and `-journal` files itself with the
/// mode of the database file (`findCreateFileMode` and `unixOpenSharedMemory` in its Unix
/// VFS), so they are private from their creation too; a umask would not do, being the whole
/// process's.
fn prepare_private(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    match options.open(path) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    #[cfg(unix)]
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut file = path.as_os_str().to_owned();
        file.push(suffix);
        make_private(Path::new(&file))?;
    }
    Ok(())
}

/// Takes group and other permissions away from the file at `path`, if it exists and has any.
#[cfg(unix)]
fn make_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => meta,
        Ok(_) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let bits = meta.permissions().mode() & 0o777;
    if bits & 0o077 == 0 {
        return Ok(());
    }
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(bits & 0o700)) {
        Ok(()) => tracing::warn!(
            "{}: others could read it (mode {bits:04o}); it is now readable by its owner only",
            path.display()
        ),
        Err(e) => tracing::warn!(
            "{}: others can read it (mode {bits:04o}) and it cannot be made private: {e}",
            path.display()
        ),
    }
    Ok(())
}

fn u(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

impl HandleBackend for SqliteHandles {
    fn insert(&self, record: HandleRecord) -> BoxFuture<'_, Result<(), BackendError>> {
        self.run(move |c| {
            c.execute(
                "INSERT INTO toolwire_handles VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![
                    record.id,
                    record.owner,
                    record.value,
                    u(record.created_ms),
                    u(record.expires_ms),
                    u(record.idle_until_ms),
                    u(record.version)
                ],
            )
            .map(drop)
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Option<HandleRecord>, BackendError>> {
        let id = id.to_owned();
        self.run(move |c| {
            c.query_row(
                "SELECT id, owner, value, created_ms, expires_ms, idle_until_ms, version
                 FROM toolwire_handles WHERE id = ?1",
                [id],
                |row| {
                    Ok(HandleRecord {
                        id: row.get(0)?,
                        owner: row.get(1)?,
                        value: row.get(2)?,
                        created_ms: row.get::<_, i64>(3)?.max(0) as u64,
                        expires_ms: row.get::<_, i64>(4)?.max(0) as u64,
                        idle_until_ms: row.get::<_, i64>(5)?.max(0) as u64,
                        version: row.get::<_, i64>(6)?.max(0) as u64,
                    })
                },
            )
            .optional()
        })
    }

    fn replace(&self, record: HandleRecord) -> BoxFuture<'_, Result<bool, BackendError>> {
        self.run(move |c| {
            let changed = c.execute(
                "UPDATE toolwire_handles
                 SET value = ?2, expires_ms = ?3, idle_until_ms = ?4, version = ?5
                 WHERE id = ?1 AND version = ?6",
                params![
                    record.id,
                    record.value,
                    u(record.expires_ms),
                    u(record.idle_until_ms),
                    u(record.version),
                    u(record.version.saturating_sub(1))
                ],
            )?;
            Ok(changed == 1)
        })
    }

    fn remove<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, BackendError>> {
        let id = id.to_owned();
        self.run(move |c| {
            c.execute("DELETE FROM toolwire_handles WHERE id = ?1", [id])
                .map(|n| n == 1)
        })
    }

    fn purge(&self, now_ms: u64) -> BoxFuture<'_, Result<u64, BackendError>> {
        self.run(move |c| {
            c.execute(
                "DELETE FROM toolwire_handles WHERE min(expires_ms, idle_until_ms) <= ?1",
                [u(now_ms)],
            )
            .map(|n| n as u64)
        })
    }
}
