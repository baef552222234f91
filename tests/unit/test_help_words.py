"""The CLI's copies of library words, kept for --help without importing the library, equal their
owners (one fact, one owner; the copy only spells it)."""

from __future__ import annotations

from nemo_gym.orchestration import watch_state
from nemo_gym.orchestration.cli import common
from nemo_gym.orchestration.stats import Correction
from nemo_gym.orchestration.verbs.plan import command as plan
from nemo_gym.orchestration.verbs.plan import sample_size
from nemo_gym.orchestration.verbs.watch import command as watch


def test_the_help_copies_equal_their_owners() -> None:
    assert tuple(c.value for c in Correction) == common.CORRECTIONS
    assert plan.DEFAULT_CORRELATION == sample_size.DEFAULT_CORRELATION
    assert plan.DEFAULT_MAX_REPEATS == sample_size.DEFAULT_MAX_REPEATS
    assert watch.WEEK == watch_state.MAX_SETTLE_SECONDS
