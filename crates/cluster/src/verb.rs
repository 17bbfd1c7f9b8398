//! The messages nodes exchange, one verb each (ScyllaDB's messaging verbs),
//! and how long a sender waits for each one's answer.

use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// The first request on a connection: who is calling, for which shard
    /// ([`crate::hello`]).
    Hello = 1,
    /// Are you there? Answered at once with an empty payload (failure
    /// detection).
    Ping = 2,
    /// A group 0 Raft message (`raft_codec`), to shard 0.
    Raft = 3,
    /// Add the calling node to group 0 ([`crate::group0`]), to shard 0.
    Group0Join = 4,
    /// Propose a schema entry or a node state
    /// ([`crate::group0::propose_schema`], [`crate::group0::propose_state`])
    /// to the group 0 leader, to shard 0.
    Group0Propose = 5,
    /// Apply a mutation (the coordinator's `wire` encoding), to the shard
    /// that owns its partition.
    Mutation = 6,
    /// Run a read command and answer its rows.
    ReadData = 7,
    /// Run a read command and answer a digest of its rows.
    ReadDigest = 8,
    /// Answer stored partitions as they are (reconciling replicas).
    ReadRaw = 9,
    /// Remove every row of a table on the node (TRUNCATE).
    Truncate = 11,
    /// Hold a logged batch until its coordinator removes it (batchlog).
    BatchStore = 12,
    /// Forget a held batch: its coordinator finished it.
    BatchRemove = 13,
    /// Answer once group 0's entry at an index is applied here, to shard 0
    /// ([`crate::group0::barrier`]).
    Group0Barrier = 14,
    /// Answer a page of a token range's stored partitions (streaming's
    /// source side), to the shard whose data is read.
    StreamRead = 15,
    /// Stream in every range this node gains by the topology change in
    /// progress, and answer when done (to shard 0).
    Stream = 16,
    /// Answer a page of the hashes of a token range's stored partitions
    /// (repair), to the shard whose data is read.
    RepairHashes = 17,
    /// Promise a Paxos ballot for a partition (a conditional write's first
    /// round), to the shard that owns it. (10, a conditional write run by
    /// the partition's primary replica, is retired.)
    PaxosPrepare = 18,
    /// Accept a Paxos proposal for a partition.
    PaxosAccept = 19,
    /// Apply a chosen Paxos proposal and record it committed.
    PaxosCommit = 20,
    /// Answer the row hashes of named stored partitions (row-level
    /// repair), to the shard of the first one.
    RepairRowHashes = 21,
    /// Lead a counter write: grow this replica's shards by its deltas,
    /// apply them here and on the other replicas, and answer once the
    /// write's consistency level is met. To the shard that owns it.
    CounterMutation = 22,
    /// The calling node is going down (a clean shutdown or drain): mark it
    /// down now rather than after the failure detector's timeout
    /// (ScyllaDB's `GOSSIP_SHUTDOWN`), to shard 0. A node of an older
    /// build does not know the verb and closes that connection: it then
    /// sees the node down by its timeout, as before.
    Shutdown = 23,
    /// Lead a run of memcached item operations (`coordinator::items`): run
    /// them on this replica, have the other replicas apply what they
    /// wrote, and answer each once its consistency level is met. To the
    /// shard that owns the first one's key.
    ItemRun = 24,
    /// Apply a mutation sent across a data center link and relay it to
    /// the replicas of this data center the message names (Cassandra's
    /// write forwarding), to the shard that owns it. The answer is this
    /// replica's own.
    MutationForward = 25,
    /// Apply a mutation relayed by a forwarding replica and send its
    /// coordinator a `MutationDone`; the answer, to the forwarder, says the
    /// copy arrived.
    MutationRelay = 26,
    /// A relayed replica's answer to a forwarded write, to the coordinator's
    /// shard that waits on it: one-way (`messaging::send`), not answered.
    MutationDone = 27,
}

impl Verb {
    pub fn from_u8(byte: u8) -> Option<Verb> {
        Some(match byte {
            1 => Verb::Hello,
            2 => Verb::Ping,
            3 => Verb::Raft,
            4 => Verb::Group0Join,
            5 => Verb::Group0Propose,
            6 => Verb::Mutation,
            7 => Verb::ReadData,
            8 => Verb::ReadDigest,
            9 => Verb::ReadRaw,
            11 => Verb::Truncate,
            12 => Verb::BatchStore,
            13 => Verb::BatchRemove,
            14 => Verb::Group0Barrier,
            15 => Verb::StreamRead,
            16 => Verb::Stream,
            17 => Verb::RepairHashes,
            18 => Verb::PaxosPrepare,
            19 => Verb::PaxosAccept,
            20 => Verb::PaxosCommit,
            21 => Verb::RepairRowHashes,
            22 => Verb::CounterMutation,
            23 => Verb::Shutdown,
            24 => Verb::ItemRun,
            25 => Verb::MutationForward,
            26 => Verb::MutationRelay,
            27 => Verb::MutationDone,
            _ => return None,
        })
    }

    /// How long a sender waits for the answer before it gives up on it.
    pub fn timeout(self) -> Duration {
        match self {
            Verb::Hello => Duration::from_secs(5),
            Verb::Ping | Verb::Raft | Verb::Shutdown => Duration::from_secs(2),
            // A join waits for its entry to be committed and applied.
            Verb::Group0Join | Verb::Group0Propose | Verb::Group0Barrier => Duration::from_secs(10),
            // A node's whole share of a topology change: bounded by its
            // data, not by a timeout; a lost connection ends the wait.
            Verb::Stream => Duration::from_secs(24 * 3600),
            // The coordinator's request timeout, shorter, ends the wait first.
            Verb::Mutation
            | Verb::ReadData
            | Verb::ReadDigest
            | Verb::ReadRaw
            | Verb::PaxosPrepare
            | Verb::PaxosAccept
            | Verb::PaxosCommit
            | Verb::Truncate
            | Verb::BatchStore
            | Verb::BatchRemove
            | Verb::StreamRead
            | Verb::RepairHashes
            | Verb::RepairRowHashes
            | Verb::CounterMutation
            | Verb::ItemRun
            | Verb::MutationForward
            | Verb::MutationRelay
            | Verb::MutationDone => Duration::from_secs(60),
        }
    }
}
