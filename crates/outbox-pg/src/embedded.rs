//! A throwaway or persistent PostgreSQL cluster run from the machine's own binaries.
//!
//! `outbox dev` and the test suites need a database without asking for one (SPEC §8.1).
//! [`EmbeddedPostgres::start`] finds `initdb` and `pg_ctl` ([`find_bindir`]), runs `initdb`
//! when the data directory holds no cluster yet, and starts the server with `pg_ctl` on
//! `127.0.0.1` and a free port, trusting every local connection as user `postgres`.
//! Dropping the handle stops the server and, for a throwaway cluster, deletes its directory;
//! with [`EmbeddedOptions::stop_with_process`] a watchdog shell does the same when the
//! process exits without dropping it (a handle in a `static`, a killed test run).
//!
//! A non-durable cluster (for tests) is not made by `initdb` but copied from a pristine
//! one that the first such start leaves under the temp dir (`outbox-pg-template-*`): on a
//! slow disk `initdb` takes seconds, a copy a fraction of that. Deleting the template is
//! always safe; the next start rebuilds it.
//!
//! PostgreSQL refuses to run as root. When this process is root, every PostgreSQL program
//! runs as the `postgres` user of `/etc/passwd` (`Command::uid`/`gid`) on a data directory
//! that user owns, so every parent of that directory must be one the user can enter.
//!
//! This module uses only `std`: it downloads nothing, needs no `sudo`, and never touches a
//! cluster it did not start (the system one on port 5432 included). It blocks; call it
//! before the runtime starts or from `spawn_blocking`.
//!
//! ```no_run
//! use outbox_pg::embedded::{EmbeddedOptions, EmbeddedPostgres};
//!
//! let server = EmbeddedPostgres::start(EmbeddedOptions::throwaway())?;
//! println!("connect to {}", server.url());
//! server.stop()?; // or drop it
//! # Ok::<(), outbox_pg::embedded::EmbeddedError>(())
//! ```

use std::fs::{self, File};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::{MetadataExt, chown};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long the server may take to accept connections, and to stop.
const TIMEOUT: Duration = Duration::from_secs(30);
/// How many ports to try when another process takes the free one we picked before the server binds it.
const PORT_ATTEMPTS: u32 = 3;
/// The user PostgreSQL runs as when this process is root.
const SERVER_USER: &str = "postgres";
/// The longest Unix socket path: `sizeof(sun_path)` less its terminating NUL.
const MAX_SOCKET_PATH: usize = 107;
/// How every cluster is created: anyone on 127.0.0.1 may connect as `postgres`.
const INITDB_ARGS: [&str; 4] = ["--auth=trust", "--username=postgres", "--encoding=UTF8", "--locale=C"];
/// The watchdog's script (see [`Programs::watchdog`]): `$1` is `pg_ctl`, `$2` the data
/// directory, `$3` whether to remove it.
const WATCHDOG_SCRIPT: &str = r#"trap '' HUP INT TERM
while read -r _; do :; done
"$1" stop -D "$2" -m fast -w -t 30 >/dev/null 2>&1
if [ "$3" = remove ]; then rm -rf -- "$2"; fi
"#;
/// How many threads copy a cluster template.
const COPY_THREADS: usize = 8;
/// How much of the server log an error quotes.
const LOG_TAIL_LINES: usize = 20;

/// Options for a throwaway or persistent cluster.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// The cluster's directory: `initdb` creates a cluster there when it has no `PG_VERSION`,
    /// and one that has it is reused.
    pub data_dir: PathBuf,
    /// The TCP port on 127.0.0.1; `None` picks a free one.
    pub port: Option<u16>,
    /// `false` trades crash safety for speed (`fsync`, `synchronous_commit` and
    /// `full_page_writes` off), which is right for tests; `outbox dev` keeps its data.
    pub durable: bool,
    /// Delete the data directory once the server has stopped.
    pub remove_on_drop: bool,
    /// Also stop the server (and honour `remove_on_drop`) when this process exits without
    /// dropping the handle: from a `static`, on `exit`, a panic that aborts, or `SIGKILL`.
    pub stop_with_process: bool,
}

