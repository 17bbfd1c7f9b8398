//! The CPUs this process may run on, so shards are pinned inside the set a
//! user gave with `taskset` or a cgroup cpuset (as Seastar honours
//! `--cpuset`), never onto a CPU outside it.

use std::ops::RangeInclusive;

/// The CPU ids in the process's affinity mask, ascending. Read from
/// `/proc/self/status` (`Cpus_allowed_list`); where that is missing or
/// unreadable, CPUs `0..available_parallelism`.
pub fn allowed_cpus() -> Vec<usize> {
    let from_proc = std::fs::read_to_string("/proc/self/status").ok().and_then(|status| {
        let list = status.lines().find_map(|line| line.strip_prefix("Cpus_allowed_list:"))?;
        parse_cpu_list(list.trim())
    });
    from_proc.unwrap_or_else(|| (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect())
}

/// Parses the kernel's list format, e.g. `0-3,8,10-11`. `None` if malformed
/// or empty.
fn parse_cpu_list(list: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for part in list.split(',') {
        let range: RangeInclusive<usize> = match part.split_once('-') {
            Some((first, last)) => first.trim().parse().ok()?..=last.trim().parse().ok()?,
            None => {
                let cpu = part.trim().parse().ok()?;
                cpu..=cpu
            }
        };
        cpus.extend(range);
    }
    cpus.sort_unstable();
    cpus.dedup();
    (!cpus.is_empty()).then_some(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_cpu_lists() {
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list("0-3,8,10-11"), Some(vec![0, 1, 2, 3, 8, 10, 11]));
        assert_eq!(parse_cpu_list(""), None);
        assert_eq!(parse_cpu_list("x-2"), None);
    }

    #[test]
    fn this_process_may_run_somewhere() {
        assert!(!allowed_cpus().is_empty());
    }
}
