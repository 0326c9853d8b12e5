"""Translation problems: the paper's WMT14 En-De and En-Fr, and any parallel files.

Sources, for every problem here:
- `--train_files=SRC,TGT --dev_files=SRC,TGT [--test_files=SRC,TGT]`: local
  parallel text files, one sentence per line, UTF-8, `.gz` read as gzip. With
  local train files nothing is downloaded: dev is required, test optional.
- wmt_ende / wmt_enfr without --train_files: tensorflow-datasets'
  `wmt14_translate/de-en` and `/fr-en` (downloaded into --tmp_dir), splits
  train, validation (newstest2013, the paper's dev set) and test (newstest2014,
  the full 3003-line set the paper used). Its fr-en train split (Europarl,
  CommonCrawl, UN, News Commentary, Gigaword) has about 40.8M pairs where the
  paper counts 36M; tfds de-en has the paper's 4.5M.
The source is always English-side first: inputs English, targets German/French.
The train split of these three is cleaned by default (data/cleaning.py: length ratio, copies,
duplicates); Multi30k, already curated, is not.
"""
import functools
import http.client
import itertools
import socket
import urllib.error
from collections.abc import Iterator

from t2t_lite.data.cleaning import TRANSLATION_CLEANING
from t2t_lite.data.datagen_options import DatagenOptions
from t2t_lite.data.shard_writer import PairSource
from t2t_lite.data.text_problem import Text2TextProblem
from t2t_lite.errors import UserError
from t2t_lite.files import iter_lines
from t2t_lite.registry import problems

_TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


def read_parallel_files(src_path: str, tgt_path: str) -> Iterator[tuple[str, str]]:
    """(source line, target line) pairs of two parallel files, validated as they stream.

    Raises:
      UserError: a file is missing or unreadable, a line is not UTF-8 (file and
        line number), or the files have different line counts (both counts).
    """
    sources, targets = iter_lines(src_path), iter_lines(tgt_path)
    for number, (src, tgt) in enumerate(itertools.zip_longest(sources, targets), 1):
        if src is None or tgt is None:
            # One file ended at line `number`; count the rest of the other for the message.
            src_count = number - 1 if src is None else number + sum(1 for _ in sources)
            tgt_count = number - 1 if tgt is None else number + sum(1 for _ in targets)
            raise UserError(f"parallel files differ in length: {src_path} has {src_count} lines, "
                            f"{tgt_path} has {tgt_count}")
        yield src, tgt


def _is_network_error(error: BaseException) -> bool:
    """Whether `error`, or an exception it was raised from, means a download server could not be reached.

    tensorflow-datasets fetches with requests (http) and urllib (ftp) in worker
    threads and re-raises their exceptions, or its own DownloadError for an
    HTTP status other than 200.
    """
    import requests
    from tensorflow_datasets.core.download.util import DownloadError

    network = (requests.exceptions.RequestException, urllib.error.URLError, http.client.HTTPException,
               ConnectionError, TimeoutError, socket.gaierror, DownloadError)
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, network):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def tfds_failure_message(name: str, error: BaseException) -> str:
    """One line saying why tensorflow-datasets could not prepare `name`, by what went wrong."""
    detail = " ".join(f"{type(error).__name__}: {error}".split())  # one line, however the error spells itself
    if _is_network_error(error):
        return (f"cannot reach the download servers of {name} ({detail}); "
                "offline, pass `train_files`=SRC,TGT `dev_files`=SRC,TGT")
    if isinstance(error, ImportError):
        fix = f"pip install {error.name}" if error.name else "reinstall t2t-lite"
        return (f"tensorflow-datasets cannot prepare {name}: a module it needs is missing ({detail}); "
                f"{fix}, or pass `train_files`=SRC,TGT `dev_files`=SRC,TGT")
    return f"tensorflow-datasets failed to prepare {name}: {detail} (T2T_LITE_DEBUG=1 shows the traceback)"


def tfds_wmt14_pairs(language: str, split: str, tmp_dir: str | None) -> Iterator[tuple[str, str]]:
    """(English, `language`) pairs of tensorflow-datasets' wmt14_translate/<language>-en.

    Args:
      language: "de" or "fr".
      split: "train", "validation" (newstest2013) or "test" (newstest2014).
      tmp_dir: tensorflow-datasets' data_dir (downloads and prepared files); None: its default.
    """
    import tensorflow_datasets as tfds

    name = f"wmt14_translate/{language}-en"
    try:
        builder = tfds.builder(name, data_dir=tmp_dir)
        builder.download_and_prepare()
    except Exception as error:  # noqa: BLE001 - each kind is named in one line; T2T_LITE_DEBUG=1 shows the chain
        raise UserError(tfds_failure_message(name, error)) from error
    # The features are keyed by language; the supervised keys would give (xx, en), the wrong way round.
    for example in tfds.as_numpy(builder.as_dataset(split=split, shuffle_files=False)):
        yield example["en"].decode("utf-8"), example[language].decode("utf-8")


class ParallelFilesProblem(Text2TextProblem):
    """Reads each split from the files its option names, else from `default_source`."""

    def pair_source(self, split: str, options: DatagenOptions, tmp_dir: str | None) -> PairSource | None:
        files = getattr(options, f"{split}_files")
        if files is not None:
            paths = files.split(",")  # "SRC,TGT"
            if len(paths) != 2:
                raise UserError(f"`{split}_files` must be two comma-separated files SRC,TGT, got {files!r}")
            return functools.partial(read_parallel_files, *paths)
        if options.train_files is not None:
            # Local training data means offline: only a test split may be absent.
            if split == "test":
                return None
            raise UserError(f"{self.name} with `train_files` also needs `{split}_files`=SRC,TGT")
        return self.default_source(split, tmp_dir)

    def default_source(self, split: str, tmp_dir: str | None) -> PairSource | None:
        """Where a split comes from when no files are named: nowhere unless a problem has a corpus of its own."""
        raise UserError(f"{self.name} needs `train_files`=SRC,TGT and `dev_files`=SRC,TGT")


class Wmt14Problem(ParallelFilesProblem):
    """English -> `language` on WMT14, from tensorflow-datasets unless local files are named."""

    language = ""
    default_cleaning = TRANSLATION_CLEANING

    def default_source(self, split: str, tmp_dir: str | None) -> PairSource:
        return functools.partial(tfds_wmt14_pairs, self.language, _TFDS_SPLITS[split], tmp_dir)


@problems.register("wmt_ende")
class WmtEnde(Wmt14Problem):
    """WMT14 English -> German with the paper's shared BPE vocabulary of ~37000."""

    name = "wmt_ende"
    language = "de"
    model_type = "bpe"
    default_vocab_size = 37000


@problems.register("wmt_enfr")
class WmtEnfr(Wmt14Problem):
    """WMT14 English -> French with a 32000 unigram vocabulary.

    The paper used a word-piece vocabulary; sentencepiece's unigram model is
    the likelihood-based segmentation closest to it.
    """

    name = "wmt_enfr"
    language = "fr"
    model_type = "unigram"
    default_vocab_size = 32000


@problems.register("translate_files")
class TranslateFiles(ParallelFilesProblem):
    """Any parallel text files: --train_files=SRC,TGT --dev_files=SRC,TGT [--test_files=SRC,TGT].

    The default BPE vocabulary of 8000 suits corpora of about 100k pairs; pass
    --vocab_size for bigger ones.
    """

    name = "translate_files"
    default_cleaning = TRANSLATION_CLEANING
