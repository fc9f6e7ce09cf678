"""Parsing corpora on a Dask cluster (``bpparse parse --cluster``): shards, workers, ordered output.

Shards. `plan_shards` cuts every input into byte ranges at sentence boundaries: a small or
compressed file is one shard; a large one is cut every ``shard_bytes`` and each cut moved to the
line after the next blank line (the client reads only a few lines around each cut, and a worker
only its own range). Each shard knows its input's format (``auto`` is resolved once, from the
file's first sentence, as `bpparse.conll.read_conll` does).

Workers. `parse_shard` runs on a worker: it loads the model once per worker process and keeps it
(`_worker_model`; only the model's name or path and its SHA-256 travel with a task, and a worker
whose file differs refuses to parse), reads its byte range with `bpparse.conll.read_conll` and
parses it with `bpparse.parse.iter_parse` (``jobs=1``, the kernels of ``bpparse parse``), so its
text is byte-identical to a local run's. Tasks have no side effects: a task whose worker dies is
simply run again by Dask. Errors come back as data (path, line, problem); line numbers inside a
shard are made line numbers of the ORIGINAL file by counting the lines before the shard, which a
worker does only when it has something to report.

Output. `parse_on_cluster` keeps a window of shards in flight, writes results in input order as
they complete (only out-of-order results wait, at most the window), to one stream or to one file
per input in ``output_dir``, each an `bpparse.conll.AtomicOutput` (temporary name, renamed when its
last shard is written). ``resume`` skips inputs whose output exists and is not older than the
input. Dask is imported only here, and only when called: it is the optional extra
``bpparse[dask]``.
"""
import hashlib
import os
import sys
import threading
import time
import uuid
from contextlib import nullcontext
from typing import NamedTuple

from bpparse.errors import BpparseError, InputError

# about 12,000 words, seconds of work for one core: small enough that the last shards of a run
# leave few workers idle, large enough that Dask's per-task cost (milliseconds) does not count
DEFAULT_SHARD_BYTES = 2 << 20
INSTALL_HINT = "pip install 'bpparse[dask]'"
COMPRESSED = (".gz", ".xz")
BOM = b"\xef\xbb\xbf"
BOM_MESSAGE = "byte-order mark (U+FEFF) inside the file (files concatenated with their BOMs?)"


def require_dask():
    """The ``distributed`` module, or a one-line BpparseError saying how to install it."""
    try:
        import distributed
    except ImportError:
        raise BpparseError(f"--cluster needs Dask (dask.distributed), which is not installed: "
                           f"{INSTALL_HINT}") from None
    return distributed


# ---------------------------------------------------------------- shards

class Shard(NamedTuple):
    """Bytes ``start`` .. ``end`` (exclusive; -1: end of file) of input ``input``; ``path``
    absolute (what a worker opens), ``name`` as given (what messages say); ``fmt`` "conllu" or
    "conllx"; ``last``: the input's last shard."""

    index: int
    input: int
    path: str
    name: str
    start: int
    end: int
    fmt: str
    last: bool


def _open(path):
    import gzip
    import lzma

    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    if path.endswith(".xz"):
        return lzma.open(path, "rb")
    return open(path, "rb")


def _detect_format(path, name):
    """The format ``read_conll(..., "auto")`` would settle on: from the first sentence block."""
    from bpparse.conll import detect_format

    block = []
    try:
        with _open(path) as f:
            for i, raw in enumerate(f):
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if i == 0 and line.startswith("\ufeff"):
                    line = line[1:]
                if line:
                    block.append(line)
                elif block:
                    break
    except (OSError, EOFError) as e:
        raise InputError(name, None, f"cannot read: {getattr(e, 'strerror', None) or e}") from None
    return detect_format(block) if block else "conllu"


def _align(f, cut, size):
    """The first sentence start at or after byte ``cut``: the position after the next blank line
    (``size`` if there is none)."""
    f.seek(cut - 1)
    f.readline()  # the rest of the line holding byte cut-1 ("\n" alone if cut starts a line)
    while True:
        line = f.readline()
        if not line:
            return size
        if line in (b"\n", b"\r\n"):
            return f.tell()


