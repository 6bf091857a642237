//! A component's tool listing as the compile cache keeps it, so that a
//! start offers the tools before the code is mapped (see
//! [`ToolHost::load_all_listing`](super::ToolHost::load_all_listing)).
//!
//! A kept listing is only ever a listing: the load lists the tools again,
//! and calls run on what it listed. It is kept beside the compiled code,
//! under the same key and with the same checks, so whoever could change it
//! could change the code.

use serde::{Deserialize, Serialize};

use crate::bindings::types;
use crate::tool::Annotations;

/// What a component listed, and the facts of its code the listing shows.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Listing {
    /// Whether its tools are scripts run in segments (world `interpreter`).
    pub interpreter: bool,
    /// Whether it imports session state.
    pub uses_state: bool,
    tools: Vec<Spec>,
}

/// One tool spec, as `list-tools` returned it.
#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Spec {
    name: String,
    description: String,
    parameters: String,
    annotations: Annotations,
}

impl Listing {
    /// The listing of a component with these facts and specs.
    pub fn new(interpreter: bool, uses_state: bool, specs: &[types::ToolSpec]) -> Self {
        let tools = specs
            .iter()
            .map(|spec| Spec {
                name: spec.name.clone(),
                description: spec.description.clone(),
                parameters: spec.parameters.clone(),
                annotations: spec.annotations.into(),
            })
            .collect();
        Self {
            interpreter,
            uses_state,
            tools,
        }
    }

    /// The specs, as `list-tools` returned them.
    pub fn specs(&self) -> Vec<types::ToolSpec> {
        self.tools
            .iter()
            .map(|tool| types::ToolSpec {
                name: tool.name.clone(),
                description: tool.description.clone(),
                parameters: tool.parameters.clone(),
                annotations: tool.annotations.into(),
            })
            .collect()
    }

    /// As kept.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a listing serialises")
    }

    /// A kept listing, if it is one.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice(bytes).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listing_reads_back_as_it_was_listed() {
        let specs = vec![types::ToolSpec {
            name: "echo".into(),
            description: "Says it back.".into(),
            parameters: r#"{"type":"object"}"#.into(),
            annotations: types::Annotations::READ_ONLY | types::Annotations::OPEN_WORLD,
        }];
        let listing = Listing::new(true, false, &specs);
        let read = Listing::from_bytes(&listing.to_bytes()).expect("reads back");
        assert_eq!(read, listing);
        assert_eq!(Listing::new(true, false, &read.specs()), listing);
        assert!(read.interpreter && !read.uses_state);
        assert_ne!(Listing::new(true, true, &specs), listing);
        assert_eq!(Listing::from_bytes(b"{\"tools\": 1}"), None);
    }
}
