"""The trainer's run flags default to what t2t_lite.train does: every RunConfig field has a flag whose default, and
the default its --help shows, is the field's."""
import dataclasses
import json
import re
import subprocess
import sys

import pytest

from t2t_lite.training.run_config import RunConfig

# In a process of its own, as absl's flags are process-wide: {name: default} of each trainer flag named as a
# RunConfig field.
TRAINER_DEFAULTS = """
import dataclasses, json
from absl import flags
from t2t_lite.bin import trainer  # noqa: F401  (defines the flags)
from t2t_lite.training.run_config import RunConfig
fields = [field.name for field in dataclasses.fields(RunConfig)]
print(json.dumps({name: flags.FLAGS[name].default for name in fields if name in flags.FLAGS}))
"""
FIELDS = [field.name for field in dataclasses.fields(RunConfig)]
# What a Python user gets without the setting (output_dir has no default).
API_DEFAULTS = {name: getattr(RunConfig(output_dir="run"), name) for name in FIELDS if name != "output_dir"}


def trainer_output(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def flag_defaults() -> dict:
    result = trainer_output("-c", TRAINER_DEFAULTS)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def help_blocks() -> dict:
    """{flag name: its --helpshort entry} of t2t-lite-trainer."""
    result = trainer_output("-m", "t2t_lite.bin.trainer", "--helpshort")
    assert "Traceback" not in result.stderr, result.stderr[-3000:]
    blocks = re.split(r"\n(?=  --)", result.stdout + result.stderr)
    return {match.group(1): block for block in blocks if (match := re.match(r"  --(?:\[no\])?(\w+):", block))}


def test_every_run_config_field_is_a_trainer_flag(flag_defaults):
    assert sorted(flag_defaults) == sorted(FIELDS)


@pytest.mark.parametrize("name", sorted(API_DEFAULTS))
def test_the_flag_defaults_to_the_python_apis_value(flag_defaults, name):
    flag, api = flag_defaults[name], API_DEFAULTS[name]
    assert (type(flag).__name__, flag) == (type(api).__name__, api)


@pytest.mark.parametrize("name", sorted(API_DEFAULTS))
def test_the_flags_help_shows_the_python_apis_default(help_blocks, name):
    api = API_DEFAULTS[name]
    shown = re.findall(r"\(default: '([^']*)'\)", help_blocks[name])
    # absl shows no default for None; a None field's help says in words what it falls back to.
    assert shown == ([] if api is None else [str(api).lower() if isinstance(api, bool) else str(api)])
