"""Decoding speed on the peers' protocol: 500 sentences of 20-30 tokens, beam 4, batch 32, outputs forced to 60 tokens.

  python benchmarks/bench_decode.py                 # fp32, the protocol
  python benchmarks/bench_decode.py --mixed_precision=mixed_bfloat16
  python benchmarks/bench_decode.py --beam_size=1   # greedy
  python benchmarks/bench_decode.py --batch_size=1 --sentences=50
  python benchmarks/bench_decode.py --length_sweep  # steps/s at 32, 64, 128, 256 output tokens
  python benchmarks/bench_decode.py --parallel_batches=2  # two batches in flight (CTranslate2's inter_threads=2)
  python benchmarks/bench_decode.py --quick         # 64 sentences, a smoke run

Weights are random (transformer_base, shared vocabulary 32,768): speed does not depend on them
when every output has the same forced length. First the matmul ceilings in this process, float32 and
bfloat16, at 4096^3 and at a decoding step's shapes (benchmarks/ceilings.py).
"""
import argparse
import concurrent.futures
import dataclasses
import time
import types

from ceilings import print_ceilings, print_step_ceilings
from common import PROTOCOL_VOCAB, decode_inputs, peak_rss_gib


def build_decoder(args, forced_length):
    """A transformer_base decoder with random weights whose every output is exactly forced_length tokens."""
    import keras
    import tensorflow as tf

    import t2t_lite.hparams  # noqa: F401
    from t2t_lite import config, environment
    from t2t_lite.decoding.decoder import INPUTS_SIGNATURE, Decoder
    from t2t_lite.models import build_model
    from t2t_lite.registry import hparams_sets

    if args.mixed_precision != "none":
        keras.mixed_precision.set_global_policy(args.mixed_precision)
    keras.utils.set_random_seed(0)  # the same weights in every run, so two versions' outputs can be compared
    hp = config.apply_overrides(hparams_sets.get("transformer_base")(), f"vocab_size={PROTOCOL_VOCAB}")
    # T2T_LITE_KERNEL_LAYOUT and T2T_LITE_STEP_MATMUL, as the decoder command reads them.
    decoder = Decoder(build_model(hp), dataclasses.replace(hp.decode, beam_size=args.beam_size, alpha=0.6),
                      environment.step_matmul_settings())

    def decode(inputs):
        # EOS suppressed until forced_length (t2t's force_decode_length): every engine does the same work.
        lengths = tf.fill([tf.shape(inputs)[0]], forced_length)  # [B]
        return decoder.search(inputs, lengths, min_lengths=lengths)

    return types.SimpleNamespace(decode=tf.function(decode, input_signature=INPUTS_SIGNATURE))


def time_decoding(decoder, sentences, batch_size, parallel_batches=1):
    """(seconds to decode all sentences in batches, after one warm-up batch (tracing); their best outputs).

    parallel_batches > 1 decodes that many batches at once from threads, as
    t2t-lite-decoder's --parallel_batches does.
    """
    from t2t_lite.decoding.batching import pad_ids

    batches = [sentences[i:i + batch_size] for i in range(0, len(sentences), batch_size)]
    padded = [pad_ids(batch) for batch in batches]
    decoder.decode(padded[0])[0].numpy()
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=parallel_batches) as pool:
        outputs = list(pool.map(lambda batch: decoder.decode(batch)[0].numpy(), padded))
    return time.perf_counter() - start, [ids for batch in outputs for ids in batch[:, 0]]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--beam_size", type=int, default=4)
    parser.add_argument("--output_length", type=int, default=60)
    parser.add_argument("--mixed_precision", default="none", choices=["none", "mixed_bfloat16", "bfloat16"],
                        help="bfloat16: weights stored in bfloat16 too (inference only), no per-step casts")
    parser.add_argument("--parallel_batches", type=int, default=1, help="batches decoded at once, from threads")
    parser.add_argument("--length_sweep", action="store_true")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no_ceilings", action="store_true", help="skip the matmul ceilings (repeated runs)")
    parser.add_argument("--outputs", help="write each sentence's best output ids here, a line each")
    args = parser.parse_args()
    sentences = decode_inputs()[: 64 if args.quick else args.sentences]
    if not (args.quick or args.no_ceilings):
        print_ceilings(("float32", "bfloat16"))
        print_step_ceilings()
    lengths = [32, 64, 128, 256] if args.length_sweep else [args.output_length]
    for length in lengths:
        seconds, outputs = time_decoding(build_decoder(args, length), sentences, args.batch_size,
                                         args.parallel_batches)
        if args.outputs:
            with open(args.outputs, "w") as file:
                file.writelines(" ".join(map(str, ids)) + "\n" for ids in outputs)
        print(f"decode: {len(sentences)} sentences, beam {args.beam_size}, batch {args.batch_size}, "
              f"{args.parallel_batches} in flight, "
              f"{length} output tokens, {args.mixed_precision}: "
              f"{seconds:.1f} s, {len(sentences) / seconds:.2f} sentences/s, "
              f"{len(sentences) * length / seconds:.0f} target tokens/s, "
              f"{len(sentences) * length / args.batch_size / seconds:.1f} decode steps/s, "
              f"peak RSS {peak_rss_gib():.2f} GiB", flush=True)


if __name__ == "__main__":
    main()
