//! Relinking components shaped like the ones `wit-component` links: a main
//! module defining memory and table, libraries filling the table from
//! offsets in imported globals. Each is run before and after, by wasmtime.

use wasmparser::{ElementKind, Operator, Payload};
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use crate::relink;

/// Main defines the table and memory and the libraries' table bases; `lib`
/// fills the table at its base and calls through it; `adapter` sits between
/// them (it needs main's memory, and `lib` needs it).
const LINKED: &str = r#"
(component
  (core module $main
    (memory (export "memory") 1)
    (table (export "table") 8 funcref)
    (global (export "lib:table_base") i32 (i32.const 2))
    (global (export "lib:counter") (mut i32) (i32.const 100))
    (func (export "main_f") (result i32) i32.const 7)
  )
  (core module $adapter
    (import "env" "memory" (memory 1))
    (func (export "store") (param i32) (result i32)
      i32.const 16 local.get 0 i32.store
      i32.const 16 i32.load)
  )
  (core module $lib
    (import "env" "memory" (memory 1))
    (import "env" "table" (table 8 funcref))
    (import "env" "__table_base" (global $tb i32))
    (import "env" "counter" (global $counter (mut i32)))
    (import "env" "main_f" (func $main_f (result i32)))
    (import "adapter" "store" (func $store (param i32) (result i32)))
    (global $got i32 (global.get $tb) (i32.const 1) (i32.add))
    (elem (global.get $tb) func $forty $via_main)
    (func $forty (result i32) i32.const 40)
    (func $via_main (result i32) call $main_f)
    (func (export "run") (param i32) (result i32)
      global.get $counter i32.const 1 i32.add global.set $counter
      local.get 0 global.get $tb i32.add
      call_indirect (result i32)
      global.get $counter i32.add
      call $store)
    (func (export "got") (param i32) (result i32) global.get $got call_indirect (result i32))
  )
  (core instance $m (instantiate $main))
  (alias core export $m "memory" (core memory $mem))
  (core instance $adapter_env (export "memory" (memory $mem)))
  (core instance $a (instantiate $adapter (with "env" (instance $adapter_env))))
  (alias core export $m "table" (core table $tab))
  (alias core export $m "lib:table_base" (core global $tb))
  (alias core export $m "lib:counter" (core global $counter))
  (alias core export $m "main_f" (core func $mf))
  (core instance $env
    (export "memory" (memory $mem))
    (export "table" (table $tab))
    (export "__table_base" (global $tb))
    (export "counter" (global $counter))
    (export "main_f" (func $mf)))
  (core instance $l (instantiate $lib (with "env" (instance $env)) (with "adapter" (instance $a))))
  (func (export "run") (param "i" u32) (result u32) (canon lift (core func $l "run")))
  (func (export "got") (param "i" u32) (result u32) (canon lift (core func $l "got")))
)
"#;

fn component(wat: &str) -> Vec<u8> {
    wat::parse_str(wat).expect("test component")
}

/// `original` relinked, which must have something to merge.
fn relinked(original: &[u8]) -> crate::Relinked {
    relink(original)
        .expect("relinks")
        .expect("something to merge")
}

/// What `export` returns for each argument, called on one fresh instance.
fn run(bytes: &[u8], export: &str, args: &[u32]) -> Vec<u32> {
    let (mut store, instance) = instantiate(bytes);
    let func = instance
        .get_typed_func::<(u32,), (u32,)>(&mut store, export)
        .expect("export");
    args.iter()
        .map(|a| {
            let (out,) = func.call(&mut store, (*a,)).expect("runs");
            out
        })
        .collect()
}

/// A fresh instance of the component `bytes`, in a store of its own.
fn instantiate(bytes: &[u8]) -> (Store<()>, wasmtime::component::Instance) {
    let engine = Engine::default();
    let component = Component::new(&engine, bytes).expect("compiles");
    let mut store = Store::new(&engine, ());
    let mut linker = Linker::new(&engine);
    // The host function `SHIM`'s component imports.
    linker
        .root()
        .func_wrap("len", |_, (s,): (String,)| Ok((s.len() as u32,)))
        .expect("defines len");
    let instance = linker
        .instantiate(&mut store, &component)
        .expect("instantiates");
    (store, instance)
}

