//! Shared by the integration tests: free ports, a child server killed on
//! drop, and running `shoal stress` through the library with a JSON report.

use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clap::Parser;
use shoal_stress::StressArgs;

pub type TestResult = Result<(), Box<dyn std::error::Error>>;

/// `shoal stress` as the `shoal` binary parses it.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: StressArgs,
}

/// `n` distinct loopback ports that were free a moment ago.
pub fn free_ports(n: usize) -> std::io::Result<Vec<u16>> {
    let listeners = (0..n).map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0))).collect::<Result<Vec<_>, _>>()?;
    listeners.iter().map(|l| l.local_addr().map(|a| a.port())).collect()
}

/// A fresh directory under the system temp dir (removed by [`Server`]'s drop).
pub fn temp_dir(tag: &str) -> std::io::Result<PathBuf> {
    let unique = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let dir = std::env::temp_dir().join(format!("shoal-stress-{tag}-{}-{unique}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// A server process, killed (and its directory removed) on drop.
pub struct Server {
    pub child: Child,
    pub dir: PathBuf,
    pub port: u16,
}

impl Server {
    /// Waits until `port` accepts connections, failing if the child exits.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        loop {
            if TcpStream::connect((Ipv4Addr::LOCALHOST, self.port)).is_ok() {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("the server exited during start-up: {status}"));
            }
            if Instant::now() > deadline {
                return Err(format!("port {} not open within {timeout:?}", self.port));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `shoal stress <argv> --json <file>` and returns the JSON report.
pub fn stress(dir: &std::path::Path, argv: &[&str]) -> Result<serde_json::Value, String> {
    let json = dir.join("report.json");
    let json_arg = json.display().to_string();
    let full = std::iter::once("stress").chain(argv.iter().copied()).chain(["--json", json_arg.as_str()]);
    let cli = Cli::try_parse_from(full).map_err(|e| e.to_string())?;
    shoal_stress::run(cli.args)?;
    let text = std::fs::read_to_string(&json).map_err(|e| e.to_string())?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// `report[key]` as u64.
pub fn count(report: &serde_json::Value, key: &str) -> u64 {
    report[key].as_u64().unwrap_or(u64::MAX)
}
