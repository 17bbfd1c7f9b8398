//! `shoal backup` and `shoal restore`: a snapshot's SSTables and the
//! schema copied off the node, and copied back into the tables' `upload/`
//! directories of another (or the same) cluster, for `nodetool refresh`
//! to load. Both run beside the node as their own process, so they use
//! the file system directly; they read the node's schema file.
//!
//! A backup of node `H` is the directory `<to>/<H's host id>/`:
//! - `schema.cql`: the CQL that creates the user keyspaces, types, tables,
//!   indexes and views (DESCRIBE SCHEMA, each `IF NOT EXISTS`), to run
//!   with cqlsh `-f`;
//! - `<keyspace>/<table>/`: the snapshot's SSTable files of every shard,
//!   renumbered `shard0-<n>-*` (the TOC of each copied last, as it marks
//!   one whole), and `columns`, the table's column ids (`<id> <name>`
//!   lines), as cells are stored by id.
//!
//! Several nodes back up into one `<to>`. A restore copies one or more
//! node backups into the `upload/` directories of the tables of the same
//! names on a node of the new cluster (numbered after what is there, so
//! backups do not overwrite each other) with their `columns`; `nodetool
//! refresh <keyspace> <table>` then writes every partition to its
//! replicas. Views and indexes are not copied: loading the base tables
//! rebuilds them.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use shoal_cql::ast::{Describe, DescribeTarget};
use shoal_schema::{Schema, TableMeta};
use shoal_storage::sstable::format::{Component, Descriptor};

use crate::api::COLUMNS_FILE;

#[derive(Debug, Clone, clap::Args)]
pub struct BackupArgs {
    /// The node's workdir (its schema file, host_id and data)
    #[arg(long, default_value = "./data")]
    pub workdir: PathBuf,
    /// The node's data directory [default: WORKDIR/data]
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The snapshot to copy (nodetool snapshot -t TAG)
    #[arg(long, short = 't')]
    pub tag: String,
    /// The directory the backup goes under, in a directory named by the node's host id
    #[arg(long)]
    pub to: PathBuf,
    /// Only this keyspace's tables
    #[arg(long)]
    pub keyspace: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RestoreArgs {
    /// A node backup (`<to>/<host id>` of shoal backup); repeat for several nodes
    #[arg(long = "from", required = true)]
    pub from: Vec<PathBuf>,
    /// The workdir of the node to restore into (running, with the schema created)
    #[arg(long, default_value = "./data")]
    pub workdir: PathBuf,
    /// That node's data directory [default: WORKDIR/data]
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
}

/// A failure of a backup or restore, for the user.
#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    #[error("{0}")]
    Schema(String),
    #[error("{0}: differs from the columns already in {1}; restore backups of one schema together")]
    ColumnsDiffer(String, String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |e| BackupError::Io(path.display().to_string(), e)
}

/// The schema a node's workdir holds.
fn load_schema(workdir: &Path) -> Result<Schema, BackupError> {
    shoal_cql::schema_file::load(&workdir.join("schema.cql")).map_err(|e| BackupError::Schema(e.to_string()))
}

/// The tables a backup holds: the user tables, not views' (rebuilt from
/// their base).
fn user_tables<'a>(schema: &'a Schema, keyspace: Option<&'a str>) -> impl Iterator<Item = &'a TableMeta> + 'a {
    let wanted = move |t: &TableMeta| {
        !shoal_cql::system::is_system_keyspace(&t.keyspace) && keyspace.is_none_or(|k| t.keyspace == k)
    };
    schema.tables().map(|t| &**t).filter(move |t| wanted(t) && t.view_of.is_none())
}

fn table_dir(data_dir: &Path, table: &TableMeta) -> PathBuf {
    data_dir.join(&table.keyspace).join(format!("{}-{}", table.name, table.id.simple()))
}

pub fn backup(args: BackupArgs) -> Result<(), String> {
    run_backup(&args).map_err(|e| e.to_string())
}