impl EmbeddedOptions {
    /// A fresh, non-durable cluster in a new directory under the temp dir, deleted on drop.
    pub fn throwaway() -> EmbeddedOptions {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.subsec_nanos());
        let unique = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("outbox-pg-{}-{nanos}-{unique}", std::process::id());
        let data_dir = std::env::temp_dir().join(name);
        EmbeddedOptions { data_dir, port: None, durable: false, remove_on_drop: true, stop_with_process: false }
    }

    /// A durable cluster in `dir`, created on first use and kept afterwards.
    pub fn persistent(dir: impl Into<PathBuf>) -> EmbeddedOptions {
        EmbeddedOptions {
            data_dir: dir.into(),
            port: None,
            durable: true,
            remove_on_drop: false,
            stop_with_process: false,
        }
    }

    /// Sets [`stop_with_process`](EmbeddedOptions::stop_with_process).
    pub fn stop_with_process(self) -> EmbeddedOptions {
        EmbeddedOptions { stop_with_process: true, ..self }
    }
}

/// What went wrong starting or stopping an embedded cluster.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddedError {
    /// No directory searched holds both `initdb` and `pg_ctl`.
    #[error(
        "postgresql server binaries (initdb, pg_ctl) not found in [{}]; install the `postgresql` package \
         or set OUTBOX_PG_BINDIR",
        list_paths(.searched)
    )]
    BinariesNotFound {
        /// Every directory looked in, in order.
        searched: Vec<PathBuf>,
    },
    /// This process is root and there is no `postgres` user to run PostgreSQL as.
    #[error(
        "running as root, and /etc/passwd has no `postgres` user to run postgresql as; install the \
         `postgresql` package or run as an unprivileged user"
    )]
    NoUnprivilegedUser,
    /// A parent of the data directory is closed to the `postgres` user.
    #[error(
        "the `postgres` user cannot enter {blocked}, a parent of the data directory {data_dir}; choose a data \
         directory it can reach, such as /tmp/outbox-pg"
    )]
    DirNotReachable {
        /// The data directory asked for.
        data_dir: PathBuf,
        /// The first parent the user cannot enter.
        blocked: PathBuf,
    },
    /// A server is already running on the data directory.
    #[error(
        "a postgresql server is already running on {data_dir}; stop it first (`pg_ctl stop -D {data_dir}`, as the \
         user that owns the directory)"
    )]
    AlreadyRunning {
        /// The data directory in use.
        data_dir: PathBuf,
    },
    /// A file or process operation failed.
    #[error("could not {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The operating system's error.
        source: io::Error,
    },
    /// A PostgreSQL program exited unsuccessfully.
    #[error("{what} failed ({status}):\n{output}")]
    Command {
        /// The program and its action, e.g. `pg_ctl start`.
        what: String,
        /// How it exited.
        status: String,
        /// What it printed, and the server log's last lines when the server was involved.
        output: String,
    },
    /// The server did not accept connections in time.
    #[error("postgresql did not accept connections in {} s; the server log ends with:\n{log_tail}", TIMEOUT.as_secs())]
    StartTimeout {
        /// The server log's last lines.
        log_tail: String,
    },
}

/// A running PostgreSQL cluster on 127.0.0.1, stopped when dropped.
#[derive(Debug)]
pub struct EmbeddedPostgres {
    programs: Programs,
    data_dir: PathBuf,
    port: u16,
    remove_on_drop: bool,
    /// Whether the cluster runs with `fsync` and synchronous commits.
    durable: bool,
    /// Whether `pg_ctl start` has run and no stop has succeeded since.
    running: bool,
    /// The shell that cleans up after this process if it exits without dropping `self`.
    watchdog: Option<Child>,
}

impl EmbeddedPostgres {
    /// Creates the cluster if needed, starts it and waits (up to 30 s) until it accepts TCP
    /// connections.
    ///
    /// Fails with [`EmbeddedError::AlreadyRunning`] when a server already runs on the directory.
    /// On any failure, a server this call started is stopped again and a `remove_on_drop`
    /// directory is deleted.
    pub fn start(options: EmbeddedOptions) -> Result<EmbeddedPostgres, EmbeddedError> {
        let programs = Programs { bindir: find_bindir()?, run_as: server_user()? };
        let data_dir = create_data_dir(&options.data_dir, programs.run_as)?;
        let remove_on_drop = options.remove_on_drop;
        let durable = options.durable;
        let mut server =
            EmbeddedPostgres { programs, data_dir, port: 0, remove_on_drop, durable, running: false, watchdog: None };
        if let Some(user) = server.programs.run_as {
            check_reachable(&server.data_dir, user)?;
        }
        let has_cluster = server.data_dir.join("PG_VERSION").exists();
        if has_cluster {
            server.refuse_if_running()?;
        }
        if options.stop_with_process {
            server.watchdog = Some(server.programs.watchdog(&server.data_dir, remove_on_drop)?);
        }
        if !has_cluster {
            server.programs.create_cluster(&server.data_dir, options.durable)?;
        }
        server.launch(options.port, options.durable)?;
        Ok(server)
    }

