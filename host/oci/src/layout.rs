//! Which manifests are Wasm components: the CNCF Wasm OCI artifact layout
//! (`wkg oci push`, Wassette, Spin) and the older wasm-to-oci one.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::digest::Digest;

/// The component layer of the CNCF layout (what `wkg oci push` writes).
pub const WASM_LAYER: &str = "application/wasm";
/// Its config.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The wasm-to-oci layout's layer and config, also accepted.
const LEGACY_LAYER: &str = "application/vnd.wasm.content.layer.v1+wasm";
const LEGACY_CONFIG: &str = "application/vnd.wasm.config.v1+json";

/// Manifest media types asked for.
pub const MANIFEST_TYPES: &[&str] = &[
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    INDEX_TYPES[0],
    INDEX_TYPES[1],
];
const INDEX_TYPES: &[&str] = &[
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

/// The largest manifest read (registries refuse larger ones on push).
pub const MAX_MANIFEST: u64 = 4 << 20;

/// A blob a manifest names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blob {
    /// Its digest.
    pub digest: Digest,
    /// Its declared size.
    pub size: u64,
}

/// An image manifest, as much of it as the host reads.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
}

/// A blob a manifest names: its type, digest, size and annotations.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// Its media type.
    pub media_type: String,
    /// Its digest, as written (checked by [`descriptor_blob`]).
    pub digest: String,
    /// Its size, as written.
    pub size: i64,
    /// Its annotations.
    #[serde(default)]
    pub annotations: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Versioned {
    schema_version: Option<i64>,
    media_type: Option<String>,
}

/// Parses a manifest; `Err` says what it is instead.
pub fn parse_manifest(bytes: &[u8]) -> Result<Manifest, String> {
    let versioned: Versioned =
        serde_json::from_slice(bytes).map_err(|e| format!("the manifest is not JSON: {e}"))?;
    if let Some(kind) = &versioned.media_type
        && INDEX_TYPES.contains(&kind.as_str())
    {
        return Err(format!(
            "it is an image index ({kind}), a list of platforms; name one manifest by digest"
        ));
    }
    if versioned.schema_version != Some(2) {
        return Err(format!(
            "manifest schemaVersion {:?}, expected 2",
            versioned.schema_version
        ));
    }
    serde_json::from_slice(bytes).map_err(|e| format!("the manifest cannot be read: {e}"))
}

/// The component layer of a manifest in one of the Wasm layouts.
pub fn component_layer(manifest: &Manifest) -> Result<Blob, String> {
    let config = manifest.config.media_type.as_str();
    let layers: Vec<&str> = manifest
        .layers
        .iter()
        .map(|l| l.media_type.as_str())
        .collect();
    let wasm: Vec<_> = manifest
        .layers
        .iter()
        .filter(|l| l.media_type == WASM_LAYER || l.media_type == LEGACY_LAYER)
        .collect();
    let explain = || {
        format!(
            "config {config}, layers [{}]; expected config {WASM_CONFIG} with one {WASM_LAYER} \
             layer (or {LEGACY_CONFIG} with {LEGACY_LAYER})",
            layers.join(", ")
        )
    };
    if (config != WASM_CONFIG && config != LEGACY_CONFIG) || wasm.len() != 1 {
        return Err(explain());
    }
    descriptor_blob(wasm[0]).map_err(|e| format!("its component layer: {e}"))
}

/// A descriptor's digest and size, checked.
pub fn descriptor_blob(descriptor: &Descriptor) -> Result<Blob, String> {
    let digest = descriptor.digest.parse()?;
    let size =
        u64::try_from(descriptor.size).map_err(|_| format!("negative size {}", descriptor.size))?;
    Ok(Blob { digest, size })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(config: &str, layers: &[&str]) -> Vec<u8> {
        let digest = Digest::of(b"x").to_string();
        let layers: Vec<_> = layers
            .iter()
            .map(|t| serde_json::json!({"mediaType": t, "digest": digest, "size": 1}))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": config, "digest": digest, "size": 1},
            "layers": layers,
        }))
        .unwrap()
    }

    #[test]
    fn finds_the_component_layer_of_both_layouts() {
        for (config, layer) in [(WASM_CONFIG, WASM_LAYER), (LEGACY_CONFIG, LEGACY_LAYER)] {
            let parsed = parse_manifest(&manifest(config, &[layer])).unwrap();
            assert_eq!(component_layer(&parsed).unwrap().size, 1);
        }
    }

    #[test]
    fn refuses_other_artifacts_naming_their_media_types() {
        let image = parse_manifest(&manifest(
            "application/vnd.oci.image.config.v1+json",
            &["application/vnd.oci.image.layer.v1.tar+gzip"],
        ))
        .unwrap();
        let error = component_layer(&image).unwrap_err();
        assert!(
            error.contains("application/vnd.oci.image.layer.v1.tar+gzip"),
            "{error}"
        );
        assert!(error.contains("expected config application/vnd.wasm.config.v0+json"));

        let two = parse_manifest(&manifest(WASM_CONFIG, &[WASM_LAYER, WASM_LAYER])).unwrap();
        assert!(component_layer(&two).is_err());

        let index = br#"{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[]}"#;
        assert!(parse_manifest(index).unwrap_err().contains("image index"));
        assert!(parse_manifest(b"<html>").is_err());
    }
}