fn run_backup(args: &BackupArgs) -> Result<(), BackupError> {
    let schema = load_schema(&args.workdir)?;
    let data_dir = args.data_dir.clone().unwrap_or_else(|| args.workdir.join("data"));
    let host_id_path = args.workdir.join("host_id");
    let host_id = fs::read_to_string(&host_id_path).map_err(io(&host_id_path))?;
    let target = args.to.join(host_id.trim());
    fs::create_dir_all(&target).map_err(io(&target))?;
    write_synced(&target.join("schema.cql"), describe_schema(&schema)?.as_bytes())?;
    let (mut tables, mut sstables) = (0, 0);
    for table in user_tables(&schema, args.keyspace.as_deref()) {
        let snapshot = table_dir(&data_dir, table).join("snapshots").join(&args.tag);
        if !snapshot.is_dir() {
            continue;
        }
        let into = target.join(&table.keyspace).join(&table.name);
        sstables += copy_sstables(&snapshot, &into)?;
        write_columns(&into.join(COLUMNS_FILE), table)?;
        tables += 1;
    }
    sync_dir(&target)?;
    println!("backed up snapshot {} of {tables} table(s), {sstables} SSTable(s), to {}", args.tag, target.display());
    Ok(())
}

pub fn restore(args: RestoreArgs) -> Result<(), String> {
    run_restore(&args).map_err(|e| e.to_string())
}

fn run_restore(args: &RestoreArgs) -> Result<(), BackupError> {
    let schema = load_schema(&args.workdir)?;
    let data_dir = args.data_dir.clone().unwrap_or_else(|| args.workdir.join("data"));
    let mut filled: BTreeMap<(String, String), usize> = BTreeMap::new();
    for from in &args.from {
        for keyspace_dir in subdirs(from)? {
            let keyspace = file_name(&keyspace_dir);
            for backed_up in subdirs(&keyspace_dir)? {
                let name = file_name(&backed_up);
                let Some(table) = schema.table(&keyspace, &name) else {
                    let missing = format!(
                        "no table {keyspace}.{name} on this node: create the schema first (cqlsh -f {}/schema.cql)",
                        from.display()
                    );
                    return Err(BackupError::Schema(missing));
                };
                let upload = table_dir(&data_dir, table).join("upload");
                let copied = copy_sstables(&backed_up, &upload)?;
                copy_columns(&backed_up.join(COLUMNS_FILE), &upload.join(COLUMNS_FILE))?;
                *filled.entry((keyspace.clone(), name)).or_default() += copied;
            }
        }
    }
    for ((keyspace, table), sstables) in filled {
        println!(
            "{sstables} SSTable(s) in {keyspace}.{table}'s upload directory: shoal nodetool refresh {keyspace} {table}"
        );
    }
    Ok(())
}

/// The CQL that creates the user keyspaces and what they hold, each
/// statement `IF NOT EXISTS`: a new cluster has the memcached keyspace
/// already (every node creates it at start), and a restore may be run
/// again.
fn describe_schema(schema: &Schema) -> Result<String, BackupError> {
    let describe = Describe { target: DescribeTarget::Schema { full: false }, with_internals: false };
    let rows = shoal_cql::describe::execute(&describe, schema, None).map_err(|e| BackupError::Schema(e.to_string()))?;
    let statements = rows.rows.iter().filter_map(|row| row.get(3).cloned().flatten());
    Ok(statements.map(|s| if_not_exists(&String::from_utf8_lossy(&s)) + "\n").collect())
}

/// `CREATE <kind> ...` as `CREATE <kind> IF NOT EXISTS ...`.
fn if_not_exists(statement: &str) -> String {
    const KINDS: [&str; 5] = ["KEYSPACE", "TABLE", "TYPE", "INDEX", "MATERIALIZED VIEW"];
    for kind in KINDS {
        let create = format!("CREATE {kind} ");
        if let Some(rest) = statement.strip_prefix(&create) {
            return format!("{create}IF NOT EXISTS {rest}");
        }
    }
    statement.to_string()
}

/// Copies every whole SSTable of `from` into `into`, numbered after the
/// generations already there, each TOC last; returns how many.
fn copy_sstables(from: &Path, into: &Path) -> Result<usize, BackupError> {
    fs::create_dir_all(into).map_err(io(into))?;
    let first = generations(into)?.last().map_or(1, |g| g + 1);
    let sources = whole_sstables(from)?;
    for (generation, source) in (first..).zip(&sources) {
        let target = Descriptor { dir: into.to_path_buf(), shard: 0, generation };
        let components = Component::ALL.into_iter().filter(|c| *c != Component::Toc).chain([Component::Toc]);
        for component in components {
            let (src, dst) = (source.path(component), target.path(component));
            fs::copy(&src, &dst).map_err(io(&src))?;
            fs::File::open(&dst).and_then(|f| f.sync_all()).map_err(io(&dst))?;
        }
    }
    sync_dir(into)?;
    Ok(sources.len())
}

