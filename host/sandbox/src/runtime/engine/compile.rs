//! Compiling a component: relinked first when its core modules are linked
//! at instantiation time (an interpreter built from shared libraries, as
//! componentize-py and componentize-qjs make them), so that its function
//! table is filled lazily rather than entry by entry on every call, or when
//! it has a shim to merge into its main module (any `wit-component` output
//! whose imports need the main module's memory); as given otherwise. See
//! `wasm_agent_relink`.

/// `compile` applied to `bytes` relinked, or to `bytes` when there is
/// nothing to relink or the relinked component does not compile.
pub(super) fn compile<T>(
    bytes: &[u8],
    compile: impl Fn(&[u8]) -> wasmtime::Result<T>,
) -> wasmtime::Result<T> {
    let relinked = match wasm_agent_relink::relink(bytes) {
        Ok(Some(relinked)) => relinked,
        Ok(None) => return compile(bytes),
        Err(e) => {
            tracing::warn!("compiling the component as given: {e}");
            return compile(bytes);
        }
    };
    match compile(&relinked.bytes) {
        Ok(compiled) => {
            tracing::debug!(modules = relinked.merged, "compiled the component relinked");
            Ok(compiled)
        }
        Err(e) => {
            tracing::warn!(
                "compiling the component as given: the relinked one does not compile: {e:#}"
            );
            compile(bytes)
        }
    }
}