    /// The TCP port the server listens on, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URL of database `postgres` as user `postgres` (no password: the cluster trusts 127.0.0.1).
    pub fn url(&self) -> String {
        self.url_for("postgres")
    }

    /// The URL of `database` as user `postgres`.
    pub fn url_for(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{}", self.port, encode_path_segment(database))
    }

    /// The cluster's directory, made absolute.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Stops the server (`pg_ctl stop -m fast`), waiting until it has exited, then deletes a
    /// `remove_on_drop` directory.
    pub fn stop(mut self) -> Result<(), EmbeddedError> {
        self.dismiss_watchdog();
        self.shutdown("fast")
    }

    /// Stops the server as a crash would (`pg_ctl stop -m immediate`: no checkpoint, every
    /// backend gone at once) and starts it again on the same port, waiting until it accepts
    /// TCP connections after its crash recovery. Committed transactions survive it unless
    /// the cluster is not [`durable`](EmbeddedOptions::durable), whose asynchronous commits
    /// may be lost.
    pub fn restart_immediately(&mut self) -> Result<(), EmbeddedError> {
        self.shutdown("immediate")?;
        let durable = self.durable;
        self.pg_ctl_start(durable)?;
        self.wait_for_tcp(Instant::now() + TIMEOUT)
    }

    /// Kills the watchdog before an orderly stop: were it merely let go, it would wake up
    /// and could stop a later server on the same directory.
    fn dismiss_watchdog(&mut self) {
        if let Some(mut watchdog) = self.watchdog.take() {
            let _ = watchdog.kill();
            let _ = watchdog.wait();
        }
    }

    /// Fails when `pg_ctl status` finds a live server; then the directory must outlive `self`.
    fn refuse_if_running(&mut self) -> Result<(), EmbeddedError> {
        let mut command = self.programs.command("pg_ctl");
        command.arg("status").arg("-D").arg(&self.data_dir);
        let output = command.output().map_err(|source| io_error("run pg_ctl status", source))?;
        if !output.status.success() {
            return Ok(());
        }
        self.remove_on_drop = false;
        Err(EmbeddedError::AlreadyRunning { data_dir: self.data_dir.clone() })
    }

    /// Starts the server, picking another free port when the one picked was taken meanwhile.
    fn launch(&mut self, port: Option<u16>, durable: bool) -> Result<(), EmbeddedError> {
        let deadline = Instant::now() + TIMEOUT;
        let mut attempts_left = if port.is_some() { 1 } else { PORT_ATTEMPTS };
        loop {
            attempts_left -= 1;
            self.port = port.map_or_else(free_port, Ok)?;
            let log_start = fs::metadata(self.log_path()).map_or(0, |meta| meta.len());
            match self.pg_ctl_start(durable) {
                Err(_) if attempts_left > 0 && self.port_was_taken(log_start) => continue,
                result => return result.and_then(|()| self.wait_for_tcp(deadline)),
            }
        }
    }

    fn pg_ctl_start(&mut self, durable: bool) -> Result<(), EmbeddedError> {
        let mut command = self.programs.command("pg_ctl");
        command.args(["start", "--wait", "--timeout", &TIMEOUT.as_secs().to_string(), "-D"]).arg(&self.data_dir);
        command.arg("-l").arg(self.log_path()).arg("-o").arg(self.server_options(durable));
        self.running = true;
        let output = command.output().map_err(|source| io_error("run pg_ctl start", source))?;
        if output.status.success() {
            return Ok(());
        }
        let log_tail = self.log_tail();
        let printed = printed(&output);
        if printed.contains("did not start in time") {
            return Err(EmbeddedError::StartTimeout { log_tail });
        }
        let status = output.status.to_string();
        let output = format!("{printed}\nthe server log ends with:\n{log_tail}");
        Err(EmbeddedError::Command { what: "pg_ctl start".into(), status, output })
    }

