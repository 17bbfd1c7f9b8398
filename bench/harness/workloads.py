"""The workloads of the comparison and the quick/full modes.

A workload is one line of WORKLOADS: the protocol it speaks, the systems that
run it (Shoal first, then its peer), how its data is loaded first and the
`shoal stress` options of the measured runs. Every system is driven by the
same `shoal stress` command line; only --port differs. Workloads with the same
population (protocol, table, keys, rows per partition) share the data loaded
into a running server, so e.g. memcache-get and memcache-get-pipelined load
the keys once.

A mode fixes the sizes, run lengths and offered-load steps. Sizes are chosen
to fit in RAM for every system (Shoal --memory 2G: a 512 MB memtable budget;
memcached -m 1024; Cassandra heap 1G) and quick mode to finish in about five
minutes on a 2-core machine.
"""
from dataclasses import dataclass

VALUE_SIZE = 1024
NUMERIC_VALUE_SIZE = 8    # the values incr / ma count up: eight digits
KEYSPACE = "shoal_bench"
SLO_MS = 10.0            # the stepped run stops once p99 passes this
SHORTFALL = 0.90         # ... or once achieved < SHORTFALL * offered


@dataclass(frozen=True)
class Mode:
    name: str
    keys: int                 # population of the 1-row workloads (1 KiB values)
    partitions: int           # population of cql-partition-read (x16 rows)
    warmup_s: int             # every measured run: warmup, not recorded ...
    duration_s: int           # ... then this long, recorded
    fractions: tuple          # offered loads of the stepped run, as fractions of the max
    concurrency: int = 64     # ops in flight (whole loader)
    cql_connections: int = 1  # driver connections per shard/host
    populate_timeout_s: int = 300


MODES = {
    "quick": Mode("quick", keys=100_000, partitions=10_000, warmup_s=1, duration_s=3,
                  fractions=(0.25, 0.5, 0.75, 0.9, 1.0, 1.2)),
    "full": Mode("full", keys=400_000, partitions=25_000, warmup_s=5, duration_s=20,
                 fractions=(0.1, 0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0, 1.1, 1.25, 1.5),
                 populate_timeout_s=900),
}


@dataclass(frozen=True)
class Workload:
    name: str
    protocol: str             # "cql" | "memcache"
    systems: tuple            # system names, Shoal first; the others are its peers
    what: str                 # one line for the report and README
    run: tuple                # `shoal stress` options of the measured runs
    table: str = ""           # CQL table (keyspace KEYSPACE)
    rows_per_partition: int = 1
    size: str = "keys"        # which Mode field is the population: "keys" | "partitions"
    populate: bool = True     # load the population with a seq write run first
    connections: int = 0      # memcache: TCP connections, each with one batch of `pipeline` in flight
    pipeline: int = 1         # memcache: requests written back to back per connection
    dialect: str = "text"     # memcache: "text" (get/set) | "meta" (mg/ms)
    numeric: bool = False     # memcache: values are NUMERIC_VALUE_SIZE ASCII zeros, for incr

    @property
    def peer(self):
        return self.systems[1]

    def keys(self, mode):
        return getattr(mode, self.size)

    def population(self, mode):
        """Workloads with equal populations share the data loaded into a server."""
        return (self.protocol, self.table, self.keys(mode), self.rows_per_partition, self.numeric)

    def in_flight(self, mode):
        """Operations in flight at most (memcache: every connection's pipeline full)."""
        return mode.concurrency if self.protocol == "cql" else self.connections * self.pipeline

    def common_args(self, mode, port):
        value = ["--numeric-values", "--value-size", str(NUMERIC_VALUE_SIZE)] if self.numeric \
            else ["--value-size", str(VALUE_SIZE)]
        args = ["--protocol", self.protocol, "--host", "127.0.0.1", "--port", str(port),
                "--keys", str(self.keys(mode)), *value, "--concurrency", str(self.in_flight(mode))]
        if self.protocol == "cql":
            args += ["--keyspace", KEYSPACE, "--table", self.table,
                     "--rows-per-partition", str(self.rows_per_partition),
                     "--connections", str(mode.cql_connections)]
        else:
            args += ["--connections", str(self.connections), "--pipeline", str(self.pipeline),
                     "--memcache-protocol", self.dialect]
        return args

    def populate_args(self, mode, port):
        """A seq write run over every row of the population (None: nothing to load)."""
        if not self.populate:
            return None
        ops = self.keys(mode) * self.rows_per_partition
        return self.common_args(mode, port) + ["--workload", "write", "--pop", "seq",
                                               "--count", str(ops)]

    def run_args(self, mode, port, rate=None):
        args = self.common_args(mode, port) + list(self.run) + [
            "--warmup", str(mode.warmup_s), "--duration", str(mode.duration_s)]
        if rate is not None:
            args += ["--rate", str(int(rate))]
        return args


