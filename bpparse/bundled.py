"""Models shipped inside the package (``bpparse/models/<name>.bpm``) and the name -> file resolver.

``bpparse parse`` and ``bpparse.load_model`` accept either a path to a model file or the name of a
bundled model; with no model at all, ``DEFAULT_MODEL`` is used. A path that exists always wins over
a bundled name, so a local file called ``en_ewt`` is never shadowed.
"""
import os
from pathlib import Path

from bpparse.errors import ModelFileError

MODEL_DIR = Path(__file__).resolve().parent / "models"
MODEL_SUFFIX = ".bpm"
DEFAULT_MODEL = "en_ewt"


def bundled_models():
    """{name: path} of the models shipped in ``bpparse/models/``, sorted by name."""
    if not MODEL_DIR.is_dir():
        return {}
    return {p.stem: p for p in sorted(MODEL_DIR.glob(f"*{MODEL_SUFFIX}"))}


def resolve_model(name_or_path=None):
    """(path, bundled) of a model: an existing file path, else a bundled name (``"en_ewt"`` or
    ``"en_ewt.bpm"``); None means ``DEFAULT_MODEL``. Raises ModelFileError naming the bundled models
    when neither exists."""
    if name_or_path is None:
        name_or_path = DEFAULT_MODEL
    path = Path(os.fspath(name_or_path))
    if path.exists():
        return path, False
    models = bundled_models()
    name = path.name[:-len(MODEL_SUFFIX)] if path.name.endswith(MODEL_SUFFIX) else path.name
    if path.parent == Path(".") and name in models:
        return models[name], True
    known = ", ".join(models) or "none installed"
    raise ModelFileError(f"{name_or_path}: model file not found, and no bundled model of that name "
                         f"(bundled: {known})")

