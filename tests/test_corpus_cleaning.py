"""Cleaning the train split (data/cleaning.py): a hand-written corpus where each rule's drops are known.

The corpus's train file holds, besides ordinary pairs, one pair for each rule to drop: a length-ratio
outlier, a copy, a duplicate of an earlier pair, and a short pair (whose ratio is high but whose shorter
side is under the floor) that must be kept. Dev holds the same kinds and must come through whole.
"""
import json
import os

import pytest

import t2t_lite.data.vocabulary_making as vocabulary_making
import t2t_lite.problems  # noqa: F401  (registers the problems)
from t2t_lite.bin import prepare
from t2t_lite.data.cleaning import MIN_RATIO_CHARS, HashSet, PairFilter, CleaningRules, length_ratio, pair_hash
from t2t_lite.data.text_problem import CONFIG_FILE
from t2t_lite.errors import UserError
from t2t_lite.problems.multi30k import TranslateMulti30k
from t2t_lite.problems.translate import TranslateFiles, WmtEnde, WmtEnfr

QUIET = {"log": lambda line: None}
ORDINARY = [(f"the cat number {i} sat on the mat", f"die Katze Nummer {i} sass auf der Matte") for i in range(20)]
RATIO = ("a short sentence here", "ein sehr langer Satz, der viel mehr sagt als die Quelle: " + "und noch mehr " * 6)
COPY = ("Brussels, 12 May 2009", "Brussels,  12 May 2009")  # equal but for whitespace
SHORT = ("Yes.", "Jawohl, gewiss.")  # 4 vs 14 characters: 3.5 without the floor, 14/12 with it
TRAIN = [*ORDINARY[:10], RATIO, COPY, ORDINARY[3], SHORT, *ORDINARY[10:], ORDINARY[3]]
KEPT = [*ORDINARY[:10], SHORT, *ORDINARY[10:]]
DEV = [ORDINARY[0], RATIO, COPY, ORDINARY[0]]
OFF = {"max_length_ratio": 0, "drop_copies": False, "drop_duplicates": False}


def write_corpus(root) -> dict:
    files = {}
    for split, pairs in (("train", TRAIN), ("dev", DEV)):
        for side, suffix in ((0, "en"), (1, "de")):
            (root / f"{split}.{suffix}").write_text("".join(p[side] + "\n" for p in pairs), encoding="utf-8")
        files[f"{split}_files"] = f"{root / f'{split}.en'},{root / f'{split}.de'}"
    return files


def prepare_corpus(root, data_dir, **options) -> tuple[TranslateFiles, dict]:
    problem = TranslateFiles(str(data_dir))
    config = problem.generate_data(None, vocab_size=320, num_shards=2, **write_corpus(root), **options, **QUIET)
    return problem, config


def decoded_pairs(problem, split) -> list[tuple[str, str]]:
    return sorted((problem.decode(ex["inputs"][:-1]), problem.decode(ex["targets"][:-1]))
                  for ex in problem.dataset(split).as_numpy_iterator())


def test_each_rule_drops_its_pair_and_the_short_pair_is_kept():
    cleaner = PairFilter(CleaningRules(3.0, True, True))
    kept = [pair for pair in TRAIN if cleaner.keep(*pair)]
    assert kept == KEPT
    assert cleaner.report() == {"read": 25, "kept": 21, "dropped": {"length_ratio": 1, "copies": 1, "duplicates": 2}}
    assert length_ratio(*RATIO) > 3 and length_ratio(*SHORT) == 14 / MIN_RATIO_CHARS


@pytest.mark.parametrize("rule, off", [("length_ratio", {"max_length_ratio": 0}),
                                       ("copies", {"drop_copies": False}),
                                       ("duplicates", {"drop_duplicates": False})])
def test_each_rule_turned_off_keeps_what_it_dropped(rule, off):
    rules = CleaningRules(**{**{"max_length_ratio": 3.0, "drop_copies": True, "drop_duplicates": True}, **off})
    cleaner = PairFilter(rules)
    kept = [pair for pair in TRAIN if cleaner.keep(*pair)]
    assert cleaner.dropped[rule] == 0
    assert len(kept) == len(KEPT) + {"length_ratio": 1, "copies": 1, "duplicates": 2}[rule]


def test_the_hash_set_keeps_every_key_through_growth():
    keys = [pair_hash(f"s{i}", f"t{i}") for i in range(5000)]
    seen = HashSet(capacity=8)
    assert all(seen.add(k) for k in keys) and len(seen) == 5000
    assert not any(seen.add(k) for k in keys)


