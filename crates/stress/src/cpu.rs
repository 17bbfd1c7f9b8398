//! The loader's own CPU use (user + system seconds of this process over the
//! wall time of the run), reported beside the throughput so that a reader
//! can tell a saturated server from a saturated loader: a loader near
//! `--threads` cores busy is the limit, whatever the server shows.
//!
//! Read from `/proc/self/stat` (Linux; elsewhere the figure is absent), in
//! clock ticks of `USER_HZ`, which the kernel fixes at 100 for that file on
//! every architecture Shoal runs on: 10 ms resolution, fine over a run of
//! seconds.

use std::time::Instant;

use serde::Serialize;

/// Ticks per second of the times in `/proc/<pid>/stat`.
const USER_HZ: f64 = 100.0;

/// A reading of the process's CPU time, taken at the start of a run.
#[derive(Debug, Clone, Copy)]
pub struct CpuClock {
    cpu_s: Option<f64>,
    at: Instant,
}

/// CPU used between a [`CpuClock`] reading and the end of the run.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CpuUse {
    /// User + system seconds of the whole loader process.
    pub cpu_s: f64,
    pub wall_s: f64,
    /// `cpu_s / wall_s`: cores kept busy on average.
    pub cores: f64,
}

impl CpuClock {
    pub fn start() -> CpuClock {
        CpuClock { cpu_s: process_cpu_s(), at: Instant::now() }
    }

    /// CPU used since [`CpuClock::start`]; `None` where it cannot be read.
    pub fn stop(&self) -> Option<CpuUse> {
        let cpu_s = process_cpu_s()? - self.cpu_s?;
        let wall_s = self.at.elapsed().as_secs_f64();
        let cores = if wall_s > 0.0 { cpu_s / wall_s } else { 0.0 };
        Some(CpuUse { cpu_s, wall_s, cores })
    }
}

/// User + system CPU seconds of this process so far.
fn process_cpu_s() -> Option<f64> {
    parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line, in seconds.
/// The command name (field 2) is in parentheses and may hold spaces, so the
/// fields are counted from the last `)`.
fn parse_stat(stat: &str) -> Option<f64> {
    let (_, after_name) = stat.rsplit_once(')')?;
    // After the name: field 3 (state) is index 0, so field n is index n - 3.
    let mut fields = after_name.split_whitespace().skip(14 - 3);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_past_odd_command_names() {
        let line = "4242 (shoal (x) y) R 1 4242 4242 0 -1 4194304 100 0 0 0 250 75 0 0 20 0 3 0 1 2 3";
        assert_eq!(parse_stat(line), Some(3.25));
        assert_eq!(parse_stat("4242 (shoal) R 1 2"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_has_a_cpu_clock_on_linux() {
        let clock = CpuClock::start();
        let used = clock.stop();
        if cfg!(target_os = "linux") {
            assert!(used.is_some_and(|u| u.cpu_s >= 0.0 && u.wall_s >= 0.0));
        }
    }
}
