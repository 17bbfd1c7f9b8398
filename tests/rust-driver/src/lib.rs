//! Tests Shoal with ScyllaDB's Rust driver (the `scylla` crate), shard-aware
//! routing included. The tests are in `tests/`; this library only starts and
//! stops a `shoal` server for them.
//!
//! Which binary runs (see [`shoal_binary`]):
//!
//! 1. `SHOAL_BIN`, if set (a relative path is tried from the current directory,
//!    then from the workspace root, since `cargo test` runs tests from the
//!    package directory);
//! 2. otherwise the test runs `cargo build -p shoal --bin shoal` in the same
//!    target directory and profile as the test itself and uses that binary.
//!    `cargo test --workspace` does not build `target/debug/shoal` on its own
//!    (the `shoal` package has no integration tests, and cargo builds binaries
//!    only for the integration tests of their own package), and a binary left
//!    over from an earlier build may be stale; when everything is current this
//!    build is a no-op;
//! 3. if cargo cannot be run at all, an existing `target/debug/shoal` or
//!    `target/release/shoal`.
//!
//! [`Server`] starts the binary on free loopback ports in a fresh workdir and
//! kills it when dropped (also when a test panics; the server's log is printed
//! then).

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a server may take to accept connections after it is spawned.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The Prometheus counter of single-partition requests that arrived on a shard
/// not owning their token.
pub const FORWARDED_METRIC: &str = "shoal_cql_forwarded_requests_total";

/// The workspace root (this package is `tests/rust-driver`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The `shoal` binary to test; see the crate documentation for the order.
pub fn shoal_binary() -> Result<PathBuf, String> {
    if let Some(bin) = std::env::var_os("SHOAL_BIN") {
        let bin = PathBuf::from(bin);
        let candidates =
            if bin.is_absolute() { vec![bin.clone()] } else { vec![bin.clone(), workspace_root().join(&bin)] };
        return candidates.into_iter().find(|p| p.is_file()).ok_or_else(|| {
            format!("SHOAL_BIN={} is not a file (also tried from {})", bin.display(), workspace_root().display())
        });
    }
    let (target_dir, profile) = target_dir_and_profile();
    match build_shoal(&target_dir, &profile) {
        Ok(bin) => Ok(bin),
        Err(BuildError::CargoUnavailable(e)) => {
            let root = workspace_root();
            ["target/debug/shoal", "target/release/shoal"]
                .iter()
                .map(|p| root.join(p))
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    format!(
                        "cannot run cargo to build shoal ({e}), and no target/{{debug,release}}/shoal; set SHOAL_BIN"
                    )
                })
        }
        Err(BuildError::Failed(e)) => Err(e),
    }
}

enum BuildError {
    CargoUnavailable(String),
    Failed(String),
}

/// The target directory and profile the running test executable was built
/// in: it lives at `<target>/<profile dir>/deps/<name>-<hash>`.
fn target_dir_and_profile() -> (PathBuf, String) {
    let fallback = || (workspace_root().join("target"), "debug".to_string());
    let Ok(exe) = std::env::current_exe() else {
        return fallback();
    };
    let Some(profile_dir) = exe.parent().filter(|d| d.ends_with("deps")).and_then(Path::parent) else {
        return fallback();
    };
    match (profile_dir.parent(), profile_dir.file_name().and_then(|n| n.to_str())) {
        (Some(target), Some(profile)) => (target.to_path_buf(), profile.to_string()),
        _ => fallback(),
    }
}

/// Runs `cargo build -p shoal --bin shoal` for `profile` in `target_dir` and
/// returns the binary's path.
fn build_shoal(target_dir: &Path, profile: &str) -> Result<PathBuf, BuildError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| env!("CARGO").into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(workspace_root())
        .args(["build", "--quiet", "-p", "shoal", "--bin", "shoal", "--target-dir"])
        .arg(target_dir);
    match profile {
        "debug" => {}
        "release" => {
            cmd.arg("--release");
        }
        other => {
            cmd.args(["--profile", other]);
        }
    }
    let status = cmd.status().map_err(|e| BuildError::CargoUnavailable(e.to_string()))?;
    if !status.success() {
        return Err(BuildError::Failed(format!(
            "`cargo build -p shoal` failed ({status}); set SHOAL_BIN to test a prebuilt binary"
        )));
    }
    let bin = target_dir.join(profile).join("shoal");
    if bin.is_file() {
        Ok(bin)
    } else {
        Err(BuildError::Failed(format!(
            "`cargo build -p shoal` succeeded but {} does not exist; set SHOAL_BIN",
            bin.display()
        )))
    }
}

/// `n` distinct loopback ports that were free a moment ago.
pub fn free_ports(n: usize) -> Result<Vec<u16>, String> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot bind a free port: {e}"))?;
    listeners.iter().map(|l| l.local_addr().map(|a| a.port()).map_err(|e| e.to_string())).collect()
}

/// A running `shoal` server; dropping it kills the process and removes its
/// workdir.
pub struct Server {
    child: Child,
    workdir: PathBuf,
    /// CQL native transport (connections are spread over the shards).
    pub cql: SocketAddr,
    /// Shard-aware CQL port: a connection lands on shard `source port % smp`.
    pub shard_aware: SocketAddr,
    /// HTTP API (`/metrics`).
    pub api: SocketAddr,
    /// Number of shards the server was started with.
    pub smp: usize,
}