/// The core modules of a component (top level), as bytes.
fn modules(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut depth = 0;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        match payload.expect("parses") {
            Payload::ModuleSection {
                unchecked_range, ..
            } if depth == 0 => {
                out.push(
                    bytes[unchecked_range.start as usize..unchecked_range.end as usize].to_vec(),
                );
                depth += 1;
            }
            Payload::ModuleSection { .. } | Payload::ComponentSection { .. } => depth += 1,
            Payload::End(_) if depth > 0 => depth -= 1,
            _ => {}
        }
    }
    out
}

/// The core modules with anything in them (merged members are emptied).
fn non_empty_modules(bytes: &[u8]) -> Vec<Vec<u8>> {
    modules(bytes).into_iter().filter(|m| m.len() > 8).collect()
}

/// Of one module: tables defined, tables imported, and each active element
/// segment's offset if it is a constant.
fn tables(module: &[u8]) -> (usize, usize, Vec<Option<i32>>) {
    let (mut defined, mut imported, mut offsets) = (0, 0, Vec::new());
    for payload in wasmparser::Parser::new(0).parse_all(module) {
        match payload.expect("parses") {
            Payload::TableSection(r) => defined += r.count() as usize,
            Payload::ImportSection(r) => {
                for import in r.into_imports() {
                    if matches!(import.expect("import").ty, wasmparser::TypeRef::Table(_)) {
                        imported += 1;
                    }
                }
            }
            Payload::ElementSection(r) => {
                for element in r {
                    if let ElementKind::Active { offset_expr, .. } = element.expect("element").kind
                    {
                        let ops: Vec<_> = offset_expr
                            .get_operators_reader()
                            .into_iter()
                            .collect::<Result<_, _>>()
                            .expect("ops");
                        offsets.push(match ops.as_slice() {
                            [Operator::I32Const { value }, Operator::End] => Some(*value),
                            _ => None,
                        });
                    }
                }
            }
            _ => {}
        }
    }
    (defined, imported, offsets)
}

#[test]
fn linked_modules_become_one_that_fills_its_own_table_at_constant_offsets() {
    let original = component(LINKED);
    let relinked = relinked(&original);
    assert_eq!(relinked.merged, 3, "main, adapter and lib");

    let full = non_empty_modules(&relinked.bytes);
    assert_eq!(full.len(), 1, "one module left with anything in it");
    let (defined, imported, offsets) = tables(&full[0]);
    assert_eq!((defined, imported), (1, 0));
    assert_eq!(offsets, [Some(2)], "the base folded into the offset");

    let (_, imported_before, offsets_before) = tables(&modules(&original)[2]);
    assert_eq!((imported_before, offsets_before), (1, vec![None]));
    assert_eq!(crate::eagerly_filled_table_entries(&original).unwrap(), 2);
    assert_eq!(
        crate::eagerly_filled_table_entries(&relinked.bytes).unwrap(),
        0
    );
}

#[test]
fn the_relinked_component_computes_what_the_original_does() {
    let original = component(LINKED);
    let relinked = relinked(&original).bytes;
    // Entry 0 (forty) and entry 1 (through main's function), a global the
    // library and main share, and memory the adapter writes.
    let before = run(&original, "run", &[0, 1, 0]);
    assert_eq!(before, [40 + 101, 7 + 102, 40 + 103]);
    assert_eq!(run(&relinked, "run", &[0, 1, 0]), before);
    // An offset computed from the base in a global's initialiser.
    assert_eq!(run(&original, "got", &[0]), [7]);
    assert_eq!(run(&relinked, "got", &[0]), [7]);
}

#[test]
fn a_component_of_one_module_is_left_alone() {
    let one = component(
        r#"(component
          (core module $m (func (export "f") (param i32) (result i32) local.get 0))
          (core instance $i (instantiate $m))
          (func (export "f") (param "x" u32) (result u32) (canon lift (core func $i "f"))))"#,
    );
    assert!(relink(&one).expect("reads").is_none());
}

#[test]
fn bytes_that_are_not_a_valid_component_are_left_alone() {
    assert!(relink(b"not wasm").expect("no error").is_none());
    let original = component(LINKED);
    for cut in [9, original.len() / 2, original.len() - 1] {
        assert!(
            relink(&original[..cut]).expect("no error").is_none(),
            "cut at {cut}"
        );
    }
    let core = wat::parse_str("(module)").expect("module");
    assert!(relink(&core).expect("no error").is_none());
}

