"""Token inflation per language against English, for the tiktoken encodings ctxr sizes with.

Inflation = tokens of a passage in a language / tokens of the same passage in English. ctxr
scales a prose document's chunk budget by it (``ctxr.enrich.split.inflation``) so that a
Japanese or Turkish chunk holds about what an English chunk holds.

Two parallel samples:

* always: Articles 1-3 of the Universal Declaration of Human Rights in the eleven languages of
  ``tests/data/languages/udhr_1_3.json`` (public domain, ~146 English tokens; small, so the
  figures move by ~15% against the larger sample);
* with ``--flores DIR`` (a FLORES-200 checkout holding ``dev/`` and ``devtest/``, e.g. the one
  in github.com/AleksandarPetrov/tokenization-fairness): all 2,009 sentences of dev +
  devtest, as Petrov et al. 2023 ("Language Model Tokenizers Introduce Unfairness Between
  Languages", NeurIPS) counted them. Their published cl100k_base premiums are printed beside
  ours, and ``--emit`` prints the table that ``ctxr/enrich/split/inflation.py`` holds.

Each text is encoded on its own with ``encode_ordinary`` (no special tokens), as the splitter
counts. Nothing is timed: the figures are counts. Usage::

    python -m bench.quality.language_inflation [--flores DIR] [--emit]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from bench.common.checkout import TESTS
from bench.common.measure import parser as cli
from ctxr.tokens import get_encoding

UDHR = TESTS / "data" / "languages" / "udhr_1_3.json"
ENCODINGS = ("cl100k_base", "o200k_base")

# ISO 639-1 (py3langid's labels) -> FLORES-200 code. Serbian is left out: py3langid's "sr"
# covers both scripts, whose premiums differ; Chinese is the Simplified text.
FLORES = {
    "af": "afr_Latn", "am": "amh_Ethi", "ar": "arb_Arab", "az": "azj_Latn", "be": "bel_Cyrl",
    "bg": "bul_Cyrl", "bn": "ben_Beng", "bs": "bos_Latn", "ca": "cat_Latn", "cs": "ces_Latn",
    "cy": "cym_Latn", "da": "dan_Latn", "de": "deu_Latn", "el": "ell_Grek", "en": "eng_Latn",
    "eo": "epo_Latn", "es": "spa_Latn", "et": "est_Latn", "eu": "eus_Latn", "fa": "pes_Arab",
    "fi": "fin_Latn", "fr": "fra_Latn", "ga": "gle_Latn", "gl": "glg_Latn", "gu": "guj_Gujr",
    "he": "heb_Hebr", "hi": "hin_Deva", "hr": "hrv_Latn", "hu": "hun_Latn", "hy": "hye_Armn",
    "id": "ind_Latn", "is": "isl_Latn", "it": "ita_Latn", "ja": "jpn_Jpan", "ka": "kat_Geor",
    "kk": "kaz_Cyrl", "km": "khm_Khmr", "kn": "kan_Knda", "ko": "kor_Hang", "lt": "lit_Latn",
    "lv": "lvs_Latn", "mk": "mkd_Cyrl", "ml": "mal_Mlym", "mr": "mar_Deva", "ms": "zsm_Latn",
    "my": "mya_Mymr", "ne": "npi_Deva", "nl": "nld_Latn", "no": "nob_Latn", "pa": "pan_Guru",
    "pl": "pol_Latn", "pt": "por_Latn", "ro": "ron_Latn", "ru": "rus_Cyrl", "si": "sin_Sinh",
    "sk": "slk_Latn", "sl": "slv_Latn", "sq": "als_Latn", "sv": "swe_Latn", "sw": "swh_Latn",
    "ta": "tam_Taml", "te": "tel_Telu", "th": "tha_Thai", "tl": "tgl_Latn", "tr": "tur_Latn",
    "uk": "ukr_Cyrl", "ur": "urd_Arab", "uz": "uzn_Latn", "vi": "vie_Latn", "zh": "zho_Hans",
}  # fmt: skip

# Petrov et al. 2023, cl100k_base column of their assets/tokenization_lengths.csv, divided by
# English's (dev + devtest): the published premiums for the eleven languages.
PUBLISHED_CL100K = {
    "en": 1.00, "ja": 2.30, "zh": 1.91, "ko": 2.38, "ru": 2.49, "ar": 3.04, "hi": 4.79,
    "tr": 1.91, "de": 1.58, "fr": 1.60, "es": 1.55,
}  # fmt: skip


def ratios(texts: dict[str, list[str]], encoding: str) -> dict[str, float]:
    enc = get_encoding(encoding)

    def tokens(parts: list[str]) -> int:
        return sum(len(ids) for ids in enc.encode_ordinary_batch(parts))

    english = tokens(texts["en"])
    return {lang: tokens(parts) / english for lang, parts in texts.items()}


def flores_texts(root: Path) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for lang, code in FLORES.items():
        lines: list[str] = []
        for split in ("dev", "devtest"):
            path = root / split / f"{code}.{split}"
            lines += path.read_text(encoding="utf-8").split("\n")
        out[lang] = lines
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = cli(__doc__)
    parser.add_argument("--flores", type=Path, help="FLORES-200 folder with dev/ and devtest/")
    parser.add_argument("--emit", action="store_true", help="print the table for the code")
    args = parser.parse_args(argv)
    udhr: dict[str, list[str]] = json.loads(UDHR.read_text(encoding="utf-8"))["texts"]
    measured = {e: ratios(udhr, e) for e in ENCODINGS}
    flores = {e: ratios(flores_texts(args.flores), e) for e in ENCODINGS} if args.flores else {}
    print(
        "| language | UDHR 1-3 cl100k | FLORES cl100k | published cl100k "
        "| UDHR o200k | FLORES o200k |"
    )
    print("|---|---|---|---|---|---|")
    for lang in udhr:
        row = [f"{measured['cl100k_base'][lang]:.2f}"]
        row.append(f"{flores['cl100k_base'][lang]:.2f}" if flores else "-")
        row.append(f"{PUBLISHED_CL100K[lang]:.2f}")
        row.append(f"{measured['o200k_base'][lang]:.2f}")
        row.append(f"{flores['o200k_base'][lang]:.2f}" if flores else "-")
        print(f"| {lang} | " + " | ".join(row) + " |")
    if args.emit and flores:
        for encoding, table in flores.items():
            print(f'    "{encoding}": {{')
            items = [f'"{lang}": {table[lang]:.2f}' for lang in sorted(table)]
            for i in range(0, len(items), 7):
                print("        " + ", ".join(items[i : i + 7]) + ",")
            print("    },")


if __name__ == "__main__":
    main()