def plan_shards(inputs, fmt="auto", shard_bytes=DEFAULT_SHARD_BYTES):
    """The shards of ``inputs`` (paths), in output order; every input has at least one."""
    if shard_bytes < 1:
        raise ValueError("shard_bytes must be >= 1")
    shards = []
    for k, name in enumerate(inputs):
        name = os.fspath(name)
        path = os.path.abspath(name)
        try:
            size = os.path.getsize(path)
        except OSError as e:
            raise InputError(name, None, f"cannot read: {e.strerror or e}") from None
        resolved = _detect_format(path, name) if fmt == "auto" else fmt
        cuts = [0]
        if not path.endswith(COMPRESSED) and size > shard_bytes:
            with open(path, "rb") as f:
                for cut in range(shard_bytes, size, shard_bytes):
                    if cut > cuts[-1]:
                        at = _align(f, cut, size)
                        if cuts[-1] < at < size:
                            cuts.append(at)
        cuts.append(-1)
        for i in range(len(cuts) - 1):
            shards.append(Shard(len(shards), k, path, name, cuts[i], cuts[i + 1], resolved,
                                i == len(cuts) - 2))
    return shards


class _ShardLines:
    """The raw lines (bytes) of a shard's byte range, for `read_conll` (``name``: the input's)."""

    def __init__(self, shard, check_bom=True):
        self.shard = shard
        self.name = shard.name
        self.check_bom = check_bom

    def __iter__(self):
        shard = self.shard
        with _open(shard.path) as f:
            if shard.start:
                f.seek(shard.start)
            pos = shard.start
            first = True
            for line in f:
                if first and self.check_bom and shard.start and line.startswith(BOM):
                    # read_conll drops a BOM on its line 1, which here is not the file's
                    raise InputError(shard.name, 1, BOM_MESSAGE)
                first = False
                yield line
                pos += len(line)
                if 0 <= shard.end <= pos:
                    break


class _Lines(list):
    """One sentence block's raw lines, named for `read_conll`."""

    def __init__(self, lines, name):
        super().__init__(lines)
        self.name = name


def _blocks(shard):
    """(first line within the shard, raw lines) of each blank-line-separated block."""
    block, start = [], 0
    for lineno, line in enumerate(_ShardLines(shard, check_bom=False), 1):
        if line in (b"\n", b"\r\n"):
            if block:
                yield start, block
                block = []
        else:
            if not block:
                start = lineno
            block.append(line)
    if block:
        yield start, block


def _skipping_sentences(shard, skipped, tagged):
    """The shard's sentences (``first_line`` within the shard), each malformed one (or, unless the
    model has a ``tagger``, untagged one) left out and recorded in ``skipped`` as (line within the
    shard, problem)."""
    from bpparse.conll import read_conll
    from bpparse.parse import check_tags

    for start, lines in _blocks(shard):
        if lines[0].startswith(BOM) and (shard.start or start > 1):
            skipped.append((start, BOM_MESSAGE))
            continue
        try:
            (sentence,) = read_conll(_Lines(lines, shard.name), shard.fmt)
        except InputError as e:  # lines of the block, made lines of the shard
            skipped.append((None if e.line is None else e.line + start - 1, e.msg))
            continue
        sentence.first_line += start - 1
        if not tagged:
            try:
                check_tags(sentence)
            except InputError as e:
                skipped.append((e.line, e.msg))
                continue
        yield sentence


class _LineBase:
    """Lines of the file before a shard, counted only when a message needs them."""

    def __init__(self, shard):
        self.shard = shard
        self._base = None if shard.start else 0

    @property
    def base(self):
        if self._base is None:
            count, left = 0, self.shard.start
            with open(self.shard.path, "rb") as f:
                while left > 0:
                    data = f.read(min(left, 1 << 24))
                    if not data:
                        break
                    count += data.count(b"\n")
                    left -= len(data)
            self._base = count
        return self._base

    def line(self, path, line):
        if line is None or path != self.shard.name:
            return line
        return line + self.base

    def message(self, text):
        """``NAME:LINE: ...`` with LINE made a line of the original file."""
        prefix = f"{self.shard.name}:"
        if text.startswith(prefix):
            number, sep, rest = text[len(prefix):].partition(":")
            if sep and number.isdigit():
                return f"{prefix}{int(number) + self.base}:{rest}"
        return text