    /// The postgres command-line options; `pg_ctl` hands them to `/bin/sh`, hence the quoting.
    fn server_options(&self, durable: bool) -> String {
        let sockets = shell_quote(&format!("unix_socket_directories={}", socket_dir_setting(&self.data_dir)));
        let mut options = format!("-p {} -c listen_addresses=127.0.0.1 -c max_connections=200 -c {sockets}", self.port);
        if !durable {
            options.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        options
    }

    /// Whether the log written since `log_start` says the port was in use.
    fn port_was_taken(&self, log_start: u64) -> bool {
        read_from(&self.log_path(), log_start).is_ok_and(|log| log.contains("Address already in use"))
    }

    /// `pg_ctl --wait` returns once the server is ready; this also proves the TCP port answers.
    fn wait_for_tcp(&self, deadline: Instant) -> Result<(), EmbeddedError> {
        let address = SocketAddr::from((Ipv4Addr::LOCALHOST, self.port));
        while TcpStream::connect_timeout(&address, Duration::from_secs(1)).is_err() {
            if Instant::now() >= deadline {
                return Err(EmbeddedError::StartTimeout { log_tail: self.log_tail() });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Stops a running server; a no-op once stopped.
    fn shutdown(&mut self, mode: &str) -> Result<(), EmbeddedError> {
        if !self.running {
            return Ok(());
        }
        let mut command = self.programs.command("pg_ctl");
        command.args(["stop", "--wait", "--timeout", &TIMEOUT.as_secs().to_string(), "-m", mode, "-D"]);
        command.arg(&self.data_dir);
        run("pg_ctl stop", &mut command)?;
        self.running = false;
        Ok(())
    }

    fn log_path(&self) -> PathBuf {
        self.data_dir.join("server.log")
    }

    fn log_tail(&self) -> String {
        let path = self.log_path();
        let start = fs::metadata(&path).map_or(0, |meta| meta.len().saturating_sub(8 * 1024));
        match read_from(&path, start) {
            Ok(log) => last_lines(&log, LOG_TAIL_LINES),
            Err(err) => format!("(could not read {}: {err})", path.display()),
        }
    }
}

impl Drop for EmbeddedPostgres {
    fn drop(&mut self) {
        self.dismiss_watchdog();
        if self.shutdown("fast").is_err() {
            let _ = self.shutdown("immediate");
        }
        if self.remove_on_drop {
            let _ = fs::remove_dir_all(&self.data_dir);
        }
    }
}

/// Where `initdb` and `pg_ctl` live: `$OUTBOX_PG_BINDIR` if set (and then only there),
/// else the first of `pg_config --bindir`, the `PATH`, and the highest
/// `/usr/lib/postgresql/*/bin` that holds both.
pub fn find_bindir() -> Result<PathBuf, EmbeddedError> {
    let override_dir = std::env::var_os("OUTBOX_PG_BINDIR").filter(|dir| !dir.is_empty());
    let candidates: Vec<PathBuf> = match override_dir {
        Some(dir) => vec![PathBuf::from(dir)],
        None => pg_config_bindir()
            .into_iter()
            .chain(
                std::env::var_os("PATH")
                    .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
                    .unwrap_or_default(),
            )
            .chain(versioned_bindirs(Path::new("/usr/lib/postgresql")))
            .collect(),
    };
    match candidates.iter().find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file()) {
        Some(dir) => Ok(dir.clone()),
        None => Err(EmbeddedError::BinariesNotFound { searched: candidates }),
    }
}

fn pg_config_bindir() -> Option<PathBuf> {
    let output = Command::new("pg_config").arg("--bindir").stdin(Stdio::null()).output().ok()?;
    let dir = String::from_utf8(output.stdout).ok()?;
    (output.status.success() && !dir.trim().is_empty()).then(|| PathBuf::from(dir.trim()))
}

/// `root/<version>/bin` for each version directory under `root`, highest version first.
fn versioned_bindirs(root: &Path) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(root) else { return Vec::new() };
    let mut versions: Vec<(Vec<u32>, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| Some((parse_version(entry.file_name().to_str()?)?, entry.path().join("bin"))))
        .collect();
    versions.sort_by(|a, b| b.0.cmp(&a.0));
    versions.into_iter().map(|(_, dir)| dir).collect()
}

/// `"15"` → `[15]`, `"9.6"` → `[9, 6]`; anything else is not a version directory.
fn parse_version(name: &str) -> Option<Vec<u32>> {
    name.split('.').map(|part| part.parse().ok()).collect()
}

/// The user PostgreSQL's programs run as: this process's own unless it is root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct User {
    uid: u32,
    gid: u32,
}

/// `Some(postgres)` when this process is root, else `None`.
fn server_user() -> Result<Option<User>, EmbeddedError> {
    if process_uid() != Some(0) {
        return Ok(None);
    }
    let passwd = fs::read_to_string("/etc/passwd").map_err(|source| io_error("read /etc/passwd", source))?;
    find_user(&passwd, SERVER_USER).map(Some).ok_or(EmbeddedError::NoUnprivilegedUser)
}

/// This process's effective user id, as the owner of `/proc/self`.
fn process_uid() -> Option<u32> {
    fs::metadata("/proc/self").ok().map(|meta| meta.uid())
}

/// Finds `name` in the text of `/etc/passwd` (`name:password:uid:gid:…`).
fn find_user(passwd: &str, name: &str) -> Option<User> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        if fields.next()? != name {
            return None;
        }
        let _password = fields.next()?;
        Some(User { uid: fields.next()?.parse().ok()?, gid: fields.next()?.parse().ok()? })
    })
}

