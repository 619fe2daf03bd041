"""Dense embedders: the protocol (`base`), the local ONNX MiniLM (`onnx`), OpenAI-compatible
`/v1/embeddings` (`openai`) and the on-disk vector cache (`cache`).
"""
