//! The `jsonl` sink: one JSON line per event appended to a file, `fsync` per batch
//! (SPEC §7.5).
//!
//! A batch is written with one `write` and made durable with `fdatasync` before the
//! delivery counts; the file is opened in append mode (created when absent) and kept
//! open. After a crash the last batch can appear twice, or its last line torn:
//! readers deduplicate on `id` and skip a line that does not parse. The file lives
//! on the machine that holds the sink's lease.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use outbox_core::Event;
use parking_lot::Mutex;

use crate::config::SinkConfig;
use crate::encoding::Encoder;
use crate::{Result, Sink, SinkError};

/// Appends events to a file, one JSON line each.
pub struct JsonlSink {
    id: String,
    path: PathBuf,
    encoder: Encoder,
    file: Arc<Mutex<Option<File>>>,
}

impl JsonlSink {
    /// The sink a `kind = "jsonl"` table describes.
    pub fn from_config(config: &SinkConfig) -> Result<JsonlSink> {
        Ok(JsonlSink {
            id: config.id.clone(),
            path: config.path.clone().unwrap_or_default(),
            encoder: config.encoder(),
            file: Arc::new(Mutex::new(None)),
        })
    }

    fn lines(&self, batch: &[Event]) -> Vec<u8> {
        let mut lines = Vec::with_capacity(batch.len() * 256);
        for event in batch {
            lines.extend_from_slice(&self.encoder.encode(event));
            lines.push(b'\n');
        }
        lines
    }
}

/// Appends `lines` and syncs, opening the file when it is not open; forgets the handle on failure.
fn append(path: &PathBuf, slot: &Mutex<Option<File>>, lines: &[u8]) -> std::io::Result<()> {
    let mut slot = slot.lock();
    let file = match slot.as_mut() {
        Some(file) => file,
        None => slot.insert(OpenOptions::new().create(true).append(true).open(path)?),
    };
    let written = file.write_all(lines).and_then(|()| file.sync_data());
    if written.is_err() {
        *slot = None;
    }
    written
}

impl Sink for JsonlSink {
    fn id(&self) -> &str {
        &self.id
    }

    fn deliver<'a>(&'a self, batch: &'a [Event]) -> BoxFuture<'a, std::result::Result<(), SinkError>> {
        let lines = self.lines(batch);
        let (path, file) = (self.path.clone(), self.file.clone());
        Box::pin(async move {
            let written = tokio::task::spawn_blocking(move || append(&path, &file, &lines)).await;
            match written {
                Ok(Ok(())) => Ok(()),
                Ok(Err(e)) => Err(SinkError::retryable(format!("appending to {}: {e}", self.path.display()))),
                Err(e) => Err(SinkError::retryable(format!("the writer thread failed: {e}"))),
            }
        })
    }
}
