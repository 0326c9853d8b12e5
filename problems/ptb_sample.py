"""Constituency parsing on NLTK's public sample of the WSJ Penn Treebank (about 10 % of it, ~3,900 trees).

The same linearisation, vocabulary rules and bracket F1 as wsj_parsing (wsj_parsing.py); only the data
differs: NLTK's `treebank/combined/wsj_0001.mrg` ... `wsj_0199.mrg`, split by file number, fixed:

    train  wsj_0001 - wsj_0159
    dev    wsj_0160 - wsj_0179
    test   wsj_0180 - wsj_0199 (where present; prepared, never trained on nor used to choose anything)

Where the files come from: `--tmp_dir=DIR`, holding the .mrg files themselves, or an NLTK data directory
(`DIR/corpora/treebank/combined/`, or `DIR/treebank/combined/`). When none is there, NLTK's treebank
package is downloaded from its data repository and its `combined/` files kept under `DIR/treebank/`; the
train and dev files must be the sample's (one SHA-256 over them), or nothing is kept.
"""
import glob
import hashlib
import io
import os
import pathlib
import shutil
import tempfile
import urllib.error
import urllib.request
import zipfile

from t2t_lite.data.text_problem import SPLIT_ORDER, Text2TextProblem
from t2t_lite.errors import UserError
from t2t_lite.problems.wsj_parsing import WordsTarget, WsjParsing
from t2t_lite.registry import problems

TREEBANK_URL = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/treebank.zip"
# Globs of each split's files (file numbers 0001-0159, 0160-0179, 0180-0199).
SPLIT_GLOBS = {"train": ("wsj_00[0-9][0-9].mrg", "wsj_01[0-5][0-9].mrg"),
               "dev": ("wsj_01[67][0-9].mrg",),
               "test": ("wsj_01[89][0-9].mrg",)}
# SHA-256 of wsj_0001.mrg ... wsj_0179.mrg (train and dev) concatenated in order.
TRAIN_DEV_SHA256 = "df3c35beb7d03cf3a002dea84c8f4d9b5e6945e470a06cc5eaa0bc21f9ab0277"


def sample_directory(tmp_dir: str) -> str | None:
    """The directory under tmp_dir that holds the sample's .mrg files; None when there is none."""
    candidates = (tmp_dir, os.path.join(tmp_dir, "corpora", "treebank", "combined"),
                  os.path.join(tmp_dir, "treebank", "combined"))
    return next((c for c in candidates if os.path.isfile(os.path.join(c, "wsj_0001.mrg"))), None)


def split_files(directory: str, split: str) -> list[str]:
    """The .mrg files of `split` in directory, sorted by name."""
    return sorted(path for pattern in SPLIT_GLOBS[split] for path in glob.glob(os.path.join(directory, pattern)))


def train_dev_digest(directory: str) -> str:
    paths = split_files(directory, "train") + split_files(directory, "dev")
    return hashlib.sha256(b"".join(pathlib.Path(path).read_bytes() for path in paths)).hexdigest()


def fetch(url: str) -> bytes:
    """The body at `url` (urllib, waiting at most 120 seconds; an HTTPError or URLError when it cannot be had)."""
    with urllib.request.urlopen(url, timeout=120) as response:
        return response.read()


def download(tmp_dir: str) -> str:
    """Downloads NLTK's treebank package and keeps its combined/ files as tmp_dir/treebank/combined.

    Returns:
      That directory.
    Raises:
      UserError: it could not be fetched (offline: what to put where), or its train and dev files are
        not the sample's; nothing is kept then.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(fetch(TREEBANK_URL)))
        members = [m for m in archive.namelist() if m.startswith("treebank/combined/") and m.endswith(".mrg")]
    except (urllib.error.URLError, OSError, zipfile.BadZipFile) as error:
        raise UserError(f"cannot download {TREEBANK_URL} ({' '.join(str(error).split())}); offline, put the "
                        f"sample's wsj_0001.mrg ... wsj_0199.mrg (NLTK's treebank/combined/) in "
                        f"`tmp_dir`={tmp_dir}") from None
    target = os.path.join(tmp_dir, "treebank", "combined")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    staging = tempfile.mkdtemp(dir=os.path.dirname(target), prefix=".tmp-combined-")
    try:
        for member in members:
            pathlib.Path(staging, os.path.basename(member)).write_bytes(archive.read(member))
        digest = train_dev_digest(staging)
        if digest != TRAIN_DEV_SHA256:
            raise UserError(f"{TREEBANK_URL} does not hold NLTK's treebank sample: the SHA-256 of its "
                            f"wsj_0001-wsj_0179 is {digest}, expected {TRAIN_DEV_SHA256}; nothing was kept")
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


@problems.register("parsing_ptb_sample")
class PtbSampleParsing(WsjParsing):
    """wsj_parsing on NLTK's WSJ sample: train wsj_0001-0159, dev 0160-0179, test 0180-0199 where present.

    A vocabulary of 4,000 (wsj_parsing's 16K is for the full treebank's ~40k trees; the sample has ~3,900).
    """

    name = "parsing_ptb_sample"
    default_vocab_size = 4000

    def generate_data(self, tmp_dir: str | None, **kwargs) -> dict:
        """As Text2TextProblem's; with no --*_files, the sample's split of the files under (or fetched to) tmp_dir."""
        if not any(kwargs.get(f"{split}_files") for split in SPLIT_ORDER):
            if not tmp_dir:
                raise UserError(f"{self.name} needs `tmp_dir`=DIR holding the sample's .mrg files or an NLTK data "
                                f"directory (it is downloaded there when absent)")
            directory = sample_directory(tmp_dir) or download(tmp_dir)
            for split in SPLIT_ORDER:
                matching = list(filter(glob.glob, (os.path.join(directory, p) for p in SPLIT_GLOBS[split])))
                if matching:
                    kwargs[f"{split}_files"] = ",".join(matching)
                elif split != "test":
                    raise UserError(f"{directory} holds no {split} files of the sample "
                                    f"({', '.join(SPLIT_GLOBS[split])})")
        return Text2TextProblem.generate_data(self, tmp_dir, **kwargs)


@problems.register("parsing_ptb_sample_words")
class PtbSampleParsingWords(WordsTarget, PtbSampleParsing):
    """parsing_ptb_sample in the "words" target form (wsj_parsing.WordsTarget): "(S (NP The cat )NP ...)S"."""

    name = "parsing_ptb_sample_words"