# ---------------------------------------------------------------- the worker side

class Job(NamedTuple):
    """What every task of a run shares: ``model`` a bundled name or an absolute path, ``sha256``
    of its file, ``settings`` (`ParseSettings`, None: the model's), the output options, and
    ``hook``, called on the worker as ``hook(shard_index)`` once the shard's first sentence is
    parsed (fault injection in tests)."""

    model: str
    sha256: str
    settings: object
    misc_probs: bool
    keep_deps: bool
    skip_bad: bool
    retag: bool
    hook: object


_MODELS = {}
_MODELS_LOCK = threading.Lock()


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_kernels_once():
    """Load (or, on a cold cache, compile) the parse kernels, one process of this machine at a
    time (a file lock), so workers starting together compile once and the others load the cache."""
    import tempfile

    from bpparse.parse import preload_kernels

    try:
        import fcntl
    except ImportError:  # no flock (Windows): numba's cache writes are atomic anyway
        preload_kernels()
        return
    lock = os.path.join(tempfile.gettempdir(), f"bpparse-kernels-{os.getuid()}.lock")
    with open(lock, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            preload_kernels()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _worker_name():
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        import socket

        return f"{socket.gethostname()}:{os.getpid()}"


def _worker_model(spec, sha256):
    """This worker process's copy of the model (loaded on first use, then kept)."""
    from bpparse.bundled import resolve_model
    from bpparse.model import load_model

    with _MODELS_LOCK:
        if spec not in _MODELS:
            load_kernels_once()
            path, _ = resolve_model(spec)
            _MODELS[spec] = (load_model(path), _sha256(path))
        model, digest = _MODELS[spec]
    if sha256 and digest != sha256:
        raise BpparseError(f"{spec}: the model file on worker {_worker_name()} differs from the "
                           f"client's (SHA-256 {digest[:12]}... vs {sha256[:12]}...): every worker "
                           "must see the same model file")
    return model


def parse_shard(shard, job):
    """Parse one `Shard` on a worker; returns a dict: ``text`` (the CoNLL-U of its sentences, or
    of those before the error), counts, ``warnings`` and ``skipped`` messages with lines of the
    original file, ``error`` (None, ``("input", path, line, problem)`` or ``("error", message)``),
    ``worker`` and its ``peak_rss_mb``."""
    from bpparse.conll import read_conll
    from bpparse.parse import iter_parse, parse_settings

    lines = _LineBase(shard)
    texts, warnings, skipped = [], [], []
    result = {"index": shard.index, "sentences": 0, "words": 0, "first_order": 0, "error": None}
    try:
        model = _worker_model(job.model, job.sha256)
        settings = job.settings or parse_settings(model)
        if job.skip_bad:
            sentences = _skipping_sentences(shard, skipped, model.tagger is not None)
        else:
            sentences = read_conll(_ShardLines(shard), shard.fmt)
        for parsed in iter_parse(model, sentences, settings, 1, job.misc_probs,
                                 on_warning=warnings.append, keep_deps=job.keep_deps,
                                 retag=job.retag):
            texts.append(parsed.text)
            result["sentences"] += 1
            result["words"] += parsed.n
            result["first_order"] += parsed.first_order
            if job.hook is not None and result["sentences"] == 1:
                job.hook(shard.index)
    except InputError as e:
        result["error"] = ("input", e.path, lines.line(e.path, e.line), e.msg)
    except BpparseError as e:
        result["error"] = ("error", str(e))
    except (OSError, EOFError) as e:
        result["error"] = ("error", f"{shard.name}: cannot read on worker {_worker_name()}: "
                                    f"{getattr(e, 'strerror', None) or e}")
    result["text"] = "".join(texts)
    result["warnings"] = [lines.message(w) for w in warnings]
    result["skipped"] = [f"{shard.name}:{lines.line(shard.name, line)}: {msg}" if line is not None
                         else f"{shard.name}: {msg}" for line, msg in skipped]
    result["worker"] = _worker_name()
    result["peak_rss_mb"] = _peak_rss_mb()
    return result


def _peak_rss_mb():
    try:
        import resource
    except ImportError:
        return 0.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ---------------------------------------------------------------- the client side

def connect(cluster):
    """(client, owned LocalCluster or None) for ``"local"``, ``"local:N"``, a scheduler address
    (``tcp://host:8786``, ``host:8786``) or an existing ``distributed.Client`` (kept open)."""
    distributed = require_dask()
    if isinstance(cluster, distributed.Client):
        return cluster, None
    text = str(cluster).strip()
    if text == "local" or text.startswith("local:"):
        count = text.partition(":")[2]
        if count and not (count.isdigit() and int(count) > 0):
            raise BpparseError(f"--cluster {text}: expected local:N with N >= 1 worker processes")
        from bpparse.parse import thread_count

        workers = int(count) if count else thread_count(0)
        load_kernels_once()  # a cold cache is compiled here, once, before the workers start
        local = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                         dashboard_address=":0")
        return distributed.Client(local), local
    if "://" not in text and ":" not in text:
        raise BpparseError(f"--cluster {text}: expected local, local:N or a Dask scheduler "
                           "address such as tcp://host:8786")
    try:
        return distributed.Client(text, timeout="30s"), None
    except (OSError, TimeoutError, ValueError) as e:
        raise BpparseError(f"{text}: cannot connect to the Dask scheduler: {e}") from None


