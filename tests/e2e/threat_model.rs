//! Every test `docs/threat-model.md` names as holding a promise exists.

use crate::common::root;

#[test]
fn every_test_the_threat_model_names_exists() {
    let page = std::fs::read_to_string(root().join("docs/threat-model.md")).unwrap();
    let python: String = std::fs::read_dir(root().join("tests/mcp"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "py"))
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect();
    let mut named = 0;
    let mut missing = Vec::new();
    for quoted in page.split('`').skip(1).step_by(2) {
        let found = if let Some((file, test)) = quoted.split_once("::") {
            let source = std::fs::read_to_string(root().join(format!("tests/e2e/{file}.rs")));
            source.is_ok_and(|source| source.contains(&format!("fn {test}(")))
        } else if quoted.starts_with("test_") {
            python.contains(&format!("def {quoted}("))
        } else {
            continue;
        };
        named += 1;
        if !found {
            missing.push(quoted);
        }
    }
    assert!(named > 40, "only {named} tests named");
    assert!(missing.is_empty(), "no such tests: {missing:?}");
}