# The comparison. Shoal's column of the memcache workloads reads "—" until
# "memcache" is added to Shoal.protocols in systems.py.
WORKLOADS = (
    Workload("cql-read", "cql", ("shoal", "cassandra"),
             "point reads (`SELECT` by partition key) of 1 KiB values, keys uniform over a "
             "population loaded first; everything in RAM",
             run=("--workload", "read", "--pop", "uniform"), table="kv1k"),
    Workload("cql-write", "cql", ("shoal", "cassandra"),
             "1 KiB single-row writes (`INSERT`), keys uniform over the population "
             "(overwrites once every key is written)",
             run=("--workload", "write", "--pop", "uniform"), table="w1k", populate=False),
    Workload("cql-mixed", "cql", ("shoal", "cassandra"),
             "1:1 reads:writes of 1 KiB rows, keys gaussian over the population loaded first "
             "(hot keys in the middle)",
             run=("--workload", "mixed", "--ratio", "1:1", "--pop", "gaussian"), table="kv1k"),
    Workload("cql-counter", "cql", ("shoal", "cassandra"),
             "counter increments (`UPDATE ... SET n = n + 1`), keys uniform over the population: "
             "each increment read-modify-writes its replica's shard of the counter",
             run=("--workload", "write", "--counter", "--pop", "uniform"), table="c1", populate=False),
    Workload("cql-partition-read", "cql", ("shoal", "cassandra"),
             "reads of whole 16-row partitions (16 x 1 KiB), partitions uniform over a "
             "population loaded first",
             run=("--workload", "read", "--pop", "uniform"), table="p16",
             rows_per_partition=16, size="partitions"),
    # memcache shapes (issue 12): 50 connections with one request each, and 40 connections with
    # 16 requests written back to back. memcached 1.6 answers a text `get` with one sendmsg per
    # reply even when 16 arrive in one read, but batches meta `mg` replies into one sendmsg: the
    # pipelined shape is run in both dialects.
    Workload("memcache-get", "memcache", ("shoal", "memcached"),
             "text-protocol `get` of 1 KiB values, 50 connections with one request each in "
             "flight, keys uniform over a population loaded first with `set`",
             run=("--workload", "read", "--pop", "uniform"), connections=50, pipeline=1),
    Workload("memcache-get-pipelined", "memcache", ("shoal", "memcached"),
             "text-protocol `get` of 1 KiB values, 40 connections each writing 16 `get`s back "
             "to back in one write before reading the 16 replies (640 in flight)",
             run=("--workload", "read", "--pop", "uniform"), connections=40, pipeline=16),
    Workload("memcache-mg-pipelined", "memcache", ("shoal", "memcached"),
             "as memcache-get-pipelined in the meta protocol (`mg <key> v`)",
             run=("--workload", "read", "--pop", "uniform"), connections=40, pipeline=16,
             dialect="meta"),
    # The other shapes of issue 31: every command family unpipelined or 16 deep, in both
    # dialects. Sets write over the get population (same sizes); increments load a population
    # of numbers over it, and deletes, last, remove those (after the first pass a delete finds
    # nothing: the report's misses say how many did).
    Workload("memcache-mg", "memcache", ("shoal", "memcached"),
             "as memcache-get in the meta protocol (`mg <key> v`), 50 connections with one "
             "request each in flight",
             run=("--workload", "read", "--pop", "uniform"), connections=50, pipeline=1,
             dialect="meta"),
    Workload("memcache-get-multi", "memcache", ("shoal", "memcached"),
             "text-protocol `get` of 16 keys in one request (one op = one request), 40 "
             "connections with one request each in flight",
             run=("--workload", "read", "--pop", "uniform", "--keys-per-get", "16"),
             connections=40, pipeline=1),
    Workload("memcache-set", "memcache", ("shoal", "memcached"),
             "text-protocol `set` of 1 KiB values, keys uniform, 50 connections with one "
             "request each in flight",
             run=("--workload", "write", "--pop", "uniform"), connections=50, pipeline=1,
             populate=False),
    Workload("memcache-set-pipelined", "memcache", ("shoal", "memcached"),
             "text-protocol `set` of 1 KiB values, 40 connections each writing 16 back to back",
             run=("--workload", "write", "--pop", "uniform"), connections=40, pipeline=16,
             populate=False),
    Workload("memcache-ms-pipelined", "memcache", ("shoal", "memcached"),
             "as memcache-set-pipelined in the meta protocol (`ms <key> <len>`)",
             run=("--workload", "write", "--pop", "uniform"), connections=40, pipeline=16,
             populate=False, dialect="meta"),
    Workload("memcache-incr-pipelined", "memcache", ("shoal", "memcached"),
             "text-protocol `incr <key> 1` of 8-digit numbers loaded first, keys uniform, 40 "
             "connections each writing 16 back to back",
             run=("--workload", "write", "--memcache-write", "incr", "--pop", "uniform"),
             connections=40, pipeline=16, numeric=True),
    Workload("memcache-ma-pipelined", "memcache", ("shoal", "memcached"),
             "as memcache-incr-pipelined in the meta protocol (`ma <key>`)",
             run=("--workload", "write", "--memcache-write", "incr", "--pop", "uniform"),
             connections=40, pipeline=16, numeric=True, dialect="meta"),
    Workload("memcache-delete-pipelined", "memcache", ("shoal", "memcached"),
             "text-protocol `delete <key>`, keys uniform over the numbers loaded for incr, 40 "
             "connections each writing 16 back to back",
             run=("--workload", "write", "--memcache-write", "delete", "--pop", "uniform"),
             connections=40, pipeline=16, numeric=True),
    Workload("memcache-md-pipelined", "memcache", ("shoal", "memcached"),
             "as memcache-delete-pipelined in the meta protocol (`md <key>`)",
             run=("--workload", "write", "--memcache-write", "delete", "--pop", "uniform"),
             connections=40, pipeline=16, numeric=True, dialect="meta"),
)


def select(only):
    """The workloads named in `only` (comma-separated or a list), all when empty."""
    if not only:
        return list(WORKLOADS)
    names = [n.strip() for part in only for n in part.split(",") if n.strip()]
    known = {w.name: w for w in WORKLOADS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return [w for w in WORKLOADS if w.name in names]
