"""The parsing peer's OpenNMT-tf files, made in the OpenNMT-tf venv from prepare.py's output and t2t-lite's
SentencePiece model (benchmarks/parsing_side_by_side.sh calls it):

  $PEERS_DIR/onmt/bin/python make_onmt.py WORK_DIR SPM_MODEL DEV_WORDS CHECKPOINT_STEPS

The peer gets the same vocabulary as t2t-lite: the very SentencePiece model t2t-lite's datagen trained (its size,
its pieces and its whole-token symbols such as "/NP"), used to encode the same sentences. From WORK_DIR/hparams.json
(the t2t-lite set's settings) it writes
  model.py    opennmt.models.Transformer with the set's layers, d_model, d_ff, heads, dropouts (residual,
              attention, ReLU), sinusoidal positions, all embeddings shared when the set shares them,
              pre- or post-norm as the set says
  config.yml  Adam (the set's betas and epsilon), NoamDecay (the set's learning-rate constant, d_model, warmup:
              t2t-lite's rsqrt schedule is the same function), label smoothing, token batches of the set's size,
              the set's maximum length, beam, GNMT length penalty alpha and maximum decoding length (the longest
              dev input in pieces + the set's extra_length), a checkpoint every CHECKPOINT_STEPS steps, all kept
and data/{train,dev}.sp.{words,trees} and data/vocab.onmt.txt (<blank> <s> </s>, then the SentencePiece pieces
less its control and unknown ones; OpenNMT-tf adds <unk>). A schedule other than rsqrt has no OpenNMT-tf
counterpart here: the peer keeps Noam at the same peak and this prints so.
"""
import json
import os
import sys

import sentencepiece as spm

if len(sys.argv) != 5:
    sys.exit("usage: make_onmt.py WORK_DIR SPM_MODEL DEV_WORDS CHECKPOINT_STEPS")
work, spm_model, dev_words, checkpoint_steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
hp = json.load(open(f"{work}/hparams.json"))
model, train, decode = hp["model"], hp["train"], hp["decode"]
data = f"{work}/data"
os.makedirs(data, exist_ok=True)

sp = spm.SentencePieceProcessor(model_file=spm_model)
with open(f"{data}/vocab.onmt.txt", "w", encoding="utf-8") as f:
    f.write("<blank>\n<s>\n</s>\n")
    for i in range(sp.get_piece_size()):
        if not (sp.is_control(i) or sp.is_unknown(i)):
            f.write(sp.id_to_piece(i) + "\n")


def encode(source: str, target: str) -> int:
    """Writes the pieces of each line of source to target; returns the longest line's length in pieces."""
    with open(source, encoding="utf-8") as f:
        lines = f.read().splitlines()
    pieces = sp.encode(lines, out_type=str)
    with open(target, "w", encoding="utf-8") as f:
        for p in pieces:
            f.write(" ".join(p) + "\n")
    return max((len(p) for p in pieces), default=0)


encode(f"{work}/train.words", f"{data}/train.sp.words")
encode(f"{work}/train.trees", f"{data}/train.sp.trees")
longest_dev = encode(dev_words, f"{data}/dev.sp.words")

with open(f"{work}/model.py", "w") as f:
    f.write(f'''"""OpenNMT-tf model at the size of t2t-lite's {hp["hparams_set"]} (written by make_onmt.py)."""
import opennmt


def model():
    return opennmt.models.Transformer(
        source_inputter=opennmt.inputters.WordEmbedder(embedding_size={model["d_model"]}),
        target_inputter=opennmt.inputters.WordEmbedder(embedding_size={model["d_model"]}),
        num_layers=({model["num_encoder_layers"]}, {model["num_decoder_layers"]}),
        num_units={model["d_model"]},
        num_heads={model["num_heads"]},
        ffn_inner_dim={model["d_ff"]},
        dropout={model["dropout"]},
        attention_dropout={model["attention_dropout"]},
        ffn_dropout={model["relu_dropout"]},
        position_encoder_class=opennmt.layers.SinusoidalPositionEncoder,
        share_embeddings=opennmt.models.EmbeddingsSharingLevel.{"ALL" if model["share_embeddings"] else "NONE"},
        pre_norm={model["norm_position"] == "pre"},
    )
''')

def yaml_float(value: float) -> str:
    """A float as YAML 1.1 (PyYAML) reads it back as one: "1e-09" would be a string there, "1.0e-09" is not."""
    text = repr(float(value))
    if "e" in text and "." not in text.split("e")[0]:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


if train["schedule"] != "rsqrt":
    print(f"make_onmt.py: {hp['hparams_set']} uses the {train['schedule']} schedule, which OpenNMT-tf has no "
          f"counterpart for here; the peer uses NoamDecay with the same peak (constant, d_model, warmup)")
config = f"""# OpenNMT-tf settings matching t2t-lite's {hp["hparams_set"]} (written by make_onmt.py).
model_dir: {work}/model/run
data:
  train_features_file: {data}/train.sp.words
  train_labels_file: {data}/train.sp.trees
  source_vocabulary: {data}/vocab.onmt.txt
  target_vocabulary: {data}/vocab.onmt.txt
params:
  optimizer: Adam
  optimizer_params:
    beta_1: {yaml_float(train["adam_beta1"])}
    beta_2: {yaml_float(train["adam_beta2"])}
    epsilon: {yaml_float(train["adam_epsilon"])}
  learning_rate: {yaml_float(train["learning_rate_constant"])}   # Noam scale: t2t-lite's learning_rate_constant
  decay_type: NoamDecay
  decay_params:
    model_dim: {model["d_model"]}
    warmup_steps: {train["warmup_steps"]}
  label_smoothing: {yaml_float(train["label_smoothing"])}
  average_loss_in_time: true
  beam_width: {decode["beam_size"]}
  length_penalty: {yaml_float(decode["alpha"])}
  maximum_decoding_length: {longest_dev + decode["extra_length"]}
train:
  batch_size: {train["batch_size"]}
  batch_type: tokens
  maximum_features_length: {train["max_length"]}
  maximum_labels_length: {train["max_length"]}
  length_bucket_width: 2
  sample_buffer_size: 500000
  save_checkpoints_steps: {checkpoint_steps}
  keep_checkpoint_max: 100000
  average_last_checkpoints: 0
  save_summary_steps: 50
  max_step: 1000000           # stopped by the wall-clock deadline in train_budget.py
infer:
  batch_size: {decode["batch_size"]}
  batch_type: examples
"""
with open(f"{work}/config.yml", "w") as f:
    f.write(config)
print(f"OpenNMT-tf files for {hp['hparams_set']}: {work}/model.py, {work}/config.yml, {data}/ "
      f"(vocabulary {sp.get_piece_size()} pieces, longest dev input {longest_dev} pieces)")
