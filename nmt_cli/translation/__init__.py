"""The translator: text to ids, decoding, ids to text, with its per-call options."""
