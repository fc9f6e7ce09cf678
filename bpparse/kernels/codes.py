"""Integer codes that kernels take in place of strings (no numba here, so config and the CLI can
import them without loading the JIT).

Global constraint of a factor graph (Smith & Eisner 2008 Table 3): TREE (PTREE when the settings
say projective), EXACTLY1, ATMOST1, or NO_GLOBAL (NOT2 is then given as NAND pairs).
NOCROSS form: CROSS_GROUPED or CROSS_EXACTLY1 (docs/design.md §2). Decoder: MBR, MAP, GREEDY or DD
(`bpparse.decode`).
"""
TREE = 0
EXACTLY1 = 1
ATMOST1 = 2
NO_GLOBAL = 3

CROSS_GROUPED = 0
CROSS_EXACTLY1 = 1

MBR = 0
MAP = 1
GREEDY = 2
DD = 3
DECODERS = ("mbr", "map", "greedy", "dd")
