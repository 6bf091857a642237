//! Relinking a component whose core modules are linked at instantiation
//! time (the shape `wit-component` gives an interpreter built from shared
//! libraries, as componentize-py and componentize-qjs do) into one whose
//! linked modules are a single module.
//!
//! Why: such a component's function table is defined by one core module and
//! filled by the others through offsets read from imported globals, so the
//! engine must fill every entry, one by one, on every instantiation (5678 of
//! them for CPython). Merged, the table is defined where it is filled, at
//! constant offsets, and the engine fills it lazily, as entries are called.
//!
//! The same goes for the shim `wit-component` puts before any module whose
//! imports need its memory (a Rust tool's main module, for one): a module
//! importing nothing, whose functions call through its own table, which a
//! later module fills with the lowered host functions. Merged into the module
//! calling those functions, it is one instance fewer to make on every
//! instantiation, and the main module's imports of it (87 for the test
//! fixture tool) are no longer wired one by one.
//!
//! What the component does is unchanged: the same functions run on the same
//! memory and table, with the same imports from the host; only the
//! boundaries between the merged modules are gone. A component of any other
//! shape, or with anything this does not understand (start functions, tags,
//! a table offset that is not a constant once linked), is left as it is.

mod component;
mod inspect;
mod merge;

pub use inspect::eagerly_filled_table_entries;

/// Why a component could not be relinked.
#[derive(Debug, thiserror::Error)]
pub enum RelinkError {
    /// The bytes could not be read as a component.
    #[error("cannot read the component: {0}")]
    Read(#[from] wasmparser::BinaryReaderError),
    /// The component is not consistent with itself.
    #[error("malformed component: {0}")]
    Malformed(&'static str),
    /// The component uses something relinking does not handle.
    #[error("not relinked: it uses {0}")]
    Unsupported(&'static str),
    /// Rewriting an item failed.
    #[error("cannot rewrite the component: {0}")]
    Rewrite(String),
    /// The relinked component does not validate (a fault in relinking).
    #[error("the relinked component is not valid: {0}")]
    Invalid(wasmparser::BinaryReaderError),
}

impl From<wasm_encoder::reencode::Error<RelinkError>> for RelinkError {
    fn from(error: wasm_encoder::reencode::Error<RelinkError>) -> Self {
        match error {
            wasm_encoder::reencode::Error::UserError(e) => e,
            wasm_encoder::reencode::Error::ParseError(e) => RelinkError::Read(e),
            other => RelinkError::Rewrite(other.to_string()),
        }
    }
}

/// The version of what relinking writes: raised whenever the same input
/// would be relinked differently (a compile cache keys its entries by it).
pub const FORMAT: u32 = 4;

/// What relinking did.
#[derive(Debug)]
pub struct Relinked {
    /// The relinked component.
    pub bytes: Vec<u8>,
    /// How many core modules became one (summed over nested components).
    pub merged: usize,
}

/// `component` relinked, or `None` when it has no modules to merge or is
/// not a valid component (what the engine then says of it is about the
/// bytes as given). A relinked component is validated before it is returned.
pub fn relink(component: &[u8]) -> Result<Option<Relinked>, RelinkError> {
    if !wasmparser::Parser::is_component(component) || validate(component).is_err() {
        return Ok(None);
    }
    let Some(relinked) = component::relink(component, 0)? else {
        return Ok(None);
    };
    validate(&relinked.bytes).map_err(RelinkError::Invalid)?;
    Ok(Some(relinked))
}

fn validate(bytes: &[u8]) -> Result<(), wasmparser::BinaryReaderError> {
    wasmparser::Validator::new_with_features(wasmparser::WasmFeatures::all())
        .validate_all(bytes)
        .map(drop)
}

#[cfg(test)]
mod tests;
