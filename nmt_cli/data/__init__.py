"""Corpora to encoded splits: fetching, cleaning, SentencePiece, stores and training batches."""
