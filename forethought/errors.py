"""User-facing errors: bad input exits non-zero with a located message, never a bare traceback."""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable


class UserError(Exception):
    """An error in something the user gave us (a file, a field, a config value).

    ``where`` names the file (and field) so the message can be acted on.
    """

    exit_code = 2

    def __init__(self, message: str, where: str | None = None):
        self.where = where
        self.message = message
        super().__init__(f"{where}: {message}" if where else message)


class RunFailed(UserError):
    """The input was fine but the run did not do its job (a backend that did not answer,
    a halted turn): exit status 1, a located message on stderr, no claim of success."""

    exit_code = 1


def ensure_output_dir(path: str | os.PathLike, field: str) -> None:
    """Create ``path`` (a folder) or fail now, naming the config field: before the work, not after it."""
    import tempfile
    from pathlib import Path

    folder = Path(path)
    check_output_dir(folder, field)  # names the file that stands where a folder belongs, creating nothing
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        raise UserError(f"cannot write to {folder}: {exc.strerror or exc}", field) from None


def check_output_dir(path: str | os.PathLike, field: str) -> None:
    """Refuse now, creating nothing, a folder that could not be made or written later: a file where it or a folder above
    it belongs, or an unwritable nearest existing folder. For a command whose other checks come after this one: a
    refusal changes nothing on disk (docs/guarantees.md)."""
    from pathlib import Path

    folder = Path(path).absolute()
    for nearest in (folder, *folder.parents):
        if nearest.exists():
            if not nearest.is_dir():
                raise UserError(f"{nearest} is a file, not a folder", field)
            if not os.access(nearest, os.W_OK | os.X_OK):
                raise UserError(f"cannot write to {nearest}: permission denied", field)
            return


def run_guarded(fn: Callable[[], int | None]) -> int:
    from forethought.config import ConfigError

    try:
        rc = fn()
        return int(rc or 0)
    except (UserError, ConfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)
    except (PermissionError, NotADirectoryError, IsADirectoryError, FileExistsError) as exc:
        # The file system refused a path the user chose (an unwritable folder, a file where a
        # folder belongs): their input, not a bug.
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader of the output went away (`forethought ... | head`): its choice, not a failure. Point stdout at
        # /dev/null so that flushing it at exit raises nothing more.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        # A path the user chose that the file system cannot hold (a name over 255 bytes, a read-only or
        # pseudo file system such as /proc, a symlink loop): the path is named, exit 2, no traceback.
        if exc.filename is None or exc.errno not in _PATH_ERRNOS:
            return _internal_error()
        print(f"error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except Exception:
        return _internal_error()


def _internal_error() -> int:
    if os.environ.get("FORETHOUGHT_DEBUG"):
        raise  # noqa: PLE0704 - called from an except clause: re-raises what it caught
    import traceback

    traceback.print_exc()
    print(
        "internal error (a bug in forethought, not in your input); set FORETHOUGHT_DEBUG=1 to re-raise", file=sys.stderr
    )
    return 1


# Besides the PermissionError / NotADirectoryError / IsADirectoryError / FileExistsError clause above.
_PATH_ERRNOS = {errno.ENAMETOOLONG, errno.ENOENT, errno.EROFS, errno.ELOOP}
