//! `shoal backup` and `shoal restore`: a snapshot's SSTables and the
//! schema copied off the node, and copied back into the tables' `upload/`
//! directories of another (or the same) cluster, for `nodetool refresh`
//! to load. Both run beside the node as their own process, so they use
//! the file system directly; they read the node's schema file. A backup
//! goes to a directory or an S3-compatible object store ([`location`]).
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
//! Several nodes back up into one `<to>` (a backup taken twice into one
//! place is numbered after the first). A restore copies one or more
//! node backups into the `upload/` directories of the tables of the same
//! names on a node of the new cluster (numbered after what is there, so
//! backups do not overwrite each other) with their `columns`; `nodetool
//! refresh <keyspace> <table>` then writes every partition to its
//! replicas. Views and indexes are not copied: loading the base tables
//! rebuilds them.

mod location;

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use shoal_cql::ast::{Describe, DescribeTarget};
use shoal_schema::{Schema, TableMeta};
use shoal_storage::sstable::format::{Component, Descriptor};

use crate::api::COLUMNS_FILE;
use location::Location;

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
    /// Where the backup goes, under the node's host id: a directory or s3://bucket[/prefix]
    #[arg(long)]
    pub to: String,
    /// Only this keyspace's tables
    #[arg(long)]
    pub keyspace: Option<String>,
}

