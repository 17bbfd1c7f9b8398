"""The container image's parts (dist/container/): the entrypoint starts a
node on the container's own address, and the Containerfile copies only
files that exist and that .dockerignore lets into the build context.

The image itself is built and run by hand (docs/operations.md): CI machines
have no container engine.
"""
import fnmatch
import os
import shlex
import signal
import subprocess

import pytest

import node as node_mod

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
ENTRYPOINT = os.path.join(ROOT, "dist", "container", "entrypoint.sh")
CONTAINERFILE = os.path.join(ROOT, "dist", "container", "Containerfile")

pytestmark = pytest.mark.skipif(node_mod.skip_reason() is not None, reason=str(node_mod.skip_reason()))


def first_address():
    out = subprocess.run(["hostname", "-I"], capture_output=True, text=True)
    addresses = out.stdout.split()
    if out.returncode != 0 or not addresses:
        pytest.skip("hostname -I gives no address here")
    return addresses[0]


class EntrypointNode(node_mod.Node):
    """A node started through the image's entrypoint, without
    --listen-address: the entrypoint must find the address itself."""

    def command(self):
        cmd = super().command()
        at = cmd.index("--listen-address")
        del cmd[at:at + 2]
        return [ENTRYPOINT] + cmd[1:]


def test_entrypoint_listens_on_the_containers_address_and_stops_cleanly(tmp_path):
    address = first_address()
    os.environ.pop("SHOAL_LISTEN_ADDRESS", None)
    n = EntrypointNode(str(tmp_path), smp=1, address=address)
    n.start()
    try:
        cluster, session = n.session()
        row = session.execute("SELECT listen_address, rpc_address FROM system.local").one()
        assert str(row.listen_address) == address and str(row.rpc_address) == address
        cluster.shutdown()
        # exec: SIGTERM reaches the server itself, which drains and exits 0.
        assert n.stop(signal.SIGTERM) == 0
        assert "stopped cleanly" in n.last_start_log()
    finally:
        n.kill()


def dockerignore_admits(path, patterns):
    """Docker's rule: the last pattern that matches a path (or a folder
    above it) decides; `!` lets it back in."""
    admitted = True
    for pattern in patterns:
        negated = pattern.startswith("!")
        glob = pattern.lstrip("!")
        parts = path.split("/")
        if any(fnmatch.fnmatchcase("/".join(parts[:i]), glob) for i in range(1, len(parts) + 1)):
            admitted = negated
    return admitted


def test_containerfile_copies_only_what_the_build_context_holds():
    with open(os.path.join(ROOT, ".dockerignore")) as f:
        patterns = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    with open(CONTAINERFILE) as f:
        copies = [shlex.split(line)[1:-1] for line in f if line.startswith("COPY ")]
    sources = [s for sources in copies for s in sources]
    assert "target/release/shoal" in sources
    for source in sources:
        source = source.rstrip("/")
        assert dockerignore_admits(source, patterns), "%s is left out by .dockerignore" % source
        if source != "target/release/shoal":  # built by `cargo build --release`
            assert os.path.exists(os.path.join(ROOT, source)), "%s does not exist" % source
