"""Multi30k Task 1 (Elliott et al., 2016): image captions, English -> German and English -> French.

29,000 training pairs; the dev split is `val` (1,014 pairs), the test split `test_2016_flickr` (1,000
pairs), the sets most Multi30k results are given on. The text is the release's raw, cased captions
(`data/task1/raw/` of github.com/multi30k/dataset).

Where the files come from: `--tmp_dir=DIR`. Files already there are read as they are, gzipped or not
(`train.en.gz` or `train.en`, and so on). Missing ones are downloaded there from the dataset's repository
at a pinned commit, and each is checked against the SHA-256 of its text before it is kept. Offline, put the
six files of the pair in DIR yourself; the error says which. `--train_files` and friends still override
every split, as for translate_files.
"""
import functools
import gzip
import hashlib
import os
import urllib.error
import urllib.request

from t2t_lite.data.shard_writer import PairSource
from t2t_lite.errors import UserError
from t2t_lite.files import atomic_write_bytes
from t2t_lite.problems.translate import ParallelFilesProblem, read_parallel_files
from t2t_lite.registry import problems

COMMIT = "a3d2e0d2"
RELEASE_URL = f"https://raw.githubusercontent.com/multi30k/dataset/{COMMIT}/data/task1/raw/"
SPLIT_NAMES = {"train": "train", "dev": "val", "test": "test_2016_flickr"}
# SHA-256 of each file's text (the .gz decompressed): gzip's bytes depend on how it was compressed.
TEXT_SHA256 = {
    "train.en": "460a15fbd157e34a7a9957ee388c1ca247fe47af3ef25fb50442af6c274e0fc6",
    "train.de": "2c2b73fd2b548fbcde3a875e0a78d6ee94d498bfdee6bd3eae3945779e9ddf72",
    "train.fr": "5925a3c18f1587b6b54b87743106e6e8ab93618edb6f65d19eac0621f853a10d",
    "val.en": "1f2a23d992769b5b3d209b0a10dd0b77c08cceb1f20dfb97ed0aafa49d107227",
    "val.de": "660e09eb7e1da2f856ea13ee5ad3cf6d36b3d5b0b733c857e94c5747a3dfc660",
    "val.fr": "5304e444d842e962b2dda4d816b70b22a1765b15401642b7ca37a67477e708dc",
    "test_2016_flickr.en": "399a4382932c1aadd3ceb9bef1008d388a64c76d4ae4e9d4728c6f4301cac182",
    "test_2016_flickr.de": "4be6b5b3236b79c25475c6bb829800a7ce559e9ba7a1f6c2394fe4d40be46d16",
    "test_2016_flickr.fr": "cb3160d69b002bb638e66cc7612fcd56cb0af82eadc9c142dedc438afb885ef6",
}
# The files to put in tmp_dir offline, for the error that says so.
_WANTED = ", ".join(f"{split}.{{en,de,fr}}" for split in SPLIT_NAMES.values())


def local_file(tmp_dir: str, name: str) -> str | None:
    """The file `name` (e.g. "train.en") in tmp_dir, gzipped or not; None when neither is there."""
    candidates = (os.path.join(tmp_dir, name + ".gz"), os.path.join(tmp_dir, name))
    return next((candidate for candidate in candidates if os.path.isfile(candidate)), None)


def fetch(url: str) -> bytes:
    """The body at `url` (urllib, waiting at most 60 seconds; an HTTPError or URLError when it cannot be had)."""
    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read()


def download(name: str, tmp_dir: str) -> str:
    """Downloads `name`.gz into tmp_dir, checks its text's SHA-256 and keeps it; returns its path.

    The file appears under its name only once complete and checked (written to a temporary file, renamed).
    Raises:
      UserError: it could not be fetched (offline: which files to put where), or its text is not the release's.
    """
    url = RELEASE_URL + name + ".gz"
    try:
        compressed = fetch(url)
        text = gzip.decompress(compressed)
    except (urllib.error.URLError, OSError, EOFError) as error:  # HTTPError is a URLError; a bad gzip an OSError
        raise UserError(f"cannot download {url} ({' '.join(str(error).split())}); offline, put {_WANTED} "
                        f"(gzipped or not) in `tmp_dir`={tmp_dir}") from None
    digest = hashlib.sha256(text).hexdigest()
    if digest != TEXT_SHA256[name]:
        raise UserError(f"{url} is not Multi30k's {name}: its text's SHA-256 is {digest}, expected "
                        f"{TEXT_SHA256[name]}; nothing was kept")
    path = os.path.join(tmp_dir, name + ".gz")
    atomic_write_bytes(path, compressed)
    return path


class Multi30kProblem(ParallelFilesProblem):
    """English -> `language` on Multi30k Task 1, from --tmp_dir (downloaded there when missing)."""

    language = ""
    model_type = "bpe"
    default_vocab_size = 8000

    def default_source(self, split: str, tmp_dir: str | None) -> PairSource:
        if not tmp_dir:
            raise UserError(f"{self.name} needs `tmp_dir`=DIR: its files are read from there, or downloaded "
                            f"there when missing")
        os.makedirs(tmp_dir, exist_ok=True)
        names = [f"{SPLIT_NAMES[split]}.{language}" for language in ("en", self.language)]
        paths = [local_file(tmp_dir, name) or download(name, tmp_dir) for name in names]
        return functools.partial(read_parallel_files, *paths)


@problems.register("translate_multi30k")
class TranslateMulti30k(Multi30kProblem):
    """Multi30k English -> German: train 29,000 pairs, dev `val`, test `test_2016_flickr`."""

    name = "translate_multi30k"
    language = "de"


@problems.register("translate_multi30k_enfr")
class TranslateMulti30kEnfr(Multi30kProblem):
    """Multi30k English -> French: train 29,000 pairs, dev `val`, test `test_2016_flickr`."""

    name = "translate_multi30k_enfr"
    language = "fr"
