"""Real memcached clients against Shoal, and against memcached as the reference.

* pymemcache's own integration suite, from its PyPI sdist (PYMEMCACHE_VERSION):
  `pytest pymemcache/test/test_integration.py -m integration --server H --port P`,
  all but the TLS tests, in a subprocess with this venv's python. The sdist is
  downloaded once with pip into .venv/memcache-sdists/ (it needs the network
  like scripts/venv.sh does). The suite runs flush_all on the server it is
  given, which is fine: every test here uses keys of its own and writes before
  it reads.
* The meta-protocol client meta-memcache (tests/requirements.txt) round-trips
  set/get/delete/incr with CAS.

Both run against the two targets of memcache_support.py ("shoal", "memcached").
"""
import os
import subprocess
import sys
import tarfile
import uuid

import pytest

from memcache_support import target  # noqa: F401  (fixture)

PYMEMCACHE_VERSION = "4.0.0"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SDIST_CACHE = os.environ.get("SHOAL_MEMCACHE_SDIST_DIR", os.path.join(ROOT, ".venv", "memcache-sdists"))
SUITE_TIMEOUT = 300


@pytest.fixture(scope="session")
def pymemcache_sdist():
    """The extracted pymemcache sdist (its tests included)."""
    src = os.path.join(SDIST_CACHE, "pymemcache-%s" % PYMEMCACHE_VERSION)
    marker = os.path.join(src, "pymemcache", "test", "test_integration.py")
    if os.path.exists(marker):
        return src
    os.makedirs(SDIST_CACHE, exist_ok=True)
    archive = os.path.join(SDIST_CACHE, "pymemcache-%s.tar.gz" % PYMEMCACHE_VERSION)
    if not os.path.exists(archive):
        out = subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
             "--no-binary", ":all:", "--no-deps", "pymemcache==%s" % PYMEMCACHE_VERSION, "-d", SDIST_CACHE],
            capture_output=True, text=True, timeout=300)
        assert out.returncode == 0 and os.path.exists(archive), (
            "pip download of the pymemcache %s sdist failed:\n%s%s" % (PYMEMCACHE_VERSION, out.stdout, out.stderr))
    tmp = os.path.join(SDIST_CACHE, "tmp-%s" % uuid.uuid4().hex[:8])
    with tarfile.open(archive) as tar:
        tar.extractall(tmp, filter="data") if hasattr(tarfile, "data_filter") else tar.extractall(tmp)
    os.replace(os.path.join(tmp, "pymemcache-%s" % PYMEMCACHE_VERSION), src)
    os.rmdir(tmp)
    return src


def test_pymemcache_integration_suite(target, pymemcache_sdist):
    # -o addopts=: the sdist's setup.cfg adds coverage options (pytest-cov) and -m unit
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-o", "addopts=", "-q", "-rfE",
           "--tb=short", "-m", "integration", "pymemcache/test/test_integration.py",
           "--server", target.host, "--port", str(target.port), "-k", "not tls"]
    out = subprocess.run(cmd, cwd=pymemcache_sdist, capture_output=True, text=True, timeout=SUITE_TIMEOUT)
    tail = (out.stdout + out.stderr)[-6000:]
    print(tail)
    assert out.returncode == 0, "pymemcache %s integration suite against %r failed:\n%s" % (
        PYMEMCACHE_VERSION, target, tail)
    assert " passed" in out.stdout and " failed" not in out.stdout


# --- meta-memcache ----------------------------------------------------------------------

@pytest.fixture
def meta_client(target):
    from meta_memcache import CacheClient, ServerAddress, connection_pool_factory_builder
    return CacheClient.cache_client_from_servers(
        servers=[ServerAddress(host=target.host, port=target.port)],
        connection_pool_factory_fn=connection_pool_factory_builder(recv_timeout=5, connection_timeout=5),
    )


def test_meta_memcache_roundtrip(meta_client):
    from meta_memcache import SetMode
    c = meta_client
    k = "mm_%s" % uuid.uuid4().hex
    assert c.get(k) is None
    assert c.set(k, b"hello", ttl=0)
    assert c.get(k) == b"hello"
    assert c.set(k + "_obj", {"a": [1, 2, 3], "b": "x"}, ttl=300)
    assert c.get(k + "_obj") == {"a": [1, 2, 3], "b": "x"}
    assert c.set(k + "_s", "text", ttl=0)
    assert c.get(k + "_s") == "text"
    got = {getattr(kk, "key", kk): v for kk, v in c.multi_get([k, k + "_s", k + "_missing"]).items()}
    assert got == {k: b"hello", k + "_s": "text", k + "_missing": None}
    # add / replace / append modes
    assert not c.set(k, b"other", ttl=0, set_mode=SetMode.ADD)
    assert c.set(k + "_add", b"a", ttl=0, set_mode=SetMode.ADD)
    assert not c.set(k + "_none", b"r", ttl=0, set_mode=SetMode.REPLACE)
    assert c.set(k, b"replaced", ttl=0, set_mode=SetMode.REPLACE)
    assert c.get(k) == b"replaced"
    # delete
    assert c.delete(k)
    assert c.get(k) is None
    assert not c.delete(k)  # NF
    # touch
    assert c.touch(k + "_s", 100)
    assert not c.touch(k + "_missing", 100)


def test_meta_memcache_cas(meta_client):
    # meta-memcache-socket 0.3.1 (the latest) parses a c return flag as an unsigned
    # 32-bit number: a CAS unique of 2^32 or more reads as "no token" (None).
    # memcached's uniques count from 1, so a server must keep them below 2^32
    # for this client's CAS to work.
    c = meta_client
    k = "mmcas_%s" % uuid.uuid4().hex
    assert c.get_cas(k) == (None, None)
    token = c.set_cas(k, b"v1", ttl=0)
    assert token is not None
    value, cas = c.get_cas(k)
    assert value == b"v1" and cas == token
    # a write with the current token wins and changes it; a stale token loses
    assert c.set(k, b"v2", ttl=0, cas_token=cas)
    value, cas2 = c.get_cas(k)
    assert value == b"v2" and cas2 != cas
    assert not c.set(k, b"v3", ttl=0, cas_token=cas)
    assert c.get(k) == b"v2"
    # delete with a stale token fails, with the current one succeeds
    assert not c.delete(k, cas_token=cas)
    assert c.delete(k, cas_token=cas2)
    assert c.get(k) is None


def test_meta_memcache_incr(meta_client):
    c = meta_client
    k = "mmincr_%s" % uuid.uuid4().hex
    assert not c.delta(k, 1)  # missing
    assert c.delta_and_get(k, 1) is None
    assert c.delta_initialize_and_get(k, 5, initial_value=10, initial_ttl=0) == 10
    assert c.delta_and_get(k, 5) == 15
    assert c.delta(k, 2)
    assert c.delta_and_get(k, -20) == 0  # decr stops at 0
    assert c.delta_initialize(k, 3, initial_value=100, initial_ttl=0)
    assert c.delta_and_get(k, 0) == 3
    # with CAS
    value, cas = c.get_cas(k)
    assert int(value) == 3
    assert not c.delta(k, 1, cas_token=cas + 1)
    assert c.delta_and_get(k, 1, cas_token=cas) == 4
    assert c.delta_and_get(k, 1, cas_token=cas) is None
