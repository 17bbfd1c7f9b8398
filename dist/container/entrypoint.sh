#!/bin/sh
# Starts a Shoal node in a container. The only thing a container needs that
# a host does not: the node must listen on, and tell the other nodes, the
# container's own address rather than loopback, so SHOAL_LISTEN_ADDRESS
# defaults to the container's first address (`hostname -I`, which reads the
# interfaces and needs no name service). Everything else is
# `shoal`'s own options, as arguments or SHOAL_* environment variables.
# `docker run shoal nodetool status` runs that subcommand instead.
set -eu

if [ -z "${SHOAL_LISTEN_ADDRESS:-}" ]; then
    addresses=$(hostname -I 2>/dev/null || true)
    SHOAL_LISTEN_ADDRESS=${addresses%% *}
    if [ -z "$SHOAL_LISTEN_ADDRESS" ]; then
        echo "shoal-entrypoint: this container has no address; set SHOAL_LISTEN_ADDRESS" >&2
        exit 1
    fi
    export SHOAL_LISTEN_ADDRESS
fi

# exec: the node is PID 1 and receives `docker stop`'s SIGTERM itself.
exec "${SHOAL_BIN:-/usr/bin/shoal}" "$@"
