"""Registered hparams sets for constituency parsing on the WSJ (paper section 6.3).

The paper gives the size (4 layers, d_model 1024) and the decoding (beam 21,
alpha 0.3, max length = input length + 300) and says "all other parameters
remained unchanged from the English-to-German base translation model", except
dropout (attention and residual) and learning rates, which were tuned on
Section 22 without the values being reported. So the other sizes stay base:
d_ff 2048 and 8 heads (d_k = 128), as also in tensor2tensor's
`transformer_parsing_base`, its WSJ-only set (which kept t2t's 6 layers).
"""
from t2t_lite.config import HParams, derive
from t2t_lite.hparams.transformer import transformer_base, transformer_small_data
from t2t_lite.registry import hparams_sets


@hparams_sets.register("transformer_wsj_parsing")
def transformer_wsj_parsing() -> HParams:
    """The paper's WSJ-only parser: base with 4 layers of d 1024; beam 21, alpha 0.3, extra length 300."""
    return derive(
        transformer_base(),
        model=dict(
            num_encoder_layers=4, num_decoder_layers=4, d_model=1024,
            # The tuned values are not in the paper; t2t's transformer_parsing_base uses
            # 0.2 for both (layer_prepostprocess_dropout and attention_dropout).
            dropout=0.2, attention_dropout=0.2,
        ),
        train=dict(
            # Linearised trees are about 3 target tokens per word; t2t's parsing sets
            # raise max_length to 512 so that long sentences are not dropped.
            max_length=512,
            # t2t's transformer_parsing_base warms up 4x longer than base. Its learning
            # rate is not carried over: its meaning changed across t2t's schedules.
            warmup_steps=16000,
        ),
        decode=dict(
            beam_size=21, alpha=0.3, extra_length=300,
            # 21 hypotheses per sentence: 8 sentences keep 168 rows of a decoder
            # cache as long as 300+ tokens, ~2 GB in float32 at d 1024.
            batch_size=8,
        ),
    )


@hparams_sets.register("transformer_wsj_parsing_tiny")
def transformer_wsj_parsing_tiny() -> HParams:
    """transformer_wsj_parsing at transformer_tiny's sizes (2 layers, d 128, 4 heads), for CPUs and tests."""
    return derive(transformer_wsj_parsing(),
                  model=dict(num_encoder_layers=2, num_decoder_layers=2, d_model=128, d_ff=512, num_heads=4),
                  train=dict(batch_size=1024, warmup_steps=1000, train_steps=2000, average_last_checkpoints=0))


@hparams_sets.register("transformer_parsing_small_data")
def transformer_parsing_small_data() -> HParams:
    """A parser for a few thousand trees on a CPU (parsing_ptb_sample_words): transformer_small_data's schedule,
    tiny sizes, and a beam of 6 (not the paper's 21) over trees that must copy the sentence.

    Each value and why (chosen on the sample's dev split; docs/performance.md#parsing-the-ptb-sample-measured has the table):
    - pre-norm, a warmup over the first tenth of the budget, then a linear decay to zero, peak 3.1e-3
      (transformer_small_data's schedule): transformer_wsj_parsing_tiny's post-norm under the rsqrt schedule
      stays a language model of trees that hardly reads the sentence (dev loss 0.93 after 5 minutes
      against 0.56 here). Twice the peak was worse.
    - transformer_tiny's sizes (2+2 layers, d_model 128, d_ff 512, 4 heads) and 1,024-token batches: the
      dev loss still falls at the end of a short budget, so updates count more than width; d_model 256 with
      3+3 layers and 4,096-token batches made 390 updates in 5 minutes and learnt no more than a tree
      language model.
    - dropout 0.1 (residual, attention, ReLU), label smoothing 0.1: transformer_small_data's.
    - max_length 512: linearised trees are about 3 tokens per word, so long sentences are kept.
    - decoder_features word_pointer (t2t_lite/parsing/features.py): each decoder input also gets the
      encoder's state of the next word the tree has not written. Without it, a model decoding freely loses its place in the sentence (a word skipped or
      repeated) in most outputs; with it, free decoding gains 15-16 F1 at 35 minutes and constrained
      decoding 1.2-1.6 (two seeds), and nearly all free outputs have the sentence's words: what still
      breaks a free tree is a bracket closed too early, too late or under another label. It costs the
      CTranslate2 export, whose decoder cannot be told; set decoder_features= (none) for that.
    - open_phrases: each decoder input also gets embeddings of how many phrases are open and of the
      innermost one's label, so the model need not count brackets: free outputs that are well-formed
      trees go from about a fifth to over nine in ten (with alpha 1.0, below), for 2.6 F1 less under the
      constraint at 10 minutes and 5 at 35 (the model overfits sooner). Set decoder_features=word_pointer
      for those points if you only ever decode under the constraint.
    - constrained decoding: every output a tree whose words are the sentence's own, copied in order
      (TreeConstraint's copy_words, for the "words" target form), so none needs repair; F1 is a little
      higher than searching freely.
    - beam 6, 128 sentences a batch, not the paper's beam 21: with the word pointer and open phrases the
      beam hardly matters (F1 within a few tenths from beam 4 to 21), and a row per beam costs as much in
      the search's top-k and the constraint's masks as in the model: beam 6 parses about three times as
      fast as 21 for a quarter of a point. extra_length 150: a target is the sentence's pieces plus about
      two brackets a word; a shorter one makes the constraint flatten long sentences' trees.
    - alpha 1.0, not the paper's 0.3: under 0.3, a free search prefers closing the tree early (one
      unlikely close, then a certain end) to writing the rest of a long sentence, and one free output in
      five stops short; 1.0 leaves one in twenty-five, and constrained F1 is as high or higher.
    """
    return derive(transformer_small_data(),
                  model=dict(num_encoder_layers=2, num_decoder_layers=2, d_model=128, d_ff=512, num_heads=4,
                             decoder_features=("word_pointer", "open_phrases")),
                  train=dict(max_length=512, batch_size=1024),
                  decode=dict(beam_size=6, batch_size=128, alpha=1.0, extra_length=150, constrained_decoding=True))
