//! The local-directory sink (the embedded default; API.md "Status document"): `{dir}/{event}.json`,
//! written whole to a temporary file in the same directory and renamed over the old one, so a
//! static server or CDN origin reading the directory never sees a half-written document.
//!
//! **Version guard.** Every write holds an exclusive `flock` on `{dir}/.{event}.lock` (shared by
//! every process writing the directory), reads the `version` and `cursor` of the document in
//! place and writes only when the new one is not older (seed 000's last bug: a delayed builder
//! that read "open" must not overwrite a newer "sold_out").

use super::{Put, StatusDoc, StatusSink};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes documents into one directory.
#[derive(Debug, Clone)]
pub struct DirSink {
    dir: PathBuf,
    guard: bool,
}

impl DirSink {
    /// A sink writing `{dir}/{event}.json` (the directory is created on first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            guard: true,
        }
    }

    /// The naive writer (no lock, no version check), kept only so tests can show the
    /// stale-overwrite bug the guard prevents. Never use it to publish.
    pub fn without_version_guard(mut self) -> Self {
        self.guard = false;
        self
    }

    /// The file of `event`'s document.
    pub fn path_of(&self, event: &str) -> PathBuf {
        self.dir.join(format!("{event}.json"))
    }

    fn put_blocking(&self, event: &str, order: (u64, u64), body: &[u8]) -> std::io::Result<Put> {
        std::fs::create_dir_all(&self.dir)?;
        let target = self.path_of(event);
        let _lock = if self.guard {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(self.dir.join(format!(".{event}.lock")))?;
            f.lock()?;
            if stored_order(&target).is_some_and(|old| old > order) {
                return Ok(Put::Stale);
            }
            Some(f) // unlocked when dropped, after the rename
        } else {
            None
        };
        let tmp = self.dir.join(format!(
            ".{event}.json.{}.{:016x}.tmp",
            std::process::id(),
            rand::random::<u64>()
        ));
        let written = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(body)?;
            f.flush()?;
            std::fs::rename(&tmp, &target)
        })();
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map(|()| Put::Written)
    }
}

/// `(version, cursor)` of the document stored at `path`; `None` when absent or unreadable
/// (then any document may replace it).
fn stored_order(path: &Path) -> Option<(u64, u64)> {
    let bytes = std::fs::read(path).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some((v["version"].as_u64()?, v["cursor"].as_u64()?))
}

#[async_trait::async_trait]
impl StatusSink for DirSink {
    fn name(&self) -> &'static str {
        "dir"
    }

    async fn put(&self, doc: &StatusDoc) -> anyhow::Result<Put> {
        let me = self.clone();
        let event = doc.event.clone();
        let order = doc.order();
        let body = doc.to_bytes();
        Ok(tokio::task::spawn_blocking(move || me.put_blocking(&event, order, &body)).await??)
    }
}
