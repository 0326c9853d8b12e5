"""Exporting a trained run: a SavedModel for TensorFlow Serving, or a CTranslate2 model (t2t_lite/inference/
decodes them).

  exporter.py             export_run: a training run -> a versioned export of either format; the SavedModel itself
  request.py              what both formats share: the request, the text vocabulary, publishing a version
  serving.py              the SavedModel's graph: strings in, translations out (tokenizer and beam search inside)
  ctranslate2_export.py   a training run -> a CTranslate2 model directory
  layout.py               TF Serving's <export_dir>/<model_name>/<version>/ layout, published atomically

What an export holds (formats, file names, hparams.json entries) is t2t_lite/export_format.py; reading one, and
calling a model server that serves one, is t2t_lite/inference/'s (export_reader.py, client.py).
"""
