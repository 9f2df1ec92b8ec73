"""Models behind a server: the request boundary every evaluation backend answers
(:mod:`negtrain.engine.requests`), a response cache on disk (:mod:`negtrain.serving.cache`)
and a client for OpenAI-compatible servers (:mod:`negtrain.serving.openai`)."""
