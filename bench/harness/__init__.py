"""Side-by-side benchmark harness: Shoal against memcached and Apache Cassandra.

bench/compare.py is the entry point; the pieces live here so each can be read
(and changed) on its own:

  systems.py    the servers: how each is installed, started pinned, stopped,
                and which protocols it speaks (the table to edit when Shoal
                gains a protocol)
  workloads.py  the workloads and the quick/full modes (sizes, durations,
                offered-load steps)
  runner.py     drives `shoal stress` (the one load generator for every
                system) for the populate, max-throughput and stepped runs
  report.py     the markdown report and the LATEST.md pointer
  plots.py      one PNG per workload: p90/p99 against offered load
"""
