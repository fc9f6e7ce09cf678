"""Factor families of the BP engine, one module each; every family reads incoming log-odds
messages ``q`` and writes outgoing log-odds messages ``r`` (Smith & Eisner 2008 §5, docs/design.md §2)."""