impl Server {
    /// Starts [`shoal_binary`] with `--smp smp` on free loopback ports and
    /// waits (at most [`START_TIMEOUT`]) until all its ports accept
    /// connections. Retries a few times with other ports if the server exits
    /// during start-up (a port taken in the meantime).
    pub fn start(smp: usize) -> Result<Server, String> {
        Self::start_with(smp, &[])
    }

    /// [`Server::start`] with more command-line arguments (e.g.
    /// `--options-file`), which may name no port [`Server::start`] sets.
    pub fn start_with(smp: usize, args: &[&OsStr]) -> Result<Server, String> {
        let bin = shoal_binary()?;
        let mut last_error = String::new();
        for _ in 0..3 {
            match Self::start_once(&bin, smp, args) {
                Ok(server) => return Ok(server),
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    fn start_once(bin: &Path, smp: usize, args: &[&OsStr]) -> Result<Server, String> {
        let ports = free_ports(5)?;
        let unique = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let workdir = std::env::temp_dir().join(format!("shoal-driver-tests-{}-{unique}", std::process::id()));
        std::fs::create_dir_all(workdir.join("data"))
            .map_err(|e| format!("cannot create {}: {e}", workdir.display()))?;
        let log =
            std::fs::File::create(workdir.join("server.log")).map_err(|e| format!("cannot create server.log: {e}"))?;
        let log_err = log.try_clone().map_err(|e| e.to_string())?;
        let child = Command::new(bin)
            .arg("--workdir")
            .arg(workdir.join("data"))
            .args(["--smp", &smp.to_string()])
            .args(["--native-transport-port", &ports[0].to_string()])
            .args(["--native-shard-aware-transport-port", &ports[1].to_string()])
            .args(["--api-port", &ports[2].to_string()])
            .args(["--memcache-port", &ports[3].to_string()])
            .args(["--storage-port", &ports[4].to_string()])
            .args(["--listen-address", "127.0.0.1"])
            .args(args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let at = |port: u16| SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let mut server =
            Server { child, workdir, cql: at(ports[0]), shard_aware: at(ports[1]), api: at(ports[2]), smp };
        // Listeners are bound in this order; the last one means "ready".
        let deadline = Instant::now() + START_TIMEOUT;
        for addr in [server.cql, server.shard_aware, server.api] {
            loop {
                if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                    break;
                }
                if let Ok(Some(status)) = server.child.try_wait() {
                    return Err(format!(
                        "{} exited during start-up ({status}); log:\n{}",
                        bin.display(),
                        server.log_tail(40)
                    ));
                }
                if Instant::now() >= deadline {
                    return Err(format!(
                        "{addr} did not accept connections within {START_TIMEOUT:?}; log:\n{}",
                        server.log_tail(40)
                    ));
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        Ok(server)
    }

    /// The last `lines` lines of the server's output.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.workdir.join("server.log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// `/metrics` from the API port, as text.
    pub fn metrics(&self) -> Result<String, String> {
        let mut stream = TcpStream::connect_timeout(&self.api, Duration::from_secs(5))
            .map_err(|e| format!("connect {}: {e}", self.api))?;
        stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| e.to_string())?;
        write!(stream, "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.api)
            .map_err(|e| format!("send: {e}"))?;
        let mut response = String::new();
        stream.read_to_string(&mut response).map_err(|e| format!("read /metrics: {e}"))?;
        let (head, body) =
            response.split_once("\r\n\r\n").ok_or_else(|| format!("malformed HTTP response: {response:?}"))?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("GET /metrics: {}", head.lines().next().unwrap_or_default()));
        }
        Ok(body.to_string())
    }

    /// [`FORWARDED_METRIC`] per shard, as `(shard label, value)`.
    pub fn forwarded_requests(&self) -> Result<Vec<(String, u64)>, String> {
        let text = self.metrics()?;
        let mut samples = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some(rest) = line.strip_prefix(FORWARDED_METRIC) else {
                continue;
            };
            let (labels, value) = rest.rsplit_once(' ').ok_or_else(|| format!("malformed sample {line:?}"))?;
            if !(labels.is_empty() || labels.starts_with('{')) {
                continue; // another metric whose name starts the same
            }
            let shard =
                labels.split("shard=\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or_default().to_string();
            let value = value.trim().parse::<f64>().map_err(|e| format!("bad value in {line:?}: {e}"))?;
            samples.push((shard, value as u64));
        }
        if samples.is_empty() {
            return Err(format!("no {FORWARDED_METRIC} samples in /metrics:\n{text}"));
        }
        Ok(samples)
    }

    /// [`FORWARDED_METRIC`] summed over the shards; fails unless every shard
    /// reported.
    pub fn forwarded_requests_total(&self) -> Result<u64, String> {
        let samples = self.forwarded_requests()?;
        if samples.len() != self.smp {
            return Err(format!("{FORWARDED_METRIC}: expected {} shards, got {samples:?}", self.smp));
        }
        Ok(samples.iter().map(|(_, v)| v).sum())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("shoal server log (last 60 lines):\n{}", self.log_tail(60));
        }
        let _ = std::fs::remove_dir_all(&self.workdir);
    }
}
