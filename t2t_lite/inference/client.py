"""Predict calls to a running TF Serving: REST with the standard library, gRPC with tensorflow-serving-api.

Both call the export's `serving_default` signature (inputs: strings; outputs:
`outputs` strings and `scores` floats). The REST path imports no TensorFlow, so
a client starts in a fraction of a second; gRPC needs `pip install
tensorflow-serving-api`, which brings TensorFlow's protos. Every failure to get
an answer (no server, wrong model name, a timeout) is a UserError of one line.
"""
import dataclasses
import json
import urllib.error
import urllib.request
from collections.abc import Callable

from t2t_lite.config import check_least
from t2t_lite.errors import UserError

SIGNATURE = "serving_default"
# The protocols, and TF Serving's default ports: --rest_api_port=8501 in its docker image, --port=8500 for gRPC.
DEFAULT_SERVERS = {"rest": "localhost:8501", "grpc": "localhost:8500"}


@dataclasses.dataclass(frozen=True)
class Translation:
    text: str
    score: float


# lines -> one Translation per line, in order
PredictFn = Callable[[list[str]], list[Translation]]


def make_predict(protocol: str, server: str | None, model_name: str, version: int | None = None,
                 timeout: float = 60.0) -> PredictFn:
    """A function sending one predict request per call.

    Args:
      protocol: "rest" or "grpc".
      server: host:port (REST may also be a full http(s):// URL); None for TF Serving's default port.
      model_name: the model's name in TF Serving.
      version: a specific version; None for the one TF Serving serves by default (the highest).
      timeout: seconds to wait for each answer.
    """
    if protocol not in DEFAULT_SERVERS:
        raise UserError(f"`protocol` must be one of {tuple(DEFAULT_SERVERS)}, got {protocol!r}")
    server = server or DEFAULT_SERVERS[protocol]
    if protocol == "rest":
        url = rest_url(server, model_name, version)
        return lambda lines: rest_predict(url, lines, timeout)
    return lambda lines: grpc_predict(server, model_name, lines, version, timeout)


def predict_in_batches(predict: PredictFn, lines: list[str], batch_size: int) -> list[Translation]:
    """Sends lines batch_size at a time (a bounded request each) and returns one Translation per line."""
    check_least({"batch_size": batch_size})
    return [translation for first in range(0, len(lines), batch_size)
            for translation in predict(lines[first:first + batch_size])]


def rest_url(server: str, model_name: str, version: int | None) -> str:
    """TF Serving's REST predict URL: <server>/v1/models/<name>[/versions/<v>]:predict."""
    base = server.rstrip("/") if "://" in server else f"http://{server}"
    versioned = "" if version is None else f"/versions/{version}"
    return f"{base}/v1/models/{urllib.request.quote(model_name)}{versioned}:predict"


def rest_predict(url: str, lines: list[str], timeout: float) -> list[Translation]:
    """POSTs {"signature_name", "instances": lines} in TF Serving's row format; parses "predictions"."""
    body = json.dumps({"signature_name": SIGNATURE, "instances": lines}).encode("utf-8")
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            reply = json.loads(response.read().decode("utf-8"))
    except urllib.error.HTTPError as error:
        raise UserError(f"TF Serving at {url} answered HTTP {error.code}: {_served_error(error)}") from None
    except OSError as error:  # a URLError (its reason says why); a connection reset or a timeout while reading
        reason = error.reason if isinstance(error, urllib.error.URLError) else error
        raise UserError(f"cannot reach TF Serving at {url}: {_reason(reason)}") from None
    except ValueError as error:
        raise UserError(f"TF Serving at {url} did not answer JSON: {error}") from None
    return parse_rest_predictions(reply, len(lines), url)


def parse_rest_predictions(reply, expected: int, url: str) -> list[Translation]:
    """[{"outputs": text, "scores": score}, ...] of a row-format reply -> Translations, checked."""
    try:
        results = [Translation(row["outputs"], float(row["scores"])) for row in reply["predictions"]]
    except (KeyError, TypeError, ValueError):
        raise UserError(f"TF Serving at {url} answered without predictions {{outputs, scores}}: "
                        f"{json.dumps(reply)[:200]}; is it a t2t-lite export?") from None
    if len(results) != expected:
        raise UserError(f"TF Serving at {url} returned {len(results)} predictions for {expected} inputs")
    return results


def grpc_predict(server: str, model_name: str, lines: list[str], version: int | None,
                 timeout: float) -> list[Translation]:
    """One PredictionService.Predict call over an insecure channel."""
    try:
        import grpc
        from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_service_pb2_grpc
    except ImportError:
        raise UserError("`protocol`=grpc needs tensorflow-serving-api: pip install tensorflow-serving-api") from None
    request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(name=model_name, signature_name=SIGNATURE))
    if version is not None:
        request.model_spec.version.value = version
    request.inputs["inputs"].CopyFrom(_string_tensor(lines))
    with grpc.insecure_channel(server) as channel:
        try:
            response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(request, timeout=timeout)
        except grpc.RpcError as error:
            raise UserError(f"TF Serving (gRPC) at {server}: {error.code().name}: {_reason(error.details())}") from None
    texts = [text.decode("utf-8") for text in response.outputs["outputs"].string_val]
    scores = _float_values(response.outputs["scores"])
    if len(texts) != len(lines) or len(scores) != len(lines):
        raise UserError(f"TF Serving (gRPC) at {server} returned {len(texts)} outputs for {len(lines)} inputs")
    return [Translation(text, score) for text, score in zip(texts, scores)]


def _string_tensor(lines: list[str]):
    """lines -> a DT_STRING TensorProto of shape [B], built from the protos (no TensorFlow runtime)."""
    from tensorflow.core.framework import tensor_pb2, tensor_shape_pb2, types_pb2

    shape = tensor_shape_pb2.TensorShapeProto(dim=[tensor_shape_pb2.TensorShapeProto.Dim(size=len(lines))])
    return tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, tensor_shape=shape,
                                  string_val=[line.encode("utf-8") for line in lines])


def _float_values(proto) -> list[float]:
    """The floats of a DT_FLOAT TensorProto, whether sent as float_val or packed tensor_content."""
    if proto.float_val:
        return list(proto.float_val)
    import numpy as np

    return np.frombuffer(proto.tensor_content, "<f4").tolist()


def _served_error(error: urllib.error.HTTPError) -> str:
    """TF Serving's {"error": message} body, else the HTTP reason."""
    try:
        return _reason(json.loads(error.read().decode("utf-8"))["error"])
    except (ValueError, KeyError, TypeError, OSError):
        return _reason(error.reason)


def _reason(reason) -> str:
    """One line of an error reason (socket errors and gRPC details can span several)."""
    text = str(getattr(reason, "strerror", None) or reason).strip()
    return text.splitlines()[0] if text else type(reason).__name__
