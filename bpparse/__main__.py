"""`python -m bpparse ...` is the `bpparse` command."""
from bpparse.cli import main

main()
