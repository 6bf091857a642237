//! Signing: a cosign simple-signing payload for a component's manifest,
//! signed with the operator's key and added to its `sha256-HEX.sig`
//! artifact (beside the signatures already there), pushed over the same
//! client and address rules as every pull.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{Value, json};

use crate::RegistryError;
use crate::digest::Digest;
use crate::layout::{self, Blob};
use crate::pull::Registry;
use crate::reference::ComponentRef;
use crate::signature::{
    MAX_PAYLOAD, MAX_SIGNATURES, PAYLOAD_LAYER, SIGNATURE_ANNOTATION, SignatureError, SigningKey,
    payload, signature_tag,
};

/// The media types of the signature artifact cosign writes.
const MANIFEST_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
const CONFIG_TYPE: &str = "application/vnd.oci.image.config.v1+json";

/// One layer of the signature artifact.
struct Layer {
    data: Bytes,
    media_type: String,
    annotations: Option<BTreeMap<String, String>>,
}

impl Layer {
    fn descriptor(&self) -> Value {
        let mut descriptor = json!({
            "mediaType": self.media_type,
            "digest": Digest::of(&self.data).to_string(),
            "size": self.data.len(),
        });
        if let Some(annotations) = &self.annotations {
            descriptor["annotations"] = json!(annotations);
        }
        descriptor
    }
}

impl Registry {
    /// Signs the component `reference` names with `key`: a simple-signing
    /// payload for its manifest, added to its `sha256-HEX.sig` artifact
    /// (beside any signatures already there). Returns the signature tag.
    pub async fn sign(
        &self,
        reference: &ComponentRef,
        key: &SigningKey,
    ) -> Result<ComponentRef, RegistryError> {
        let (manifest, _) = self
            .within_deadline(reference, self.manifest(reference))
            .await?;
        let signatures = reference.with_tag(signature_tag(&manifest));
        let mut layers = self.existing_signatures(reference, &signatures).await?;
        let payload = payload(reference, &manifest);
        let annotations = BTreeMap::from([(SIGNATURE_ANNOTATION.to_string(), key.sign(&payload))]);
        layers.push(Layer {
            data: payload.into(),
            media_type: PAYLOAD_LAYER.to_string(),
            annotations: Some(annotations),
        });
        let diff_ids: Vec<String> = layers
            .iter()
            .map(|l| Digest::of(&l.data).to_string())
            .collect();
        let config = Layer {
            data: serde_json::to_vec(&json!({
                "architecture": "",
                "os": "",
                "config": {},
                "rootfs": {"type": "layers", "diff_ids": diff_ids},
            }))
            .expect("JSON values serialize")
            .into(),
            media_type: CONFIG_TYPE.to_string(),
            annotations: None,
        };
        let artifact = serde_json::to_vec(&json!({
            "schemaVersion": 2,
            "mediaType": MANIFEST_TYPE,
            "config": config.descriptor(),
            "layers": layers.iter().map(Layer::descriptor).collect::<Vec<_>>(),
        }))
        .expect("JSON values serialize");
        let wire = self.wire(&reference.registry).await?;
        let text = signatures.to_string();
        let tag = signatures.tag.clone().unwrap_or_default();
        self.within_deadline(&signatures, async {
            for layer in layers.iter().chain([&config]) {
                wire.push_blob(&text, &reference.repository, layer.data.clone())
                    .await?;
            }
            wire.put_manifest(
                &text,
                &reference.repository,
                &tag,
                MANIFEST_TYPE,
                artifact.into(),
            )
            .await
        })
        .await?;
        Ok(signatures)
    }

    /// The layers of the signatures already under `signatures`, to push
    /// again beside the new one (none when there are none).
    async fn existing_signatures(
        &self,
        reference: &ComponentRef,
        signatures: &ComponentRef,
    ) -> Result<Vec<Layer>, RegistryError> {
        let malformed = |reason: String| RegistryError::Signature {
            reference: reference.to_string(),
            reason: SignatureError::Malformed(reason),
        };
        let bytes = match self
            .within_deadline(signatures, self.manifest(signatures))
            .await
        {
            Ok((_, bytes)) => bytes,
            Err(RegistryError::NotFound { .. }) => return Ok(Vec::new()),
            Err(other) => return Err(other),
        };
        let existing = layout::parse_manifest(&bytes).map_err(malformed)?;
        if existing.layers.len() >= MAX_SIGNATURES {
            return Err(malformed(format!(
                "{signatures} already holds {} layers, and the host keeps at most {MAX_SIGNATURES} \
                 signatures in one artifact",
                existing.layers.len()
            )));
        }
        let mut layers = Vec::new();
        for layer in existing.layers {
            let blob: Blob = layout::descriptor_blob(&layer).map_err(malformed)?;
            self.within_deadline(
                signatures,
                self.blob(signatures, &blob, MAX_PAYLOAD, "a signature payload"),
            )
            .await?;
            let data = self
                .store()
                .read_small(&blob.digest, MAX_PAYLOAD)
                .unwrap_or_default();
            layers.push(Layer {
                data: data.into(),
                media_type: layer.media_type,
                annotations: layer.annotations,
            });
        }
        Ok(layers)
    }
}
