"""Generative retrievers (STAIR, DSI, zero-shot LLM): prompts, the LM engine, training and decoding."""
