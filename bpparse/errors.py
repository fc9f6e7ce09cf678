"""The only exceptions users see. The CLI maps each to a clean message and a non-zero exit."""


class BpparseError(Exception):
    """Base class of every error bpparse raises on purpose."""


class InputError(BpparseError):
    """Malformed input data: names the file, the 1-based line number and the problem."""

    def __init__(self, path, line, msg):
        self.path = str(path)
        self.line = line
        self.msg = msg
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {msg}")


class ConfigError(BpparseError):
    """A configuration file or option that cannot be used."""


class ModelFileError(BpparseError):
    """A model file that cannot be loaded (wrong format version, truncated, not a model)."""
