//! The S3 sink (DESIGN.md "Status document": S3 behind a CDN): object `{prefix}{event}.json`
//! with `Content-Type: application/json` and `Cache-Control: public, max-age=N`. Endpoint,
//! region and credentials come from the standard AWS configuration (`AWS_ENDPOINT_URL`,
//! `AWS_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, profiles…); with a custom
//! endpoint (a local S3-compatible server) requests are path-style (DEPENDENCIES.md). HTTPS
//! goes through rustls with the `ring` provider.
//!
//! **Version guard.** The object carries its `(version, cursor)` as user metadata
//! (`x-amz-meta-status-version`, `x-amz-meta-status-cursor`). A write first reads the stored
//! pair (HEAD); a newer stored document wins (nothing written); otherwise the PUT is
//! conditional on the ETag just read (`If-Match`, or `If-None-Match: *` when absent), and a
//! lost race (412/409) starts over — S3's compare-and-swap, so two publishers racing never
//! leave an older document on top (seed 000's last bug).

use super::{Put, StatusDoc, StatusSink};
use anyhow::Context;
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::Client;

/// Rounds of HEAD + conditional PUT before a write gives up (each lost round means another
/// writer wrote in between).
const ATTEMPTS: usize = 8;

/// Writes documents to one bucket under one prefix.
#[derive(Debug, Clone)]
pub struct S3Sink {
    client: Client,
    bucket: String,
    prefix: String,
    max_age_secs: u64,
    guard: bool,
}

/// The HTTP status of a failed SDK call, if the server answered.
fn http_status<E, R: HasStatus>(e: &aws_sdk_s3::error::SdkError<E, R>) -> Option<u16> {
    e.raw_response().map(HasStatus::status_code)
}

/// Raw responses that know their HTTP status.
trait HasStatus {
    fn status_code(&self) -> u16;
}

impl HasStatus for aws_sdk_s3::config::http::HttpResponse {
    fn status_code(&self) -> u16 {
        self.status().as_u16()
    }
}

impl S3Sink {
    /// A sink on an SDK configuration (tests pass an explicit endpoint and credentials).
    /// Path-style addressing when the configuration names a custom endpoint.
    pub fn from_sdk_config(
        sdk: &aws_config::SdkConfig,
        bucket: &str,
        prefix: &str,
        max_age_secs: u64,
    ) -> Self {
        let path_style = sdk.endpoint_url().is_some();
        let conf = aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(path_style)
            .build();
        Self {
            client: Client::from_conf(conf),
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
            max_age_secs,
            guard: true,
        }
    }

    /// A sink from the standard AWS configuration (environment, profile files); region
    /// defaults to `us-east-1` when none is configured.
    pub async fn from_env(bucket: &str, prefix: &str, max_age_secs: u64) -> Self {
        let sdk =
            load_sdk_config(aws_config::defaults(aws_config::BehaviorVersion::latest())).await;
        Self::from_sdk_config(&sdk, bucket, prefix, max_age_secs)
    }

    /// The naive writer (unconditional PUT), kept only so tests can show the stale-overwrite
    /// bug the guard prevents. Never use it to publish.
    pub fn without_version_guard(mut self) -> Self {
        self.guard = false;
        self
    }

    /// The object key of `event`'s document.
    pub fn key_of(&self, event: &str) -> String {
        format!("{}{event}.json", self.prefix)
    }

    /// The SDK client (tests create the bucket and read objects back with it).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// `(etag, (version, cursor))` of the stored object; `Ok(None)` when there is none.
    async fn stored(&self, key: &str) -> anyhow::Result<Option<(String, Option<(u64, u64)>)>> {
        let head = self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(key)
            .send()
            .await;
        let h = match head {
            Ok(h) => h,
            Err(e) if http_status(&e) == Some(404) => return Ok(None),
            Err(e) => return Err(e).context("HEAD status object"),
        };
        let meta = h.metadata();
        let num = |k: &str| meta.and_then(|m| m.get(k)).and_then(|v| v.parse().ok());
        let order = num("status-version").zip(num("status-cursor"));
        Ok(Some((h.e_tag().unwrap_or_default().to_owned(), order)))
    }
}

/// Loads the SDK configuration with the rustls (`ring`) HTTPS client and a `us-east-1`
/// fallback region.
pub async fn load_sdk_config(loader: aws_config::ConfigLoader) -> aws_config::SdkConfig {
    use aws_smithy_http_client::tls::{self, rustls_provider::CryptoMode};
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(CryptoMode::Ring))
        .build_https();
    let sdk = loader.http_client(http).load().await;
    if sdk.region().is_some() {
        return sdk;
    }
    sdk.into_builder()
        .region(aws_config::Region::new("us-east-1"))
        .build()
}

#[async_trait::async_trait]
impl StatusSink for S3Sink {
    fn name(&self) -> &'static str {
        "s3"
    }

    async fn put(&self, doc: &StatusDoc) -> anyhow::Result<Put> {
        let key = self.key_of(&doc.event);
        let body = doc.to_bytes();
        let (version, cursor) = doc.order();
        for _ in 0..ATTEMPTS {
            let mut req = self
                .client
                .put_object()
                .bucket(&self.bucket)
                .key(&key)
                .body(ByteStream::from(body.clone()))
                .content_type("application/json")
                .cache_control(super::cache_control(self.max_age_secs))
                .metadata("status-version", version.to_string())
                .metadata("status-cursor", cursor.to_string());
            if self.guard {
                req = match self.stored(&key).await? {
                    Some((_, Some(old))) if old > doc.order() => return Ok(Put::Stale),
                    Some((etag, _)) => req.if_match(etag),
                    None => req.if_none_match("*"),
                };
            }
            match req.send().await {
                Ok(_) => return Ok(Put::Written),
                // Another writer won between our HEAD and PUT: read again.
                Err(e) if matches!(http_status(&e), Some(409 | 412)) => continue,
                Err(e) => return Err(e).context("PUT status object"),
            }
        }
        anyhow::bail!("status object {key}: still contended after {ATTEMPTS} conditional PUTs")
    }
}
