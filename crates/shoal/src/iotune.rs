//! `shoal iotune`: measures the disk under `--workdir` (`shoal_io::iotune`)
//! and writes ScyllaDB's `io_properties.yaml`, which the server reads with
//! `--io-properties-file`.

use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
pub struct IotuneArgs {
    /// The directory whose disk is measured (a scratch file is written there)
    #[arg(long, default_value = "./data")]
    pub workdir: PathBuf,
    /// How long the four measurements take together
    #[arg(long, default_value_t = 4)]
    pub duration_s: u64,
    /// The scratch file's largest size, in MiB
    #[arg(long, default_value_t = 256)]
    pub file_size_mb: u64,
    /// Where to write the result [default: WORKDIR/io_properties.yaml]
    #[arg(long)]
    pub properties_file: Option<PathBuf>,
}

pub fn run(args: IotuneArgs) -> Result<(), String> {
    if args.duration_s == 0 || args.file_size_mb == 0 {
        return Err("--duration-s and --file-size-mb must be at least 1".to_string());
    }
    let options = shoal_io::iotune::IotuneOptions {
        dir: args.workdir.clone(),
        duration: Duration::from_secs(args.duration_s),
        file_size_bytes: args.file_size_mb << 20,
    };
    let report = shoal_io::iotune::run(&options).map_err(|e| e.to_string())?;
    let path = args.properties_file.unwrap_or_else(|| args.workdir.join("io_properties.yaml"));
    let yaml = report.properties.render_yaml(&report.mountpoint);
    std::fs::write(&path, &yaml).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let p = report.properties;
    println!(
        "{}: random 4 KiB reads {} IOPS, writes {} IOPS; sequential reads {} MiB/s, writes {} MiB/s{}",
        report.mountpoint,
        p.read_iops,
        p.write_iops,
        p.read_bandwidth_bytes_per_s >> 20,
        p.write_bandwidth_bytes_per_s >> 20,
        if report.direct { " (O_DIRECT)" } else { " (through the page cache: the filesystem refuses O_DIRECT)" }
    );
    println!("wrote {}", path.display());
    Ok(())
}
