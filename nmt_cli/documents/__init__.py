"""The document layer: paragraphs, sentences, markup and protected spans around segments."""
