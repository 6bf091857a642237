//! A start lists the tools from the listings kept at the components' last
//! load: at once, before any code is mapped; calls wait for the load, and
//! run on what it lists.

use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::common::{component, temp_dir};
use wasm_agent::host::{DEFAULT_CONCURRENCY, DEFAULT_KEPT_INSTANCES};
use wasm_agent::sandbox::{CacheOutcome, CompileCache, Sandbox};
use wasm_agent::{CallContext, ComponentSource, HostError, LoadOptions, LoadReport, Policy};
use wasm_agent::{ToolHost, ToolInfo};

fn host_on(cache: &Path) -> ToolHost {
    ToolHost::builder().cache_dir(cache).build().unwrap()
}

fn calculator() -> Vec<(ComponentSource, LoadOptions)> {
    vec![(
        ComponentSource::File(component("calculator")),
        LoadOptions::new(Policy::default()),
    )]
}

/// The files of one kind (`cwasm`, `json`) in the cache folder.
fn entries(cache: &Path, extension: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == extension))
        .collect()
}

/// Loads `components` on a new host over `cache`; `at_listing` runs when
/// the tools are listed, and sees what is on offer then.
async fn start(
    cache: &Path,
    components: Vec<(ComponentSource, LoadOptions)>,
    at_listing: impl FnOnce(&ToolHost) + Send,
) -> (ToolHost, Result<Vec<LoadReport>, HostError>) {
    let host = host_on(cache);
    let listed = host.clone();
    let reports = host
        .load_all_listing(components, move || at_listing(&listed))
        .await;
    (host, reports)
}

/// Keeps, as the cache's owner could, a listing of one tool `calculate`
/// with the description "An old description." and `parameters`, for the
/// component whose SHA-256 is `digest`.
fn keep(cache: &Path, digest: &[u8; 32], parameters: &str) {
    let sandbox = Sandbox::new(
        DEFAULT_CONCURRENCY,
        DEFAULT_KEPT_INSTANCES,
        true,
        CompileCache::new(Some(cache.to_path_buf())),
    )
    .unwrap();
    let listing = serde_json::json!({
        "interpreter": false, "uses_state": false,
        "tools": [{"name": "calculate", "description": "An old description.",
                   "parameters": parameters,
                   "annotations": {"read_only": true, "destructive": false,
                                   "idempotent": true, "open_world": false}}]
    });
    sandbox.keep_listing(digest, listing.to_string().as_bytes());
}

fn calculate(tools: &[ToolInfo]) -> Option<&ToolInfo> {
    tools.iter().find(|tool| tool.name == "calculate")
}

