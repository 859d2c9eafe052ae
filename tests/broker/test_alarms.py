"""The dead letter alarm: a warning when dead letters grow by a burst between two looks."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest

from tidings.broker.alarms import DeadLetterAlarm, DiskAlarm
from tidings.errors import ErrorCode, TidingsError


def test_the_first_look_only_counts(caplog: pytest.LogCaptureFixture) -> None:
    alarm = DeadLetterAlarm(burst=10)
    assert not alarm.look(500)
    assert "dead-lettered" not in caplog.text


def test_a_burst_since_the_last_look_warns_with_the_counts(
    caplog: pytest.LogCaptureFixture,
) -> None:
    alarm = DeadLetterAlarm(burst=10)
    alarm.look(5)
    with caplog.at_level(logging.WARNING, logger="tidings.broker"):
        assert alarm.look(15)
    assert "10 messages were dead-lettered in the last minute (15 in all)" in caplog.text


def test_growth_below_the_burst_is_quiet() -> None:
    alarm = DeadLetterAlarm(burst=10)
    alarm.look(5)
    assert not alarm.look(14)
    assert not alarm.look(23)  # measured from the last look, not the first


def test_the_disk_alarm_refuses_while_the_disk_has_less_than_the_minimum(tmp_path: Path) -> None:
    free = shutil.disk_usage(tmp_path).free
    with pytest.raises(TidingsError) as caught:
        DiskAlarm(tmp_path, min_free=free + 10**15).check()
    assert caught.value.code == ErrorCode.INSUFFICIENT_STORAGE and caught.value.status == 507
    DiskAlarm(tmp_path, min_free=1).check()  # room enough: nothing said


def test_the_disk_alarm_looks_at_a_directory_not_made_yet(tmp_path: Path) -> None:
    DiskAlarm(tmp_path / "not" / "yet", min_free=1).check()
