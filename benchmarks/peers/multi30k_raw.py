"""The Multi30k release files as plain text, for the peer (OpenNMT-tf reads plain lines) and the BLEU scorers.

  python benchmarks/peers/multi30k_raw.py FILES_DIR RAW_DIR [LANGUAGE=de]

Runs in t2t-lite's environment and gets the files exactly as the registered problem translate_multi30k does
(problems/multi30k.py): each of {train,val,test_2016_flickr}.{en,LANGUAGE} is read from FILES_DIR, gzipped or
not, or, when missing, downloaded there from the dataset's repository at the pinned commit and checked against
its SHA-256. Then every file is written to RAW_DIR uncompressed. FILES_DIR is what multi30k_quality.sh takes as
MULTI30K_DIR, so both toolkits read the same bytes. Offline, put the files in FILES_DIR yourself; the error
says which.
"""
import gzip
import os
import sys

from t2t_lite.errors import UserError
from t2t_lite.files import atomic_write_bytes
from t2t_lite.problems.multi30k import SPLIT_NAMES, download, local_file


def main(files_dir: str, raw_dir: str, language: str = "de") -> None:
    os.makedirs(files_dir, exist_ok=True)
    os.makedirs(raw_dir, exist_ok=True)
    for split in SPLIT_NAMES.values():
        for lang in ("en", language):
            name = f"{split}.{lang}"
            path = local_file(files_dir, name) or download(name, files_dir)
            with open(path, "rb") as f:
                data = f.read()
            if path.endswith(".gz"):
                data = gzip.decompress(data)
            atomic_write_bytes(os.path.join(raw_dir, name), data)
            lines = data.count(b"\n")
            print(f"{os.path.join(raw_dir, name)}: {lines} lines (from {path})")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__.strip().splitlines()[2].strip())
    try:
        main(*sys.argv[1:])
    except UserError as error:
        sys.exit(f"multi30k_raw.py: {error}")
