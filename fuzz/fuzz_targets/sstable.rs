//! Fuzzes SSTable reading: damages one component of a valid SSTable, then
//! opens it and, if it opens, reads a few partitions (whole and sliced) and
//! scans it all. Damage must fail the open or the reads that touch it with
//! an error, never panic, hang or allocate by a length read from disk; an
//! undamaged SSTable must read back what was written.
//!
//! Three SSTables (no compression, LZ4, zstd), each with more than one
//! index page and a partition large enough for clustering samples, are
//! written once per process into a temporary directory. An input is
//! `[selector][mode][offset: u16 LE][payload]`: the selector picks the
//! SSTable and the component; the mode says how the payload damages the
//! component (replace it, XOR into it, overwrite, truncate and append,
//! insert), whether checksums are then repaired so the damage reaches the
//! decoders behind them, and whether the large partition (slow to read) is
//! read too. The component is restored after each input. The SSTables are
//! of the format version written now: index pages end with their entries'
//! offsets and count, which damage to `Index.db` reaches like the entries
//! (`index_page` fuzzes a page's decoder alone, in both versions).
#![no_main]

use std::ops::Bound;
use std::rc::Rc;
use std::sync::OnceLock;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use shoal_fuzz::{fix_frames, partition, position};
use shoal_storage::commitlog::Position;
use shoal_storage::sstable::compression::Compression;
use shoal_storage::sstable::format::{Component, Descriptor, HEADER_BYTES, INDEX_PAGE_ENTRIES};
use shoal_storage::sstable::writer::{Lineage, Writer, WriterOptions};
use shoal_storage::sstable::{SSTable, Scanner};
use shoal_storage::{ClusteringRange, Partition, PartitionPosition};

const COMPONENTS: [Component; 6] = [
    Component::Data,
    Component::CompressionInfo,
    Component::Index,
    Component::Summary,
    Component::Filter,
    Component::Statistics,
];
const COMPRESSIONS: [Compression; 3] = [Compression::None, Compression::Lz4, Compression::Zstd];
/// More than one index page.
const PARTITIONS: u32 = INDEX_PAGE_ENTRIES as u32 + 10;
/// The last partition has rows enough for two clustering samples (at rows
/// 4 and 8); the small ones come first, within the reach of a u16 offset.
const LARGE: u32 = PARTITIONS - 1;

struct Fixture {
    sstables: Vec<Written>,
    partitions: Vec<(PartitionPosition, Partition)>,
}

struct Written {
    descriptor: Descriptor,
    /// The valid bytes of each of `COMPONENTS`.
    files: Vec<Vec<u8>>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        // libFuzzer exits without dropping statics: the directory stays, and
        // is removed by a later run once its process is gone.
        remove_stale_dirs();
        let dir = std::env::temp_dir().join(format!("{DIR_PREFIX}{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let partitions: Vec<_> = (0..PARTITIONS)
            .map(|i| {
                let (rows, value_bytes) = if i == LARGE { (10, 20_000) } else { (i % 4, 12) };
                (position(i), partition(i, rows, value_bytes))
            })
            .collect();
        // Tokens grow with `i`: the partitions are in ring order.
        assert!(partitions.windows(2).all(|w| w[0].0 < w[1].0));
        let sstables = COMPRESSIONS
            .iter()
            .zip(1..)
            .map(|(&compression, generation)| {
                let descriptor = Descriptor { dir: dir.clone(), shard: 0, generation };
                let options = WriterOptions { compression, chunk_bytes: 4096, bloom_fp_chance: 0.01 };
                let descriptor = shoal_io::block_on(async {
                    let mut writer = Writer::create(descriptor, options, partitions.len(), shoal_io::IoClass::Flush)
                        .await
                        .expect("create");
                    for (position, partition) in &partitions {
                        writer.add(position, partition).await.expect("add");
                    }
                    let lineage = Lineage { ancestors: vec![generation + 10], last_of_run: true };
                    writer.finish(Position::ZERO, 0, lineage).await.expect("finish")
                });
                let files =
                    COMPONENTS.iter().map(|c| std::fs::read(descriptor.path(*c)).expect("read component")).collect();
                Written { descriptor, files }
            })
            .collect();
        let fixture = Fixture { sstables, partitions };
        for written in &fixture.sstables {
            shoal_io::block_on(check(&fixture, written, true, true));
        }
        fixture
    })
}

const DIR_PREFIX: &str = "shoal-fuzz-sstable-";

fn remove_stale_dirs() {
    for entry in std::fs::read_dir(std::env::temp_dir()).into_iter().flatten().flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.strip_prefix(DIR_PREFIX)) else { continue };
        if !std::path::Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let fixture = fixture();
    let [selector, mode, lo, hi, payload @ ..] = data else { return };
    let written = &fixture.sstables[usize::from(selector / 6) % fixture.sstables.len()];
    let index = usize::from(selector % 6);
    let component = COMPONENTS[index];
    let valid = &written.files[index];
    let offset = usize::from(u16::from_le_bytes([*lo, *hi]));
    let mut bytes = damage(valid, mode & 7, offset, payload);
    if mode & 8 != 0 {
        repair_checksums(component, &mut bytes);
    }
    let path = written.descriptor.path(component);
    std::fs::write(&path, &bytes).expect("write component");
    let deep = mode & 16 != 0;
    shoal_io::block_on(check(fixture, written, bytes == *valid, deep));
    std::fs::write(&path, valid).expect("restore component");
});

