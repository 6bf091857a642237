//! Unit tests of the parent module.

use std::sync::Arc;

use super::schema::{SCHEMA_V1, SCHEMA_VERSION};
use super::*;

fn temp_store_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data").join("sessions.db");
    (dir, path)
}

fn backend_message(result: Result<SqliteSessionStore, SessionError>) -> String {
    match result {
        Err(SessionError::Backend {
            location,
            what,
            source,
        }) => format!("{location}: {what}: {source}"),
        other => panic!("expected a backend error, got {other:?}"),
    }
}

fn scope(session: &str, component: &str) -> StateScope {
    StateScope {
        owner: Owner::default(),
        session: session.to_string(),
        component: Arc::from(component),
    }
}

fn count_keys(store: &SqliteSessionStore, session_id: &str, scope: &str) -> i64 {
    store
        .lock()
        .query_row(
            "SELECT COUNT(*) FROM state WHERE session_id = ?1 AND scope = ?2",
            params![session_id, scope],
            |row| row.get(0),
        )
        .unwrap()
}

#[tokio::test]
async fn does_what_every_store_does() {
    use wasm_agent_session::conformance;
    let store = SqliteSessionStore::in_memory()
        .unwrap()
        .with_quotas(conformance::QUOTAS);
    let store: Arc<dyn SessionStore> = Arc::new(store);
    conformance::isolation(&*store, "run").await;
    conformance::quotas(&*store, "run").await;
    conformance::history(&*store, "run").await;
    conformance::protocol_sessions(&*store, "run").await;
    conformance::exchange(&*store, "run").await;
    conformance::concurrent_quota(store, "run").await;
    let store = SqliteSessionStore::in_memory()
        .unwrap()
        .with_quotas(conformance::TOTALS_QUOTAS);
    conformance::totals(&store, "run").await;
    let store = SqliteSessionStore::in_memory()
        .unwrap()
        .with_quotas(conformance::IDLE_QUOTAS);
    conformance::idle_sessions(&store, "run").await;
}

#[test]
fn state_survives_reopening_the_file() {
    let (_dir, path) = temp_store_path();
    {
        let store = SqliteSessionStore::open(&path).unwrap();
        store
            .set_blocking(&scope("s1", "calc"), "ans", "42".into())
            .unwrap();
    }
    let store = SqliteSessionStore::open(&path).unwrap();
    assert_eq!(
        store
            .get_blocking(&scope("s1", "calc"), "ans")
            .unwrap()
            .as_deref(),
        Some("42")
    );
    let version: i64 = store
        .lock()
        .pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap();
    assert_eq!(version, SCHEMA_VERSION);
    let mode: String = store
        .lock()
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn two_stores_on_one_file_see_each_others_writes() {
    let (_dir, path) = temp_store_path();
    let first = SqliteSessionStore::open(&path).unwrap();
    let second = SqliteSessionStore::open(&path).unwrap();
    first
        .set_blocking(&scope("s", "c"), "a", "1".into())
        .unwrap();
    assert_eq!(
        second
            .get_blocking(&scope("s", "c"), "a")
            .unwrap()
            .as_deref(),
        Some("1")
    );
    second
        .set_blocking(&scope("s", "c"), "a", "2".into())
        .unwrap();
    assert_eq!(
        first
            .get_blocking(&scope("s", "c"), "a")
            .unwrap()
            .as_deref(),
        Some("2")
    );
    second
        .save_history_blocking(&Owner::default(), "s", "[]")
        .unwrap();
    assert_eq!(
        first
            .load_history_blocking(&Owner::default(), "s")
            .unwrap()
            .as_deref(),
        Some("[]")
    );
}

#[test]
fn default_limit_matches_the_in_memory_store() {
    let store = SqliteSessionStore::in_memory().unwrap();
    for i in 0..wasm_agent_session::DEFAULT_MAX_KEYS {
        store
            .set_blocking(&scope("s", "c"), &i.to_string(), "1".into())
            .unwrap();
    }
    assert!(matches!(
        store.set_blocking(&scope("s", "c"), "one-more", "1".into()),
        Err(SessionError::TooManyKeys { max: 1024 })
    ));
}

#[test]
fn history_round_trips_per_session_and_survives_reopening() {
    let (_dir, path) = temp_store_path();
    {
        let store = SqliteSessionStore::open(&path).unwrap();
        assert_eq!(
            store
                .load_history_blocking(&Owner::default(), "s1")
                .unwrap(),
            None
        );
        store
            .save_history_blocking(&Owner::default(), "s1", r#"[{"role":"user"}]"#)
            .unwrap();
        store
            .save_history_blocking(
                &Owner::default(),
                "s1",
                r#"[{"role":"user"},{"role":"assistant"}]"#,
            )
            .unwrap();
        store
            .save_history_blocking(&Owner::default(), "s2", "[]")
            .unwrap();
    }
    let store = SqliteSessionStore::open(&path).unwrap();
    assert_eq!(
        store
            .load_history_blocking(&Owner::default(), "s1")
            .unwrap()
            .as_deref(),
        Some(r#"[{"role":"user"},{"role":"assistant"}]"#)
    );
    assert_eq!(
        store
            .load_history_blocking(&Owner::default(), "s2")
            .unwrap()
            .as_deref(),
        Some("[]")
    );
    assert_eq!(
        store
            .load_history_blocking(&Owner::default(), "s3")
            .unwrap(),
        None
    );
}

#[cfg(unix)]
#[test]
fn new_directory_and_files_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, path) = temp_store_path();
    let store = SqliteSessionStore::open(&path).unwrap();
    store
        .set_blocking(&scope("s", "c"), "k", "secret".into())
        .unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&dir.path().join("data")), 0o700);
    assert_eq!(mode(&path), 0o600);
    // SQLite copies the main file's mode to its side files.
    assert_eq!(mode(&path.with_extension("db-wal")), 0o600);
}

