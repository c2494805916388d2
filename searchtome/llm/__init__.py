"""LLM plumbing: the OpenAI-compatible client, the reply cache, the local model and its server."""
