"""`nmt serve`: the HTTP service, LibreTranslate's API, batching across requests."""