/// Creates `dir`, hands it to `run_as` unless it already holds a cluster, and makes it absolute.
fn create_data_dir(dir: &Path, run_as: Option<User>) -> Result<PathBuf, EmbeddedError> {
    let what = |action: &str| format!("{action} data directory {}", dir.display());
    fs::create_dir_all(dir).map_err(|source| io_error(&what("create"), source))?;
    let dir = fs::canonicalize(dir).map_err(|source| io_error(&what("resolve"), source))?;
    if let Some(user) = run_as.filter(|_| !dir.join("PG_VERSION").exists()) {
        chown(&dir, Some(user.uid), Some(user.gid)).map_err(|source| io_error(&what("hand over"), source))?;
    }
    Ok(dir)
}

/// Fails unless `user` can enter every parent of `data_dir` (judged by mode bits, as the
/// child runs with its primary group only: `Command::uid` drops supplementary groups).
fn check_reachable(data_dir: &Path, user: User) -> Result<(), EmbeddedError> {
    for parent in data_dir.ancestors().skip(1) {
        let meta = fs::metadata(parent).map_err(|source| io_error(&format!("inspect {}", parent.display()), source))?;
        if !can_enter(meta.mode(), meta.uid(), meta.gid(), user) {
            return Err(EmbeddedError::DirNotReachable { data_dir: data_dir.into(), blocked: parent.into() });
        }
    }
    Ok(())
}

fn can_enter(mode: u32, owner: u32, group: u32, user: User) -> bool {
    let search_bit = if owner == user.uid {
        0o100
    } else if group == user.gid {
        0o010
    } else {
        0o001
    };
    mode & search_bit != 0
}

/// PostgreSQL's programs, run as the server user when this process is root.
#[derive(Debug, Clone)]
struct Programs {
    bindir: PathBuf,
    run_as: Option<User>,
}

impl Programs {
    /// A command for `program` with no input, run from `/` (the caller's directory may be closed to
    /// the server user); every path handed to it must be absolute.
    fn command(&self, program: &str) -> Command {
        self.as_server_user(Command::new(self.bindir.join(program)))
    }

    fn as_server_user(&self, mut command: Command) -> Command {
        command.current_dir("/").stdin(Stdio::null());
        if let Some(user) = self.run_as {
            command.uid(user.uid).gid(user.gid);
        }
        command
    }

