"""bpparse: dependency parsing by loopy belief propagation with global tree constraints.

The public API is imported lazily so that ``import bpparse`` (and the CLI's ``--help``) stays fast:
numba kernels are compiled or loaded from cache only when first used.
"""
from bpparse import kernel_cache as _kernel_cache
from bpparse._version import __version__

_kernel_cache.select_cpu()  # before numba is imported: the CPU the shipped kernels are built for

# public name -> module that defines it
_API = {
    "tree_marginals": "bpparse.trees",
    "decode_tree": "bpparse.trees",
    "tree_marginals_batch": "bpparse.trees",
    "decode_tree_batch": "bpparse.trees",
    "sibling_marginals": "bpparse.trees",
    "decode_sibling_tree": "bpparse.trees",
    "dd_decode": "bpparse.trees",
    "bp_marginals": "bpparse.bp",
    "mbr_decode": "bpparse.decode",
    "relaxed_marginals": "bpparse.relax",
    "load_model": "bpparse.model",
    "save_model": "bpparse.model",
    "Model": "bpparse.model",
    "load_config": "bpparse.config",
    "read_conll": "bpparse.conll",
    "write_conll": "bpparse.conll",
    "evaluate": "bpparse.evaluate",
    "Sentence": "bpparse.conll",
    "format_sentence": "bpparse.conll",
    "open_output": "bpparse.conll",
    "Vocab": "bpparse.encode",
    "Vocabularies": "bpparse.encode",
    "EncodedSentence": "bpparse.encode",
    "encode_corpus": "bpparse.encode",
    "parse_sentences": "bpparse.parse",
    "parse_file": "bpparse.parse",
    "ParsedSentence": "bpparse.parse",
    "read_marginals": "bpparse.parse",
    "sentence_svg": "bpparse.show",
    "sentence_html": "bpparse.show",
    "page": "bpparse.show",
    "joint_marginals": "bpparse.trees",
    "joint_dd_decode": "bpparse.trees",
    "train_taglink": "bpparse.train_joint",
    "InputError": "bpparse.errors",
    "ConfigError": "bpparse.errors",
    "ModelFileError": "bpparse.errors",
}

__all__ = ["__version__", *_API]


def __getattr__(name):
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'bpparse' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(__all__)
