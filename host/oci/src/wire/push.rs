//! Pushing, as `sign` needs it: blobs uploaded whole (a POST opening the
//! upload, a PUT of the bytes to the URL the registry names, checked by the
//! address rules and sent no credentials unless it is the registry's own),
//! then the manifest under its tag.

use bytes::Bytes;
use reqwest::Method;
use reqwest::header::LOCATION;
use url::Url;

use super::{Access, Body, Wire, scope};
use crate::RegistryError;
use crate::digest::Digest;

impl Wire {
    /// Uploads `data` as a blob of `repository`.
    pub(crate) async fn push_blob(
        &self,
        reference: &str,
        repository: &str,
        data: Bytes,
    ) -> Result<(), RegistryError> {
        let digest = Digest::of(&data);
        let scope = scope(repository, Access::Push);
        let opened = self
            .send(
                reference,
                Method::POST,
                &format!("{}/v2/{repository}/blobs/uploads/", self.base()),
                &scope,
                Body::Bytes("application/octet-stream", Bytes::new()),
            )
            .await?;
        let unusable = |why: String| RegistryError::Registry {
            reference: reference.to_string(),
            reason: format!("the upload's Location {why}"),
        };
        let location = opened
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| unusable("header is missing".into()))?;
        let base: Url = self.base().parse().map_err(|e| unusable(format!("{e}")))?;
        let mut url = base.join(location).map_err(|e| unusable(format!("{e}")))?;
        url.query_pairs_mut()
            .append_pair("digest", &digest.to_string());
        self.send(
            reference,
            Method::PUT,
            url.as_str(),
            &scope,
            Body::Bytes("application/octet-stream", data),
        )
        .await?;
        Ok(())
    }

    /// Puts `manifest` (of `media_type`) under `tag` in `repository`.
    pub(crate) async fn put_manifest(
        &self,
        reference: &str,
        repository: &str,
        tag: &str,
        media_type: &str,
        manifest: Bytes,
    ) -> Result<(), RegistryError> {
        self.send(
            reference,
            Method::PUT,
            &format!("{}/v2/{repository}/manifests/{tag}", self.base()),
            &scope(repository, Access::Push),
            Body::Bytes(media_type, manifest),
        )
        .await?;
        Ok(())
    }
}
