"""Peak memory (RSS) of the parts that hold the most: the local embedder."""
