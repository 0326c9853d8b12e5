"""The trainer's progress line: mean loss per target token over the interval, elapsed and remaining time."""
import pytest

from t2t_lite.training.progress import Progress, clock


class FakeClock:
    def __init__(self):
        self.seconds = 0.0

    def __call__(self):
        return self.seconds


def test_loss_is_the_mean_per_target_token_since_the_last_line():
    now = FakeClock()
    progress = Progress(first_step=0, last_step=100, now=now)
    # A short, easy batch and a long, hard one: the per-step mean would be 2.0, the per-token mean is lower.
    progress.add(loss=1.0, tokens=300)
    progress.add(loss=3.0, tokens=100)
    assert progress.mean_loss == pytest.approx((1.0 * 300 + 3.0 * 100) / 400)
    assert progress.steps == 2
    now.seconds = 4.0
    assert progress.tokens_per_second() == pytest.approx(100.0)
    progress.restart_window()
    progress.add(loss=5.0, tokens=10)
    assert progress.mean_loss == 5.0 and progress.steps == 1


def test_remaining_time_follows_this_processs_pace_from_a_resumed_step():
    now = FakeClock()
    progress = Progress(first_step=200, last_step=1000, now=now)
    now.seconds = 100.0  # 100 steps in 100 s; 700 to go
    assert progress.times(300) == "elapsed 0:01:40  remaining ~0:11:40"
    assert Progress(first_step=5, last_step=10, now=now).times(5).endswith("remaining ~0:00:00")


def test_clock():
    assert clock(0) == "0:00:00" and clock(3725.2) == "1:02:05" and clock(59.6) == "0:01:00"
