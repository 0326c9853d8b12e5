"""Installs t2t-lite.

problems/, hparams/ and bin/ sit at the top of the source tree (the design
card's layout) but are installed as t2t_lite.problems, t2t_lite.hparams and
t2t_lite.bin, so no generic top-level names land in site-packages.
"""
from setuptools import find_packages, setup

_CORE_PACKAGES = find_packages(include=["t2t_lite", "t2t_lite.*"])
_MAPPED_DIRS = {"t2t_lite.problems": "problems", "t2t_lite.hparams": "hparams", "t2t_lite.bin": "bin"}

setup(
    name="t2t-lite",
    version="0.2.0",
    description="The Transformer of 'Attention Is All You Need' on TensorFlow 2 and Keras 3, in the tensor2tensor lineage.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    # Keras 3.15 (below) needs Python 3.11 or newer.
    python_requires=">=3.11",
    packages=_CORE_PACKAGES + list(_MAPPED_DIRS),
    package_dir=_MAPPED_DIRS,
    install_requires=[
        # The versions tested, nothing wider: t2t_lite/compat.py fences the private API of these three and says
        # so in its TESTED (tests/test_compat.py keeps the two the same).
        "tensorflow~=2.21.0",
        "keras~=3.15.0",
        "tensorflow-text~=2.21.0",
        "tensorflow-datasets",
        # tensorflow-datasets' download_and_prepare (WMT14 without --train_files) reads its checksums through
        # etils.epath, which imports importlib_resources; neither package installs it. The wmt14 builder's
        # download, .tgz/.gz extraction and SGML parsing need nothing else beyond the standard library.
        "importlib_resources",
        # tf.summary needs it and TensorFlow 2.21 no longer installs it.
        "tensorboard",
        "sacrebleu",
        # Moses' tokenizer, for the paper's compound-split BLEU convention (sacreBLEU has no Moses tokenizer).
        "sacremoses",
        # A parser's raw input is split into Penn Treebank tokens by NLTK's TreebankWordTokenizer
        # (t2t_lite/data/input_tokenizers.py), imported only when a parser tokenizes.
        "nltk",
        "absl-py",
        "sentencepiece",
    ],
    extras_require={
        "test": ["pytest", "pytest-xdist", "matplotlib", "ctranslate2>=4.5", "tensorflow-serving-api~=2.21.0"],
        "visualize": ["matplotlib"],
        # TF Serving's protos: the SavedModel export's warmup records (t2t_lite/export/warmup.py), gRPC queries.
        "serving": ["tensorflow-serving-api~=2.21.0"],
        # The CTranslate2 export and decoding it (t2t-lite-exporter --export_format=ctranslate2).
        "ctranslate2": ["ctranslate2>=4.5"],
    },
    entry_points={
        "console_scripts": [
            "t2t-lite-trainer=t2t_lite.bin.trainer:run",
            "t2t-lite-datagen=t2t_lite.bin.datagen:run",
            "t2t-lite-decoder=t2t_lite.bin.decoder:run",
            "t2t-lite-scorer=t2t_lite.bin.scorer:run",
            "t2t-lite-bleu=t2t_lite.bin.bleu:run",
            "t2t-lite-avg-checkpoints=t2t_lite.bin.avg_checkpoints:run",
            "t2t-lite-ensemble=t2t_lite.bin.ensemble:run",
            "t2t-lite-visualize=t2t_lite.bin.visualize:run",
            "t2t-lite-exporter=t2t_lite.bin.exporter:run",
            "t2t-lite-query=t2t_lite.bin.query:run",
        ],
    },
)
