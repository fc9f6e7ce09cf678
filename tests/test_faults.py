"""Faults a user meets: files that must not be lost, broken input, scores of any scale, full disks,
interrupts, options that do not apply. Issue 20; future features add their own fault tests here
(full disk via /dev/full, unwritable paths, output = input, SIGINT in a subprocess, bad models).
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import bpparse
from bpparse.cli import cli

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "en_ewt_sample.conllu"
TINY = DATA / "en_ewt_train_tiny.conllu"


def run_cli(*args, input=None):
    return CliRunner().invoke(cli, [str(a) for a in args], input=input)


# ---------------------------------------------------------------- item 3: numerics

@pytest.mark.parametrize("offset", [1e3, -1e3, 1e6, -1e6])
def test_bp_is_invariant_to_offsets_of_a_childs_scores(offset):
    s = np.random.default_rng(0).normal(0, 2, (21, 21))
    base = bpparse.bp_marginals(s)
    shifted = bpparse.bp_marginals(s + offset)
    np.testing.assert_allclose(shifted.marginals, base.marginals, atol=1e-9)
    np.testing.assert_allclose(shifted.marginals[:, 1:].sum(axis=0), 1.0, atol=1e-9)
    assert shifted.converged == base.converged
    # LINK + TREE is exact whatever the scale
    exact, _ = bpparse.tree_marginals(s)
    np.testing.assert_allclose(shifted.marginals, exact, atol=1e-9)


@pytest.mark.parametrize("constraint", ["tree", "exactly1"])
def test_second_order_bp_and_relaxation_are_invariant_to_per_child_offsets(constraint):
    rng = np.random.default_rng(1)
    n1 = 9
    s = rng.normal(0, 2, (n1, n1))
    grand = rng.normal(0, 0.5, (n1, n1, n1))
    sib = rng.normal(0, 0.5, (n1, n1, n1))
    offsets = rng.choice([1e3, -1e3, 1e6, -1e6, 0.0], size=n1)
    kw = dict(max_iter=20, damping=0.3, constraint=constraint)
    base = bpparse.bp_marginals(s, grand, sib, **kw)
    moved = bpparse.bp_marginals(s + offsets[None, :], grand, sib, **kw)
    np.testing.assert_allclose(moved.marginals, base.marginals, atol=1e-8)
    rbase = bpparse.relaxed_marginals(s, grand, sib, threshold=1e-3, constraint=constraint)
    rmoved = bpparse.relaxed_marginals(s + offsets[None, :], grand, sib, threshold=1e-3,
                                       constraint=constraint)
    np.testing.assert_allclose(rmoved.marginals, rbase.marginals, atol=1e-8)
