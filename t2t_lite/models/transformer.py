"""The Transformer (paper section 3): encoder and decoder stacks over shared embeddings."""
import dataclasses

import keras
from keras import ops

from t2t_lite import registry
from t2t_lite.config import ModelHParams, translate_former_features
from t2t_lite.layers.attention import causal_bias, padding_bias
from t2t_lite.layers.dropout import Dropout
from t2t_lite.layers.embedding import LearnedPosition, SharedEmbedding, SinusoidalPosition
from t2t_lite.layers.transformer_layers import DecoderLayer, EncoderLayer
from t2t_lite.models.token_losses import TokenLosses, token_losses


def shift_right(targets):
    """Decoder inputs: targets delayed one step, position 0 holding the start id 0 (t2t's PAD).

    targets int [B, T_tgt] -> int [B, T_tgt].
    """
    return ops.pad(targets, [[0, 0], [1, 0]])[:, :-1]


@registry.models.register("transformer")
def transformer(hp: ModelHParams) -> "Transformer":
    """The Transformer of a ModelHParams (its fields are the model's settings), with its variables created."""
    model = Transformer(**dataclasses.asdict(hp))
    model.build()
    return model


@keras.saving.register_keras_serializable(package="t2t_lite")
class Transformer(keras.Model):
    """Encoder-decoder Transformer; `call` gives teacher-forced logits.

    `encode` and `decoder_states` are the two halves. A beam search decodes
    a position at a time through the same methods and layers
    (decoding/cached_step.py: `memory_cache`, the features' `feature_contexts`,
    `initial_feature_states` and `feature_inputs`, `embed_targets`, then
    `run_decoder` with the self-attention caches of `empty_caches`, and
    `logits`), so a model decodes as it trains.
    The settings are ModelHParams' fields, where each has its comment.

    Args:
      vocab_size: V (must be set), the targets' vocabulary.
      source_vocab_size: the sources' own vocabulary size (needs share_embeddings False); 0: V.
      num_encoder_layers, num_decoder_layers: N of each stack.
      d_model: D.
      d_ff: F, the feed-forward network's hidden width.
      num_heads: H.
      key_dim, value_dim: Dk and Dv per head; 0 for D // H.
      dropout, attention_dropout, relu_dropout: the dropout rates.
      norm_position: "post" (paper) or "pre" (t2t v2+).
      position_encoding: "sinusoid" (paper) or "learned".
      max_position: positions a learned positional embedding can represent.
      share_embeddings: one matrix for source, target and pre-softmax projection.
      layer_norm_epsilon: LayerNorm epsilon.
      decoder_features: names in registry.decoder_features of what each decoder input is also told
        (models/decoder_features.py), added to its embedding in this order.
    """

    # The classes of its layers: a variant replaces one by subclassing (docs/extending.md).
    encoder_layer_class = EncoderLayer
    decoder_layer_class = DecoderLayer

    def __init__(self, vocab_size, source_vocab_size=0, num_encoder_layers=6, num_decoder_layers=6, d_model=512, d_ff=2048, num_heads=8,
                 key_dim=0, value_dim=0, dropout=0.1, attention_dropout=0.0, relu_dropout=0.0, norm_position="post",
                 position_encoding="sinusoid", max_position=1024, share_embeddings=True, layer_norm_epsilon=1e-6,
                 decoder_features=(), **kwargs):
        super().__init__(**kwargs)
        if vocab_size <= 0:
            raise ValueError(f"vocab_size must be set, got {vocab_size}")
        if share_embeddings and source_vocab_size not in (0, vocab_size):
            raise ValueError(f"a source vocabulary of {source_vocab_size} beside a target vocabulary of {vocab_size} "
                             "needs share_embeddings=False")
        if position_encoding not in ("sinusoid", "learned"):
            raise ValueError(f"position_encoding must be 'sinusoid' or 'learned', got {position_encoding!r}")
        self.vocab_size, self.d_model, self.d_ff, self.num_heads = vocab_size, d_model, d_ff, num_heads
        self.source_vocab_size = source_vocab_size
        self.num_encoder_layers, self.num_decoder_layers = num_encoder_layers, num_decoder_layers
        self.key_dim, self.value_dim = key_dim, value_dim
        self.head_key_dim, self.head_value_dim = key_dim or d_model // num_heads, value_dim or d_model // num_heads
        self.dropout_rate, self.attention_dropout, self.relu_dropout = dropout, attention_dropout, relu_dropout
        self.norm_position, self.position_encoding, self.max_position = norm_position, position_encoding, max_position
        self.share_embeddings, self.layer_norm_epsilon = share_embeddings, layer_norm_epsilon
        self.decoder_features = tuple(decoder_features)
        policy = self.dtype_policy
        self.target_embedding = SharedEmbedding(vocab_size, d_model, name="shared_embedding", dtype=policy)
        self.source_embedding = (self.target_embedding if share_embeddings
                                 else SharedEmbedding(source_vocab_size or vocab_size, d_model, name="source_embedding",
                                                      dtype=policy))
        self.position = (LearnedPosition(max_position, d_model, name="position", dtype=policy)
                         if position_encoding == "learned" else SinusoidalPosition(name="position", dtype=policy))
        self.embedding_dropout = Dropout(dropout, dtype=policy)
        layer_settings = dict(key_dim=self.head_key_dim, value_dim=self.head_value_dim, dropout=dropout,
                              attention_dropout=attention_dropout, relu_dropout=relu_dropout,
                              norm_position=norm_position, epsilon=layer_norm_epsilon, dtype=policy)
        self.encoder_layers = [self.encoder_layer_class(d_model, num_heads, d_ff, name=f"encoder_{i}", **layer_settings)
                               for i in range(num_encoder_layers)]
        self.decoder_layers = [self.decoder_layer_class(d_model, num_heads, d_ff, name=f"decoder_{i}", **layer_settings)
                               for i in range(num_decoder_layers)]
        # Keras 3 does not hand layers held in a list to tf.train.Checkpoint's
        # object graph; named attributes put every layer's weights under model/.
        for layer in self.encoder_layers + self.decoder_layers:
            setattr(self, layer.name, layer)
        # Pre-norm leaves the residual stream unnormalised; t2t adds a final LayerNorm.
        self.encoder_norm, self.decoder_norm = (
            keras.layers.LayerNormalization(epsilon=layer_norm_epsilon, name=f"{stack}_norm", dtype=policy)
            if norm_position == "pre" else None for stack in ("encoder", "decoder"))
        # A tuple of plain objects: what they make is the model's own (DecoderFeature.create and build).
        self.features = tuple(registry.decoder_features.get(name)() for name in self.decoder_features)
        for feature in self.features:
            feature.create(self)

    def build(self, input_shape=None):
        """Creates every variable from the settings alone, in the order `call` reaches them.

        Every width is known without an input, so nothing is traced: without this, Keras would build the model
        by tracing a whole forward pass, which takes seconds for transformer_big.
        """
        width = (None, None, self.d_model)
        layers = [self.source_embedding, self.position, *self.encoder_layers, self.encoder_norm,
                  self.target_embedding, *self.decoder_layers, self.decoder_norm]
        for layer in layers:
            if layer is not None and not layer.built:
                layer.build(width)
        if not self.built:
            for feature in self.features:
                feature.build(self)

    def get_build_config(self):
        return {"built": self.built}

    def build_from_config(self, config):
        if config.get("built"):
            self.build()

    def call(self, features, training=None):
        """features {"inputs" [B, T_src], "targets" [B, T_tgt]} -> float32 logits [B, T_tgt, V]."""
        return self.logits(self.decoder_states(features, training=training))

    def logits(self, states, columns=None, products=None):
        """The output projection: decoder states [..., D] -> float32 logits [..., V] (x E^T, paper 3.4).

        Args:
          columns: None, or a shortlist's output embeddings [B, C, D] (`column_embeddings`): states [B, R, D]
            -> logits [B, R, C] of those ids only.
          products: None, or `prepared_products`' (a decoding step's kernels).
        """
        return self.target_embedding.logits(states, columns, (products or {}).get("logits"))

    def column_embeddings(self, ids):
        """A shortlist's output embeddings, ids int [B, C] -> [B, C, D], for `logits`' columns."""
        return self.target_embedding.column_embeddings(ids)

    def token_losses(self, states, targets, smoothing=0.0, slices=1, differentiable=False) -> TokenLosses:
        """The targets' log-probabilities, label-smoothed cross-entropy and correct argmaxes under `logits`.

        Training, the dev loss and scoring all read them here: the states go through the output projection a
        slice of positions at a time (models/token_losses.py), so the [B, T_tgt, V] logits never exist at once.

        Args:
          states: `decoder_states`' [B, T_tgt, D] (cast to float32 first for a float32 projection).
          targets: int [B, T_tgt], PAD = 0 positions ignored.
          smoothing: eps_ls.
          slices: how many slices the positions are projected in.
          differentiable: whether loss_sum needs a gradient (training's).
        """
        return token_losses(self.logits, states, targets, self.vocab_size, smoothing, slices, differentiable)

    def decoder_states(self, features, training=None):
        """features -> the decoder's outputs [B, T_tgt, D] (compute dtype), before the softmax projection."""
        memory, memory_bias = self.encode(features["inputs"], training=training)
        contexts = self.feature_contexts(features["inputs"], memory)
        decoder_inputs = shift_right(features["targets"])
        states = self.initial_feature_states(ops.shape(decoder_inputs)[0])
        added, _ = self.feature_inputs(contexts, decoder_inputs, states)
        x = self.embed_targets(decoder_inputs, added=added, training=training)
        self_bias = causal_bias(ops.shape(decoder_inputs)[1])  # [1, 1, T_tgt, T_tgt]
        return self.run_decoder(x, memory, self_bias, memory_bias, training=training)

    def encode(self, inputs, training=None):
        """inputs int [B, T_src] -> (memory [B, T_src, D], memory_bias float32 [B, 1, 1, T_src])."""
        bias = padding_bias(inputs)
        x = self._embed(self.source_embedding, inputs, None, training)
        for layer in self.encoder_layers:
            x = layer(x, bias, training=training)
        if self.encoder_norm is not None:
            x = self.encoder_norm(x)
        return x, bias

    def embed_targets(self, decoder_inputs, position=None, added=(), training=None):
        """The decoder's inputs: decoder_inputs int [N, T_tgt] -> [N, T_tgt, D], embedded, with their positions.

        Args:
          position: None for positions 0..T_tgt-1, or the int scalar position of the first column.
          added: [N, T_tgt, D] tensors added to the embeddings, the decoder features' (`feature_inputs`).
        """
        x = self._embed(self.target_embedding, decoder_inputs, position, training)
        for features in added:  # after the embeddings' dropout: the encoder's states had their own
            x = x + ops.cast(features, x.dtype)
        return x

    def run_decoder(self, x, memory, self_bias, memory_bias, caches=None, products=None, positions=None,
                    training=None):
        """The decoder stack over its embedded inputs, up to the softmax projection.

        Args:
          x: [B, T, D], `embed_targets`' (a decoding step's: [B, K, D], a sentence's K beams as K positions).
          memory: the encoder's output [B, T_src, D], or its `memory_cache`.
          self_bias: the self-attention's bias, [1|B, 1, T, T] (causal), or with caches [B, 1, T, T_cached + T].
          memory_bias: [B, 1, 1, T_src].
          caches: None, or each decoder layer's self-attention cache (`empty_caches`) of earlier positions.
          products: None, or `prepared_products`' (a decoding step's kernels).
          positions: None, or int32 [T], x's positions (a decoding step's: K times its position); None numbers
            them on from the cached ones.
        Returns:
          the decoder's states [B, T, D] (normalised under pre-norm); with caches, (states, the grown caches).
        """
        # A layer that takes no products (DecoderLayer.prepared_products) is given None.
        layer_products = [given or None
                          for given in (products or {}).get("layers") or [None] * len(self.decoder_layers)]
        grown = []
        for i, layer in enumerate(self.decoder_layers):
            layer_memory = memory[f"layer_{i}"] if isinstance(memory, dict) else memory
            x = layer(x, layer_memory, self_bias, memory_bias, cache=None if caches is None else caches[i],
                      products=layer_products[i], positions=positions, training=training)
            if caches is not None:
                x, cache = x
                grown.append(cache)
        x = x if self.decoder_norm is None else self.decoder_norm(x)
        return x if caches is None else (x, grown)

    def empty_caches(self, batch, dtype) -> list:
        """Each decoder layer's self-attention cache holding no positions (MultiHeadAttention.empty_cache)."""
        return [layer.self_attention.empty_cache(batch, dtype) for layer in self.decoder_layers]

    def settled_caches(self, caches) -> list:
        """`run_decoder`'s caches, each with its recent positions folded into its settled ones
        (MultiHeadAttention.settled_cache)."""
        return [layer.self_attention.settled_cache(cache) for layer, cache in zip(self.decoder_layers, caches)]

    def prepared_products(self, prepare) -> dict:
        """The decoder's products and the output projection made once by `prepare` (layers/prepared.py), for a
        decoding step's `run_decoder` and `logits`."""
        return {"layers": [layer.prepared_products(prepare) for layer in self.decoder_layers],
                "logits": self.target_embedding.prepared_logits(prepare)}

    def memory_cache(self, memory):
        """Every decoder layer's encoder-decoder keys/values, projected once per sentence.

        Args:
          memory: [B, T_src, D] encoder output.
        Returns:
          {"layer_i": {"key" [B, H, T_src, Dk], "value" [B, H, T_src, Dv]}}.
        """
        return {f"layer_{i}": layer.cross_attention.memory_cache(memory) for i, layer in enumerate(self.decoder_layers)}

    def configure_features(self, problem) -> None:
        """Sets what each decoder feature reads from `problem` (DecoderFeature.configure); a trainer's first step."""
        for feature in self.features:
            feature.configure(self, problem)

    def feature_contexts(self, inputs, memory) -> dict:
        """Each decoder feature's context of the sentences: {name: DecoderFeature.context}, None left out (a
        search's state holds tensors only)."""
        return {name: context for name, feature in zip(self.decoder_features, self.features)
                if (context := feature.context(self, inputs, memory)) is not None}

    def initial_feature_states(self, rows) -> dict:
        """Each decoder feature's state before a target's first position: {name: DecoderFeature.initial_state}."""
        return {name: feature.initial_state(self, rows) for name, feature in zip(self.decoder_features,
                                                                                  self.features)}

    def feature_inputs(self, contexts, decoder_inputs, states) -> tuple[list, dict]:
        """What the decoder features add to decoder_inputs int [N, T] after `states`: ([N, T, D] per feature, in
        order; their states after the last column)."""
        added, after = [], {}
        for name, feature in zip(self.decoder_features, self.features):
            features, after[name] = feature(self, contexts.get(name), decoder_inputs, states[name])
            added.append(features)
        return added, after

    def _embed(self, embedding, ids, position, training):
        # Paper 5.4: dropout on the sum of the embeddings and the positional encodings.
        x = self.position(embedding(ids), position=position)
        return self.embedding_dropout(x, training=training)

    def get_config(self):
        # The constructor's arguments are ModelHParams' fields, each kept as the attribute of its name (dropout's
        # as dropout_rate).
        settings = {field.name: getattr(self, field.name) for field in dataclasses.fields(ModelHParams)
                    if field.name != "dropout"}
        return {**super().get_config(), **settings, "dropout": self.dropout_rate}

    @classmethod
    def from_config(cls, config):
        # A .keras file saved before decoder features were a list holds their old booleans.
        config, features = translate_former_features(config, tuple(config.get("decoder_features", ())))
        return cls(**{**config, "decoder_features": features})

