//! Writes seed inputs for the fuzz targets that need valid files to start
//! from (the `sstable` target builds its own valid SSTables):
//!
//!   cd fuzz && cargo run --example seeds
//!
//! fills `corpus/commitlog_segment` with valid segments (and a
//! torn one), `corpus/codec_partition` with encoded partitions and
//! `corpus/sstable` with inputs that leave each component intact,
//! `corpus/raft_log` with a Raft log file (and a torn one), one that
//! opens with a snapshot, and group 0's snapshot state, and
//! `corpus/internode_frame` with a handshake frame and a Raft message frame;
//! `corpus/index_page` with the index pages of an SSTable written now
//! (version 2) and of the storage tests' version-1 fixture;
//! `corpus/data_messages` with a mutation (counter cells among its rows), a
//! counter write, a read command and partitions.

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

    index_page_seeds(&corpus.join("index_page"));
    raft_seeds(&corpus);
    println!("seeds written under {}", corpus.display());
}

fn raft_seeds(corpus: &Path) {
    use raft::eraftpb::{ConfState, Entry, HardState, Message, MessageType};
    use shoal_cluster::frame::{encode, Kind};
    use shoal_cluster::verb::Verb;

    let entries: Vec<Entry> = (1..=3)
        .map(|index| Entry { term: 1, index, data: bytes::Bytes::from(format!("op-{index}")), ..Entry::default() })
        .collect();
    let hard_state = HardState { term: 1, vote: 1, commit: 2, ..Default::default() };
    let conf_state = ConfState { voters: vec![1, 2, 3], ..Default::default() };
    let log = shoal_cluster::raft_store::encode_records(&entries, Some(&hard_state), Some(&conf_state));
    let raft_log = corpus.join("raft_log");
    write(&raft_log, "log", &log);
    write(&raft_log, "torn", &log[..log.len() - 3]);
    let member = shoal_cluster::group0::Member {
        host_id: uuid::Uuid::from_u128(1),
        address: std::net::SocketAddr::from(([127, 0, 0, 2], 7000)),
        native_port: 9042,
        shard_count: 2,
        data_center: "datacenter1".to_string(),
        rack: "rack1".to_string(),
        tokens: vec![-7, 42],
    };
    let state = shoal_cluster::group0_snapshot::Group0State {
        members: vec![(member, shoal_cluster::group0::NodeState::Normal)],
        replacing: Vec::new(),
        departed: vec![9],
        schema_index: 2,
        schema: b"schema".to_vec(),
    };
    write(&raft_log, "group0-state", &state.encode());
    let mut metadata = raft::eraftpb::SnapshotMetadata { index: 3, term: 1, ..Default::default() };
    metadata.set_conf_state(conf_state.clone());
    let mut snapshot = raft::eraftpb::Snapshot { data: state.encode().into(), ..Default::default() };
    snapshot.set_metadata(metadata);
    let mut compacted = shoal_cluster::raft_store::encode_snapshot_record(&snapshot);
    let after = Entry { term: 1, index: 4, data: bytes::Bytes::from_static(b"op-4"), ..Entry::default() };
    let hard_state = HardState { commit: 4, ..hard_state };
    compacted.extend(shoal_cluster::raft_store::encode_records(&[after], Some(&hard_state), Some(&conf_state)));
    write(&raft_log, "compacted", &compacted);

    let frames = corpus.join("internode_frame");
    let hello = shoal_cluster::hello::Hello {
        version: shoal_cluster::hello::PROTOCOL_VERSION,
        cluster_name: "Shoal Cluster".to_string(),
        host_id: uuid::Uuid::from_u128(1),
        address: std::net::IpAddr::from([127, 0, 0, 1]),
        storage_port: 7000,
        shard_count: 2,
        from_shard: 0,
        to_shard: 1,
    };
    let mut payload = Vec::new();
    hello.encode(&mut payload);
    let mut frame = Vec::new();
    encode(&mut frame, Kind::Request, Verb::Hello, 0, &payload);
    write(&frames, "hello", &frame);
    let mut message = Message { msg_type: MessageType::MsgAppend, to: 2, from: 1, term: 1, ..Message::default() };
    message.entries = entries.into();
    let mut payload = Vec::new();
    shoal_cluster::raft_codec::encode_message(&message, &mut payload);
    let mut frame = Vec::new();
    encode(&mut frame, Kind::Request, Verb::Ping, 7, &payload);
    write(&frames, "raft-append", &frame);

    let data = corpus.join("data_messages");
    let mutation = shoal_coordinator::data::Mutation {
        table: uuid::Uuid::from_u128(1),
        position: position(1),
        update: partition(1, 4, 8),
        list_ops: Vec::new(),
    };
    write(&data, "mutation", &[&[0u8][..], &shoal_coordinator::wire::encode_mutation(&mutation)].concat());
    let counter_write = shoal_coordinator::wire::CounterWrite {
        consistency: shoal_coordinator::ConsistencyLevel::Quorum,
        timeout_ms: 5000,
        mutation: mutation.clone(),
    };
    write(
        &data,
        "counter-write",
        &[&[13u8][..], &shoal_coordinator::wire::encode_counter_write(&counter_write)].concat(),
    );
    let command = shoal_coordinator::data::ReadCommand {
        table: uuid::Uuid::from_u128(1),
        partitions: shoal_coordinator::data::PartitionSelection::Keys(vec![position(1)]),
        clustering: vec![shoal_coordinator::data::ClusteringRange::all()],
        reversed: false,
        filters: Vec::new(),
        distinct: false,
        row_limit: 100,
        per_partition_limit: 100,
        start_after: None,
        start_partition_rows: 0,
        now_s: 0,
        bypass_cache: false,
        start_at_key: false,
        tombstone_limit: 10_000,
    };
    write(&data, "read", &[&[1u8][..], &shoal_coordinator::wire::encode_read_command(&command)].concat());
    let partitions = shoal_coordinator::wire::encode_partitions(&[None, Some(partition(2, 2, 4))]);
    write(&data, "partitions", &[&[3u8][..], &partitions].concat());
    let page = shoal_coordinator::wire::StreamPage { partitions: vec![(position(2), partition(2, 2, 4))], more: true };
    write(&data, "stream-page", &[&[8u8][..], &shoal_coordinator::wire::encode_stream_page(&page)].concat());
    let ballot = shoal_coordinator::wire::Ballot { micros: 1_700_000_000_000_000, node: uuid::Uuid::from_u128(7) };
    write(
        &data,
        "paxos-proposal",
        &[&[10u8][..], &shoal_coordinator::wire::encode_paxos_proposal(ballot, &mutation)].concat(),
    );
    let promise = shoal_coordinator::wire::Promise {
        promised: true,
        promised_ballot: ballot,
        accepted: Some(shoal_coordinator::wire::Proposal { ballot, update: partition(1, 2, 4) }),
        committed: ballot,
        data: Some(partition(1, 2, 4)),
    };
    write(&data, "paxos-promise", &[&[5u8][..], &shoal_coordinator::wire::encode_promise(&promise)].concat());
    let rows = shoal_coordinator::wire::RowHashes::of(&partition(2, 2, 4));
    write(
        &data,
        "row-hashes",
        &[&[12u8][..], &shoal_coordinator::wire::encode_row_hashes(&[None, Some(rows)])].concat(),
    );
}

