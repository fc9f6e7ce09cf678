"""The ``bpparse`` command line: a click group over one module per command.

Adding a command: write it in its own module of this package with the shared options of
`bpparse.cli.options`, import heavy modules (numpy, numba, the kernels) inside it so ``bpparse
--help`` stays instant, raise ``BpparseError`` (or let library code raise it): the group turns it
into ``bpparse: error: <file>:<line>: <problem>`` on stderr and exit status 1, without a traceback;
then register it below. ``main`` makes a closed stdout pipe (``bpparse ... | head``) exit quietly.
"""
import gc
import os
import sys

# no command calls BLAS (the kernels do their own linear algebra): without this, numpy's OpenBLAS
# starts a thread per core at import, which then spins on the other cores (a tenth of the CPU of
# a one-sentence parse, 30 ms of its wall time); a user's own setting is kept
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import click

from bpparse._version import __version__
from bpparse.cli.calibrate import calibrate_command
from bpparse.cli.check import check_command
from bpparse.cli.evaluate import eval_command
from bpparse.cli.info import info_command
from bpparse.cli.options import cli_errors
from bpparse.cli.parse import parse_command
from bpparse.cli.relax import relax_command
from bpparse.cli.show import show_command
from bpparse.cli.train import train_command
from bpparse.cli.train_joint import train_joint_command
from bpparse.cli.train_labeler import train_labeler_command
from bpparse.cli.train_stage import train_punct_command, train_reattach_command


class BpparseGroup(click.Group):
    def invoke(self, ctx):
        with cli_errors():
            return super().invoke(ctx)


@click.group(cls=BpparseGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="bpparse", message="%(prog)s %(version)s")
def cli():
    """bpparse: dependency parsing by loopy belief propagation with global tree constraints.

    Files are CoNLL-U (or CoNLL-X); - reads stdin. Run `bpparse COMMAND --help` for each command.
    """

for command in (parse_command, relax_command, train_command, eval_command, check_command,
                info_command, show_command, train_joint_command, train_labeler_command,
                train_punct_command, train_reattach_command, calibrate_command):
    cli.add_command(command)


def _silence_stdout():
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


def _interrupted(exc):
    """Is ``exc`` a Ctrl-C, possibly wrapped (numba raises SystemError when an interrupt arrives
    as a compiled call returns)?"""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, (KeyboardInterrupt, click.exceptions.Abort)):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def main(argv=None):
    """Console-script entry point: exit status 0 on success, 1 on an error (one line on stderr),
    2 on a usage error, 130 on Ctrl-C, never a traceback for these. A reader that closed the pipe
    (``| head``) ends us quietly with status 1."""
    # parsing makes a few lists a word (split lines, rows), all freed by reference counting: the
    # young generation collected every 50,000 of them instead of every 700, and what a command
    # loaded frozen (`options.freeze_loaded`), the collector takes 0.02 s of parsing EWT test, not 0.06
    gc.set_threshold(50_000, 20, 10)
    try:
        try:
            code = cli.main(args=argv, prog_name="bpparse", standalone_mode=False)
        finally:
            sys.stdout.flush()
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except BrokenPipeError:
        _silence_stdout()
        sys.exit(1)
    except OSError as e:  # e.g. stdout on a full disk: `bpparse parse x > /dev/full`
        _silence_stdout()
        click.echo(f"bpparse: error: {e.filename or '<stdout>'}: {e.strerror or e}", err=True)
        sys.exit(1)
    except BaseException as e:
        if _interrupted(e):
            _silence_stdout()
            click.echo("bpparse: interrupted", err=True)
            sys.exit(130)
        raise
    # the interpreter's teardown would trace every object left (numba's types, the model: about
    # 60,000) once more: 40 ms of a half-second warm start, for memory the OS reclaims anyway
    gc.freeze()
    sys.exit(code if isinstance(code, int) else 0)
