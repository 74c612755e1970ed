"""The reference implementations of guardwire's text metrics (tests/metrics.rs).

Reads one JSON document on stdin and writes one on stdout, so that a single Python process
scores every generated case:

  in:  {"bleu": [{"hyp": str, "refs": [str]}], "corpus_bleu": [{"hyps": [str], "refs": [[str]]}],
        "rouge": [{"hyp": str, "ref": str, "stemmer": bool}], "meteor": [{"hyp": str, "refs": [str]}],
        "stem": [str], "synonyms": [str]}
  out: {"versions": {...}, "bleu": [float], "corpus_bleu": [float],
        "rouge": [{"rouge1": [p, r, f], "rouge2": [...], "rougeL": [...]}], "meteor": [float],
        "stem": [str], "synonyms": [[str]]}

BLEU: sacrebleu.sentence_bleu / corpus_bleu with their defaults (tokenizer 13a, smoothing exp,
effective order for sentences), divided by 100. `corpus_bleu` takes reference streams: the
per-hypothesis lists are transposed here. ROUGE: rouge_score.RougeScorer(["rouge1", "rouge2",
"rougeL"], use_stemmer=...).score(reference, hypothesis). METEOR:
nltk.translate.meteor_score.meteor_score([r.split() for r in refs], hyp.split()) with WordNet
from $NLTK_DATA (never downloaded). Synonyms: the lemma names without "_" of wordnet.synsets(w).
"""

import json
import sys
from importlib import metadata

import nltk
import sacrebleu
from nltk.corpus import wordnet
from nltk.stem.porter import PorterStemmer
from nltk.translate.meteor_score import meteor_score
from rouge_score import rouge_scorer


def main():
    cases = json.load(sys.stdin)
    out = {
        "versions": {
            name: metadata.version(name) for name in ("sacrebleu", "rouge-score", "nltk")
        }
    }
    out["bleu"] = [
        sacrebleu.sentence_bleu(c["hyp"], c["refs"]).score / 100.0 for c in cases["bleu"]
    ]
    out["corpus_bleu"] = [
        sacrebleu.corpus_bleu(c["hyps"], [list(s) for s in zip(*c["refs"])]).score / 100.0
        for c in cases["corpus_bleu"]
    ]
    scorers = {
        stem: rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=stem)
        for stem in (False, True)
    }
    out["rouge"] = []
    for c in cases["rouge"]:
        scores = scorers[c["stemmer"]].score(c["ref"], c["hyp"])
        out["rouge"].append(
            {k: [v.precision, v.recall, v.fmeasure] for k, v in scores.items()}
        )
    out["meteor"] = [
        meteor_score([r.split() for r in c["refs"]], c["hyp"].split()) for c in cases["meteor"]
    ]
    stemmer = PorterStemmer()
    out["stem"] = [stemmer.stem(w) for w in cases["stem"]]
    out["synonyms"] = [
        sorted(
            {
                lemma.name()
                for synset in wordnet.synsets(w)
                for lemma in synset.lemmas()
                if "_" not in lemma.name()
            }
        )
        for w in cases["synonyms"]
    ]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
