"""A SentencePiece model trained elsewhere, adopted as a problem's vocabulary (datagen's `vocab_file`).

t2t-lite needs PAD at id 0 and EOS at id 1 (t2t's convention, which the model, the batching and the beam search
rely on). SentencePiece's defaults are UNK 0, BOS 1, EOS 2 and no PAD, so the ModelProto is rewritten: PAD and
EOS move to the front (added as control pieces where the model has none, the vocabulary growing by one each),
every other piece keeps its order after them. The rewritten model is the vocabulary from then on (vocab.model,
its sha256, what an export ships): ids of the original model no longer apply.
"""
from t2t_lite.errors import UserError

PAD_PIECE, EOS_PIECE = "<pad>", "</s>"


def adopted_sentencepiece(path: str) -> tuple[bytes, list[str]]:
    """(the model at path with PAD at 0 and EOS at 1, serialized; one line for each way it may not round-trip).

    Raises:
      UserError: path is unreadable or not a SentencePiece model.
    """
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    try:
        with open(path, "rb") as f:
            proto = model_pb2.ModelProto.FromString(f.read())
    except OSError as error:
        raise UserError(f"cannot read `vocab_file` {path}: {error.strerror or error}") from None
    except Exception:  # protobuf's DecodeError, or a file of other bytes that parses to nothing
        proto = None
    if proto is None or not proto.pieces:
        raise UserError(f"`vocab_file` {path} is not a SentencePiece model (a .model file, as spm_train writes)")
    spec, pieces = proto.trainer_spec, list(proto.pieces)
    control = model_pb2.ModelProto.SentencePiece.CONTROL
    front = [pieces[index] if 0 <= index < len(pieces)
             else model_pb2.ModelProto.SentencePiece(piece=name, score=0.0, type=control)
             for index, name in ((spec.pad_id, PAD_PIECE), (spec.eos_id, EOS_PIECE))]
    # An index outside the pieces (-1: none) matches no piece, so only pieces moved to the front are left out.
    rest = [i for i in range(len(pieces)) if i not in (spec.pad_id, spec.eos_id)]
    new_index = {old: 2 + position for position, old in enumerate(rest)}
    del proto.pieces[:]
    proto.pieces.extend(front + [pieces[i] for i in rest])
    spec.pad_id, spec.eos_id, spec.pad_piece, spec.eos_piece = 0, 1, front[0].piece, front[1].piece
    spec.unk_id = new_index.get(spec.unk_id, spec.unk_id)
    spec.bos_id = new_index[spec.bos_id] if 0 <= spec.bos_id < len(pieces) else -1
    spec.vocab_size = len(proto.pieces)
    return proto.SerializeToString(), round_trip_notes(proto)


def round_trip_notes(proto) -> list[str]:
    """One line for each setting of the model that can keep decoded text from equalling the text encoded."""
    notes = []
    normalizer = proto.normalizer_spec
    if normalizer.name not in ("identity", "") or normalizer.precompiled_charsmap:
        notes.append(f"the vocabulary normalises text ({normalizer.name or 'a custom rule'}): outputs are in its "
                     "normal form (e.g. NFKC folds full-width forms), not always the input's characters")
    if not proto.trainer_spec.byte_fallback:
        notes.append("the vocabulary has no byte fallback: characters it never saw become <unk> and are lost "
                     "from the outputs")
    if normalizer.remove_extra_whitespaces:
        notes.append("the vocabulary removes extra whitespace: runs of spaces come back as one")
    return notes


def tokenizer_disagreement(model: bytes, sentences: list[str]) -> str | None:
    """One line if the graph's tokenizer (tf-text, what training and an export encode with) and Python's
    sentencepiece give other ids for some of `sentences`, or decoding does not give a sentence back; else None."""
    import sentencepiece

    from t2t_lite.data.vocabulary import Vocabulary

    python = sentencepiece.SentencePieceProcessor(model_proto=model)
    graph = Vocabulary(model, source="the adopted vocabulary").encode_many(sentences)
    differ = [s for s, ids in zip(sentences, graph) if list(ids) != python.encode(s)]
    lossy = [s for s in sentences if python.decode(python.encode(s)) != s]
    if not differ and not lossy:
        return None
    example = (differ or lossy)[0]
    return (f"of {len(sentences):,} sampled training sentences, {len(differ):,} are encoded otherwise by the graph's "
            f"tokenizer (tf-text) than by Python's sentencepiece and {len(lossy):,} do not decode back to themselves, "
            f"e.g. {example[:60]!r}; a model trained with byte_fallback=true and normalization_rule_name=identity "
            "round-trips, as one datagen trains does")
