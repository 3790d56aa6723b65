"""Markdown table of a 'lipi inflation --format csv' run over the frontier
points (bench/fair_frontier.sh): English tokens per line, English against
`none` of the same model type and size, parity of every Indic language of
FLORES-200 devtest, the goal check, and the share of token boundaries that
cut a grapheme cluster in the worst language.

    python3 bench/fair_table.py inflation.csv NAME...   (NAME = bpe-none-64k, ...)
    python3 bench/fair_table.py --by-language inflation.csv TOKENIZER...
        (one row per language: English tokens per line, then parity)
"""
import csv
import sys

INDIC = ["hin_Deva", "ben_Beng", "tam_Taml", "asm_Beng", "guj_Gujr", "kan_Knda",
         "kas_Arab", "kas_Deva", "mai_Deva", "mal_Mlym", "mar_Deva", "mni_Beng",
         "npi_Deva", "ory_Orya", "pan_Guru", "san_Deva", "sat_Olck", "snd_Arab",
         "tel_Telu", "urd_Arab", "sin_Sinh"]
GOAL = INDIC[:3]
# Languages with a FLORES-200 dev file (sin_Sinh has none).
WITH_DEV = INDIC[:20]


def label(name):
    for suffix in (".json",):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def by_language(path, names):
    rows = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            rows[(r["tokenizer"], r["language"])] = r
    out = ["| FLORES-200 devtest | " + " | ".join(names) + " |",
           "|---" + "|---:" * len(names) + "|"]
    out.append("| eng_Latn tokens/line | " + " | ".join(
        f'{float(rows[(n, "eng_Latn")]["tokens_per_line"]):.2f}' for n in names) + " |")
    for lang in sorted(INDIC):
        cells = []
        for n in names:
            r = rows[(n, lang)]
            cells.append(f'{float(r["parity"]):.2f}' + ("" if r["comparable"] == "true" else "*"))
        out.append(f"| {lang} | " + " | ".join(cells) + " |")
    print("\n".join(out))


def main():
    if sys.argv[1] == "--by-language":
        by_language(sys.argv[2], sys.argv[3:])
        return
    rows = {}
    with open(sys.argv[1], newline="") as f:
        for r in csv.DictReader(f):
            rows[(label(r["tokenizer"]), r["language"])] = r
    names = [label(n) for n in sys.argv[2:]]

    def get(n, lang, field):
        r = rows.get((n, lang))
        return float(r[field]) if r else None

    def none_of(n):
        ty, _, size = n.split("-")[0], None, n.split("-")[-1]
        return f"{ty}-none-{size}"

    out = ["| | " + " | ".join(names) + " |", "|---" + "|---:" * len(names) + "|"]
    eng = [get(n, "eng_Latn", "tokens_per_line") for n in names]
    out.append("| eng_Latn tokens/line | " + " | ".join(f"{e:.2f}" for e in eng) + " |")
    vs = []
    for n, e in zip(names, eng):
        b = get(none_of(n), "eng_Latn", "tokens_per_line")
        vs.append(f"{(e / b - 1) * 100:+.1f}%" if b else "")
    out.append("| English vs none | " + " | ".join(vs) + " |")
    for lang in INDIC:
        cells = []
        for n in names:
            p = get(n, lang, "parity")
            b = get(none_of(n), lang, "parity")
            s = f"{p:.2f}"
            if lang in GOAL and p <= 1.10:
                s = f"**{s}**"
            elif lang not in GOAL and b is not None and n != none_of(n) and round(p, 2) > round(b, 2):
                s += " ↑"
            cells.append(s)
        out.append(f"| {lang} | " + " | ".join(cells) + " |")
    goal = []
    for n in names:
        e = get(n, "eng_Latn", "tokens_per_line")
        b = get(none_of(n), "eng_Latn", "tokens_per_line")
        ok = all(get(n, l, "parity") <= 1.10 for l in GOAL) and b and e <= b * 1.05 and all(
            round(get(n, l, "parity"), 2) <= round(get(none_of(n), l, "parity"), 2)
            for l in WITH_DEV[3:])
        goal.append("yes" if ok else "no")
    out.append("| goal met | " + " | ".join(goal) + " |")
    cuts = []
    for n in names:
        worst = max(INDIC, key=lambda l: get(n, l, "grapheme_split_share") or 0.0)
        c = get(n, worst, "grapheme_split_share") * 100
        cuts.append(f"{c:.3f}% {worst.split('_')[0]}")
    out.append("| boundaries cutting a grapheme cluster (worst language) | " + " | ".join(cuts) + " |")
    print("\n".join(out))


if __name__ == "__main__":
    main()
