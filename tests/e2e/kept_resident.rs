//! Pages kept resident in memory slots (`host/sandbox/src/runtime/engine/
//! resident.rs`): the passes that join a call's written pages into few runs,
//! so the reset keeps them, never change what a call sees. Every call still
//! starts on its component's memory as new, while passes run beside calls.

use crate::common::host;
use crate::wat_tool;
use wasm_agent::{CallContext, ComponentSource, Policy};

/// A tool, `scattered`, whose memory's host pages 1 to 255 each hold their
/// own number (at byte 8); a call checks that every page holds it and that
/// byte 16 of each is zero, then writes byte 16 of every fourth page: 64
/// runs of written pages, with read pages between them, as an
/// interpreter's call writes. It answers `pristine`, or `dirty` when any
/// page was not as new.
fn scattered() -> Vec<u8> {
    let pages: String = (1..256)
        .map(|page| format!("(data (i32.const {}) \"\\{page:02x}\")\n", page * 4096 + 8))
        .collect();
    let answer = wat_tool::answer("(local.get $new)", (500, 8), (510, 5));
    let realloc = wat_tool::REALLOC;
    let spec = wat_tool::spec("scattered", "reads every page, writes every fourth");
    let module = format!(
        r#"
  (core module $m
    (import "host" "cancelled" (func $cancelled (result i32)))
    (memory (export "memory") 17)
    (global $bump (mut i32) (i32.const 0x100000))
    {spec}
    (data (i32.const 500) "pristine")
    (data (i32.const 510) "dirty")
    {pages}
    (func (export "list-tools") (result i32) (i32.const 400))
    (func (export "call")
      (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i32) (result i32)
      (local $page i32) (local $at i32) (local $new i32)
      (local.set $new (i32.const 1))
      (local.set $page (i32.const 1))
      (loop $check
        (local.set $at (i32.shl (local.get $page) (i32.const 12)))
        (if (i32.ne (i32.load8_u offset=8 (local.get $at)) (local.get $page))
          (then (local.set $new (i32.const 0))))
        (if (i32.load8_u offset=16 (local.get $at))
          (then (local.set $new (i32.const 0))))
        (local.set $page (i32.add (local.get $page) (i32.const 1)))
        (br_if $check (i32.lt_u (local.get $page) (i32.const 256))))
      (local.set $page (i32.const 1))
      (loop $write
        (i32.store8 offset=16 (i32.shl (local.get $page) (i32.const 12)) (i32.const 1))
        (local.set $page (i32.add (local.get $page) (i32.const 4)))
        (br_if $write (i32.lt_u (local.get $page) (i32.const 256))))
      {answer}
{realloc}"#
    );
    wat_tool::component(&module)
}

#[tokio::test]
async fn calls_see_their_memory_as_new_while_passes_keep_their_pages_resident() {
    let host = host();
    let source = ComponentSource::Bytes {
        name: "scattered".into(),
        bytes: scattered(),
    };
    host.load(source, Policy::default()).await.expect("loads");
    // One at a time (the first call's pass runs as it is freed), then four
    // at once, so that passes run beside calls in other slots.
    for call in 0..100 {
        let seen = host.call("scattered", "{}", &CallContext::new()).await;
        assert_eq!(seen.content, "pristine", "call {call}: {seen:?}");
    }
    for round in 0..50 {
        let calls: Vec<_> = (0..4)
            .map(|_| {
                let host = host.clone();
                tokio::spawn(async move {
                    host.call("scattered", "{}", &CallContext::new())
                        .await
                        .content
                })
            })
            .collect();
        for call in calls {
            assert_eq!(call.await.unwrap(), "pristine", "round {round}");
        }
    }
}