#[tokio::test]
async fn a_start_lists_from_the_kept_listing_before_the_code_is_mapped() {
    let cache = temp_dir();
    let (_, first) = start(cache.path(), calculator(), |_| ()).await;
    assert_eq!(first.unwrap()[0].cache, CacheOutcome::Compiled);
    assert_eq!(entries(cache.path(), "json").len(), 1, "a listing is kept");

    // At the next start the listing comes before the load: with the
    // compiled code removed while listing, the load has to compile again.
    let seen = Arc::new(Mutex::new(None));
    let call = Arc::new(Mutex::new(None));
    let (host, reports) = start(cache.path(), calculator(), {
        let (seen, call) = (seen.clone(), call.clone());
        let cache = cache.path().to_path_buf();
        move |host| {
            *seen.lock().unwrap() = calculate(&host.tools()).cloned();
            for entry in entries(&cache, "cwasm") {
                std::fs::remove_file(entry).unwrap();
            }
            // A call made now waits for the load (on this one-thread
            // runtime it starts at the load's first await).
            let host = host.clone();
            *call.lock().unwrap() = Some(tokio::spawn(async move {
                host.call("calculate", r#"{"expression":"6*7"}"#, &CallContext::new())
                    .await
            }));
        }
    })
    .await;
    let reports = reports.unwrap();
    assert_eq!(reports[0].cache, CacheOutcome::Compiled, "{reports:?}");
    assert!(!reports[0].listing_changed);
    let seen = seen
        .lock()
        .unwrap()
        .clone()
        .expect("listed before the load");
    assert_eq!(
        Some(&seen),
        calculate(&host.tools()),
        "the same tool as loaded"
    );
    let call = call.lock().unwrap().take().unwrap();
    let result = call.await.unwrap();
    assert_eq!(result.content.trim(), "42", "{result:?}");
}

#[tokio::test]
async fn a_listing_that_differs_from_the_kept_one_replaces_it_and_says_so() {
    let cache = temp_dir();
    let (_, first) = start(cache.path(), calculator(), |_| ()).await;
    first.unwrap();
    // The cache's owner keeps another listing for the same code (as a
    // component whose listing depends on its policy would).
    let digest = {
        use sha2::Digest;
        sha2::Sha256::digest(std::fs::read(component("calculator")).unwrap())
    };
    keep(cache.path(), &digest.into(), "{\"type\":\"object\"}");

    let seen = Arc::new(Mutex::new(None));
    let (host, reports) = start(cache.path(), calculator(), {
        let seen = seen.clone();
        move |host| *seen.lock().unwrap() = calculate(&host.tools()).cloned()
    })
    .await;
    let seen = seen.lock().unwrap().clone().unwrap();
    assert_eq!(seen.description, "An old description.");
    assert!(reports.unwrap()[0].listing_changed);
    let loaded = calculate(&host.tools()).unwrap().clone();
    assert_ne!(loaded.description, seen.description);

    // What the load listed is kept for the next start.
    let seen = Arc::new(Mutex::new(None));
    let (_, reports) = start(cache.path(), calculator(), {
        let seen = seen.clone();
        move |host| *seen.lock().unwrap() = calculate(&host.tools()).cloned()
    })
    .await;
    assert!(!reports.unwrap()[0].listing_changed);
    assert_eq!(seen.lock().unwrap().as_ref(), Some(&loaded));
}

#[tokio::test]
async fn arguments_checked_against_a_kept_listing_are_checked_again_once_loaded() {
    let cache = temp_dir();
    start(cache.path(), calculator(), |_| ()).await.1.unwrap();
    let digest = {
        use sha2::Digest;
        sha2::Sha256::digest(std::fs::read(component("calculator")).unwrap())
    };
    keep(cache.path(), &digest.into(), "{\"type\":\"object\"}");

    // Checked and pinned while offered from the kept listing, whose schema
    // takes any object; run once loaded, on the component's own schema.
    let call = Arc::new(Mutex::new(None));
    let (_, reports) = start(cache.path(), calculator(), {
        let call = call.clone();
        move |host| {
            let arguments = serde_json::json!({"formula": "6*7"});
            let pinned = host.check_for_call("calculate", &arguments).unwrap();
            let host = host.clone();
            *call.lock().unwrap() = Some(tokio::spawn(async move {
                host.call_pinned("calculate", &arguments, &pinned, &CallContext::new())
                    .await
            }));
        }
    })
    .await;
    assert!(reports.unwrap()[0].listing_changed);
    let call = call.lock().unwrap().take().unwrap();
    let error = call.await.unwrap().error.expect("refused");
    assert_eq!(error.kind, wasm_agent::ErrorKind::InvalidArguments);
    assert!(
        error
            .message
            .contains("do not match the schema of calculate"),
        "checked by the host, not left to the tool: {error:?}"
    );
}

#[tokio::test]
async fn a_kept_listing_changed_behind_the_cache_is_not_used() {
    let cache = temp_dir();
    let (_, first) = start(cache.path(), calculator(), |_| ()).await;
    first.unwrap();
    let [listing] = entries(cache.path(), "json").try_into().unwrap();
    let text = std::fs::read_to_string(&listing).unwrap();
    let forged = text.replacen("\"description\":\"", "\"description\":\"Forged. ", 1);
    assert_ne!(forged, text);
    std::fs::write(&listing, forged).unwrap();

    let seen = Arc::new(Mutex::new(None));
    let (_, reports) = start(cache.path(), calculator(), {
        let seen = seen.clone();
        move |host| *seen.lock().unwrap() = calculate(&host.tools()).cloned()
    })
    .await;
    let reports = reports.unwrap();
    // Listed only once loaded: from the cache's compiled code, with what
    // the component listed.
    assert_eq!(reports[0].cache, CacheOutcome::Hit);
    assert!(!reports[0].listing_changed);
    let seen = seen.lock().unwrap().clone().unwrap();
    assert!(!seen.description.contains("Forged"), "{seen:?}");
}

#[tokio::test]
async fn calls_waiting_for_a_component_that_fails_to_load_are_told_it_is_not_there() {
    let cache = temp_dir();
    let (_folder, path) = settled_copy("calculator");
    let source = || file_source(&path);
    start(cache.path(), source(), |_| ()).await.1.unwrap();

    let call = Arc::new(Mutex::new(None));
    let (host, reports) = start(cache.path(), source(), {
        let (call, path) = (call.clone(), path.clone());
        move |host| {
            assert!(
                calculate(&host.tools()).is_some(),
                "listed from the kept listing"
            );
            std::fs::remove_file(&path).unwrap();
            let host = host.clone();
            *call.lock().unwrap() = Some(tokio::spawn(async move {
                host.call("calculate", r#"{"expression":"1"}"#, &CallContext::new())
                    .await
            }));
        }
    })
    .await;
    let error = reports.unwrap_err();
    assert!(matches!(error, HostError::Read { .. }), "{error}");
    assert!(host.tools().is_empty(), "the offer is withdrawn");
    let call = call.lock().unwrap().take().unwrap();
    let result = call.await.unwrap();
    let error = result.error.expect("no tool ran");
    assert_eq!(error.kind, wasm_agent::ErrorKind::UnknownTool, "{error:?}");
}

/// A copy of component `name` in a folder of its own, its times settled
/// (a file's digest is remembered only then), and where it is.
fn settled_copy(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let folder = temp_dir();
    let path = folder.path().join("tool.wasm");
    std::fs::copy(component(name), &path).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2100));
    (folder, path)
}

