import os
import sys

# tests import the shared oracle as a plain module
sys.path.insert(0, os.path.dirname(__file__))


import numpy as np  # noqa: E402
import pytest  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "data")
TINY = os.path.join(DATA, "en_ewt_train_tiny.conllu")


@pytest.fixture(scope="module")
def tiny_model():
    """A first-order model over the tiny EWT fixture's vocabularies with random float16-exact
    weights (small hash regions, XPOS templates, no morphology or lemmas)."""
    from bpparse.config import load_config
    from bpparse.conll import read_conll
    from bpparse.encode import Vocabularies
    from bpparse.model import Model, round_weights

    small = {"features.hash_bits": 16, "features.second_order_hash_bits": 12,
             "features.label_hash_bits": 10, "features.fine_tags": True, "features.morph": False,
             "features.lemma": False}
    m = Model(load_config("first-order", small), Vocabularies.build(list(read_conll(TINY))))
    m.theta = round_weights(np.random.default_rng(3).normal(scale=0.3, size=m.theta.shape[0]))
    return m


@pytest.fixture(scope="module")
def tiny_encoded(tiny_model):
    """The tiny EWT fixture's sentences encoded by `tiny_model`."""
    from bpparse.conll import read_conll

    return [tiny_model.encode(s) for s in read_conll(TINY)]
