"""Which keywords may name a table or column unquoted: ScyllaDB's reserved
words (`is`, `materialized`, `token`, `set`, ... are; `desc`, `describe`,
`execute` are not).
"""
import pytest

from cassandra.protocol import SyntaxException

from conftest import IS_CASSANDRA


@pytest.mark.parametrize("word", ["is", "materialized", "from", "limit", "token", "set"])
def test_reserved_words_are_refused_as_names(session, table, word):
    t = table("(k int PRIMARY KEY)")
    with pytest.raises(SyntaxException):
        session.execute(f"ALTER TABLE {t} ADD {word} text")


@pytest.mark.skipif(IS_CASSANDRA, reason="Cassandra reserves them")
def test_scylla_unreserved_words_name_columns(session, table):
    t = table("(k int, c int, desc text, describe text, execute text, PRIMARY KEY (k, c))")
    session.execute(f"INSERT INTO {t} (k, c, desc, describe, execute) VALUES (1, 1, 'a', 'b', 'c')")
    session.execute(f"INSERT INTO {t} (k, c) VALUES (1, 2)")
    row = session.execute(f"SELECT desc, describe, execute FROM {t} WHERE k = 1 AND c = 1").one()
    assert tuple(row) == ("a", "b", "c")
    # DESC still orders where it is a keyword.
    rows = session.execute(f"SELECT c FROM {t} WHERE k = 1 ORDER BY c DESC")
    assert [r.c for r in rows] == [2, 1]


def test_token_and_set_keep_their_meaning(session, table):
    """Reserved, `token` and `set` still call token() and type sets; quoted,
    they name columns."""
    t = table('(k int PRIMARY KEY, "token" int, "set" set<int>)')
    session.execute(f'UPDATE {t} SET "token" = 1, "set" = {{2}} WHERE k = 1')
    row = session.execute(f'SELECT token(k), "token", "set" FROM {t} WHERE token(k) >= -9223372036854775808').one()
    assert row[1] == 1 and row[2] == {2}