fn damage(valid: &[u8], mode: u8, offset: usize, payload: &[u8]) -> Vec<u8> {
    let at = offset % (valid.len() + 1);
    match mode {
        0 => payload.to_vec(),
        1 => {
            // Overwrite at `at`, extending the file if need be.
            let mut out = valid.to_vec();
            let end = (at + payload.len()).min(out.len());
            out.splice(at..end, payload.iter().copied());
            out
        }
        2 => [&valid[..at], payload].concat(),
        3 => [&valid[..at], payload, &valid[at..]].concat(),
        _ => {
            let mut out = valid.to_vec();
            for (i, b) in payload.iter().enumerate() {
                let len = out.len();
                out[(at + i) % len] ^= b;
            }
            out
        }
    }
}

/// Recomputes what the reader checks first: the small components' trailing
/// crc32c, or the data chunks' and index pages' frame checksums.
fn repair_checksums(component: Component, bytes: &mut [u8]) {
    match component {
        Component::Data | Component::Index => fix_frames(bytes, HEADER_BYTES),
        _ if bytes.len() >= HEADER_BYTES + 4 => {
            let end = bytes.len() - 4;
            let crc = crc32c::crc32c(&bytes[HEADER_BYTES..end]);
            bytes[end..].copy_from_slice(&crc.to_le_bytes());
        }
        _ => {}
    }
}

/// Opens the SSTable and reads it every way (the large partition only when
/// `deep`); when `intact`, checks that what is read is what was written.
async fn check(fixture: &Fixture, written: &Written, intact: bool, deep: bool) {
    let sstable = match SSTable::open(written.descriptor.clone(), shoal_io::IoClass::Query).await {
        Ok(sstable) => Rc::new(sstable),
        Err(e) => {
            assert!(!intact, "an intact SSTable does not open: {e}");
            return;
        }
    };
    let all = [ClusteringRange::all()];
    let key = |r: u32| Bytes::from(r.to_be_bytes().to_vec());
    let slices = [
        ClusteringRange { start: Bound::Included(key(5)), end: Bound::Excluded(key(6)) },
        ClusteringRange { start: Bound::Excluded(key(8)), end: Bound::Unbounded },
    ];
    let reads = if deep { &[0, 1, PARTITIONS / 2, LARGE][..] } else { &[0, 1, PARTITIONS / 2][..] };
    for &i in reads {
        let (position, expected) = &fixture.partitions[i as usize];
        let read = sstable.read(position, &all).await;
        let sliced = sstable.read(position, &slices).await;
        if intact {
            assert_eq!(read.expect("read").as_ref(), Some(expected));
            assert_eq!(sliced.expect("sliced read"), Some(expected.slice(&slices)));
        }
    }
    let missing = PartitionPosition { token: 17, key: Bytes::from_static(b"missing") };
    let read = sstable.read(&missing, &all).await;
    if intact {
        assert!(matches!(read, Ok(None)));
    }

    let (large, _) = &fixture.partitions[LARGE as usize];
    let to = if deep { Bound::Unbounded } else { Bound::Excluded(large.clone()) };
    let mut scanned = 0;
    match Scanner::new(Rc::clone(&sstable), Bound::Unbounded, to, shoal_io::IoClass::Query).await {
        Ok(mut scanner) => loop {
            match scanner.next(&all).await {
                Ok(Some((position, partition))) => {
                    if intact {
                        let (p, expected) = fixture.partitions.iter().find(|(p, _)| *p == position).expect("known");
                        assert_eq!((&position, &partition), (p, expected));
                    }
                    scanned += 1;
                }
                Ok(None) => break,
                Err(e) => {
                    assert!(!intact, "scan of an intact SSTable failed: {e}");
                    break;
                }
            }
        },
        Err(e) => assert!(!intact, "scan of an intact SSTable failed: {e}"),
    }
    if intact {
        assert_eq!(scanned, fixture.partitions.len() - usize::from(!deep));
    }
    // A bounded scan from inside the second index page, of slices.
    let (from, _) = &fixture.partitions[INDEX_PAGE_ENTRIES + 3];
    let (to, _) = &fixture.partitions[PARTITIONS as usize - 2];
    if let Ok(mut scanner) =
        Scanner::new(sstable, Bound::Excluded(from), Bound::Excluded(to.clone()), shoal_io::IoClass::Query).await
    {
        let mut scanned = 0;
        loop {
            match scanner.next(&slices).await {
                Ok(Some(_)) => scanned += 1,
                Ok(None) => break,
                Err(e) => {
                    assert!(!intact, "bounded scan of an intact SSTable failed: {e}");
                    break;
                }
            }
        }
        if intact {
            assert_eq!(scanned, (PARTITIONS as usize - 2) - (INDEX_PAGE_ENTRIES + 4));
        }
    }
}
