"""t2t_lite.config imports nothing of parsing/: the booleans a parser's decoder features replaced reach it through
registry.former_feature_settings, whose bundled entries load at its first lookup, and without Keras."""
import json
import subprocess
import sys

# Appended to a test's code, which sets `shown`: what it left in sys.modules, and `shown`.
REPORT = """
import json, sys
print(json.dumps({"parsing": sorted(name for name in sys.modules if name.startswith("t2t_lite.parsing")),
                  "keras": "keras" in sys.modules, "shown": shown}))
"""


def fresh(code: str) -> dict:
    """What `code` leaves in a fresh interpreter, where no other test's imports count."""
    done = subprocess.run([sys.executable, "-c", code + REPORT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_importing_config_imports_no_parsing_module():
    assert fresh("import t2t_lite.config\nshown = None") == {"parsing": [], "keras": False, "shown": None}


def test_an_old_parsers_hparams_json_loads_in_a_fresh_process_with_the_former_settings_alone():
    seen = fresh("from t2t_lite import config\n"
                 "old = config.to_dict(config.HParams())\n"
                 "old['model'].pop('decoder_features')\n"
                 "old['model'].update(open_phrases=True, word_pointer=True)\n"
                 "shown = config.from_dict(old).model.decoder_features")
    # The booleans become the list in the order the model added them, as in tests/test_config.py.
    assert seen == {"parsing": ["t2t_lite.parsing", "t2t_lite.parsing.former_settings"], "keras": False,
                    "shown": ["word_pointer", "open_phrases"]}
