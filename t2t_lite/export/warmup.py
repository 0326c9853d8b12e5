"""TF Serving warmup records: requests a model server runs once when it loads the export, before any client's.

A SavedModel's first call traces nothing (the graph is saved) but still pays its first run: TensorFlow builds
its kernels, oneDNN makes one for each new shape, and the beam search's loop allocates. TF Serving runs the
PredictionLog records in `assets.extra/tf_serving_warmup_requests` at load to pay that before the first
client does. One record per batch size the batching configuration in docs/serving.md allows, each of
WARMUP_SENTENCE repeated, through serving_default.

Writing the records takes tensorflow-serving-api's protos (`pip install "tensorflow-serving-api~=2.21.0"`);
without it the export is written without them, and says so.
"""
import os

import tensorflow as tf

WARMUP_FILE = os.path.join("assets.extra", "tf_serving_warmup_requests")
# The allowed_batch_sizes of docs/serving.md's batching configuration: a server pads every batch to one of them.
WARMUP_BATCH_SIZES = (1, 8, 32)
# A sentence of a typical length; which words does not matter to the kernels, only the shapes.
WARMUP_SENTENCE = "The quick brown fox jumps over the lazy dog near the river bank ."
SIGNATURE = "serving_default"
NO_SERVING_API = ("no TF Serving warmup requests in the export: tensorflow-serving-api is not installed "
                  '(pip install "tensorflow-serving-api~=2.21.0"); the first request pays the warm-up')


def serving_api_installed() -> bool:
    try:
        import tensorflow_serving.apis.prediction_log_pb2  # noqa: F401
    except ImportError:
        return False
    return True


def write_warmup_requests(export_path: str, model_name: str, log) -> str | None:
    """Writes the records (a serving_default request of WARMUP_SENTENCE for each batch size) into export_path's
    assets.extra/ (the export is not yet published); returns the file, or None (with one line to `log`) where
    tensorflow-serving-api is missing."""
    if not serving_api_installed():
        log(NO_SERVING_API)
        return None
    from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

    path = os.path.join(export_path, WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with tf.io.TFRecordWriter(path) as writer:
        for batch_size in WARMUP_BATCH_SIZES:
            request = predict_pb2.PredictRequest(
                model_spec=model_pb2.ModelSpec(name=model_name, signature_name=SIGNATURE))
            request.inputs["inputs"].CopyFrom(tf.make_tensor_proto([WARMUP_SENTENCE] * batch_size, dtype=tf.string))
            record = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
            writer.write(record.SerializeToString())
    return path


def read_warmup_requests(export_path: str) -> list:
    """The PredictionLog records of an export, in order ([] without the file)."""
    from tensorflow_serving.apis import prediction_log_pb2

    path = os.path.join(export_path, WARMUP_FILE)
    if not os.path.exists(path):
        return []
    return [prediction_log_pb2.PredictionLog.FromString(record.numpy()) for record in tf.data.TFRecordDataset(path)]