def dashboard(client):
    """The Dask dashboard's address, or None when the scheduler serves none."""
    try:
        if "dashboard" in client.scheduler_info().get("services", {}):
            return client.dashboard_link
    except (OSError, KeyError, AttributeError):
        pass
    return None


def _output_paths(inputs, output_dir):
    paths, seen = [], {}
    for name in inputs:
        base = os.path.basename(os.fspath(name))
        if base in seen:
            raise BpparseError(f"{name}: same file name as {seen[base]}: their outputs in "
                               f"{output_dir} would collide")
        seen[base] = name
        paths.append(os.path.join(output_dir, base))
    return paths


def _complete(output, source):
    """Is ``output`` a finished output of ``source``? (Outputs are renamed into place only when
    complete, so one that exists and is not older than its input is.)"""
    try:
        return os.stat(output).st_mtime_ns >= os.stat(source).st_mtime_ns
    except OSError:
        return False


def parse_on_cluster(model, inputs, output="-", output_dir=None, cluster="local", fmt="auto",
                     settings=None, misc_probs=False, keep_deps=False, resume=False, skip_bad=False, retag=False,
                     shard_bytes=DEFAULT_SHARD_BYTES, progress=False, on_warning=None, on_info=None,
                     hook=None):
    """Parse CoNLL files on a Dask cluster; the text is byte-identical to `parse.parse_corpus`'s.

    ``model``: a bundled name or a path every worker can read (None: the default bundled model);
    ``inputs``: file paths, read by the workers (not "-"); ``output``: a path or "-" (one stream,
    input order) or ``output_dir``: one file per input, same name; ``cluster``: "local", "local:N",
    a scheduler address or a ``distributed.Client``; ``settings``: `ParseSettings` (None: the
    model's); ``resume`` (with ``output_dir``): skip inputs whose output is complete;
    ``skip_bad``: report malformed or untagged sentences through ``on_warning`` and leave them out
    instead of stopping; ``retag``: as in `bpparse.parse.iter_parse`; ``on_info``: called with the dashboard link; ``hook``: see `Job`.
    Returns {"sentences", "words", "first_order", "skipped", "inputs", "resumed", "shards",
    "seconds", "workers": {address: peak RSS in MB}, "dashboard"}. Raises InputError (the line of
    the original file) on malformed input, after writing the sentences before it.
    """
    from bpparse.bundled import resolve_model
    from bpparse.conll import AtomicOutput, check_outputs, open_output

    start = time.perf_counter()
    report = on_warning or (lambda message: print(f"bpparse: warning: {message}", file=sys.stderr))
    inputs = [os.fspath(p) for p in inputs]
    if not inputs or any(p == "-" for p in inputs):
        raise BpparseError("a cluster reads its inputs from files (each worker reads its shards): "
                           "stdin cannot be parsed on a cluster")
    if output_dir is not None and output not in (None, "-"):
        raise ValueError("give output or output_dir, not both")
    if resume and output_dir is None:
        raise ValueError("resume needs output_dir")
    distributed = require_dask()
    stats = {"sentences": 0, "words": 0, "first_order": 0, "skipped": 0, "inputs": len(inputs),
             "resumed": 0, "shards": 0, "workers": {}, "dashboard": None}
    targets = None
    if output_dir is not None:
        targets = _output_paths(inputs, output_dir)
        check_outputs(inputs, targets)
        os.makedirs(output_dir, exist_ok=True)
        if resume:
            todo = [k for k, p in enumerate(inputs) if not _complete(targets[k], p)]
            stats["resumed"] = len(inputs) - len(todo)
            inputs = [inputs[k] for k in todo]
            targets = [targets[k] for k in todo]
            stats["inputs"] = len(inputs)
    else:
        check_outputs(inputs, [output])
    path, bundled = resolve_model(model)
    job = Job(path.stem if bundled else str(path.resolve()), _sha256(path), settings, misc_probs,
              keep_deps, skip_bad, retag, hook)
    shards = plan_shards(inputs, fmt, shard_bytes)
    stats["shards"] = len(shards)

    bar = None
    client = local = None
    futures = {}
    try:
        if shards:
            client, local = connect(cluster)
            stats["dashboard"] = dashboard(client)
            if stats["dashboard"] and on_info is not None:
                on_info(f"Dask dashboard: {stats['dashboard']}")
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(shards), unit="shard", file=sys.stderr, mininterval=0.5,
                       leave=False)
        run = uuid.uuid4().hex[:8]

        def submit(shard):
            futures[shard.index] = client.submit(parse_shard, shard, job, pure=False,
                                                 key=f"bpparse-shard-{run}-{shard.index}")
            return futures[shard.index]

        def window():
            return max(4, 3 * sum(client.nthreads().values()))

        # one stream (stdout or an atomic file), or one atomic file per input
        with (open_output(output) if output_dir is None else nullcontext()) as stream:
            current = None  # the output_dir file being written
            try:
                done = {}
                written = 0
                submitted = 0
                failed = None  # index of the first shard with an error
                pending = distributed.as_completed()
                while submitted < min(len(shards), window()):
                    pending.add(submit(shards[submitted]))
                    submitted += 1
                for future in pending:
                    try:
                        result = future.result()
                    except distributed.KilledWorker as e:
                        index = int(str(future.key).rpartition("-")[2])
                        shard = shards[index]
                        raise BpparseError(f"{shard.name}: bytes {shard.start}..{shard.end} "
                                           f"killed every worker that tried them ({e})") from None
                    done[result["index"]] = result
                    futures.pop(result["index"], None)
                    if result["error"] is not None and (failed is None or result["index"] < failed):
                        failed = result["index"]
                    while written in done:
                        result = done.pop(written)
                        shard = shards[written]
                        if output_dir is not None and current is None:
                            current = AtomicOutput(targets[shard.input])
                        out = stream if current is None else current.stream
                        out.write(result["text"])
                        out.flush()
                        for message in result["skipped"]:
                            report(f"{message} (sentence skipped)")
                        for message in result["warnings"]:
                            report(message)
                        for key in ("sentences", "words", "first_order"):
                            stats[key] += result[key]
                        stats["skipped"] += len(result["skipped"])
                        workers = stats["workers"]
                        workers[result["worker"]] = max(workers.get(result["worker"], 0.0),
                                                        result["peak_rss_mb"])
                        if result["error"] is not None:
                            error = result["error"]
                            if error[0] == "input":
                                raise InputError(*error[1:])
                            raise BpparseError(error[1])
                        if current is not None and shard.last:
                            current.commit()
                            current = None
                        written += 1
                        if bar is not None:
                            bar.update(1)
                            bar.set_postfix(sentences=stats["sentences"], refresh=False)
                    while (submitted < len(shards) and (failed is None or submitted < failed)
                           and submitted - written < window()):
                        pending.add(submit(shards[submitted]))
                        submitted += 1
            except BaseException:
                if current is not None:
                    current.discard()
                raise
    finally:
        if bar is not None:
            bar.close()
        if client is not None:
            if futures:
                client.cancel(list(futures.values()))
            if local is not None:
                client.close()
                local.close()
    stats["seconds"] = time.perf_counter() - start
    return stats
