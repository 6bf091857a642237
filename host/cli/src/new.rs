//! `wasm-agent new NAME --lang rust|python|js`: a tool project from the
//! templates shipped in this binary, which builds as it is and can be called
//! with `wasm-agent call` right away.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::ValueEnum;

/// The languages a project can be made in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Lang {
    /// Rust with the `wasm-agent-guest` SDK (cargo, wasm32-wasip2).
    Rust,
    /// Python with `wasm_agent_tool` (componentize-py).
    Python,
    /// JavaScript with `wasm-agent-tool.js` (componentize-qjs).
    Js,
}

impl Lang {
    fn label(self) -> &'static str {
        match self {
            Lang::Rust => "Rust",
            Lang::Python => "Python",
            Lang::Js => "JavaScript",
        }
    }
}

/// One file of a template: where it goes and what it holds.
type File = (&'static str, &'static str);

/// The contract every tool is built against.
const WIT: File = ("wit/world.wit", include_str!("../../../wit/world.wit"));

const RUST: &[File] = &[
    ("Cargo.toml", include_str!("../templates/rust/Cargo.toml")),
    ("src/lib.rs", include_str!("../templates/rust/src/lib.rs")),
    ("README.md", include_str!("../templates/rust/README.md")),
    (".gitignore", include_str!("../templates/rust/.gitignore")),
];

const PYTHON: &[File] = &[
    ("app.py", include_str!("../templates/python/app.py")),
    (
        "wasm_agent_tool.py",
        include_str!("../../../guest-sdk/python/wasm_agent_tool.py"),
    ),
    (
        "wasm_agent_schema.py",
        include_str!("../../../guest-sdk/python/wasm_agent_schema.py"),
    ),
    ("build.sh", include_str!("../templates/python/build.sh")),
    (
        "requirements.txt",
        include_str!("../../../guest-sdk/python/requirements.txt"),
    ),
    ("README.md", include_str!("../templates/python/README.md")),
    (".gitignore", include_str!("../templates/python/.gitignore")),
    WIT,
];

const JS: &[File] = &[
    ("app.js", include_str!("../templates/js/app.js")),
    (
        "wasm-agent-tool.js",
        include_str!("../../../guest-sdk/js/wasm-agent-tool.js"),
    ),
    ("package.json", include_str!("../templates/js/package.json")),
    ("README.md", include_str!("../templates/js/README.md")),
    (".gitignore", include_str!("../templates/js/.gitignore")),
    WIT,
    (
        "wit/js-tool.wit",
        include_str!("../../../guest-sdk/js/wit/js-tool.wit"),
    ),
    (
        "wit/deps/wasi-random/random.wit",
        include_str!("../../../guest-sdk/js/wit/deps/wasi-random/random.wit"),
    ),
];

/// The Rust SDK of the checkout this binary was built from.
const BUILT_FROM_SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../guest-sdk");

/// Creates the project and prints how to build and call it.
pub fn new_project(
    name: &str,
    lang: Lang,
    dir: Option<PathBuf>,
    sdk: Option<PathBuf>,
) -> anyhow::Result<ExitCode> {
    if !valid_project_name(name) {
        bail!(
            "{name:?} cannot name a tool project: start with a letter, then use \
             letters, digits, '-' or '_' (at most 64)"
        );
    }
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    if dir.is_file() || dir.is_symlink() {
        bail!("{} already exists and is not a folder", dir.display());
    }
    if dir.is_dir() && std::fs::read_dir(&dir).map_or(true, |mut d| d.next().is_some()) {
        bail!("{} already exists and is not empty", dir.display());
    }
    let crate_name = name.replace('-', "_");
    let sdk = match (lang, sdk) {
        (Lang::Rust, sdk) => rust_sdk(sdk)?,
        (_, Some(_)) => bail!("--sdk applies to --lang rust only"),
        (_, None) => String::new(),
    };
    let files = match lang {
        Lang::Rust => RUST,
        Lang::Python => PYTHON,
        Lang::Js => JS,
    };
    for (path, text) in files {
        let text = text
            .replace("{{name}}", name)
            .replace("{{crate}}", &crate_name)
            .replace("{{sdk}}", &sdk);
        write(&dir.join(path), &text)?;
    }
    println!(
        "created {} ({} tool project)\n",
        dir.display(),
        lang.label()
    );
    println!("{}", next_steps(lang, &dir, &crate_name));
    Ok(ExitCode::SUCCESS)
}