    /// Starts a shell that waits for end-of-file on its stdin, whose write end only this
    /// process holds (std opens pipes close-on-exec): when this process exits, however it
    /// exits, the kernel closes that end and the shell stops the server and, if `remove`,
    /// deletes `data_dir`. It runs in a process group of its own and ignores the terminal's
    /// signals, so a Ctrl-C that kills this process does not kill it too.
    fn watchdog(&self, data_dir: &Path, remove: bool) -> Result<Child, EmbeddedError> {
        let mut command = self.as_server_user(Command::new("/bin/sh"));
        command.args(["-c", WATCHDOG_SCRIPT, "outbox-pg-watchdog"]).arg(self.bindir.join("pg_ctl")).arg(data_dir);
        command.arg(if remove { "remove" } else { "keep" });
        command.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::null()).process_group(0);
        command.spawn().map_err(|source| io_error("start the watchdog shell", source))
    }

    /// Fills the empty `data_dir` with a new cluster.
    fn create_cluster(&self, data_dir: &Path, durable: bool) -> Result<(), EmbeddedError> {
        if durable { self.initdb(data_dir, true) } else { self.init_from_template(data_dir) }
    }

    fn initdb(&self, data_dir: &Path, durable: bool) -> Result<(), EmbeddedError> {
        let mut command = self.command("initdb");
        command.arg("-D").arg(data_dir).args(INITDB_ARGS);
        if !durable {
            command.arg("--no-sync");
        }
        run("initdb", &mut command).map(drop)
    }

    /// Fills the empty `data_dir` with a copy of a pristine cluster kept under the temp dir,
    /// made by `initdb` on first use, or runs `initdb` itself when no template can be made.
    ///
    /// A non-durable cluster is for tests, which start many: `initdb` creates about a thousand
    /// files through a single-user backend and takes seconds on a slow disk, while copying
    /// them takes a fraction of that. The template is a plain cluster directory that is never
    /// started; it appears under its final name only once complete (by `rename`), and is
    /// rebuilt when deleted.
    fn init_from_template(&self, data_dir: &Path) -> Result<(), EmbeddedError> {
        match self.template() {
            Ok(template) => copy_cluster(&template, data_dir, self.run_as),
            Err(_) => self.initdb(data_dir, false),
        }
    }

    fn template(&self) -> Result<PathBuf, EmbeddedError> {
        let template = std::env::temp_dir().join(format!("outbox-pg-template-{}", self.template_key()));
        if template.join("PG_VERSION").is_file() {
            return Ok(template);
        }
        let staging = create_data_dir(&EmbeddedOptions::throwaway().data_dir, self.run_as)?;
        let made = self.initdb(&staging, false).and_then(|()| {
            fs::rename(&staging, &template).map_err(|source| io_error("move the cluster template into place", source))
        });
        if made.is_err() {
            let _ = fs::remove_dir_all(&staging);
        }
        // Another process may have moved its own template into place first; it is as good as ours.
        if template.join("PG_VERSION").is_file() { Ok(template) } else { made.map(|()| template) }
    }

    /// Names the template after what makes clusters differ: the binaries, the `initdb`
    /// arguments, and the user who owns the files.
    fn template_key(&self) -> String {
        let mut hasher = DefaultHasher::new();
        self.bindir.hash(&mut hasher);
        fs::metadata(self.bindir.join("initdb")).and_then(|meta| meta.modified()).ok().hash(&mut hasher);
        INITDB_ARGS.hash(&mut hasher);
        let owner = self.run_as.map(|user| user.uid).or_else(process_uid);
        format!("{}-{:016x}", owner.unwrap_or(u32::MAX), hasher.finish())
    }
}

/// Copies the cluster `template` into the empty `data_dir`, handing every file to `owner`.
fn copy_cluster(template: &Path, data_dir: &Path, owner: Option<User>) -> Result<(), EmbeddedError> {
    let copy = || {
        let mut files = Vec::new();
        copy_dirs(template, data_dir, owner, &mut files)?;
        copy_files(&files, owner)?;
        // PostgreSQL refuses a data directory that others may read.
        fs::set_permissions(data_dir, fs::metadata(template)?.permissions())
    };
    copy().map_err(|source| {
        io_error(&format!("copy the cluster template {} to {}", template.display(), data_dir.display()), source)
    })
}

/// Recreates the directories under `from` under `to`, and lists the files to copy.
fn copy_dirs(from: &Path, to: &Path, owner: Option<User>, files: &mut Vec<(PathBuf, PathBuf)>) -> io::Result<()> {
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if !entry.file_type()?.is_dir() {
            files.push((entry.path(), target));
            continue;
        }
        fs::create_dir(&target)?;
        fs::set_permissions(&target, entry.metadata()?.permissions())?;
        hand_over(&target, owner)?;
        copy_dirs(&entry.path(), &target, owner, files)?;
    }
    Ok(())
}

/// Copies `files` on a few threads: creating a file costs a disk round trip on a slow disk,
/// and several of them overlap.
fn copy_files(files: &[(PathBuf, PathBuf)], owner: Option<User>) -> io::Result<()> {
    let chunk = files.len().div_ceil(COPY_THREADS).max(1);
    let copy_chunk = |chunk: &[(PathBuf, PathBuf)]| {
        chunk.iter().try_for_each(|(from, to)| fs::copy(from, to).and_then(|_| hand_over(to, owner)))
    };
    std::thread::scope(|scope| {
        let threads: Vec<_> = files.chunks(chunk).map(|chunk| scope.spawn(move || copy_chunk(chunk))).collect();
        threads
            .into_iter()
            .try_for_each(|thread| thread.join().unwrap_or_else(|_| Err(io::Error::other("copy panicked"))))
    })
}

