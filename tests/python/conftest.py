# The backends the Python tests run against: $CPLANE_PY_BACKENDS, a comma
# list of "sqlite" and "postgres" (default "sqlite"). PostgreSQL's server is
# the one $CPLANE_TEST_PG_URL names, else the one the ctest fixture started
# (its URL in $CPLANE_TEST_PG_URL_FILE), as for the C++ suite; each test
# gets a schema of its own. No server: the test skips, or fails when
# $CPLANE_TEST_PG_REQUIRED is set (CI).
import os
import random
import subprocess

import pytest

BACKENDS = [b for b in os.environ.get("CPLANE_PY_BACKENDS", "sqlite").split(",") if b]


def postgres_url():
    url = os.environ.get("CPLANE_TEST_PG_URL", "")
    path = os.environ.get("CPLANE_TEST_PG_URL_FILE", "")
    if not url and path and os.path.exists(path) and os.path.getsize(path) > 0:
        with open(path) as f:
            url = f.readline().strip()
    why = None
    if not url:
        why = "$CPLANE_TEST_PG_URL is unset and no ctest fixture started a server"
    elif subprocess.run(["psql", url, "-qAtc", "SELECT 1"], capture_output=True).returncode != 0:
        why = f"no PostgreSQL server answers at {url}"
    if why:
        if os.environ.get("CPLANE_TEST_PG_REQUIRED"):
            pytest.fail(why)
        pytest.skip(why)
    return url


class Backend:
    """Makes fresh stores of one backend and tampers with their rows."""

    def __init__(self, name, tmp_path):
        self.name = name
        self.tmp_path = tmp_path
        self.count = 0

    def fresh_url(self):
        self.count += 1
        if self.name == "sqlite":
            return str(self.tmp_path / f"store{self.count}.db")
        base = postgres_url()
        schema = f"py{random.randrange(10**12)}"
        subprocess.run(["psql", base, "-qAtc", f"CREATE SCHEMA {schema}"], check=True,
                       capture_output=True)
        sep = "&" if "?" in base else "?"
        return f"{base}{sep}options=-csearch_path%3D{schema}"

    def execute(self, url, sql, *params):
        """Runs one statement on the store's rows behind cplane's back."""
        if self.name == "sqlite":
            import sqlite3
            con = sqlite3.connect(url)
            with con:
                con.execute(sql, params)
            con.close()
            return
        for p in params:
            sql = sql.replace("?", "'" + str(p).replace("'", "''") + "'", 1)
        subprocess.run(["psql", url, "-qAtc", sql], check=True, capture_output=True)


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    return Backend(request.param, tmp_path)


@pytest.fixture
def url(backend):
    return backend.fresh_url()