fn valid_project_name(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= 64
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Where the Rust project finds `wasm-agent-guest`: `--sdk`, or the checkout
/// this binary was built from.
fn rust_sdk(sdk: Option<PathBuf>) -> anyhow::Result<String> {
    let given = sdk.is_some();
    let sdk = sdk.unwrap_or_else(|| PathBuf::from(BUILT_FROM_SDK));
    let manifest = sdk.join("Cargo.toml");
    let is_sdk = std::fs::read_to_string(&manifest)
        .is_ok_and(|text| text.contains("name = \"wasm-agent-guest\""));
    if !is_sdk {
        let hint = if given {
            "--sdk must name the guest-sdk folder of a wasm-agent checkout"
        } else {
            "this binary was built elsewhere; pass --sdk PATH/TO/wasm-agent/guest-sdk"
        };
        bail!("no wasm-agent-guest crate at {}: {hint}", sdk.display());
    }
    let sdk = sdk
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", sdk.display()))?;
    Ok(sdk.to_string_lossy().replace('\\', "/"))
}

/// Writes a new file; an existing one (or a symlink) is never overwritten.
fn write(path: &Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .with_context(|| format!("cannot create {}", parent.display()))?;
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .with_context(|| format!("cannot write {}", path.display()))?;
    #[cfg(unix)]
    if path.extension().is_some_and(|e| e == "sh") {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))?;
    }
    Ok(())
}

fn next_steps(lang: Lang, dir: &Path, crate_name: &str) -> String {
    let cd = format!("cd {:?}", dir.display().to_string());
    match lang {
        Lang::Rust => format!(
            "  {cd}\n  cargo build --release --target wasm32-wasip2\n  \
             wasm-agent call target/wasm32-wasip2/release/{crate_name}.wasm greet '{{\"name\": \"Ada\"}}'"
        ),
        Lang::Python => format!(
            "  {cd}\n  python3 -m venv .venv && . .venv/bin/activate\n  \
             pip install -r requirements.txt\n  ./build.sh\n  \
             wasm-agent call {crate_name}.wasm word_stats '{{\"text\": \"one two two\"}}'"
        ),
        Lang::Js => format!(
            "  {cd}\n  npm install\n  npm run build\n  \
             wasm-agent call {crate_name}.wasm slugify '{{\"text\": \"Hello, World!\"}}'"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_js_template_pins_what_the_example_is_built_with() {
        let pins = |text: &str| -> serde_json::Value {
            serde_json::from_str::<serde_json::Value>(text).expect("package.json")
                ["devDependencies"]
                .clone()
        };
        let template = include_str!("../templates/js/package.json").replace("{{name}}", "t");
        let example = pins(include_str!("../../../example-tools/mdtable/package.json"));
        let template = pins(&template);
        let template = template.as_object().expect("pins");
        assert!(!template.is_empty());
        // The example's packages also build run_javascript (componentize-js).
        for (package, version) in template {
            assert_eq!(Some(version), example.get(package), "{package}");
        }
    }

    #[test]
    fn project_names_must_suit_every_toolchain() {
        assert!(valid_project_name("my-tool_2"));
        for bad in ["", "2tools", "my tool", "../x", "a/b", &"x".repeat(65)] {
            assert!(!valid_project_name(bad), "{bad:?}");
        }
    }
}
