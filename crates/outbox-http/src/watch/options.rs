//! The live stream's options (SPEC §5.4), with the SPEC's defaults.

use std::time::Duration;

use outbox_pg::MAX_LIMIT;
use outbox_pg::tail::TailOptions;
use serde::Deserialize;

/// How a `/watch` stream behaves. Every value is in milliseconds except `batch`, `buffer`
/// and `shared_tail`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WatchOptions {
    /// The reconnection delay the stream tells clients (`retry:`), default 2000.
    pub retry_ms: u64,
    /// How often a `: keep-alive <position>` comment goes out, default 15000.
    pub heartbeat_ms: u64,
    /// How often the shared tail (or, without it, each idle stream) reads the outbox, default 100.
    pub poll_ms: u64,
    /// The most events one read takes, default 500 (at most 1000).
    pub batch: usize,
    /// When the server ends a stream on purpose, default 3600000 (one hour).
    pub max_duration_ms: u64,
    /// How often an open stream's grant is checked again, default 60000.
    pub reauthorize_ms: u64,
    /// How long the authority may stay unreachable before the stream closes, default 120000.
    pub iam_outage_ms: u64,
    /// The most events the shared tail holds for a stream that has not sent them yet, default
    /// 1000; a stream that falls further behind leaves the tail and reads on its own.
    pub buffer: usize,
    /// Whether live streams are fed by the process's shared tail (default `true`). `false`
    /// restores per-stream polling: each stream reads the outbox on its own every `poll_ms`,
    /// which costs one query per stream per poll (kept as the benchmark's baseline).
    pub shared_tail: bool,
}

impl Default for WatchOptions {
    fn default() -> WatchOptions {
        WatchOptions {
            retry_ms: 2_000,
            heartbeat_ms: 15_000,
            poll_ms: u64::try_from(TailOptions::default().poll.as_millis()).unwrap_or(u64::MAX),
            batch: 500,
            max_duration_ms: 3_600_000,
            reauthorize_ms: 60_000,
            iam_outage_ms: 120_000,
            buffer: 1_000,
            shared_tail: true,
        }
    }
}

impl WatchOptions {
    /// Refuses values a stream cannot run with, naming the option: a zero interval, a
    /// `batch` outside 1 to 1000, or a zero `buffer`.
    pub fn validate(&self) -> Result<(), String> {
        let intervals = [
            ("heartbeat_ms", self.heartbeat_ms),
            ("poll_ms", self.poll_ms),
            ("max_duration_ms", self.max_duration_ms),
            ("reauthorize_ms", self.reauthorize_ms),
        ];
        if let Some((name, _)) = intervals.iter().find(|(_, value)| *value == 0) {
            return Err(format!("{name} must be at least 1"));
        }
        if !(1..=MAX_LIMIT).contains(&self.batch) {
            return Err(format!("batch must be 1 to {MAX_LIMIT} (got {})", self.batch));
        }
        if self.buffer == 0 {
            return Err("buffer must be at least 1".into());
        }
        Ok(())
    }

    /// The events one read takes, kept within 1 to 1000.
    pub(crate) fn read_limit(&self) -> usize {
        self.batch.clamp(1, MAX_LIMIT)
    }

    /// How the process's shared tail reads: every `poll_ms`, the tail's own batch. The
    /// service uses it when it starts its own tail; a host that starts one does the same.
    pub fn tail(&self) -> TailOptions {
        TailOptions { poll: self.poll(), ..TailOptions::default() }
    }

    pub(crate) fn heartbeat(&self) -> Duration {
        millis(self.heartbeat_ms)
    }

    pub(crate) fn poll(&self) -> Duration {
        millis(self.poll_ms)
    }

    pub(crate) fn max_duration(&self) -> Duration {
        millis(self.max_duration_ms)
    }

    pub(crate) fn reauthorize(&self) -> Duration {
        millis(self.reauthorize_ms)
    }

    pub(crate) fn iam_outage(&self) -> Duration {
        Duration::from_millis(self.iam_outage_ms)
    }
}

/// At least one millisecond, so that a zero never turns a timer into a busy loop.
fn millis(value: u64) -> Duration {
    Duration::from_millis(value.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_the_specs_and_partial_configs_keep_them() {
        let options: WatchOptions = serde_json::from_str(r#"{"heartbeat_ms": 50}"#).unwrap();
        assert_eq!(options, WatchOptions { heartbeat_ms: 50, ..WatchOptions::default() });
        assert!(serde_json::from_str::<WatchOptions>(r#"{"heartbeat": 50}"#).is_err());
        assert_eq!(WatchOptions::default().validate(), Ok(()));
    }

    #[test]
    fn validate_names_the_bad_option() {
        let zero_poll = WatchOptions { poll_ms: 0, ..WatchOptions::default() };
        assert!(zero_poll.validate().unwrap_err().contains("poll_ms"));
        let big_batch = WatchOptions { batch: 5_000, ..WatchOptions::default() };
        assert!(big_batch.validate().unwrap_err().contains("batch"));
        let no_buffer = WatchOptions { buffer: 0, ..WatchOptions::default() };
        assert!(no_buffer.validate().unwrap_err().contains("buffer"));
    }
}