#[test]
fn refuses_a_file_that_is_not_sqlite() {
    let (_dir, path) = temp_store_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let text = "these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &text).unwrap();
    let message = backend_message(SqliteSessionStore::open(&path));
    assert!(
        message.starts_with(&path.display().to_string()),
        "{message}"
    );
    assert!(message.contains("not a SQLite database"), "{message}");
    // Refusing must not damage the file.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn refuses_another_programs_database() {
    let (_dir, path) = temp_store_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    Connection::open(&path)
        .unwrap()
        .execute_batch("CREATE TABLE contacts (name TEXT)")
        .unwrap();
    let message = backend_message(SqliteSessionStore::open(&path));
    assert!(
        message.starts_with(&path.display().to_string()),
        "{message}"
    );
    assert!(message.contains("some other program"), "{message}");
    // Refused untouched: not even switched to WAL.
    let mode: String = Connection::open(&path)
        .unwrap()
        .pragma_query_value(None, "journal_mode", |row| row.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
}

#[test]
fn refuses_a_newer_schema_version() {
    let (_dir, path) = temp_store_path();
    drop(SqliteSessionStore::open(&path).unwrap());
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
        .unwrap();
    let message = backend_message(SqliteSessionStore::open(&path));
    assert!(
        message.starts_with(&path.display().to_string()),
        "{message}"
    );
    assert!(message.contains("newer wasm-agent"), "{message}");
    let newer = format!("version {}", SCHEMA_VERSION + 1);
    assert!(message.contains(&newer), "{message}");
}

#[test]
fn version_1_state_moves_under_its_alias() {
    let (_dir, path) = temp_store_path();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(SCHEMA_V1).unwrap();
    conn.execute("INSERT INTO state VALUES ('s', 'calc', 'ans', '42', 0)", [])
        .unwrap();
    conn.pragma_update(None, "user_version", 1).unwrap();
    drop(conn);
    let store = SqliteSessionStore::open(&path).unwrap();
    assert_eq!(
        store
            .get_blocking(&scope("s", "alias:calc"), "ans")
            .unwrap()
            .as_deref(),
        Some("42")
    );
    assert_eq!(
        store.get_blocking(&scope("s", "calc"), "ans").unwrap(),
        None
    );
    drop(store);
    // Opening again does not migrate twice.
    let store = SqliteSessionStore::open(&path).unwrap();
    assert_eq!(
        store
            .get_blocking(&scope("s", "alias:calc"), "ans")
            .unwrap()
            .as_deref(),
        Some("42")
    );
}

#[test]
fn a_broken_store_fails_reads_and_writes() {
    let (_dir, path) = temp_store_path();
    let store = SqliteSessionStore::open(&path).unwrap();
    store
        .set_blocking(&scope("s", "c"), "k", "1".into())
        .unwrap();
    store.lock().execute_batch("DROP TABLE state").unwrap();
    let read = store.get_blocking(&scope("s", "c"), "k").unwrap_err();
    assert!(
        read.to_string().contains("cannot read session state"),
        "{read}"
    );
    match store.set_blocking(&scope("s", "c"), "k", "2".into()) {
        Err(SessionError::Backend {
            location,
            what,
            source,
        }) => {
            let message = format!("{location}: {what}: {source}");
            assert!(
                message.starts_with(&path.display().to_string()),
                "{message}"
            );
            assert!(message.contains("cannot write session state"), "{message}");
        }
        other => panic!("expected a backend error, got {other:?}"),
    }
}

#[test]
fn concurrent_writers_lose_nothing() {
    let (_dir, path) = temp_store_path();
    let shared = Arc::new(SqliteSessionStore::open(&path).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let shared = Arc::clone(&shared);
            let path = path.clone();
            std::thread::spawn(move || {
                // One connection shared through the mutex, and one of the
                // thread's own, as a second process would have.
                let own = SqliteSessionStore::open(&path).unwrap();
                for i in 0..25 {
                    shared
                        .set_blocking(&scope("s", "c"), &format!("shared-{t}-{i}"), i.to_string())
                        .unwrap();
                    own.set_blocking(&scope("s", "c"), &format!("own-{t}-{i}"), i.to_string())
                        .unwrap();
                    own.set_blocking(&scope("s", "c"), "contended", t.to_string())
                        .unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    assert_eq!(count_keys(&shared, "s", "c"), 4 * 25 * 2 + 1);
    assert_eq!(
        shared
            .get_blocking(&scope("s", "c"), "own-3-24")
            .unwrap()
            .as_deref(),
        Some("24")
    );
}

#[test]
fn processes_racing_to_create_the_file_all_succeed() {
    let (_dir, path) = temp_store_path();
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = SqliteSessionStore::open(&path).unwrap();
                store
                    .set_blocking(&scope("s", "c"), &t.to_string(), "1".into())
                    .unwrap();
                store
                    .save_history_blocking(&Owner::default(), &t.to_string(), "[]")
                    .unwrap();
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    let store = SqliteSessionStore::open(&path).unwrap();
    assert_eq!(count_keys(&store, "s", "c"), 8);
    assert_eq!(
        store
            .load_history_blocking(&Owner::default(), "7")
            .unwrap()
            .as_deref(),
        Some("[]")
    );
}

#[test]
fn the_key_limit_holds_across_concurrent_stores() {
    let (_dir, path) = temp_store_path();
    drop(SqliteSessionStore::open(&path).unwrap());
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let path = path.clone();
            std::thread::spawn(move || {
                let store = SqliteSessionStore::open(&path)
                    .unwrap()
                    .with_quotas(Quotas {
                        max_keys: 10,
                        ..Quotas::default()
                    });
                (0..10)
                    .filter(|i| {
                        store
                            .set_blocking(&scope("s", "c"), &format!("{t}-{i}"), "1".into())
                            .is_err()
                    })
                    .count()
            })
        })
        .collect();
    let refused: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(refused, 30);
    let store = SqliteSessionStore::open(&path).unwrap();
    assert_eq!(count_keys(&store, "s", "c"), 10);
}

#[test]
fn default_path_prefers_the_explicit_data_dir_then_xdg_then_home() {
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| OsString::from(value))
        }
    };
    assert_eq!(
        default_path_from(env(&[
            ("WASM_AGENT_DATA_DIR", "/data"),
            ("XDG_DATA_HOME", "/xdg"),
            ("HOME", "/home/u"),
        ])),
        Some(PathBuf::from("/data/sessions.db"))
    );
    assert_eq!(
        default_path_from(env(&[("XDG_DATA_HOME", "/xdg"), ("HOME", "/home/u")])),
        Some(PathBuf::from("/xdg/wasm-agent/sessions.db"))
    );
    let home = Some(PathBuf::from("/home/u/.local/share/wasm-agent/sessions.db"));
    assert_eq!(default_path_from(env(&[("HOME", "/home/u")])), home);
    // Empty and relative values are ignored, as the XDG spec says.
    assert_eq!(
        default_path_from(env(&[
            ("WASM_AGENT_DATA_DIR", ""),
            ("XDG_DATA_HOME", "relative"),
            ("HOME", "/home/u"),
        ])),
        home
    );
    assert_eq!(default_path_from(env(&[])), None);
}
