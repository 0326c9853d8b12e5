"""Reading what training and export wrote, to decode it: the Translator and its three backends.

- translator.py: `Translator`, text in and text out over any backend; it resolves each decode request
  (decoding/request.py) against its backend's engine, once.
- backend.py: `Backend`, the interface.
- run_backend.py: `RunBackend`, a run's Decoder (beam search, sampling, ensembles, scoring).
- saved_model_backend.py: `IdBatchBackend` over a SavedModel's decode_ids signature (its search fixed when it
  was exported), or over any engine that decodes padded id batches.
- ctranslate2_backend.py: `CTranslate2Export`, a CTranslate2 export (any beam size, alpha and extra_length),
  without TensorFlow.
- export_reader.py: `read_export`, an export's version directory read once (`ExportDir`: its engine, its report).
- client.py: REST and gRPC predict calls to a model server serving a SavedModel export.

t2t_lite/export/ writes exports and this package reads them, each through t2t_lite/export_format.py (what an
export holds); neither imports the other.
"""