#[derive(Debug, Clone, clap::Args)]
pub struct RestoreArgs {
    /// A node backup (`<to>/<host id>` of shoal backup, a directory or s3://...); repeat for several nodes
    #[arg(long = "from", required = true)]
    pub from: Vec<String>,
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
    #[error("{0}: {1}")]
    Store(String, String),
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
    let host_id = fs::read_to_string(&host_id_path).map_err(io(&host_id_path))?.trim().to_string();
    let to = Location::parse(&args.to)?;
    to.write(&format!("{host_id}/schema.cql"), describe_schema(&schema)?.as_bytes())?;
    let (mut tables, mut sstables) = (0, 0);
    for table in user_tables(&schema, args.keyspace.as_deref()) {
        let snapshot = table_dir(&data_dir, table).join("snapshots").join(&args.tag);
        if !snapshot.is_dir() {
            continue;
        }
        let into = format!("{host_id}/{}/{}", table.keyspace, table.name);
        sstables += send_sstables(&snapshot, &to, &into)?;
        let columns: String = table.columns.iter().map(|c| format!("{} {}\n", c.id, c.name)).collect();
        to.write(&format!("{into}/{COLUMNS_FILE}"), columns.as_bytes())?;
        to.sync_dir(&into)?;
        tables += 1;
    }
    to.sync_dir(&host_id)?;
    println!("backed up snapshot {} of {tables} table(s), {sstables} SSTable(s), to {}", args.tag, to.name(&host_id));
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
        let from = Location::parse(from)?;
        for keyspace in from.list("")?.0 {
            for name in from.list(&keyspace)?.0 {
                let Some(table) = schema.table(&keyspace, &name) else {
                    let missing = format!(
                        "no table {keyspace}.{name} on this node: create the schema first (cqlsh -f with {})",
                        from.name("schema.cql")
                    );
                    return Err(BackupError::Schema(missing));
                };
                let upload = table_dir(&data_dir, table).join("upload");
                let rel = format!("{keyspace}/{name}");
                let copied = fetch_sstables(&from, &rel, &upload)?;
                let columns_rel = format!("{rel}/{COLUMNS_FILE}");
                let columns = from
                    .read(&columns_rel)?
                    .ok_or_else(|| BackupError::Io(from.name(&columns_rel), std::io::ErrorKind::NotFound.into()))?;
                place_columns(&columns, &from.name(&columns_rel), &upload.join(COLUMNS_FILE))?;
                location::sync_dir(&upload)?;
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
    let describe =
        Describe { target: DescribeTarget::Schema { full: false }, with_internals: false, with_passwords: false };
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

/// Sends the snapshot's whole SSTables to `to`'s `rel`; returns how many.
fn send_sstables(snapshot: &Path, to: &Location, rel: &str) -> Result<usize, BackupError> {
    let there = to.list(rel)?.1;
    let mut send = |from: &str, name: &str| to.upload(&snapshot.join(from), &format!("{rel}/{name}"));
    copy_sstables(&local_files(snapshot)?, next_generation(&there), &mut send)
}

/// Fetches the whole SSTables of `from`'s `rel` into `upload`; returns how
/// many.
fn fetch_sstables(from: &Location, rel: &str, upload: &Path) -> Result<usize, BackupError> {
    fs::create_dir_all(upload).map_err(io(upload))?;
    let mut fetch = |name: &str, to: &str| from.download(&format!("{rel}/{name}"), &upload.join(to));
    copy_sstables(&from.list(rel)?.1, next_generation(&local_files(upload)?), &mut fetch)
}

/// Copies the whole SSTables (a TOC there) among the file `names`,
/// renumbered `shard0-<first>`, `shard0-<first + 1>`, ..., each TOC last,
/// by `copy(source name, target name)`; returns how many.
fn copy_sstables(
    names: &[String],
    first: u64,
    copy: &mut dyn FnMut(&str, &str) -> Result<(), BackupError>,
) -> Result<usize, BackupError> {
    let whole: BTreeMap<(usize, u64), Descriptor> = names
        .iter()
        .filter_map(|name| match Descriptor::parse(Path::new(""), name) {
            Some((d, Some(Component::Toc))) => Some(((d.shard, d.generation), d)),
            _ => None,
        })
        .collect();
    let file = |d: &Descriptor, c: Component| d.path(c).to_string_lossy().into_owned();
    for (generation, source) in (first..).zip(whole.values()) {
        let target = Descriptor { dir: PathBuf::new(), shard: 0, generation };
        for component in Component::ALL.into_iter().filter(|c| *c != Component::Toc).chain([Component::Toc]) {
            copy(&file(source, component), &file(&target, component))?;
        }
    }
    Ok(whole.len())
}

/// The generation after every SSTable file among `names`.
fn next_generation(names: &[String]) -> u64 {
    names.iter().filter_map(|n| Descriptor::parse(Path::new(""), n)).map(|(d, _)| d.generation + 1).max().unwrap_or(1)
}

/// The names of the files in local directory `dir` (none when it is not
/// there).
fn local_files(dir: &Path) -> Result<Vec<String>, BackupError> {
    Location::Dir(dir.to_path_buf()).list("").map(|(_, files)| files)
}

/// Writes a backup's column file beside the uploaded SSTables; one there
/// already (from another node's backup) must say the same.
fn place_columns(columns: &[u8], from: &str, to: &Path) -> Result<(), BackupError> {
    match fs::read(to) {
        Ok(there) if there == columns => Ok(()),
        Ok(_) => Err(BackupError::ColumnsDiffer(from.to_string(), to.display().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = to.parent().unwrap_or(Path::new("."));
            Location::Dir(dir.to_path_buf()).write(&file_name(to), columns)
        }
        Err(e) => Err(io(to)(e)),
    }
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
        let table = "CREATE TABLE ks.t (k int PRIMARY KEY);";
        assert_eq!(if_not_exists(table), "CREATE TABLE IF NOT EXISTS ks.t (k int PRIMARY KEY);");
        assert_eq!(if_not_exists("CREATE MATERIALIZED VIEW ks.v AS"), "CREATE MATERIALIZED VIEW IF NOT EXISTS ks.v AS");
        assert_eq!(if_not_exists("CREATE ROLE r"), "CREATE ROLE r");
    }

    #[test]
    fn sends_and_fetches_whole_sstables_numbered_after_those_there() {
        let root = std::env::temp_dir().join(format!("shoal-backup-test-{}", std::process::id()));
        let (snapshot, upload) = (root.join("snapshot"), root.join("upload"));
        fs::create_dir_all(&snapshot).expect("mkdir");
        sstable(&snapshot, 0, 4, true);
        sstable(&snapshot, 1, 4, true);
        sstable(&snapshot, 1, 5, false);
        let backup = Location::Dir(root.join("backup"));
        assert_eq!(send_sstables(&snapshot, &backup, "h/ks/t").expect("send"), 2);
        assert_eq!(send_sstables(&snapshot, &backup, "h/ks/t").expect("send again"), 2);
        let sent = backup.list("h/ks/t").expect("list").1;
        assert_eq!(sent.len(), 4 * Component::ALL.len());
        assert_eq!(next_generation(&sent), 5);
        assert_eq!(fetch_sstables(&backup, "h/ks/t", &upload).expect("fetch"), 4);
        assert_eq!(fetch_sstables(&backup, "h/ks/t", &upload).expect("fetch again"), 4);
        assert_eq!(next_generation(&local_files(&upload).expect("list")), 9);
        let first = Descriptor { dir: upload.clone(), shard: 0, generation: 1 };
        assert_eq!(fs::read_to_string(first.path(Component::Data)).expect("read"), "0-4-Data.db");
        fs::remove_dir_all(&root).expect("clean up");
    }
}
