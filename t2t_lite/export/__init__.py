"""Exporting a trained run for TensorFlow Serving, and a client for the running server.

  serving.py   the exported graph: strings in, translations out (tokenizer and beam search inside)
  layout.py    TF Serving's <export_dir>/<model_name>/<version>/ layout, published atomically
  exporter.py  a training run -> a versioned SavedModel with its hparams and vocabulary as assets
  client.py    REST and gRPC predict calls to a running model server (no TensorFlow import for REST)
"""
