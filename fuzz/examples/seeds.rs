//! Writes seed inputs for the fuzz targets that need valid files to start
//! from (the `sstable` target builds its own valid SSTables):
//!
//!   cd fuzz && cargo run --example seeds
//!
//! fills `corpus/commitlog_segment` with valid segments (and a
//! torn one), `corpus/codec_partition` with encoded partitions and
//! `corpus/sstable` with inputs that leave each component intact.

use std::path::Path;

use shoal_fuzz::{commitlog_segment, partition, position, small_partitions};
use shoal_storage::codec::{encode_partition, Encoder};

fn write(dir: &Path, name: &str, bytes: &[u8]) {
    std::fs::create_dir_all(dir).expect("create corpus dir");
    std::fs::write(dir.join(format!("seed-{name}")), bytes).expect("write seed");
}

fn main() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let partitions = small_partitions();

    let segments = corpus.join("commitlog_segment");
    let segment = commitlog_segment(&partitions);
    write(&segments, "segment", &segment);
    write(&segments, "one-entry", &commitlog_segment(&partitions[..1]));
    write(&segments, "large-entry", &commitlog_segment(&[(position(9), partition(9, 40, 100))]));
    // A torn tail: the last entry cut short, then zeros.
    let mut torn = segment[..segment.len() - 5].to_vec();
    torn.extend_from_slice(&[0; 16]);
    write(&segments, "torn", &torn);

    let codec = corpus.join("codec_partition");
    for (i, (_, p)) in partitions.iter().enumerate() {
        let mut out = Vec::new();
        encode_partition(&mut Encoder { out: &mut out }, p);
        write(&codec, &format!("partition-{i}"), &out);
    }
    // The `sstable` target damages valid SSTables it writes itself: an empty
    // payload leaves the chosen component intact (mode 20: XOR, reading
    // the large partition too).
    let sstable = corpus.join("sstable");
    for selector in 0..18u8 {
        write(&sstable, &format!("intact-{selector}"), &[selector, 20, 0, 0]);
    }

    println!("seeds written under {}", corpus.display());
}
