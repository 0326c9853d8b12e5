"""OpenNMT-tf custom model: Transformer 3+3 layers, d_model 256, ffn 1024, 4 heads,
dropout/attention_dropout/ffn_dropout 0.1, sinusoidal positions, pre-norm,
all embeddings shared (source, target, output softmax): the Multi30k peer's model (7,586,881 parameters at
an 8k vocabulary), the size of t2t-lite's transformer_small_data. onmt-main --model model_transformer_small.py."""
import opennmt


def model():
    return opennmt.models.Transformer(
        source_inputter=opennmt.inputters.WordEmbedder(embedding_size=256),
        target_inputter=opennmt.inputters.WordEmbedder(embedding_size=256),
        num_layers=(3, 3),
        num_units=256,
        num_heads=4,
        ffn_inner_dim=1024,
        dropout=0.1,
        attention_dropout=0.1,
        ffn_dropout=0.1,
        position_encoder_class=opennmt.layers.SinusoidalPositionEncoder,
        share_embeddings=opennmt.models.EmbeddingsSharingLevel.ALL,
        pre_norm=True,
    )
