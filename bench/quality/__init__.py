"""Retrieval quality and the figures defaults are tuned on: Pass@k, nDCG, recall, chunk sizes
and token counts. Time, where printed, is incidental."""
