//! A one-tool component around a core module written in WAT, for tests
//! that need a guest doing exactly one thing.
//!
//! The core module `$m` imports `host.cancelled` (`(func (result i32))`) and
//! exports `memory`, `cabi_realloc`, `list-tools` (the address of a list of
//! tool specs) and `call` (the lowered `call`: 16 `i32`s in, the address of
//! its result out).

/// `cabi_realloc`, a bump allocator from the module's global `$bump`; it
/// closes the module.
pub const REALLOC: &str = r#"    (func (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
      (local $at i32)
      (local.set $at (global.get $bump))
      (global.set $bump
        (i32.and (i32.add (i32.add (local.get $at) (local.get 3)) (i32.const 7)) (i32.const -8)))
      (local.get $at)))
"#;

/// Data segments naming the module's one tool: its name at 100, its
/// description at 110, an object schema at 200, the spec at 300 and
/// `list-tools`' answer (one spec) at 400.
pub fn spec(name: &str, description: &str) -> String {
    assert!(name.len() <= 10 && description.len() < 90, "fits below 200");
    let le = |n: usize| {
        (n as u32)
            .to_le_bytes()
            .iter()
            .map(|b| format!("\\{b:02x}"))
            .collect::<String>()
    };
    format!(
        r#"(data (i32.const 100) "{name}")
    (data (i32.const 110) "{description}")
    (data (i32.const 200) "{{\"type\":\"object\"}}")
    (data (i32.const 300) "{}{}{}{}{}{}\00")
    (data (i32.const 400) "{}{}")"#,
        le(100),
        le(name.len()),
        le(110),
        le(description.len()),
        le(200),
        le(17),
        le(300),
        le(1),
    )
}

/// The end of `call`: an `ok` answer at 600 whose content is the string at
/// `yes` (address, length) when `condition` (an `i32` expression) holds,
/// and at `no` otherwise.
pub fn answer(condition: &str, yes: (u32, u32), no: (u32, u32)) -> String {
    format!(
        "(i32.store8 (i32.const 600) (i32.const 0))
      (if {condition}
        (then (i32.store (i32.const 604) (i32.const {})) (i32.store (i32.const 608) (i32.const {})))
        (else (i32.store (i32.const 604) (i32.const {})) (i32.store (i32.const 608) (i32.const {}))))
      (i32.store (i32.const 612) (i32.const 0))
      (i32.store (i32.const 616) (i32.const 0))
      (i32.const 600))",
        yes.0, yes.1, no.0, no.1
    )
}

/// The component exporting `wasm-agent:tool/tool` around `module`.
pub fn component(module: &str) -> Vec<u8> {
    let wat = format!("{HEAD}{module}{TAIL}");
    wat::parse_str(&wat).expect("the component assembles")
}

const HEAD: &str = r#"
(component
  (import "wasm-agent:tool/host@0.1.3" (instance $host
    (export "cancelled" (func (result bool)))))
  (alias export $host "cancelled" (func $cancelled))
  (core func $cancelled_lowered (canon lower (func $cancelled)))
"#;

const TAIL: &str = r#"  (core instance $i (instantiate $m
    (with "host" (instance (export "cancelled" (func $cancelled_lowered))))))
  (alias core export $i "memory" (core memory $mem))
  (alias core export $i "cabi_realloc" (core func $realloc))
  (type $annotations (flags "read-only" "destructive" "idempotent" "open-world"))
  (type $spec (record (field "name" string) (field "description" string)
    (field "parameters" string) (field "annotations" $annotations)))
  (type $artifact (record (field "kind" string) (field "mime-type" (option string))
    (field "data" (list u8))))
  (type $output (record (field "content" string) (field "artifacts" (list $artifact))))
  (type $error (variant (case "invalid-arguments" string) (case "failed" string)
    (case "unknown-tool" string)))
  (type $context (record (field "run-id" string) (field "session-id" string)
    (field "user-id" (option string)) (field "tenant-id" (option string))
    (field "metadata" string)))
  (func $list (result (list $spec))
    (canon lift (core func $i "list-tools") (memory $mem) (realloc $realloc)))
  (func $call (param "name" string) (param "arguments" string) (param "context" $context)
    (result (result $output (error $error)))
    (canon lift (core func $i "call") (memory $mem) (realloc $realloc)))
  ;; The interface's shape: its types exported beside the functions using them.
  (component $shape
    (type $a (flags "read-only" "destructive" "idempotent" "open-world"))
    (import "a" (type $a_i (eq $a)))
    (type $s (record (field "name" string) (field "description" string)
      (field "parameters" string) (field "annotations" $a_i)))
    (import "s" (type $s_i (eq $s)))
    (type $ar (record (field "kind" string) (field "mime-type" (option string))
      (field "data" (list u8))))
    (import "ar" (type $ar_i (eq $ar)))
    (type $o (record (field "content" string) (field "artifacts" (list $ar_i))))
    (import "o" (type $o_i (eq $o)))
    (type $e (variant (case "invalid-arguments" string) (case "failed" string)
      (case "unknown-tool" string)))
    (import "e" (type $e_i (eq $e)))
    (type $c (record (field "run-id" string) (field "session-id" string)
      (field "user-id" (option string)) (field "tenant-id" (option string))
      (field "metadata" string)))
    (import "c" (type $c_i (eq $c)))
    (import "list" (func $l (result (list $s_i))))
    (import "call" (func $k (param "name" string) (param "arguments" string)
      (param "context" $c_i) (result (result $o_i (error $e_i)))))
    (export $a_e "annotations" (type $a_i))
    (type $s2 (record (field "name" string) (field "description" string)
      (field "parameters" string) (field "annotations" $a_e)))
    (export $s_e "tool-spec" (type $s2))
    (export $ar_e "artifact" (type $ar_i))
    (type $o2 (record (field "content" string) (field "artifacts" (list $ar_e))))
    (export $o_e "tool-output" (type $o2))
    (export $e_e "tool-error" (type $e_i))
    (export $c_e "call-context" (type $c_i))
    (export "list-tools" (func $l) (func (result (list $s_e))))
    (export "call" (func $k) (func (param "name" string) (param "arguments" string)
      (param "context" $c_e) (result (result $o_e (error $e_e))))))
  (instance $tool (instantiate $shape
    (with "a" (type $annotations)) (with "s" (type $spec)) (with "ar" (type $artifact))
    (with "o" (type $output)) (with "e" (type $error)) (with "c" (type $context))
    (with "list" (func $list)) (with "call" (func $call))))
  (export "wasm-agent:tool/tool@0.1.3" (instance $tool))
)
"#;
