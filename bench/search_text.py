#!/usr/bin/python3
"""Model of the real-text retrieval benchmark (bench/search_text.sh).

    search_text.py make DIR VOCAB   a random-weight BERT of one layer, hidden
                                    384 (12 heads, FFN 1536), multilingual
                                    BERT's vocabulary (VOCAB, vocab.txt), mean
                                    pooling and L2 normalization as a
                                    sentence-transformers folder

No trained model can be had offline (../shared/data/SOURCES.md: none under
4 MiB), so the embeddings have less structure than a trained model's: the
weights are bench/embed_anchor.py's (seed 7, N(0, 0.02)), one layer so that
the 100,000-odd lines embed in minutes on two cores.
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import embed_anchor  # noqa: E402

SHAPE = dict(layers=1, hidden=384, heads=12, inter=1536, vocab=119547)


def make(d, vocab):
    stamp = os.path.join(d, "stamp")
    if os.path.exists(stamp):
        return
    os.makedirs(os.path.join(d, "1_Pooling"), exist_ok=True)
    cfg = {"architectures": ["BertModel"], "model_type": "bert",
           "vocab_size": SHAPE["vocab"], "hidden_size": SHAPE["hidden"],
           "num_hidden_layers": SHAPE["layers"], "num_attention_heads": SHAPE["heads"],
           "intermediate_size": SHAPE["inter"], "max_position_embeddings": 512,
           "type_vocab_size": 2, "hidden_act": "gelu", "layer_norm_eps": 1e-12,
           "pad_token_id": 0}
    files = {
        "config.json": cfg,
        "tokenizer_config.json": {"do_lower_case": False, "model_max_length": 128,
                                  "tokenizer_class": "BertTokenizer"},
        "modules.json": [
            {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
            {"idx": 1, "name": "1", "path": "1_Pooling",
             "type": "sentence_transformers.models.Pooling"},
            {"idx": 2, "name": "2", "path": "2_Normalize",
             "type": "sentence_transformers.models.Normalize"}],
        "sentence_bert_config.json": {"max_seq_length": 128, "do_lower_case": False},
        "1_Pooling/config.json": {"word_embedding_dimension": SHAPE["hidden"],
                                  "pooling_mode_mean_tokens": True},
    }
    for name, obj in files.items():
        with open(os.path.join(d, name), "w") as f:
            json.dump(obj, f, indent=1)
    shutil.copyfile(vocab, os.path.join(d, "vocab.txt"))
    ts = embed_anchor.tensors(SHAPE)
    # N(0, 1) word embeddings against N(0, 0.02) positions: with all at
    # 0.02 the mean of the position rows dominates every sentence's vector
    # (cosine 0.97 between any two lines); so the words decide, as in a
    # trained model, and lines sharing words are near one another.
    ts["embeddings.word_embeddings.weight"] *= 50
    embed_anchor.write_safetensors(os.path.join(d, "model.safetensors"), ts)
    with open(stamp, "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