fn hand_over(path: &Path, owner: Option<User>) -> io::Result<()> {
    owner.map_or(Ok(()), |user| chown(path, Some(user.uid), Some(user.gid)))
}

/// Runs `command` to completion; a failure carries everything it printed.
fn run(what: &str, command: &mut Command) -> Result<Output, EmbeddedError> {
    let output = command.output().map_err(|source| io_error(&format!("run {what}"), source))?;
    if output.status.success() {
        return Ok(output);
    }
    Err(EmbeddedError::Command { what: what.into(), status: output.status.to_string(), output: printed(&output) })
}

fn printed(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    format!("{}\n{}", stdout.trim(), stderr.trim()).trim().to_owned()
}

fn io_error(what: &str, source: io::Error) -> EmbeddedError {
    EmbeddedError::Io { what: what.into(), source }
}

fn free_port() -> Result<u16, EmbeddedError> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|source| io_error("find a free port", source))?;
    listener.local_addr().map(|address| address.port()).map_err(|source| io_error("find a free port", source))
}

/// The `unix_socket_directories` value: the data directory, quoted for PostgreSQL's list
/// syntax, or none at all when the socket path would be too long or the path is not UTF-8
/// (clients use TCP anyway).
fn socket_dir_setting(data_dir: &Path) -> String {
    match data_dir.to_str() {
        Some(dir) if dir.len() + "/.s.PGSQL.65535".len() <= MAX_SOCKET_PATH => {
            format!("\"{}\"", dir.replace('"', "\"\""))
        }
        _ => String::new(),
    }
}

