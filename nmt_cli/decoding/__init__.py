"""Search over the model: the beam loop and its strategies, shortlists, batched decoding."""
