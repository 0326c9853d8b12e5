"""A lever measured and not taken (benchmarks/logs/2026-11-28-parsing-levers.txt): parsing_ptb_sample_words with every
phrase of 2+ words of a training tree as an example too. Use it as a --usr_dir:

  USR_DIR=benchmarks/usr_parsing_constituents PROBLEM=parsing_ptb_sample_words_aug bash benchmarks/parsing_quality.sh WORK 600
"""
import functools

from t2t_lite.data.trees import read_mrg, strip_tree
from t2t_lite.problems.ptb_sample import PtbSampleParsingWords
from t2t_lite.problems.wsj_parsing import expand_mrg_files
from t2t_lite.registry import problems


def phrases(tree):
    for child in tree.children:
        if not isinstance(child, str) and not child.is_preterminal:
            if len(child.words()) >= 2:
                yield child
            yield from phrases(child)


def read_with_constituents(paths, form):
    for path in paths:
        for tree in read_mrg(path):
            tree = strip_tree(tree)
            for node in [tree, *phrases(tree.children[0] if tree.label == "TOP" and len(tree.children) == 1 else tree)]:
                words, tokens = form.linearize(node)
                yield " ".join(words), " ".join(tokens)


@problems.register("parsing_ptb_sample_words_aug")
class Aug(PtbSampleParsingWords):
    name = "parsing_ptb_sample_words_aug"

    def pair_source(self, split, options, tmp_dir):
        if split != "train":
            return super().pair_source(split, options, tmp_dir)
        return functools.partial(read_with_constituents, expand_mrg_files(options.train_files, "train_files"), self.form)