/// Quotes `word` for `/bin/sh`.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// Percent-encodes everything but URL-unreserved characters.
fn encode_path_segment(segment: &str) -> String {
    segment
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => char::from(byte).to_string(),
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

fn read_from(path: &Path, start: u64) -> io::Result<String> {
    let mut file = File::open(path)?;
    file.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

fn last_lines(text: &str, count: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(count)..].join("\n")
}

fn list_paths(paths: &[PathBuf]) -> String {
    paths.iter().map(|path| path.display().to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `sql` through psql over TCP and returns what it printed, unaligned.
    fn psql(server: &EmbeddedPostgres, sql: &str) -> String {
        let psql = find_bindir().map(|dir| dir.join("psql")).ok().filter(|path| path.is_file());
        let output = Command::new(psql.unwrap_or_else(|| "psql".into()))
            .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"])
            .args(["-p", &server.port().to_string(), "-c", sql])
            .output()
            .expect("psql runs");
        assert!(output.status.success(), "psql failed: {}", String::from_utf8_lossy(&output.stderr));
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }

    fn answers_tcp(port: u16) -> bool {
        TcpStream::connect_timeout(&SocketAddr::from((Ipv4Addr::LOCALHOST, port)), Duration::from_secs(1)).is_ok()
    }

    #[test]
    fn a_throwaway_cluster_serves_sql_and_leaves_nothing_behind() {
        let server = EmbeddedPostgres::start(EmbeddedOptions::throwaway()).unwrap();
        let (port, dir) = (server.port(), server.data_dir().to_owned());
        assert_ne!(port, 5432);
        assert!(answers_tcp(port));
        assert_eq!(psql(&server, "select 1"), "1");
        assert_eq!(psql(&server, "show fsync"), "off");
        assert_eq!(server.url(), format!("postgres://postgres@127.0.0.1:{port}/postgres"));
        server.stop().unwrap();
        assert!(!dir.exists(), "{} still exists", dir.display());
        assert!(!answers_tcp(port));
    }

    #[test]
    fn dropping_stops_the_server() {
        let server = EmbeddedPostgres::start(EmbeddedOptions::throwaway()).unwrap();
        let (port, dir) = (server.port(), server.data_dir().to_owned());
        drop(server);
        assert!(!dir.exists());
        assert!(!answers_tcp(port));
    }

    #[test]
    fn a_stopped_server_dismisses_its_watchdog() {
        let dir = EmbeddedOptions::throwaway().data_dir;
        let options = EmbeddedOptions { durable: false, ..EmbeddedOptions::persistent(&dir) }.stop_with_process();
        EmbeddedPostgres::start(options.clone()).unwrap().stop().unwrap();
        let second = EmbeddedPostgres::start(EmbeddedOptions { remove_on_drop: true, ..options }).unwrap();
        std::thread::sleep(Duration::from_millis(300)); // room for a wrongly woken watchdog to strike
        assert_eq!(psql(&second, "select 1"), "1");
    }

    #[test]
    fn two_clusters_run_side_by_side_on_different_ports() {
        let first = EmbeddedPostgres::start(EmbeddedOptions::throwaway()).unwrap();
        let second = EmbeddedPostgres::start(EmbeddedOptions::throwaway()).unwrap();
        assert_ne!(first.port(), second.port());
        assert_ne!(first.data_dir(), second.data_dir());
        assert_eq!(psql(&first, "select 1"), "1");
        assert_eq!(psql(&second, "select 2"), "2");
    }

    #[test]
    fn a_persistent_cluster_keeps_its_data_and_refuses_a_second_server() {
        let dir = EmbeddedOptions::throwaway().data_dir;
        let options = EmbeddedOptions { durable: false, ..EmbeddedOptions::persistent(&dir) };
        let first = EmbeddedPostgres::start(options.clone()).unwrap();
        psql(&first, "create table kept (n int); insert into kept values (7)");
        let again = EmbeddedPostgres::start(options.clone());
        assert!(matches!(again, Err(EmbeddedError::AlreadyRunning { .. })), "{again:?}");
        first.stop().unwrap();
        assert!(dir.join("PG_VERSION").is_file());

        let second = EmbeddedPostgres::start(EmbeddedOptions { remove_on_drop: true, ..options }).unwrap();
        assert_eq!(psql(&second, "select n from kept"), "7");
        second.stop().unwrap();
        assert!(!dir.exists());
    }

    #[test]
    fn an_immediate_restart_ends_every_session_and_keeps_what_was_committed() {
        let dir = EmbeddedOptions::throwaway().data_dir;
        let options = EmbeddedOptions { remove_on_drop: true, ..EmbeddedOptions::persistent(&dir) };
        let mut server = EmbeddedPostgres::start(options).unwrap();
        let port = server.port();
        psql(&server, "create table kept (n int); insert into kept values (7)");
        let started = psql(&server, "select pg_postmaster_start_time()");
        server.restart_immediately().unwrap();
        assert_eq!(server.port(), port);
        assert_eq!(psql(&server, "select n from kept"), "7");
        assert_ne!(psql(&server, "select pg_postmaster_start_time()"), started, "a new postmaster");
        let log = fs::read_to_string(server.log_path()).unwrap();
        assert!(log.contains("not properly shut down"), "crash recovery ran: {}", last_lines(&log, 10));
    }

    #[test]
    fn find_bindir_finds_initdb_and_pg_ctl() {
        let dir = find_bindir().unwrap();
        assert!(dir.join("initdb").is_file() && dir.join("pg_ctl").is_file(), "{}", dir.display());
    }

    #[test]
    fn helpers() {
        assert_eq!(parse_version("15"), Some(vec![15]));
        assert_eq!(parse_version("9.6"), Some(vec![9, 6]));
        assert_eq!(parse_version("lib"), None);
        let passwd = "root:x:0:0:root:/root:/bin/bash\npostgres:x:101:104:PostgreSQL:/var/lib/postgresql:/bin/bash\n";
        assert_eq!(find_user(passwd, "postgres"), Some(User { uid: 101, gid: 104 }));
        assert_eq!(find_user(passwd, "nobody"), None);
        let user = User { uid: 101, gid: 104 };
        assert!(can_enter(0o755, 0, 0, user));
        assert!(!can_enter(0o700, 0, 0, user));
        assert!(can_enter(0o750, 0, 104, user));
        assert!(can_enter(0o700, 101, 0, user));
        assert_eq!(shell_quote("a'b c"), r"'a'\''b c'");
        assert_eq!(socket_dir_setting(Path::new("/tmp/a\"b")), r#""/tmp/a""b""#);
        assert_eq!(socket_dir_setting(&Path::new("/tmp").join("x".repeat(100))), "");
        assert_eq!(encode_path_segment("db_1-x"), "db_1-x");
        assert_eq!(encode_path_segment("a b/c"), "a%20b%2Fc");
    }
}
