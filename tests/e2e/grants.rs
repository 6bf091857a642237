//! A folder grant stays the folder it was when the tool was loaded. Two
//! tools of one server with nested grants: `a` may write the outer folder,
//! `b` may read a folder inside it. `a` moves `b`'s folder aside and puts a
//! link to a folder outside every grant (or a folder of its own) in its
//! place; `b`'s next call is refused, naming the grant, and never sees what
//! the link leads to.

use std::path::Path;

use serde_json::{Value, json};

use crate::common::{component, temp_dir};
use crate::entries::StdioServer;
use crate::mcp::path;

/// A server with `a` (the hostile tool, `shared` read-write at /shared)
/// and `b` (the fixture, `shared/ro` read-only at /ro).
fn server(dir: &Path) -> StdioServer {
    let config = dir.join("wasm-agent.toml");
    let shared = dir.join("shared");
    let text = format!(
        "[tools.a]\ncomponent = \"{}\"\ndirs = [\"{}:/shared:rw\"]\n\n\
         [tools.b]\ncomponent = \"{}\"\ndirs = [\"{}:/ro:ro\"]\n",
        path(&component("hostile_tool")),
        path(&shared),
        path(&component("fixture_tool")),
        path(&shared.join("ro")),
    );
    std::fs::write(&config, text).unwrap();
    StdioServer::start(&["--config".into(), path(&config)], Vec::new())
}

/// The text of a result, and whether it is an error.
fn text(result: &Value) -> (String, bool) {
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    (text.to_string(), result["isError"] == true)
}

#[test]
fn a_grant_moved_or_linked_elsewhere_by_another_tool_is_refused() {
    for target in ["../outside", "mine"] {
        let dir = temp_dir();
        let shared = dir.path().join("shared");
        std::fs::create_dir_all(shared.join("ro")).unwrap();
        std::fs::write(shared.join("ro/kept.txt"), "the granted file").unwrap();
        // Outside every grant; and a folder of `a`'s own, inside its grant.
        std::fs::create_dir_all(dir.path().join("outside")).unwrap();
        std::fs::write(dir.path().join("outside/kept.txt"), "a secret").unwrap();
        std::fs::create_dir_all(shared.join("mine")).unwrap();
        std::fs::write(shared.join("mine/kept.txt"), "planted by a").unwrap();

        let mut server = server(dir.path());
        let read = json!({"path": "/ro/kept.txt"});
        let (before, failed) = text(&server.call("read_path", read.clone()));
        assert_eq!((before.as_str(), failed), ("the granted file", false));

        let redirect = json!({"path": "/shared/ro", "target": target});
        let (redirected, failed) = text(&server.call("redirect", redirect));
        assert!(
            !failed,
            "{target}: the tool could not redirect: {redirected}"
        );
        // The link works as a link: read from the host, it leads elsewhere.
        let through_link = std::fs::read_to_string(shared.join("ro/kept.txt")).unwrap();
        assert_ne!(through_link, "the granted file");

        let (after, failed) = text(&server.call("read_path", read));
        assert!(failed, "{target}: {after}");
        assert!(
            after.contains("no longer the folder the policy named"),
            "{target}: {after}"
        );
        assert!(after.contains("capability_denied"), "{target}: {after}");
        assert!(
            !after.contains(&through_link),
            "{target}: the linked folder leaked: {after}"
        );
    }
}
