"""A synthetic corpus at any size, stored as ctxr stores real chunks: for latency at scale.

* Texts are synthetic (deterministic seed): Zipf-distributed words from a generated vocabulary
  of real English and real-looking words plus code identifiers (camelCase, snake_case,
  dotted), 50-150 words per chunk, `CHUNKS_PER_DOC` chunks per document.
* Dense vectors are partly synthetic: a pool of real embeddings, and every further chunk a pool
  vector plus Gaussian noise of norm `NOISE`, renormalised (cosine to its pool vector about
  0.9). Latency depends on the vectors' geometry only mildly for exact search; HNSW recall on
  such clustered vectors is indicative only.
* `stored_point` and `document_entries` give each chunk a stored point and each document the
  manifest entry `ctxr index` writes, so `SearchService` opens the index as any other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ctxr.index.bm25.weights import Bm25Params, SparseTerms, document_vector
from ctxr.index.manifest import DocumentEntry
from ctxr.index.store.base import StoredPoint
from ctxr.types import chunk_id_for

CHUNKS_PER_DOC = 10
NOISE = 0.5  # norm of the noise added to a pool vector: cosine to it ~ 1/sqrt(1 + NOISE**2)
ZIPF_S = 1.07
VOCAB_SIZE = 4000
IDENTIFIERS = 600

# Real words (prose and code), extended with generated real-looking ones to VOCAB_SIZE.
_REAL_WORDS_TEXT = """
the of and to in is for that with on as it be by this are or from at an not was can which
have has all will if when data file index search query vector token chunk document model
server client request response error value type function method class module package config
setting option default path name user time date list table field record key cache store
memory disk thread process queue event handler stream buffer parser format schema version
build test release deploy install update delete create read write open close start stop run
load save send receive connect retry timeout limit batch size count score rank weight filter
sort merge split join match replace encode decode compress hash sign verify token session
account password permission role policy network socket port address host domain proxy route
log metric trace alert monitor report dashboard chart graph node edge tree leaf root branch
commit merge rebase diff patch issue review comment note section heading paragraph sentence
word term phrase language english retrieval embedding similarity distance cosine nearest
neighbour graph layer segment shard replica cluster collection payload point sparse dense
hybrid fusion reciprocal lexical semantic context prompt answer question source citation
"""
_SYLLABLES_TEXT = """
ka ri to mo ne sa lu vi de po ra ti ko me na shi ba gre tan vel mor dex pli quo zen fra lin
ber cor dan el ix on ul ar est ion ent al ism ure ory ate ive ous ant ly ize
"""
_REAL_WORDS = _REAL_WORDS_TEXT.split()
_SYLLABLES = _SYLLABLES_TEXT.split()


@dataclass(frozen=True)
class Corpus:
    texts: list[str]
    vocab: list[str]
    probs: npt.NDArray[np.float64]


def make_vocab(rng: np.random.Generator) -> list[str]:
    """Real words first (they get the most frequent ranks), then pseudo-words, then identifiers."""
    words = list(dict.fromkeys(_REAL_WORDS))
    seen = set(words)
    while len(words) < VOCAB_SIZE - IDENTIFIERS:
        n = int(rng.integers(2, 5))
        word = "".join(str(s) for s in rng.choice(_SYLLABLES, size=n))
        if word not in seen:
            seen.add(word)
            words.append(word)
    base = words[40:1500]
    while len(words) < VOCAB_SIZE:
        a, b, c = (str(w) for w in rng.choice(base, size=3))
        style = int(rng.integers(0, 4))
        if style == 0:
            ident = a + b.capitalize()  # camelCase
        elif style == 1:
            ident = f"{a}_{b}"  # snake_case
        elif style == 2:
            ident = f"{a}.{b}_{c}"  # dotted
        else:
            ident = a.capitalize() + b.capitalize() + c.capitalize()  # PascalCase
        if ident not in seen:
            seen.add(ident)
            words.append(ident)
    # Shuffle identifiers into the middle of the rank order so some are frequent, most rare.
    order = list(range(len(words)))
    tail = order[300:]
    rng.shuffle(tail)
    return [words[i] for i in order[:300] + tail]


def make_corpus(chunks: int, seed: int) -> Corpus:
    rng = np.random.default_rng(seed)
    vocab = make_vocab(rng)
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    probs = ranks**-ZIPF_S
    probs /= probs.sum()
    lengths = rng.integers(50, 151, size=chunks)
    ids = rng.choice(len(vocab), size=int(lengths.sum()), p=probs)
    texts: list[str] = []
    pos = 0
    for n in lengths:
        words = [vocab[i] for i in ids[pos : pos + n]]
        pos += int(n)
        # Sentences of ~12 words so the text reads like prose to the tokenizers.
        sentences = [" ".join(words[i : i + 12]) for i in range(0, len(words), 12)]
        texts.append(". ".join(s.capitalize() for s in sentences) + ".")
    return Corpus(texts=texts, vocab=vocab, probs=probs)


def make_queries(corpus: Corpus, count: int, seed: int) -> list[str]:
    """2-6 words drawn from the same Zipf law minus the 30 commonest words (as users type)."""
    rng = np.random.default_rng(seed + 1)
    probs = corpus.probs.copy()
    probs[:30] = 0.0
    probs /= probs.sum()
    queries = []
    for _ in range(count):
        n = int(rng.integers(2, 7))
        queries.append(" ".join(corpus.vocab[i] for i in rng.choice(len(probs), n, p=probs)))
    return queries


def synthetic_dense(
    pool: npt.NDArray[np.float32], start: int, stop: int, seed: int
) -> npt.NDArray[np.float32]:
    """Rows start..stop: chunk i < len(pool) keeps its real embedding; others get noise."""
    rng = np.random.default_rng(seed + 2 + start)
    rows = pool[np.arange(start, stop) % len(pool)].astype(np.float32)
    dim = pool.shape[1]
    noise = rng.standard_normal((stop - start, dim)).astype(np.float32) * (NOISE / dim**0.5)
    noisy = np.arange(start, stop) >= len(pool)
    rows[noisy] += noise[noisy]
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def doc_id(chunk: int) -> str:
    """The document that chunk number `chunk` of the corpus belongs to."""
    return f"doc{chunk // CHUNKS_PER_DOC:07d}"


def stored_point(chunk: int, text: str, dense: Sequence[float], sparse: SparseTerms) -> StoredPoint:
    """Chunk number `chunk` of the corpus as a stored point, no context. The payload holds what
    a search reads back; a real chunk's also carries its title, kind, language, hash and token
    count, left out here as in every figure recorded with this corpus."""
    document = doc_id(chunk)
    return StoredPoint(
        point_id=chunk_id_for(document, chunk % CHUNKS_PER_DOC),
        dense=dense,
        sparse=sparse,
        payload={  # type: ignore[typeddict-item]
            "doc_id": document,
            "source": f"synthetic/{document}.md",
            "index": chunk % CHUNKS_PER_DOC,
            "start": 0,
            "end": len(text),
            "heading_path": [],
            "text": text,
            "context": "",
            "context_kind": "none",
        },
    )


def stored_points(
    texts: Sequence[str],
    terms: Sequence[Sequence[str]],
    dense: npt.NDArray[np.float32],
    start: int,
    avg_len: float,
    params: Bm25Params,
) -> list[StoredPoint]:
    """Chunks `start` to `start + len(dense)` as stored points: row i of `dense` is chunk
    `start + i`'s vector, its BM25 vector weighted from its `terms` as ctxr's writer does."""
    return [
        stored_point(
            start + i,
            texts[start + i],
            row.tolist(),
            document_vector(terms[start + i], avg_len, params),
        )
        for i, row in enumerate(dense)
    ]


def document_entries(
    texts: Sequence[str], terms: Sequence[Sequence[str]], recipe: str, indexed_at: str
) -> dict[str, DocumentEntry]:
    """The manifest's entry for every document of the corpus."""
    entries = {}
    for start in range(0, len(texts), CHUNKS_PER_DOC):
        document = doc_id(start)
        chunks = texts[start : start + CHUNKS_PER_DOC]
        entries[document] = DocumentEntry(
            source=f"synthetic/{document}.md",
            sha256=hashlib.sha256("\n".join(chunks).encode()).hexdigest(),
            recipe=recipe,
            chunks=len(chunks),
            terms=sum(len(t) for t in terms[start : start + CHUNKS_PER_DOC]),
            context_kind="none",
            indexed_at=indexed_at,
        )
    return entries