#[test]
fn a_library_with_a_start_function_is_not_merged() {
    // A start function would run at another moment once merged.
    let with_start = LINKED.replace(
        "(func $forty (result i32) i32.const 40)",
        "(func $forty (result i32) i32.const 40) (start $init) (func $init)",
    );
    let original = component(&with_start);
    match relink(&original).expect("reads") {
        None => {}
        Some(relinked) => {
            assert!(relinked.merged < 3, "lib is not merged");
            assert_eq!(
                run(&relinked.bytes, "run", &[0, 1]),
                run(&original, "run", &[0, 1])
            );
        }
    }
}

#[test]
fn two_libraries_exporting_one_name_keep_them_apart() {
    let second = LINKED
        .replace(
            r#"(core instance $l (instantiate"#,
            r#"(core module $lib2
    (import "env" "table" (table 8 funcref))
    (import "env" "__table_base" (global $tb i32))
    (elem (i32.const 5) func $nine)
    (func $nine (result i32) i32.const 9)
    (func (export "run") (param i32) (result i32) i32.const 5 call_indirect (result i32) local.get 0 i32.add))
  (core instance $l2 (instantiate $lib2 (with "env" (instance $env))))
  (core instance $l (instantiate"#,
        )
        .replace(
            r#"(func (export "got") (param "i" u32)"#,
            r#"(func (export "run2") (param "i" u32) (result u32) (canon lift (core func $l2 "run")))
  (func (export "got") (param "i" u32)"#,
        );
    let original = component(&second);
    let relinked = relinked(&original);
    assert_eq!(relinked.merged, 4);
    assert_eq!(run(&relinked.bytes, "run2", &[1, 2]), [10, 11]);
    assert_eq!(
        run(&relinked.bytes, "run", &[0, 1]),
        run(&original, "run", &[0, 1])
    );
}

#[test]
fn a_module_between_the_members_writing_where_they_write_keeps_the_order_of_writes() {
    // `writer`, instantiated between main and lib, writes the byte lib's
    // data segment then overwrites: merged at lib's place, the order of the
    // two writes must not turn round.
    let variant = LINKED
        .replace(
            "(func $forty (result i32) i32.const 40)",
            r#"(func $forty (result i32) i32.const 40)
    (data (i32.const 32) "\02")
    (func (export "peek") (param i32) (result i32) i32.const 32 i32.load8_u)"#,
        )
        .replace(
            "(alias core export $m \"table\" (core table $tab))",
            r#"(core module $writer (import "env" "memory" (memory 1)) (data (i32.const 32) "\01"))
  (core instance $w (instantiate $writer (with "env" (instance $adapter_env))))
  (alias core export $m "table" (core table $tab))"#,
        )
        .replace(
            r#"(func (export "got") (param "i" u32)"#,
            r#"(func (export "peek") (param "i" u32) (result u32) (canon lift (core func $l "peek")))
  (func (export "got") (param "i" u32)"#,
        );
    let original = component(&variant);
    assert_eq!(run(&original, "peek", &[0]), [2]);
    if let Some(relinked) = relink(&original).expect("reads") {
        assert_eq!(run(&relinked.bytes, "peek", &[0]), [2]);
    }
}

/// The component's exported core module `name`, instantiated on its own:
/// what its `main_f` returns.
fn exported_main_f(bytes: &[u8], name: &str) -> i32 {
    let (mut store, instance) = instantiate(bytes);
    let module = instance.get_module(&mut store, name).expect("exported");
    let core = wasmtime::Instance::new(&mut store, &module, &[]).expect("instantiates");
    let main_f = core
        .get_typed_func::<(), i32>(&mut store, "main_f")
        .expect("main_f");
    main_f.call(&mut store, ()).expect("runs")
}

/// A module besides the linked ones, whose `main_f` returns 9.
const OTHER: &str = r#"(core module $other (func (export "main_f") (result i32) i32.const 9))"#;

#[test]
fn a_module_exported_between_the_members_keeps_every_module_in_its_place() {
    // The export adds a module index between main and lib: counted wrong,
    // the rewritten instantiations would name the wrong modules.
    let variant = LINKED.replace(
        "  (core module $adapter",
        &format!(
            "  {OTHER}\n  (export \"other-module\" (core module $other))\n  (core module $adapter"
        ),
    );
    let original = component(&variant);
    let relinked = relinked(&original);
    assert_eq!(
        run(&relinked.bytes, "run", &[0, 1]),
        run(&original, "run", &[0, 1])
    );
    assert_eq!(exported_main_f(&relinked.bytes, "other-module"), 9);
}

#[test]
fn a_nested_component_aliasing_an_outer_module_still_finds_it() {
    let variant = LINKED
        .replacen("(component", "(component $root", 1)
        .replace(
            "  (core instance $m (instantiate $main))",
            &format!(
                r#"  {OTHER}
  (component $nested
    (alias outer $root $other (core module $outer_other))
    (core instance $i (instantiate $outer_other))
    (func (export "f") (result u32) (canon lift (core func $i "main_f")))
  )
  (instance $n (instantiate $nested))
  (export "nested-f" (func $n "f"))
  (core instance $m (instantiate $main))"#
            ),
        );
    let original = component(&variant);
    let relinked = relinked(&original);
    assert_eq!(
        run(&relinked.bytes, "run", &[0, 1]),
        run(&original, "run", &[0, 1])
    );
    let (mut store, instance) = instantiate(&relinked.bytes);
    let nested_f = instance
        .get_typed_func::<(), (u32,)>(&mut store, "nested-f")
        .expect("export");
    assert_eq!(nested_f.call(&mut store, ()).expect("runs"), (9,));
}

#[test]
fn a_member_exported_or_aliased_by_a_nested_component_is_not_merged() {
    // Merged, the module would be emptied where it is defined, and what
    // exports or aliases it would get a module with nothing in it.
    let exported = LINKED.replace(
        "  (core module $adapter",
        "  (export \"main-module\" (core module $main))\n  (core module $adapter",
    );
    let aliased = LINKED
        .replacen("(component", "(component $root", 1)
        .replace(
            "  (core instance $m (instantiate $main))",
            r#"  (component $nested
    (alias outer $root $main (core module $outer_main))
    (core instance $i (instantiate $outer_main))
  )
  (instance $n (instantiate $nested))
  (core instance $m (instantiate $main))"#,
        );
    for variant in [exported, aliased] {
        let original = component(&variant);
        assert!(relink(&original).expect("reads").is_none());
    }
}

/// The shape `wit-component` gives a module importing a host function that
/// reads its memory: a shim (importing nothing) whose function calls through
/// its own table, the main module importing that function, and a fixup
/// module filling the shim's table with the lowered host function once
/// main's memory exists. Main has a table of its own, as Rust's has.
const SHIM: &str = include_str!("../testdata/shim.wat");

#[test]
fn a_shim_becomes_part_of_the_module_calling_it_and_the_fixup_still_fills_its_table() {
    let original = component(SHIM);
    let relinked = relinked(&original);
    assert_eq!(relinked.merged, 2, "shim and main");

    let full = non_empty_modules(&relinked.bytes);
    assert_eq!(full.len(), 2, "main with the shim in it, and the fixup");
    assert_eq!(tables(&full[0]).0, 2, "main's table and the shim's");
    assert_eq!(tables(&full[1]).1, 1, "the fixup fills the shim's table");

    // "hello" read by the host through the shim's table, plus main's own.
    let before = run(&original, "run", &[0, 1]);
    assert_eq!(before, [5 + 3, 5 + 4]);
    assert_eq!(run(&relinked.bytes, "run", &[0, 1]), before);
}

#[test]
fn a_library_table_merges_when_a_shim_s_table_is_imported_as_often() {
    // The shim's table (filled by the fixup) and main's (filled by the
    // library) have one importer each: the shim's, tried first, cannot
    // merge, and main's still does.
    let original = component(include_str!("../testdata/linked_shim.wat"));
    let relinked = relinked(&original);
    assert_eq!(relinked.merged, 2, "main and the library");

    let full = non_empty_modules(&relinked.bytes);
    assert_eq!(full.len(), 3, "the shim, main with the library, the fixup");
    let (defined, imported, offsets) = tables(&full[1]);
    assert_eq!((defined, imported, offsets), (1, 0, vec![Some(1)]));
    // The library's data, copied into the imported memory on every
    // instantiation before, is now the defining module's own.
    assert_eq!(data_segments(&full[1]), 1);

    // "world!" read by the host through the shim, plus the library's entry.
    let before = run(&original, "run", &[0]);
    assert_eq!(before, [6 + 6]);
    assert_eq!(run(&relinked.bytes, "run", &[0]), before);
}

/// How many data segments a module has.
fn data_segments(module: &[u8]) -> u32 {
    wasmparser::Parser::new(0)
        .parse_all(module)
        .map(|payload| match payload.expect("parses") {
            Payload::DataSection(reader) => reader.count(),
            _ => 0,
        })
        .sum()
}
