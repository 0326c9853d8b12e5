"""What parsing adds to the generic Transformer and search: decoder-input features (features.py, which
registry.decoder_features imports at its first lookup) and the tree constraint."""