/// The `index_page` target's inputs: `[flags][raw_len][page body]` for
/// every index page of a version-2 SSTable written here (with a few
/// hundred partitions) and of the version-1 fixture of the storage tests;
/// the data stream taken as unbounded (flags bit 1).
fn index_page_seeds(dir: &Path) {
    use shoal_storage::sstable::format::{Component, Descriptor, HEADER_BYTES};
    use shoal_storage::sstable::writer::{Lineage, Writer, WriterOptions};

    let written = std::env::temp_dir().join(format!("shoal-fuzz-seeds-{}", std::process::id()));
    let descriptor = shoal_io::block_on(async {
        let descriptor = Descriptor { dir: written.clone(), shard: 0, generation: 1 };
        let options = WriterOptions {
            compression: shoal_storage::sstable::compression::Compression::None,
            chunk_bytes: 4096,
            bloom_fp_chance: 0.01,
        };
        let mut writer = Writer::create(descriptor, options, 300, shoal_io::IoClass::Flush).await.expect("create");
        for i in 0..300 {
            writer.add(&position(i), &partition(i, i % 3, 12)).await.expect("add");
        }
        writer.finish(shoal_storage::commitlog::Position::ZERO, 0, Lineage::flushed()).await.expect("finish")
    });
    let v1 =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/storage/tests/fixtures/sstable-v1/shard0-1-Index.db");
    for (name, path, flags) in [("v2", descriptor.path(Component::Index), 3u8), ("v1", v1, 2u8)] {
        let index = std::fs::read(&path).expect("read an index");
        let mut at = HEADER_BYTES;
        let mut page = 0;
        while let Some(header) = index.get(at..at + 8) {
            let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
            let body = &index[at + 8..at + 8 + len];
            write(dir, &format!("{name}-page-{page}"), &[&[flags, 0, 0][..], body].concat());
            at += 8 + len;
            page += 1;
        }
    }
    let _ = std::fs::remove_dir_all(&written);
}
