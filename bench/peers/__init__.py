"""ctxr side by side with the common alternatives: a peer search stack, peer splitters."""