def test_datagen_cleans_train_only_and_both_passes_keep_the_same_pairs(tmp_path, monkeypatch):
    sampled = []
    train = vocabulary_making.train_sentencepiece
    monkeypatch.setattr(vocabulary_making, "train_sentencepiece",
                        lambda sentences, *args: (sampled.extend(sentences), train(sentences, *args))[1])
    problem, config = prepare_corpus(tmp_path, tmp_path / "data")
    # The vocabulary sample: both sides of the kept pairs, no side of a dropped one.
    assert sorted(sampled) == sorted(side for pair in KEPT for side in pair)
    assert decoded_pairs(problem, "train") == sorted(KEPT)
    assert decoded_pairs(problem, "dev") == sorted(DEV)  # untouched: ratio, copy and repeat all kept
    saved = json.loads((tmp_path / "data" / CONFIG_FILE).read_text())
    assert saved["splits"]["train"]["examples"] == 21 and saved["splits"]["dev"]["examples"] == 4
    assert saved["splits"]["train"]["cleaning"] == {
        "rules": {"max_length_ratio": 3.0, "drop_copies": True, "drop_duplicates": True},
        "read": 25, "kept": 21, "dropped": {"length_ratio": 1, "copies": 1, "duplicates": 2}}
    assert "cleaning" not in saved["splits"]["dev"]
    assert saved["options"] | OFF != saved["options"]  # the rules are recorded options


def test_a_train_split_cleaning_empties_is_refused_naming_the_rules(tmp_path):
    (tmp_path / "same.txt").write_text("one\ntwo\n")
    same = f"{tmp_path / 'same.txt'},{tmp_path / 'same.txt'}"
    with pytest.raises(UserError, match="keeps no pair: 0 with an empty side, and cleaning dropped 0 by length "
                                        "ratio, 2 copies, 0 duplicates; turn rules off"):
        TranslateFiles(str(tmp_path / "data")).generate_data(None, train_files=same, dev_files=same, **QUIET)
    assert not (tmp_path / "data").exists()


def test_the_flags_turn_every_rule_off(tmp_path):
    problem, config = prepare_corpus(tmp_path, tmp_path / "data", **OFF)
    assert decoded_pairs(problem, "train") == sorted(TRAIN)
    assert config["splits"]["train"]["cleaning"]["dropped"] == {"length_ratio": 0, "copies": 0, "duplicates": 0}


def test_datagen_prints_the_counts_in_one_line(tmp_path, capsys, monkeypatch):
    files = write_corpus(tmp_path)
    flag_values = {"train_files": files["train_files"], "dev_files": files["dev_files"], "vocab_size": 320,
                   "num_shards": 2, "max_vocab_sentences": 1_000_000}
    monkeypatch.setattr(prepare, "FLAGS", _Flags(flag_values))
    problem = TranslateFiles(str(tmp_path / "data"))
    monkeypatch.setattr(problem, "generate_data", lambda tmp, **o: TranslateFiles.generate_data(problem, tmp, **o, **QUIET))
    prepare.generate_data(problem)
    assert ("cleaned train: kept 21 of 25 pairs; dropped 1 by length ratio, 1 copies, 2 duplicates"
            in capsys.readouterr().out.splitlines())


class _Flags:
    """FLAGS as prepare.generate_data reads them: FLAGS[name].value and FLAGS.tmp_dir."""

    def __init__(self, values):
        self._values = {name: values.get(name) for name in prepare.OPTION_FLAGS}
        self.tmp_dir = None

    def __getitem__(self, name):
        return type("Flag", (), {"value": self._values[name]})()


def test_a_rerun_with_other_rules_is_refused_in_one_line(tmp_path):
    prepare_corpus(tmp_path, tmp_path / "data")
    with pytest.raises(UserError) as error:
        prepare_corpus(tmp_path, tmp_path / "data", max_length_ratio=9)
    assert "max_length_ratio=3.0 (now 9.0)" in str(error.value) and "\n" not in str(error.value)
    prepare_corpus(tmp_path, tmp_path / "data")  # the same (default) rules: accepted


def test_an_old_data_dir_reads_as_not_cleaned(tmp_path):
    data_dir = tmp_path / "data"
    prepare_corpus(tmp_path, data_dir, **OFF)
    config_path = data_dir / CONFIG_FILE
    config = json.loads(config_path.read_text())
    for name in OFF:  # as a t2t-lite from before cleaning wrote it
        del config["options"][name]
    del config["splits"]["train"]["cleaning"]
    config_path.write_text(json.dumps(config))
    prepare_corpus(tmp_path, data_dir, **OFF)  # the not-cleaned rules: the same options
    with pytest.raises(UserError, match=r"drop_copies=False \(now True\)"):
        prepare_corpus(tmp_path, data_dir)  # today's defaults clean, so they are other options


def test_translations_clean_by_default_and_other_problems_do_not():
    for cls in (TranslateFiles, WmtEnde, WmtEnfr):
        opts = cls("/nowhere").resolve_options({"train_files": "a,b"})
        assert (opts.max_length_ratio, opts.drop_copies, opts.drop_duplicates) == (3.0, True, True)
    opts = TranslateMulti30k("/nowhere").resolve_options({})
    assert (opts.max_length_ratio, opts.drop_copies, opts.drop_duplicates) == (0.0, False, False)
    with pytest.raises(UserError, match="`max_length_ratio` must be 0 \\(off\\) or at least 1, got 0.5"):
        TranslateFiles("/nowhere").resolve_options({"max_length_ratio": 0.5})