/// The SSTables of `dir` with a TOC (written last, so whole).
fn whole_sstables(dir: &Path) -> Result<Vec<Descriptor>, BackupError> {
    let mut found = BTreeMap::new();
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let name = entry.map_err(io(dir))?.file_name().to_string_lossy().into_owned();
        if let Some((d, Some(Component::Toc))) = Descriptor::parse(dir, &name) {
            found.insert((d.shard, d.generation), d);
        }
    }
    Ok(found.into_values().collect())
}

/// The generations of the SSTable files in `dir`, whole or not, sorted.
fn generations(dir: &Path) -> Result<Vec<u64>, BackupError> {
    let mut found: Vec<u64> = Vec::new();
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let name = entry.map_err(io(dir))?.file_name().to_string_lossy().into_owned();
        found.extend(Descriptor::parse(dir, &name).map(|(d, _)| d.generation));
    }
    found.sort_unstable();
    Ok(found)
}

fn write_columns(path: &Path, table: &TableMeta) -> Result<(), BackupError> {
    let lines: String = table.columns.iter().map(|c| format!("{} {}\n", c.id, c.name)).collect();
    write_synced(path, lines.as_bytes())
}

/// Copies a backup's column file beside the uploaded SSTables; one there
/// already (from another node's backup) must say the same.
fn copy_columns(from: &Path, to: &Path) -> Result<(), BackupError> {
    let columns = fs::read(from).map_err(io(from))?;
    match fs::read(to) {
        Ok(there) if there == columns => Ok(()),
        Ok(_) => Err(BackupError::ColumnsDiffer(from.display().to_string(), to.display().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => write_synced(to, &columns),
        Err(e) => Err(io(to)(e)),
    }
}

fn write_synced(path: &Path, bytes: &[u8]) -> Result<(), BackupError> {
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut file = fs::File::create(path)?;
        file.write_all(bytes)?;
        file.sync_all()
    };
    write().map_err(io(path))
}

fn sync_dir(dir: &Path) -> Result<(), BackupError> {
    fs::File::open(dir).and_then(|d| d.sync_all()).map_err(io(dir))
}

fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, BackupError> {
    let mut dirs = Vec::new();
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        if entry.file_type().map_err(io(dir))?.is_dir() {
            dirs.push(entry.path());
        }
    }
    dirs.sort();
    Ok(dirs)
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sstable(dir: &Path, shard: usize, generation: u64, whole: bool) {
        let d = Descriptor { dir: dir.to_path_buf(), shard, generation };
        for c in Component::ALL.into_iter().filter(|c| whole || *c != Component::Toc) {
            fs::write(d.path(c), format!("{shard}-{generation}-{}", c.file_suffix())).expect("write");
        }
    }

    #[test]
    fn schema_statements_become_if_not_exists() {
        assert_eq!(
            if_not_exists("CREATE TABLE ks.t (k int PRIMARY KEY);"),
            "CREATE TABLE IF NOT EXISTS ks.t (k int PRIMARY KEY);"
        );
        assert_eq!(if_not_exists("CREATE MATERIALIZED VIEW ks.v AS"), "CREATE MATERIALIZED VIEW IF NOT EXISTS ks.v AS");
        assert_eq!(if_not_exists("CREATE ROLE r"), "CREATE ROLE r");
    }

    #[test]
    fn copies_whole_sstables_numbered_after_those_there() {
        let root = std::env::temp_dir().join(format!("shoal-backup-test-{}", std::process::id()));
        let (from, into) = (root.join("from"), root.join("into"));
        fs::create_dir_all(&from).expect("mkdir");
        sstable(&from, 0, 4, true);
        sstable(&from, 1, 4, true);
        sstable(&from, 1, 5, false);
        assert_eq!(copy_sstables(&from, &into).expect("copy"), 2);
        assert_eq!(copy_sstables(&from, &into).expect("copy again"), 2);
        assert_eq!(
            generations(&into).expect("list").into_iter().collect::<std::collections::BTreeSet<_>>(),
            (1..=4).collect()
        );
        let first = Descriptor { dir: into.clone(), shard: 0, generation: 1 };
        assert_eq!(fs::read_to_string(first.path(Component::Data)).expect("read"), "0-4-Data.db");
        assert_eq!(whole_sstables(&into).expect("list").len(), 4);
        fs::remove_dir_all(&root).expect("clean up");
    }
}
