//! `shoal stress`: the load generator (skeleton; filled in by the stress tool work).

/// Options of `shoal stress`.
#[derive(Debug, Clone, clap::Args)]
pub struct StressArgs {}

/// Runs a stress session; the error is a message for the user.
pub fn run(_args: StressArgs) -> Result<(), String> {
    Err("not built yet".into())
}
