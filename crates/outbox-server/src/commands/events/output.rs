//! Printing events so that a terminal shows them and nothing else ([`crate::terminal`]).

use std::io::{self, Write};

pub use crate::terminal::{json_line, terminal_safe};

/// Standard output, line by line, flushed per line so a pipe sees each event at once.
pub(crate) struct Lines {
    out: io::Stdout,
}

impl Lines {
    pub(crate) fn stdout() -> Lines {
        Lines { out: io::stdout() }
    }

    /// Writes `line` and a line break. `Ok(false)` when the reader went away (a closed
    /// pipe): the command should stop, successfully.
    pub(crate) fn print(&mut self, line: &str) -> anyhow::Result<bool> {
        let mut out = self.out.lock();
        match writeln!(out, "{line}").and_then(|()| out.flush()) {
            Ok(()) => Ok(true),
            Err(error) if error.kind() == io::ErrorKind::BrokenPipe => Ok(false),
            Err(error) => Err(anyhow::Error::new(error).context("writing to standard output")),
        }
    }
}
