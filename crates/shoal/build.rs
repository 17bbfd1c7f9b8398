//! Names the git commit the binary is built from, for `shoal --version`:
//! `SHOAL_GIT_COMMIT` is `git rev-parse --short=12 HEAD`, or "unknown"
//! outside a git checkout (a source tarball, a crate package).

use std::process::Command;

fn main() {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|out| out.status.success())
            .and_then(|out| String::from_utf8(out.stdout).ok())
            .map(|text| text.trim().to_string())
            .filter(|text| !text.is_empty())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=SHOAL_GIT_COMMIT={commit}");
    // Built again when HEAD moves: a commit, a checkout (HEAD names the
    // branch; the branch's ref, or packed-refs, moves on a commit).
    // A path that does not exist would run this script at every build.
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    let watched = ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref());
    for path in watched.filter_map(|name| git(&["rev-parse", "--git-path", name])) {
        if std::path::Path::new(&path).exists() {
            println!("cargo:rerun-if-changed={path}");
        }
    }
}