fn file_source(path: &Path) -> Vec<(ComponentSource, LoadOptions)> {
    vec![(
        ComponentSource::File(path.to_path_buf()),
        LoadOptions::new(Policy::default()),
    )]
}

#[tokio::test]
async fn a_call_pinned_while_offered_never_runs_other_code_than_it_was_checked_for() {
    let cache = temp_dir();
    let (_folder, path) = settled_copy("echo_tool");
    start(cache.path(), file_source(&path), |_| ())
        .await
        .1
        .unwrap();

    // Checked and pinned against the offer; the file then changes to
    // another component offering a tool of the same name.
    let call = Arc::new(Mutex::new(None));
    let (host, reports) = start(cache.path(), file_source(&path), {
        let (call, path) = (call.clone(), path.clone());
        move |host| {
            let arguments = serde_json::json!({"text": "hi"});
            let pinned = host.check_for_call("echo", &arguments).unwrap();
            std::fs::copy(component("fixture_tool"), &path).unwrap();
            let host = host.clone();
            *call.lock().unwrap() = Some(tokio::spawn(async move {
                host.call_pinned("echo", &arguments, &pinned, &CallContext::new())
                    .await
            }));
        }
    })
    .await;
    assert!(reports.unwrap()[0].listing_changed);
    assert!(host.tool("echo").is_some(), "the new component offers echo");
    let call = call.lock().unwrap().take().unwrap();
    let error = call.await.unwrap().error.expect("refused");
    assert_eq!(error.kind, wasm_agent::ErrorKind::Denied, "{error:?}");
    assert!(error.message.contains("was reloaded"), "{error:?}");
}

#[tokio::test]
async fn a_call_cancelled_while_its_component_loads_ends_cancelled() {
    let cache = temp_dir();
    start(cache.path(), calculator(), |_| ()).await.1.unwrap();
    let call = Arc::new(Mutex::new(None));
    let (_, reports) = start(cache.path(), calculator(), {
        let call = call.clone();
        move |host| {
            let context = CallContext::new();
            context.cancellation.cancel();
            let host = host.clone();
            *call.lock().unwrap() = Some(tokio::spawn(async move {
                host.call("calculate", r#"{"expression":"1"}"#, &context)
                    .await
            }));
        }
    })
    .await;
    reports.unwrap();
    let call = call.lock().unwrap().take().unwrap();
    let error = call.await.unwrap().error.expect("cancelled");
    assert_eq!(error.kind, wasm_agent::ErrorKind::Cancelled, "{error:?}");
}
