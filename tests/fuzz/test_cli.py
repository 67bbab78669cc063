"""python -m ember.fuzz's run loop: --count and --seconds bound the programs run, and the summary counts them."""
import io

from ember.fuzz.__main__ import run


def test_count_bounds_the_run():
    out = io.StringIO()
    ran, found = run(3, 7, ["eager-backend"], False, None, 0, stream=out)
    assert (ran, found) == (3, [])
    assert "ember.fuzz: 3 programs (seeds 7..9), variants eager-backend" in out.getvalue()


def test_seconds_stop_starting_programs():
    out = io.StringIO()
    ran, found = run(1000, 7, ["eager-backend"], False, None, 0, stream=out, seconds=0.0)
    assert (ran, found) == (0, [])
    assert "ember.fuzz: 0 programs, variants eager-backend" in out.getvalue()
